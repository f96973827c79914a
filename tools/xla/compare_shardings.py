#!/usr/bin/env python3
"""Per-instruction comparison of shardlens's sharding propagation with XLA's (issue 16).

usage: python3 tools/xla/compare_shardings.py --tool build/shardlens CORPUS
           [--filter SUBSTR] [--show K] [--json FILE] [--no-trace] [--set KEY=VALUE]...

For every program of a corpus folder (tools/xla/corpus.py; made with --propagation gspmd
for a like-for-like reference) runs `shardlens propagate NAME.before_optimizations.hlo
--inline-calls --set is_spmd=true` with the header's allow_spmd_sharding_propagation_to_*
(what `partition` runs before partitioning, as XLA's pipeline does: call-inliner, then the
pass built from the module config) and compares each instruction's sharding with the one in
NAME.spmd_input.hlo, the input of XLA's spmd-partitioning, i.e. the output of XLA's
sharding-propagation pass. Instructions are paired by name where their structure (opcode,
shape, attributes, operands, recursively) agrees, then by structure alone (XLA's call-inliner
names the copies of a callee called from several places its own way), then by name, opcode
and shape; the ones left are counted as unmatched, apart from the comparison (XLA's pipeline
forwards get-tuple-element(tuple) and drops same-shape reshapes before propagation).
Shardings are compared by meaning, not by text:
  - iota tile assignments (<=[4,2]T(1,0)) and explicit device lists are expanded;
  - the devices of a partially replicated tile (last_tile_dim_replicate or a replicated
    last_tile_dims) form a set, as XLA's sharding equality ignores their order only there;
  - {replicated}, an all-ones tile and a fully replicated partial tile are one value; an
    instruction without a sharding counts as replicated (what the partitioner does);
  - a tuple sharding is compared leaf by leaf (a single sharding on a tuple applies to every
    leaf); an instruction agrees when every leaf does.
Differences are grouped by opcode and by the rule shardlens's trace records for the
instruction's final sharding (sharding_origin.rule; "annotated" for the input's own, "none"
when shardlens set nothing). --no-trace skips the trace (faster; no rule grouping).

Closing line: "N of M instructions agree (P %), programs fully agreeing K/T".
Exit 0 when it ran (whatever the agreement), 2 on bad usage or an unreadable corpus.
"""

import argparse
import collections
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hlo_struct  # noqa: E402


class ShardingError(Exception):
    pass


# ---------------------------------------------------------------- sharding text

def _split_tuple(body):
    """'{a}, {b}' -> ['{a}', '{b}'] (top-level brace groups)."""
    out, depth, start = [], 0, None
    for i, ch in enumerate(body):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                out.append(body[start:i + 1])
    return out


def _strip_metadata(s):
    """Drops metadata={...} (nested braces) from one sharding's text."""
    i = s.find("metadata={")
    while i >= 0:
        j = i + len("metadata=")
        depth = 0
        for k in range(j, len(s)):
            if s[k] == "{":
                depth += 1
            elif s[k] == "}":
                depth -= 1
                if depth == 0:
                    s = s[:i] + s[k + 1:]
                    break
        else:
            break
        i = s.find("metadata={")
    return s


def parse_sharding(text):
    """A sharding's text -> list of leaf texts (one element unless a tuple sharding)."""
    t = _strip_metadata(text.strip())
    if not (t.startswith("{") and t.endswith("}")):
        raise ShardingError("not a sharding: %s" % text[:80])
    inner = t[1:-1].strip()
    if inner.startswith("{"):
        return [p[1:-1].strip() for p in _split_tuple(inner)]
    return [inner]


def _tile_devices(rest):
    """'<=[4,2]T(1,0)' or '0,1,2,3' (up to the next attribute) -> device list."""
    rest = rest.strip()
    m = re.match(r"<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?", rest)
    if m:
        dims = [int(x) for x in m.group(1).split(",")]
        perm = [int(x) for x in m.group(2).split(",")] if m.group(2) else None
        return hlo_struct.iota_devices(dims, perm)
    m = re.match(r"([0-9,\s]+)", rest)
    if not m:
        raise ShardingError("cannot read a tile assignment: %s" % rest[:60])
    return [int(x) for x in m.group(1).replace(" ", "").split(",") if x]


