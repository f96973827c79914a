#!/usr/bin/env python3
"""The xla-golden suite: shardlens against XLA's own partitioner, without JAX.

usage: tests/xla-golden/check.py SHARDLENS DIR

DIR/manifest.json lists the modules (tools/xla/make-golden.py wrote them from the corpus:
NAME.input.hlo is the input of XLA's spmd-partitioning pass, NAME.xla.hlo its output, both
produced by JAX/XLA from our own models in tools/xla/models) with the jax version and, per
module, the differences known and explained in tools/xla/KNOWN_DIFFERENCES.md. For every
module shardlens partitions the input (with the options XLA's CPU pipeline uses) and the
two outputs are compared structurally (tools/xla/hlo_struct.py): entry parameter and root
shapes, collectives per computation with expanded replica groups, windowed loops, per-device
ring-model bytes, and opcode counts after XLA's spmd clean-up (CSE, tuple forwarding, dead
code) applied to both sides. Every category not listed as expected must be identical; a
listed one must still differ (when it no longer does, the list is out of date).
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "xla"))
import hlo_struct  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: check.py SHARDLENS DIR\n")
        return 2
    tool, d = sys.argv[1], sys.argv[2]
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="xla-golden.") as tmp:
        for m in manifest["modules"]:
            name, n = m["name"], m["devices"]
            out = os.path.join(tmp, name + ".hlo")
            p = subprocess.run([tool, "partition", os.path.join(d, m["input"]), "-n", str(n),
                                "--set", "threshold_for_windowed_einsum_mib=100000",
                                "-o", out], capture_output=True, text=True)
            if p.returncode != 0:
                print("FAIL %s: shardlens exits %d: %s" % (name, p.returncode,
                                                         p.stderr.strip()[:300]))
                failed += 1
                continue
            with open(os.path.join(d, m["xla"])) as f:
                xs = hlo_struct.summarize(hlo_struct.parse_module(f.read()), n, clean=True)
            with open(out) as f:
                ours = hlo_struct.summarize(hlo_struct.parse_module(f.read()), n, clean=True)
            diffs, cats = hlo_struct.compare(xs, ours)
            expected = m.get("expected_differences", {})
            bad = [c for c in cats if c not in expected]
            stale = [c for c in expected if c not in cats]
            if bad or stale:
                failed += 1
                print("FAIL %s" % name)
                for line in diffs:
                    print("    " + line)
                for c in stale:
                    print("    expected a difference in %s (%s) but there is none: update "
                          "%s" % (c, expected[c], os.path.join(d, "manifest.json")))
            else:
                note = " (expected: %s)" % ", ".join(sorted(expected)) if expected else ""
                print("ok   %s%s" % (name, note))
    total = len(manifest["modules"])
    print("%d passed, %d failed (XLA from jax %s)" % (total - failed, failed, manifest["jax"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
