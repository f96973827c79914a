#!/usr/bin/env python3
"""Compare shardlens's partitioner with XLA's, module by module, without instruction names.

usage: tools/xla/compare.py --tool build/shardlens TARGET... [--json FILE] [--jobs N]
                            [--filter SUBSTR] [--limit N] [--timeout S]

A TARGET is
  - a corpus folder (tools/xla/make-corpus.sh; manifest.json): shardlens partitions each
    program's spmd-partitioning input, XLA's output is the one XLA produced when JAX
    compiled the program;
  - a conformance .jsonl: XLA (tools/xla/partition.py) and shardlens partition each case's
    `hlo` for its `num_partitions` with its `options.set` (XLA's sharding propagation runs
    first when the case's pipeline has ShardingPropagation);
  - HLO files: both partition them for the header's num_partitions=, shardlens with the
    options XLA's CPU pipeline uses (threshold_for_windowed_einsum_mib=100000).

Both outputs are reduced to the summary of hlo_struct.py (entry parameter and root shapes;
per computation, keyed by its call path (a while's body and condition by the sorted element
shapes of its state: Shardy's round trip reorders the state), the multiset of collectives with kind, operand and
result shapes, dimensions, replica groups as explicit lists and source-target pairs;
windowed-einsum loops with trip counts; opcode counts; per-device bytes under the ring
model) and compared. Each module prints `identical` or `differs` and the first
differences; a module XLA cannot partition with the requested options is `skipped`, and
one that XLA or shardlens rejects is counted as failed unless both reject it. The last line
is `N passed, N failed`. --json FILE keeps every detail.

The comparison itself needs only the standard library; XLA runs through partition.py in
.venv-xla (tools/xla/setup.sh).
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hlo_struct  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
VENV_PY = os.path.join(ROOT, ".venv-xla", "bin", "python")
CPU_SET = ["threshold_for_windowed_einsum_mib=100000"]


def run_shardlens(tool, path, n, settings, out, timeout, propagate=False):
    # like for like: shardlens propagates first only where XLA's side ran a propagation pass
    cmd = [tool, "partition", path, "-n", str(n), "-o", out]
    if not propagate:
        cmd.append("--no-propagate")
    for s in settings:
        cmd += ["--set", s]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"rc": None, "error": "timeout after %ds" % timeout}
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        msg = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[0]
        return {"rc": p.returncode, "error": msg}
    return {"rc": 0, "seconds": dt}


def run_xla(path, n, settings, out, inp, propagate, timeout):
    py = VENV_PY if os.path.exists(VENV_PY) else sys.executable
    cmd = [py, os.path.join(HERE, "partition.py"), path, "-n", str(n), "-o", out,
           "--input-out", inp]
    if propagate:
        cmd.append("--propagate")
    for s in settings:
        cmd += ["--set", s]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"rc": None, "error": "timeout after %ds" % timeout}
    if p.returncode != 0:
        err = p.stderr.strip()
        skipped = any(k in err for k in ("cannot honour", "unknown partitioner option",
                                         "does not run spmd-partitioning"))
        return {"rc": p.returncode, "error": err.split("\n")[0][:400], "skipped": skipped}
    secs = None
    for line in p.stdout.splitlines():
        if line.startswith("xla spmd-partitioning pass:"):
            tok = line.split(":", 1)[1].split()
            try:
                secs = float(tok[0])
            except (ValueError, IndexError):
                secs = None
    return {"rc": 0, "pass_seconds": secs}


def _sharded_count(text):
    try:
        mod = hlo_struct.parse_module(text)
    except hlo_struct.HloError:
        return None
    # replicated ones do not count: XLA's import adds {replicated} to unannotated parameters,
    # which would hide a sharding it dropped elsewhere
    return sum(1 for c in mod.computations.values() for i in c.instrs
               if "sharding" in i.attrs and i.attrs["sharding"].replace(" ", "") != "{replicated}")


CLEAN = False
CACHE = None


def compare_outputs(xla_text, ours_text, n):
    xs = hlo_struct.summarize(hlo_struct.parse_module(xla_text), n, CLEAN)
    os_ = hlo_struct.summarize(hlo_struct.parse_module(ours_text), n, CLEAN)
    diffs, cats = hlo_struct.compare(xs, os_)
    return xs, os_, diffs, cats


def job_case(item, tool, timeout):
    """item: dict(name, text, n, settings, ours_settings, propagate, xla_output (or None))."""
    rec = {"name": item["name"], "n": item["n"]}
    with tempfile.TemporaryDirectory(prefix="xla-compare.") as d:
        src = os.path.join(d, "in.hlo")
        with open(src, "w") as f:
            f.write(item["text"])
        ours_out = os.path.join(d, "shardlens.hlo")
        xla_out = os.path.join(d, "xla.hlo")
        xla_in = os.path.join(d, "xla-input.hlo")
        key = None
        if CACHE:
            h = hashlib.sha256(json.dumps([item["text"], item["n"], item["settings"],
                                           item.get("propagate", False)]).encode())
            key = os.path.join(CACHE, h.hexdigest()[:24])
        if item.get("xla_output") is not None:
            xla_text = item["xla_output"]
            x = {"rc": 0, "pass_seconds": item.get("pass_seconds")}
        elif key and os.path.exists(key + ".json"):
            with open(key + ".json") as f:
                x = json.load(f)
            for ext, dst in ((".out.hlo", xla_out), (".in.hlo", xla_in)):
                if os.path.exists(key + ext):
                    shutil.copyfile(key + ext, dst)
        else:
            x = run_xla(src, item["n"], item["settings"], xla_out, xla_in,
                        item.get("propagate", False), timeout * 6)
            if key:
                for ext, srcf in ((".out.hlo", xla_out), (".in.hlo", xla_in)):
                    if os.path.exists(srcf):
                        shutil.copyfile(srcf, key + ext)
                with open(key + ".json.tmp", "w") as f:
                    json.dump(x, f)
                os.replace(key + ".json.tmp", key + ".json")
        if item.get("xla_output") is None:
            xla_text = None
            if x["rc"] == 0:
                with open(xla_out) as f:
                    xla_text = f.read()
                if os.path.exists(xla_in):
                    with open(xla_in) as f:
                        a, b = _sharded_count(item["text"]), _sharded_count(f.read())
                    if a is not None and b is not None and b < a:
                        rec["import_dropped_shardings"] = a - b
        rec["xla_pass_seconds"] = x.get("pass_seconds")
        s = run_shardlens(tool, src, item["n"], item["ours_settings"], ours_out, timeout,
                          item.get("ours_propagate", item.get("propagate", False)))
        rec["shardlens_seconds"] = s.get("seconds")
        if x["rc"] != 0 and x.get("skipped"):
            rec.update(status="skipped", reason=x["error"])
            return rec
        if x["rc"] != 0 and s["rc"] != 0:
            rec.update(status="identical", note="both reject: XLA: %s; shardlens: %s" % (
                x["error"], s["error"]), diffs=[], categories=[])
            return rec
        if x["rc"] != 0:
            rec.update(status="differs", categories=["xla-rejects"],
                       diffs=["XLA rejects the module (%s); shardlens partitions it" %
                              x["error"]])
            return rec
        if s["rc"] != 0:
            rec.update(status="differs", categories=["shardlens-rejects"],
                       diffs=["shardlens fails (exit %s): %s" % (s["rc"], s["error"])])
            return rec
        with open(ours_out) as f:
            ours_text = f.read()
        try:
            xs, os_, diffs, cats = compare_outputs(xla_text, ours_text, item["n"])
        except hlo_struct.HloError as e:
            rec.update(status="differs", categories=["unreadable"],
                       diffs=["cannot read an output: %s" % e])
            return rec
        rec.update(status="identical" if not diffs else "differs", diffs=diffs,
                   categories=cats, xla=xs, shardlens=os_)
        return rec


def devices_in_shardings(text):
    """The device count the shardings imply: the largest tile-assignment size, or the
    largest device id + 1 of a maximal sharding (what shardlens needs -n for)."""
    import re
    best = 0
    for m in re.finditer(r"devices=\[([0-9,]+)\]", text):
        k = 1
        for d in m.group(1).split(","):
            k *= int(d)
        best = max(best, k)
    for m in re.finditer(r"maximal device=(\d+)", text):
        best = max(best, int(m.group(1)) + 1)
    return best or None


def items_from_target(t, corpus_input="spmd_input"):
    if os.path.isdir(t):
        man = os.path.join(t, "manifest.json")
        if not os.path.exists(man):
            raise SystemExit("%s: error: no manifest.json (not a corpus folder)" % t)
        with open(man) as f:
            manifest = json.load(f)
        if corpus_input == "before_optimizations" and manifest.get("propagation") == "shardy":
            print("note: %s was made with Shardy propagation: its before_optimizations "
                  "carries xla.sdy.* attributes and XLA's side ran Shardy, not GSPMD "
                  "(tools/xla/corpus.py --propagation gspmd)" % t, file=sys.stderr)
        for prog in manifest["programs"]:
            with open(os.path.join(t, prog[corpus_input])) as f:
                text = f.read()
            with open(os.path.join(t, prog["spmd_output"])) as f:
                out = f.read()
            yield {"name": "%s:%s" % (os.path.basename(t.rstrip("/")), prog["name"]),
                   "text": text, "n": prog["devices"], "settings": [],
                   "ours_settings": CPU_SET, "xla_output": out,
                   "ours_propagate": corpus_input == "before_optimizations",
                   "pass_seconds": prog.get("xla_pass_seconds"), "family": prog.get("family"),
                   "mesh": prog.get("mesh")}
    elif t.endswith(".jsonl"):
        with open(t) as f:
            for line in f:
                if not line.strip():
                    continue
                c = json.loads(line)
                yield {"name": c["id"], "text": c["hlo"], "n": c["num_partitions"],
                       "settings": c["options"]["set"],
                       "ours_settings": c["options"]["set"],
                       "propagate": "ShardingPropagation" in c.get("pipeline", [])}
    else:
        with open(t) as f:
            text = f.read()
        try:
            n = hlo_struct.parse_module(text).num_partitions()
        except hlo_struct.HloError as e:
            raise SystemExit("%s: error: %s" % (t, e))
        if not n:
            n = devices_in_shardings(text)
        if not n:
            raise SystemExit("%s: error: no num_partitions= in the header and no tiled "
                             "sharding to take the device count from" % t)
        yield {"name": t, "text": text, "n": n, "settings": [], "ours_settings": CPU_SET}


def main():
    ap = argparse.ArgumentParser(prog="tools/xla/compare.py",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool", required=True, help="the shardlens binary")
    ap.add_argument("targets", nargs="+", metavar="TARGET",
                    help="corpus folder, conformance .jsonl or HLO files")
    ap.add_argument("--json", metavar="FILE", help="write every result here")
    ap.add_argument("--jobs", type=int, default=1, help="modules in parallel (default 1)")
    ap.add_argument("--filter", help="only modules whose name contains this")
    ap.add_argument("--limit", type=int, help="only the first N modules")
    ap.add_argument("--timeout", type=int, default=120,
                    help="seconds for one shardlens run (XLA gets 6 times as much)")
    ap.add_argument("--show", type=int, default=4, help="differences printed per module")
    ap.add_argument("--input", choices=["spmd_input", "before_optimizations"],
                    default="spmd_input",
                    help="which corpus module shardlens partitions: the input of XLA's "
                         "spmd-partitioning (after XLA's propagation; default) or the one JAX "
                         "hands to XLA (shardlens then propagates itself: end to end)")
    ap.add_argument("--clean", action="store_true",
                    help="count opcodes after XLA's spmd-cleanup (CSE, tuple forwarding, "
                         "dead code) applied to both outputs: separates a missing clean-up "
                         "from a real difference")
    ap.add_argument("--xla-cache", metavar="DIR",
                    help="keep XLA's results here (keyed by module text, device count, options) "
                         "and reuse them on the next run")
    args = ap.parse_args()
    global CLEAN, CACHE
    CLEAN = args.clean
    if args.xla_cache:
        os.makedirs(args.xla_cache, exist_ok=True)
        CACHE = args.xla_cache
    items = []
    for t in args.targets:
        for it in items_from_target(t, args.input):
            if args.filter and args.filter not in it["name"]:
                continue
            items.append(it)
    if args.limit:
        items = items[:args.limit]
    results = [None] * len(items)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        futs = {ex.submit(job_case, it, args.tool, args.timeout): k
                for k, it in enumerate(items)}
        for fut in concurrent.futures.as_completed(futs):
            k = futs[fut]
            try:
                results[k] = fut.result()
            except Exception as e:  # a bug here must not lose the other results
                results[k] = {"name": items[k]["name"], "status": "differs",
                              "categories": ["compare-error"],
                              "diffs": ["compare.py failed: %r" % e]}
            for key in ("family", "mesh"):
                if items[k].get(key):
                    results[k][key] = items[k][key]
    passed = failed = skipped = 0
    by_cat = {}
    for r in results:
        st = r["status"]
        extra = ""
        if r.get("import_dropped_shardings"):
            extra = " (XLA's HLO import dropped %d shardings)" % r["import_dropped_shardings"]
        if st == "skipped":
            skipped += 1
            print("%s: skipped: %s" % (r["name"], r["reason"]))
            continue
        print("%s: %s%s" % (r["name"], st, extra))
        if st == "identical":
            passed += 1
        else:
            failed += 1
            for c in r.get("categories", []):
                by_cat[c] = by_cat.get(c, 0) + 1
            for d in r["diffs"][:args.show]:
                print("    " + d)
            if len(r["diffs"]) > args.show:
                print("    ... %d more" % (len(r["diffs"]) - args.show))
    if by_cat:
        print("differences by kind: " + ", ".join(
            "%s %d" % (k, v) for k, v in sorted(by_cat.items(), key=lambda kv: -kv[1])))
    if skipped:
        print("%d skipped (XLA's CPU pipeline cannot partition them that way)" % skipped)
    # issue 16's measure: the collectives alone (opcode and byte differences aside)
    coll_ok = sum(1 for r in results if r["status"] == "identical" or (
        r["status"] == "differs" and not set(r.get("categories", [])) &
        {"collectives", "shardlens-rejects", "xla-rejects", "unreadable", "compare-error"}))
    print("XLA's collectives on %d of %d modules" % (coll_ok, passed + failed))
    if args.json:
        tmp = args.json + ".tmp.%d" % os.getpid()
        with open(tmp, "w") as f:
            json.dump({"results": results, "passed": passed, "failed": failed,
                       "skipped": skipped}, f, indent=1, sort_keys=True)
        os.replace(tmp, args.json)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
