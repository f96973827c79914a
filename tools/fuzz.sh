#!/usr/bin/env bash
# fuzz.sh - run one fuzz target (tests/fuzz/fuzz_TARGET.c) with libFuzzer for SECONDS.
#
#   tools/fuzz.sh TARGET SECONDS [libFuzzer options...]
#   TARGET: hlo | sharding | partition | trace | summary
#
# Sets up build-fuzz/ once (clang, -Dfuzz=true, AddressSanitizer + UndefinedBehaviorSanitizer;
# on Debian 12: apt-get install clang-14 libclang-rt-14-dev), writes the seed corpus into
# fuzz-corpus/TARGET/ (tests/fuzz/seeds.py: samples/, tests/ and mutants of them) on the first
# run and keeps growing it, and runs one job at low priority (nice 10), with a 1 GB and 10 s
# limit per input. Crashes go to fuzz-crashes/TARGET/; minimize one with
#   build-fuzz/tests/fuzz/fuzz_TARGET -minimize_crash=1 -runs=20000 -exact_artifact_path=OUT CRASH
# and commit it under tests/fuzz-regressions/TARGET/ (`meson test --suite fuzz` replays it).
# Environment: CC (default: clang-14, else clang), FUZZ_BUILD_DIR (default: build-fuzz),
# FUZZ_WORK (default: the worktree; where fuzz-corpus/ and fuzz-crashes/ go).
set -euo pipefail

if [ $# -lt 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,16s/^# \{0,1\}//p' "$0"
    [ $# -ge 2 ] || exit 2
    exit 0
fi
target=$1
seconds=$2
shift 2
case "$target" in
hlo | sharding | partition | trace | summary) ;;
*)
    echo "fuzz.sh: unknown target '$target' (want hlo, sharding, partition, trace or summary)" >&2
    exit 2
    ;;
esac
case "$seconds" in
'' | *[!0-9]*)
    echo "fuzz.sh: SECONDS must be a positive integer, got '$seconds'" >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${FUZZ_BUILD_DIR:-build-fuzz}
work=${FUZZ_WORK:-$root}
cc=${CC:-$(command -v clang-14 || command -v clang || true)}
if [ -z "$cc" ]; then
    echo "fuzz.sh: clang not found (Debian 12: apt-get install clang-14 libclang-rt-14-dev)" >&2
    exit 2
fi

if [ ! -d "$build" ]; then
    CC=$cc meson setup "$build" -Dfuzz=true -Dtests=disabled -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized -Dc_args=-fsanitize=fuzzer-no-link
fi
nice -n 10 meson compile -C "$build" "tests/fuzz/fuzz_$target" >/dev/null

corpus=$work/fuzz-corpus/$target
crashes=$work/fuzz-crashes/$target
mkdir -p "$corpus" "$crashes"
if [ -z "$(ls -A "$corpus")" ]; then
    python3 tests/fuzz/seeds.py "$root" "$target" "$corpus" --mutants 4
fi
dict=()
case "$target" in
hlo | partition | sharding) dict=(-dict=tests/fuzz/hlo.dict) ;;
esac

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
exec nice -n 10 "$build/tests/fuzz/fuzz_$target" "$corpus" tests/fuzz-regressions/"$target" \
    "${dict[@]}" -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 \
    -max_len=65536 -artifact_prefix="$crashes/" -print_final_stats=1 "$@"
