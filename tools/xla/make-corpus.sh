#!/bin/sh
# Regenerate the XLA corpus into .xla-corpus/ (gitignored): every program of
# tools/xla/models/*.py compiled by JAX 0.10.2 up to XLA's spmd-partitioning pass, three
# modules per program and a manifest (see tools/xla/corpus.py). Deterministic: the same
# checkout gives the same files (manifest.json holds their sha256). Runs niced, one process.
# usage: tools/xla/make-corpus.sh [OUTDIR] [--only SUBSTR] [--propagation shardy|gspmd]
# (--propagation gspmd: XLA's GSPMD sharding-propagation instead of Shardy, JAX's default)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/.xla-corpus}
[ $# -gt 0 ] && shift
sh "$here/setup.sh"
rm -rf "$out.tmp"
nice "$root/.venv-xla/bin/python" "$here/corpus.py" "$out.tmp" "$@"
rm -rf "$out"
mv "$out.tmp" "$out"
