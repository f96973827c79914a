#!/usr/bin/env bash
# test_golden.sh - every samples/<name>.hlo partitions to exactly tests/golden/<name>.partitioned.hlo, and,
# once `report --json` exists, traces to exactly tests/golden/<name>.json (design/product.md, STYLE.md §7).
# A sample's first line may carry its options: `// shardlens: --set KEY=VALUE ...`.
# SHARDLENS_UPDATE_GOLDEN=1 rewrites the golden files instead of comparing (review the diff like code).
# usage: test_golden.sh SHARDLENS SOURCE_ROOT   (meson passes both; nothing depends on the cwd)
set -euo pipefail

BIN=$(realpath "$1")
SRC=$(realpath "$2")
GOLDEN=$SRC/tests/golden
UPDATE=${SHARDLENS_UPDATE_GOLDEN:-0}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$SRC" # sample paths are relative, as a user types them

failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# options NAME: the words after `// shardlens:` on the sample's first line (none if absent)
options() {
    local first
    first=$(head -n 1 "samples/$1.hlo")
    case $first in
    "// shardlens:"*) printf '%s\n' "${first#// shardlens:}" ;;
    *) printf '\n' ;;
    esac
}

# compare NAME KIND ACTUAL: ACTUAL must equal tests/golden/NAME.KIND (or replaces it when updating)
compare() {
    local want=$GOLDEN/$1.$2
    if [ "$UPDATE" = 1 ]; then
        mkdir -p "$GOLDEN"
        if ! cmp -s "$3" "$want" 2>/dev/null; then
            cp "$3" "$want"
            echo "updated tests/golden/$1.$2"
        fi
    elif [ ! -e "$want" ]; then
        fail "$1: tests/golden/$1.$2 is missing (SHARDLENS_UPDATE_GOLDEN=1 meson test --suite golden)"
    elif ! diff -u "$want" "$3" >"$TMP/$1.$2.diff"; then
        fail "$1: partitioned output differs from tests/golden/$1.$2"
        head -n 40 "$TMP/$1.$2.diff" | sed 's/^/    /' >&2
    fi
}

# The JSON summary is compared once `report --json` is implemented (it exits 3 until then).
has_report=0
report_help=$("$BIN" report --help 2>&1 || true)
case $report_help in
*"not yet available"*) ;;
*--json*) has_report=1 ;;
esac

n=0
for sample in samples/*.hlo; do
    name=$(basename "$sample" .hlo)
    n=$((n + 1))
    read -r -a opts <<<"$(options "$name")"
    rc=0
    "$BIN" partition "$sample" "${opts[@]}" -o "$TMP/$name.partitioned.hlo" 2>"$TMP/$name.err" || rc=$?
    if [ "$rc" != 0 ]; then
        fail "$name: shardlens partition ${opts[*]} exited $rc"
        sed 's/^/    /' "$TMP/$name.err" >&2
        continue
    fi
    compare "$name" partitioned.hlo "$TMP/$name.partitioned.hlo"
    if [ "$has_report" = 1 ]; then
        rc=0
        { "$BIN" partition "$sample" "${opts[@]}" -o /dev/null --trace "$TMP/$name.db" &&
            "$BIN" report "$TMP/$name.db" --json "$TMP/$name.json" >/dev/null; } 2>"$TMP/$name.err" || rc=$?
        if [ "$rc" != 0 ]; then
            fail "$name: partition --trace + report --json exited $rc"
            sed 's/^/    /' "$TMP/$name.err" >&2
        else
            compare "$name" json "$TMP/$name.json"
        fi
    elif [ -e "$GOLDEN/$name.json" ]; then
        fail "$name: tests/golden/$name.json exists but this build has no 'report --json'"
    fi
done

# a golden file without its sample is stale
for g in "$GOLDEN"/*.partitioned.hlo "$GOLDEN"/*.json; do
    [ -e "$g" ] || continue
    base=$(basename "$g")
    name=${base%.partitioned.hlo}
    name=${name%.json}
    [ -e "samples/$name.hlo" ] || fail "tests/golden/$base has no samples/$name.hlo"
done

[ "$n" -gt 0 ] || fail "no samples found in $SRC/samples"
if [ "$failures" -ne 0 ]; then
    echo "$failures golden check(s) failed" >&2
    exit 1
fi
echo "$n samples match their golden files"
