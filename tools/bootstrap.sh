#!/usr/bin/env bash
# bootstrap.sh - set up a Debian machine for shardlens, build it, and run either the main job
# on the bundled sample or the whole test suite. Idempotent: packages already installed are
# left alone and an existing build directory is reused.
#
#   tools/bootstrap.sh run    install what is missing, build, run the main job (default)
#   tools/bootstrap.sh test   install what is missing, build, run `meson test`
#
# Environment: BUILD_DIR (default: build), MESON_ARGS (extra `meson setup` options, e.g.
# "-Dwerror=true -Db_sanitize=address,undefined"; applied to an existing directory too),
# OUT_DIR (default: out; where the main job writes).
set -euo pipefail

mode=${1:-run}
case "$mode" in
run | test) ;;
-h | --help)
    sed -n '2,12s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
*)
    echo "bootstrap.sh: unknown mode '$mode' (want 'run' or 'test')" >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build}
out=${OUT_DIR:-out}
read -r -a extra <<<"${MESON_ARGS:-}"

# ---- Debian packages ----------------------------------------------------------------------
packages=(meson ninja-build pkg-config gcc libsqlite3-dev libcjson-dev libgraphviz-dev
    libcmocka-dev python3)
# The HTML report's test loads the page in headless Chromium (tests/test_html.py).
if [ "$mode" = test ]; then
    packages+=(chromium)
fi
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "bootstrap: installing ${missing[*]}"
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || {
            echo "bootstrap: need root (or sudo) to install: ${missing[*]}" >&2
            exit 1
        }
        sudo=(sudo)
    fi
    "${sudo[@]}" apt-get update
    # Recommends stay on: gcc needs libc6-dev, which it only recommends.
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi

# ---- build ----------------------------------------------------------------------------------
if [ -f "$build/build.ninja" ]; then
    if [ "${#extra[@]}" -gt 0 ]; then
        meson configure "$build" -Dtests=enabled "${extra[@]}"
    fi
else
    meson setup "$build" -Dtests=enabled "${extra[@]}"
fi
meson compile -C "$build"
# The conformance runner and the README call the tool as $build/shardlens.
ln -sfn src/cli/shardlens "$build/shardlens"

# ---- the job ------------------------------------------------------------------------------
if [ "$mode" = test ]; then
    meson test -C "$build" --print-errorlogs
    exit 0
fi

shardlens="$build/shardlens"
sample=samples/mlp_megatron.hlo
"$shardlens" check "$sample"
# partitioned.hlo, trace.db, summary.json, report.txt and the before/after diagrams
"$shardlens" analyze "$sample" --out "$out/mlp_megatron"
echo "bootstrap: wrote $out/mlp_megatron/; its report:"
cat "$out/mlp_megatron/report.txt"
