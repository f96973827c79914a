#!/usr/bin/env python3
"""Checks shardlens's Shardy import against XLA's, program by program.

usage: tools/xla/sdy_check.py --tool build/shardlens CORPUS [--filter SUBSTR] [--show N]

For every program of a corpus folder (tools/xla/make-corpus.sh), shardlens prints
NAME.before_optimizations.hlo (the module JAX hands to XLA, with Shardy's `xla.sdy.*`
attributes; `print` shows it after shardlens's import) and the entry computation's parameter
shardings (by parameter number) and root sharding are compared with NAME.spmd_input.hlo (the
same program after XLA's own Shardy import, propagation and export). Shardings are compared as
device placements: tile dims, subgroup types and device order, so that an iota and an explicit
device list of the same assignment are equal. Prints each program that differs and closes with
`N passed, N failed`; a program without FuncResultSharding calls has its root sharding
from XLA's propagation, so only its parameters are compared. Standard library only (and hlo_struct.py).
"""

import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hlo_struct  # noqa: E402


def _top_items(s):
    return [p.strip() for p in hlo_struct.split_top(s)] if s.strip() else []


def sharding_key(text):
    """A comparable value of a sharding's text: ('tuple', [leaves]) or (kind, dims, types,
    devices). Metadata is ignored."""
    t = text.strip()
    if not t.startswith("{"):
        raise ValueError("not a sharding: %s" % t[:60])
    body = t[1:-1].strip()
    if body.startswith("{") or body == "":
        return ("tuple", [sharding_key(p) for p in _top_items(body)])
    body = re.sub(r"\s*metadata=\{.*\}\s*$", "", body)
    if body.startswith("replicated"):
        return ("replicated",)
    if body.startswith("manual"):
        return ("manual",)
    if body.startswith("unreduced"):
        return ("unreduced",)
    m = re.match(r"maximal device=(\d+)", body)
    if m:
        return ("maximal", int(m.group(1)))
    m = re.match(r"devices=\[([\d,]+)\]", body)
    if not m:
        raise ValueError("cannot read sharding %s" % t[:80])
    dims = [int(x) for x in m.group(1).split(",")]
    rest = body[m.end():]
    total = 1
    for d in dims:
        total *= d
    mi = re.match(r"<=\[([\d,]+)\](?:T\(([\d,]+)\))?", rest)
    if mi:
        reshape = [int(x) for x in mi.group(1).split(",")]
        perm = [int(x) for x in mi.group(2).split(",")] if mi.group(2) else None
        devs = hlo_struct.iota_devices(reshape, perm)
        rest = rest[mi.end():]
    else:
        me = re.match(r"([\d,\s]+)", rest)
        devs = [int(x) for x in me.group(1).replace(" ", "").split(",") if x]
        rest = rest[me.end():]
    types = []
    if "last_tile_dim_replicate" in rest:
        types = ["replicated"]
    ml = re.search(r"last_tile_dims=\{([^}]*)\}", rest)
    if ml:
        types = [x.strip() for x in ml.group(1).split(",")]
    if len(devs) != total:
        raise ValueError("device count does not match tile dims in %s" % t[:80])
    # partial replication: XLA treats a replication group's order as irrelevant
    if types and types[-1] == "replicated":
        g = dims[-1]
        devs = [d for k in range(0, total, g) for d in sorted(devs[k:k + g])]
    return ("tiled", tuple(dims), tuple(types), tuple(devs))


def entry_shardings(text):
    mod = hlo_struct.parse_module(text)
    comp = mod.entry
    params = {}
    for ins in comp.instrs:
        if ins.opcode == "parameter":
            params[int(ins.raw_args.strip())] = ins.attrs.get("sharding")
    root = comp.root.attrs.get("sharding") if comp.root else None
    return params, root


def check_program(tool, before, spmd_input):
    p = subprocess.run([tool, "print", before], capture_output=True, text=True)
    if p.returncode != 0:
        return ["shardlens fails (exit %d): %s" % (p.returncode, p.stderr.strip()[:300])], False
    with open(spmd_input) as f:
        xla_text = f.read()
    ours_p, ours_r = entry_shardings(p.stdout)
    xla_p, xla_r = entry_shardings(xla_text)
    diffs = []

    def same(a, b):
        if a is None or b is None:
            return a is b
        return sharding_key(a) == sharding_key(b)

    for k in sorted(set(ours_p) | set(xla_p)):
        a, b = ours_p.get(k), xla_p.get(k)
        if not same(a, b):
            diffs.append("parameter %d: shardlens %s, XLA %s" % (k, a, b))
    if ours_r is None:
        return diffs, True  # no FuncResultSharding: XLA's root sharding is propagation's
    if not same(ours_r, xla_r):
        diffs.append("root: shardlens %s, XLA %s" % ((ours_r or "none")[:200],
                                                     (xla_r or "none")[:200]))
    return diffs, False


def main():
    ap = argparse.ArgumentParser(prog="tools/xla/sdy_check.py",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool", required=True, help="the shardlens binary")
    ap.add_argument("corpus", help="corpus folder (manifest.json)")
    ap.add_argument("--filter", help="only programs whose name contains this")
    ap.add_argument("--show", type=int, default=3, help="differences printed per program")
    args = ap.parse_args()
    with open(os.path.join(args.corpus, "manifest.json")) as f:
        manifest = json.load(f)
    passed = failed = open_roots = 0
    for prog in manifest["programs"]:
        if args.filter and args.filter not in prog["name"]:
            continue
        diffs, open_root = check_program(args.tool, os.path.join(args.corpus, prog["before_optimizations"]),
                              os.path.join(args.corpus, prog["spmd_input"]))
        open_roots += open_root
        if diffs:
            failed += 1
            print("%s: differs" % prog["name"])
            for d in diffs[:args.show]:
                print("  " + d)
            if len(diffs) > args.show:
                print("  ... %d more" % (len(diffs) - args.show))
        else:
            passed += 1
    print("%d passed, %d failed (%d without FuncResultSharding: parameters only, the root is "
          "left to propagation)" % (passed, failed, open_roots))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
