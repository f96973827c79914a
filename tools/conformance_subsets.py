#!/usr/bin/env python3
"""Summarise a conformance run (run.py --json) by the subsets the issues track.

  tools/conformance_subsets.py CASES.jsonl RESULTS.json

Prints pass counts for: cases whose input has none of the dot-engine opcodes (the core
partitioner's subset), and for each dot-engine opcode family. Standard library only.
"""
import json
import sys

ENGINE_OPS = ("dot", "convolution", "gather", "scatter", "reduce-window", "select-and-scatter")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    cases = {}
    with open(sys.argv[1]) as f:
        for line in f:
            if line.strip():
                c = json.loads(line)
                cases[c["id"]] = set(c.get("input_opcodes") or [])
    results = json.load(open(sys.argv[2]))["results"]
    verdict = {r["id"]: r["status"] for r in results}

    def count(pred):
        ids = [i for i, ops in cases.items() if pred(ops) and i in verdict]
        return sum(verdict[i] == "PASS" for i in ids), len(ids)

    p, n = count(lambda ops: not ops.intersection(ENGINE_OPS))
    print(f"no dot/conv/gather/scatter/reduce-window/select-and-scatter: {p}/{n}")
    for op in ENGINE_OPS:
        p, n = count(lambda ops, op=op: op in ops)
        print(f"{op}: {p}/{n}")
    p, n = count(lambda ops: True)
    print(f"all: {p}/{n}")


if __name__ == "__main__":
    main()
