#!/usr/bin/env python3
"""bench/memory_cost.py - what the memory estimate (src/memory, issue 19) adds to a traced run.

Runs `shardlens partition IN --trace T.db` with two builds, the one without the estimate
(--base) and the one with it (--bin), alternately, a fresh trace file each run, and prints the
median wall and CPU (user + sys of the child, os.wait4) of each and the ratio. The partitioned
text goes to /dev/null through a redirect (never -o /dev/null). Nothing here runs under
`meson test`.

usage: bench/memory_cost.py --base OLD_SHARDLENS --bin NEW_SHARDLENS [--runs 5] IN.hlo
  e.g. python3 bench/gen_transformer.py --layers 1265 --data 2 --model 4 -o /tmp/t100k.hlo
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def one(binary, hlo, db):
    if os.path.exists(db):
        os.remove(db)
    t0 = time.monotonic()
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen([binary, "partition", hlo, "--trace", db], stdout=null)
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{binary} failed on {hlo}")
    return wall, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="shardlens without the memory estimate")
    ap.add_argument("--bin", required=True, help="shardlens with it")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("hlo")
    a = ap.parse_args()
    times = {"base": [], "bin": []}
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "t.db")
        for _ in range(a.runs):
            for key in ("base", "bin"):
                times[key].append(one(getattr(a, key), a.hlo, db))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in times.items()}
    for k in ("base", "bin"):
        print(f"{k:5} wall {med[k][0]:.3f} s  cpu {med[k][1]:.3f} s  (median of {a.runs})")
    print(f"ratio wall {med['bin'][0] / med['base'][0]:.3f}  cpu {med['bin'][1] / med['base'][1]:.3f}")


if __name__ == "__main__":
    main()