def canon_leaf(leaf):
    """One leaf's text -> a hashable value equal for equal meanings."""
    s = leaf.strip()
    if s in ("", "replicated"):
        return ("replicated",)
    if s.startswith("maximal"):
        m = re.search(r"device=(\d+)", s)
        return ("maximal", int(m.group(1)) if m else -1)
    if s == "manual":
        return ("manual",)
    if s == "unknown" or s.startswith("unknown"):
        return ("unknown",)
    if s == "unreduced":
        return ("unreduced",)
    m = re.match(r"devices=\[([0-9,]+)\]", s)
    if not m:
        raise ShardingError("cannot read sharding {%s}" % s[:80])
    dims = [int(x) for x in m.group(1).split(",")]
    devs = _tile_devices(s[m.end():])
    total = 1
    for d in dims:
        total *= d
    if len(devs) != total:
        raise ShardingError("tile assignment has %d devices for %s" % (len(devs), dims))
    kinds = []  # the types of the trailing subgroup dimensions
    if "last_tile_dim_replicate" in s:
        kinds = ["replicated"]
    else:
        m2 = re.search(r"last_tile_dims=\{([^}]*)\}", s)
        if m2:
            kinds = [k.strip() for k in m2.group(1).split(",") if k.strip()]
    nd = len(dims) - len(kinds)
    data = dims[:nd]
    # the devices of one data tile: per manual index, the set over replicated dims
    sub = dims[nd:]
    per_tile = 1
    for d in sub:
        per_tile *= d
    tiles = []
    for t in range(len(devs) // per_tile):
        chunk = devs[t * per_tile:(t + 1) * per_tile]
        # group by the manual sub-dimensions' index; replicated ones become a set
        groups = collections.OrderedDict()
        for k, dev in enumerate(chunk):
            idx, rem = [], k
            for j in range(len(sub) - 1, -1, -1):
                idx.append(rem % sub[j])
                rem //= sub[j]
            idx.reverse()
            key = tuple(idx[j] for j in range(len(sub)) if kinds[j] == "manual")
            groups.setdefault(key, set()).add(dev)
        tiles.append(tuple(frozenset(g) for g in groups.values()))
    has_manual = any(k == "manual" for k in kinds)
    if all(d == 1 for d in data) and not has_manual:
        return ("replicated",)
    return ("tiled", tuple(data), tuple(tiles), has_manual)


def canon(text, n_leaves):
    """A sharding's text (None: no sharding) -> tuple of n_leaves canonical leaves."""
    if text is None:
        return (("replicated",),) * n_leaves
    leaves = parse_sharding(text)
    if len(leaves) == 1:
        return (canon_leaf(leaves[0]),) * n_leaves
    return tuple(canon_leaf(x) for x in leaves)


def n_leaves(shape):
    s = shape.strip()
    if not s.startswith("("):
        return 1
    return max(1, len(hlo_struct.shape_leaves(s)))


# ---------------------------------------------------------------- one program

def instrs_by_name(text):
    mod = hlo_struct.parse_module(text)
    out = {}
    for comp in mod.computations.values():
        for ins in comp.instrs:
            out[ins.name] = ins
    return out


HEADER_OPTIONS = ("allow_spmd_sharding_propagation_to_output",
                  "allow_spmd_sharding_propagation_to_parameters")


def header_settings(path):
    """The pass's allow_* options as XLA's pipeline takes them: from the module config,
    printed in the HloModule header."""
    with open(path) as f:
        head = f.readline()
    out = []
    for key in HEADER_OPTIONS:
        m = re.search(r"\b%s=\{([a-z,]*)\}" % key, head)
        if m:
            out.append("%s=%s" % (key, m.group(1)))
    return out


def resolve(instrs, nm):
    """The instruction `nm` stands for: get-tuple-element(tuple(...)) is the tuple's operand
    and a reshape/copy/bitcast to the same shape its operand (XLA's pipeline forwards both
    before propagation, shardlens keeps them)."""
    for _ in range(64):
        g = instrs.get(nm)
        if g and g.opcode in ("reshape", "copy", "bitcast") and g.operands:
            src = instrs.get(g.operands[0])
            if src and hlo_struct.shape_leaves(src.shape) == hlo_struct.shape_leaves(g.shape):
                nm = g.operands[0]
                continue
        if not g or g.opcode != "get-tuple-element" or not g.operands:
            break
        t = instrs.get(g.operands[0])
        try:
            k = int(g.attrs.get("index", ""))
        except ValueError:
            break
        if not t or t.opcode != "tuple" or k >= len(t.operands):
            break
        nm = t.operands[k]
    return nm


_SIG_IGNORED = {"metadata", "sharding", "frontend_attributes", "origin", "statistics",
                "to_apply", "calls", "body", "condition", "branch_computations",
                "true_computation", "false_computation"}


def structure_keys(instrs):
    """name -> a structural key: opcode, shape, attributes (names of called computations
    aside), the literal or parameter number, and the operands' keys, operands seen through
    resolve(). Equal keys: the same computation of the same values, whatever the names."""
    key = {}
    for nm, ins in instrs.items():  # operands precede users within a computation
        attrs = tuple(sorted((k, v) for k, v in ins.attrs.items() if k not in _SIG_IGNORED))
        lit = ins.raw_args if ins.opcode in ("constant", "parameter", "iota") else ""
        ops = tuple(key.get(resolve(instrs, o), ("?", o)) for o in ins.operands)
        key[nm] = hash((ins.opcode, tuple(hlo_struct.shape_leaves(ins.shape)), attrs, lit, ops))
    return key


def pair_instructions(xla, ours):
    """({XLA name: our name} by name, {XLA name: our name} by structure): by name where the
    structures agree, then the rest by structure in order of appearance (XLA's call-inliner
    names the copies of a callee called from several places its own way; copies with the
    same structure are interchangeable)."""
    kx, ko = structure_keys(xla), structure_keys(ours)
    pairs = {nm: nm for nm in xla if nm in ours and kx[nm] == ko[nm]}
    taken = set(pairs.values())
    free = collections.defaultdict(list)
    for nm in ours:
        if nm not in taken:
            free[ko[nm]].append(nm)
    for lst in free.values():
        lst.reverse()
    by_structure = {}
    for nm in xla:
        if nm not in pairs and free.get(kx[nm]):
            by_structure[nm] = free[kx[nm]].pop()
    # last, the same name, opcode and shape where the structures differ (something upstream
    # differs, e.g. an instruction only one side has)
    taken = set(pairs.values()) | set(by_structure.values())
    for nm, xi in xla.items():
        oi = ours.get(nm)
        if nm not in pairs and nm not in by_structure and oi is not None and \
                nm not in taken and oi.opcode == xi.opcode and \
                hlo_struct.shape_leaves(oi.shape) == hlo_struct.shape_leaves(xi.shape):
            pairs[nm] = nm
    return pairs, by_structure


def run_propagate(tool, path, n, settings, out, trace, timeout):
    cmd = [tool, "propagate", path, "-n", str(n), "-o", out, "--inline-calls",
           "--set", "is_spmd=true"]
    for s in header_settings(path):
        cmd += ["--set", s]
    for s in settings:
        cmd += ["--set", s]
    if trace:
        cmd += ["--trace", trace]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout after %ds" % timeout
    if p.returncode != 0:
        return (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[0]
    return None


def read_rules(trace):
    """instruction name -> rule of its final sharding in the trace's last run."""
    rules = {}
    if not trace or not os.path.exists(trace):
        return rules
    con = sqlite3.connect(trace)
    try:
        run = con.execute("SELECT max(id) FROM run").fetchone()[0]
        rows = con.execute(
            "SELECT i.name, o.rule, o.direction FROM sharding_origin o JOIN instr i "
            "ON i.id = o.instr WHERE o.run_id = ? ORDER BY o.id", (run,)).fetchall()
    finally:
        con.close()
    for name, rule, direction in rows:
        rules[name] = rule or direction  # the last row of an instruction is its final one
    return rules


def fmt(text):
    return _strip_metadata(text).replace(" ,", ",").strip() if text else "(none)"


def compare_program(tool, corpus, prog, trace_on, settings, timeout):
    rec = {"name": prog["name"], "agree": 0, "differ": 0, "unmatched_xla": 0,
           "unmatched_ours": 0, "diffs": []}
    with open(os.path.join(corpus, prog["spmd_input"])) as f:
        xla = instrs_by_name(f.read())
    with tempfile.TemporaryDirectory(prefix="cmp-shd.") as d:
        out = os.path.join(d, "prop.hlo")
        trace = os.path.join(d, "trace.db") if trace_on else None
        err = run_propagate(tool, os.path.join(corpus, prog["before_optimizations"]),
                            prog["devices"], settings, out, trace, timeout)
        if err:
            rec["error"] = err
            return rec
        with open(out) as f:
            ours = instrs_by_name(f.read())
        rules = read_rules(trace)
    pairs, by_structure = pair_instructions(xla, ours)
    pairs.update(by_structure)
    rec["matched_by_structure"] = len(by_structure)
    rec["unmatched_xla"] = len(xla) - len(pairs)
    ours_paired = set(pairs.values())
    rec["unmatched_xla_ops"] = dict(collections.Counter(
        xi.opcode for nm, xi in xla.items() if nm not in pairs))
    rec["unmatched_ours_ops"] = dict(collections.Counter(
        oi.opcode for nm, oi in ours.items() if nm not in ours_paired))
    rec["unmatched_ours"] = len(ours) - len(pairs)
    for name, xi in xla.items():
        if name not in pairs:
            continue
        oi = ours[pairs[name]]
        k = n_leaves(xi.shape)
        try:
            same = canon(xi.attrs.get("sharding"), k) == canon(oi.attrs.get("sharding"), k)
        except ShardingError as e:
            same, note = False, str(e)
        else:
            note = None
        if same:
            rec["agree"] += 1
            continue
        rec["differ"] += 1
        rule = "annotated" if oi.name not in rules and oi.attrs.get("sharding") else \
            rules.get(oi.name, "none")
        rec["diffs"].append({"instr": name if oi.name == name else "%s (ours %s)" % (
                                 name, oi.name), "opcode": xi.opcode, "rule": rule,
                             "xla": fmt(xi.attrs.get("sharding")),
                             "shardlens": fmt(oi.attrs.get("sharding")), "note": note})
    return rec


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(prog="tools/xla/compare_shardings.py",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool", required=True, help="the shardlens binary")
    ap.add_argument("corpus", help="a corpus folder with manifest.json")
    ap.add_argument("--filter", help="only programs whose name contains this")
    ap.add_argument("--show", type=int, default=3, help="differences printed per program")
    ap.add_argument("--json", metavar="FILE", help="write every result here")
    ap.add_argument("--no-trace", action="store_true",
                    help="do not record shardlens's trace (no grouping by rule)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a propagation option passed to shardlens propagate")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per program")
    args = ap.parse_args()
    man = os.path.join(args.corpus, "manifest.json")
    if not os.path.exists(man):
        print("%s: error: no manifest.json (not a corpus folder)" % args.corpus,
              file=sys.stderr)
        return 2
    with open(man) as f:
        manifest = json.load(f)
    if manifest.get("propagation") not in (None, "gspmd"):
        print("note: this corpus was made with %s propagation; XLA's GSPMD "
              "sharding-propagation is the reference only for a --propagation gspmd corpus"
              % manifest.get("propagation"), file=sys.stderr)
    progs = [p for p in manifest["programs"]
             if not args.filter or args.filter in p["name"]]
    results = []
    by_op, by_rule = collections.Counter(), collections.Counter()
    un_x, un_o = collections.Counter(), collections.Counter()
    tot_a = tot_d = tot_ux = tot_uo = tot_ms = full = failed = 0
    for prog in progs:
        r = compare_program(args.tool, args.corpus, prog, not args.no_trace, args.set,
                            args.timeout)
        results.append(r)
        if "error" in r:
            failed += 1
            print("%-40s shardlens fails: %s" % (r["name"], r["error"][:300]), flush=True)
            continue
        m = r["agree"] + r["differ"]
        tot_a += r["agree"]
        tot_d += r["differ"]
        tot_ux += r["unmatched_xla"]
        tot_uo += r["unmatched_ours"]
        tot_ms += r.get("matched_by_structure", 0)
        un_x.update(r.get("unmatched_xla_ops", {}))
        un_o.update(r.get("unmatched_ours_ops", {}))
        if r["differ"] == 0:
            full += 1
        print("%-40s %5d of %5d agree (%5.1f %%), %d paired by structure, unmatched xla %d"
              " / shardlens %d" % (r["name"], r["agree"], m,
                                   100.0 * r["agree"] / m if m else 100.0,
                                   r.get("matched_by_structure", 0), r["unmatched_xla"],
                                   r["unmatched_ours"]), flush=True)
        for dd in r["diffs"][:args.show]:
            print("    %%%s (%s, rule %s): XLA %s, shardlens %s%s" % (
                dd["instr"], dd["opcode"], dd["rule"], dd["xla"], dd["shardlens"],
                " [%s]" % dd["note"] if dd["note"] else ""))
        for dd in r["diffs"]:
            by_op[dd["opcode"]] += 1
            by_rule[dd["rule"]] += 1
    if by_op:
        print("differences by opcode: " + ", ".join(
            "%s %d" % kv for kv in sorted(by_op.items(), key=lambda kv: (-kv[1], kv[0]))))
    if by_rule:
        print("differences by shardlens rule: " + ", ".join(
            "%s %d" % kv for kv in sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0]))))
    print("%d instructions paired by structure (names differ); unmatched (not compared): %d "
          "only in XLA's, %d only in shardlens's" % (tot_ms, tot_ux, tot_uo))
    for side, cnt in (("XLA's", un_x), ("shardlens's", un_o)):
        if cnt:
            print("unmatched only in %s, by opcode: " % side + ", ".join(
                "%s %d" % kv for kv in sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0]))[:8]))
    if failed:
        print("shardlens failed on %d programs" % failed)
    tot = tot_a + tot_d
    print("%d of %d instructions agree (%.1f %%), programs fully agreeing %d/%d" % (
        tot_a, tot, 100.0 * tot_a / tot if tot else 100.0, full, len(progs)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
