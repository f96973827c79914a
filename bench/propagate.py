#!/usr/bin/env python3
"""bench/propagate.py - sharding propagation against partitioning on generated transformers.

For each size, bench/gen_transformer.py writes a fully annotated module (what `partition`
gets) and the same module with every sharding removed except the parameters' and the roots'
(what a JAX user's `before_optimizations` dump looks like: `propagate` has to fill in the
rest). Each command runs --runs times; the CPU time (user + system of the child) and the peak
RSS are medians. The issue 16 target: propagating a module takes at most as long as
partitioning it.

  propagate   shardlens propagate BARE.hlo --set is_spmd=true > /dev/null
  partition   shardlens partition --no-propagate FULL.hlo > /dev/null (the generated module
              leaves constants and the like unannotated, so plain `partition` would propagate
              too and the ratio would compare propagation with itself)
  parse+print shardlens print BARE.hlo > /dev/null (the floor both include)

usage: bench/propagate.py [--bin SHARDLENS] [--sizes 10k,100k] [--runs 5] [--workdir DIR]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PER_LAYER, FIXED = 79, 56  # instructions per layer and outside the layers (bench/run)
SHARDING = re.compile(r", sharding=\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")


def layers_for(size):
    n = int(size[:-1]) * (1000 if size.endswith("k") else 1000000)
    return max(1, round((n - FIXED) / PER_LAYER))


def strip(src, dst):
    """Keeps the shardings of parameters and roots only."""
    with open(src) as f, open(dst, "w") as g:
        for line in f:
            if " parameter(" in line or line.lstrip().startswith("ROOT"):
                g.write(line)
            else:
                g.write(SHARDING.sub("", line))


def timed(cmd):
    """CPU seconds (user + system) and peak RSS in MB of one run of cmd."""
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(cmd, stdout=null, stderr=null)
        _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit("failed: " + " ".join(cmd))
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "shardlens"))
    ap.add_argument("--sizes", default="10k,100k")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workdir")
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="sl-prop-bench-")
    print("| size | instructions | propagate CPU s | RSS MB | partition CPU s | RSS MB |"
          " parse+print CPU s | propagate/partition |")
    print("|---|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        full = os.path.join(work, "t%s.hlo" % size)
        bare = os.path.join(work, "t%s_bare.hlo" % size)
        subprocess.run([sys.executable, os.path.join(HERE, "gen_transformer.py"), "--layers",
                        str(layers_for(size)), "--data", "2", "--model", "4", "-o", full],
                       check=True)
        strip(full, bare)
        with open(full) as f:
            n = sum(1 for line in f if " = " in line)
        rows = {}
        for name, cmd in (("propagate", [args.bin, "propagate", bare, "--set", "is_spmd=true"]),
                          ("partition", [args.bin, "partition", "--no-propagate", full]),
                          ("print", [args.bin, "print", bare])):
            runs = [timed(cmd) for _ in range(args.runs)]
            rows[name] = (statistics.median(r[0] for r in runs),
                          statistics.median(r[1] for r in runs))
        p, q, f = rows["propagate"], rows["partition"], rows["print"]
        print("| %s | %d | %.3f | %.0f | %.3f | %.0f | %.3f | %.2f |"
              % (size, n, p[0], p[1], q[0], q[1], f[0], p[0] / q[0] if q[0] else 0))


if __name__ == "__main__":
    main()
