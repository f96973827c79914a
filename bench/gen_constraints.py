#!/usr/bin/env python3
"""bench/gen_constraints.py - a chain of N adds, each followed by a `Sharding` custom call (what
JAX writes for with_sharding_constraint), alternating row and column shardings on 4 devices:
2N+2 instructions, N of them Sharding ops. Propagation turns every one into a copy and rewires
its users, so its cost per Sharding op shows here (issue 17: 50k of them took 63 s when each
rewiring scanned the whole computation). Standard library only; deterministic output.

usage: bench/gen_constraints.py N [-o OUT.hlo]
  time build/shardlens propagate OUT.hlo > /dev/null
"""

import argparse
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", type=int, help="number of Sharding custom calls")
    ap.add_argument("-o", "--output", help="write here (default: stdout)")
    a = ap.parse_args()
    out = [f"HloModule constraints_{a.n}, num_partitions=4", "", "ENTRY e {",
           "  p = f32[8,8] parameter(0), sharding={devices=[4,1]<=[4]}"]
    prev = "p"
    for k in range(a.n):
        tile = "4,1" if k % 2 else "1,4"
        out.append(f"  a{k} = f32[8,8] add({prev}, {prev})")
        out.append(f"  s{k} = f32[8,8] custom-call(a{k}), custom_call_target=\"Sharding\","
                   f" sharding={{devices=[{tile}]<=[4]}}")
        prev = f"s{k}"
    out += [f"  ROOT r = f32[8,8] copy({prev})", "}", ""]
    text = "\n".join(out)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
