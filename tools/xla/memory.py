#!/usr/bin/env python3
"""shardlens's memory estimate against XLA's compiled.memory_analysis(), program by program.

usage: tools/xla/memory.py --tool build/shardlens TARGET... [--jobs N] [--filter SUBSTR]
                           [--limit N] [--json FILE] [--xla-cache DIR] [--no-unpartitioned]
                           [--optimized] [--cached-only] [--xla-dump DIR] [--quiet]

A TARGET is a corpus folder (tools/xla/make-corpus.sh; manifest.json: each program's
NAME.spmd_input.hlo on its device count, grouped by family) or HLO files (the device count
from the header's num_partitions=, else from the shardings).

XLA's side: the module is compiled in full by the CPU backend (every pass, fusion and buffer
assignment included) with N partitions, GSPMD partitioning on, and the executable's
CompiledMemoryStats are read: argument, output, alias, temp and generated-code bytes per
device (one SPMD program serves every device). Unless --no-unpartitioned, the same
module is also compiled for one device without partitioning (its shardings are then ignored),
which is what shardlens's "unpartitioned" figures describe.

shardlens's side: `partition --trace`, the trace's memory table (the figures of summary.json's
"memory" object, with max_temp_bytes besides), with XLA's CPU options
(threshold_for_windowed_einsum_mib=100000, no propagation: the corpus input is already
propagated).

What is compared. Arguments and outputs are per-device local sizes after partitioning and
must agree exactly; XLA's output bytes include the pointer tables of tuple-shaped outputs.
Aliased bytes (input_output_alias donation) must agree too. Temporaries differ by design:
XLA's CPU pipeline fuses elementwise chains (their intermediates never get a buffer), packs
buffers into one heap-simulated allocation, reorders the schedule and may rematerialise;
shardlens counts every unfused value of the HLO it is given under the module's own order.
For them the ratio shardlens / XLA is reported (shardlens's most temporary bytes live at
once against XLA's temp allocation). The last line: "arguments equal in A of N, outputs equal
in B of N, aliases equal in C of N, temp ratio median R (p10 P..p90 Q)".

Exit status 0 when arguments and outputs agree in every program compared, else 1. XLA runs in
.venv-xla (tools/xla/setup.sh), one process per compile (this file with --xla-worker); the
rest needs only the standard library. Results and causes: tools/xla/MEMORY.md.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV_PY = os.path.join(ROOT, ".venv-xla", "bin", "python")
CPU_SET = ["threshold_for_windowed_einsum_mib=100000"]
STAT_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
               "temp_size_in_bytes", "generated_code_size_in_bytes",
               "host_argument_size_in_bytes", "host_output_size_in_bytes",
               "host_alias_size_in_bytes", "host_temp_size_in_bytes",
               "host_generated_code_size_in_bytes", "peak_memory_in_bytes")


# ---- XLA (runs inside .venv-xla) --------------------------------------------------------

def xla_worker(path, k, dump=None, hlo_out=None):
    """Prints XLA's CompiledMemoryStats of `path` compiled for k devices as one JSON object:
    k > 1 with GSPMD partitioning, k == 1 unpartitioned (the shardings are then ignored)."""
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "",
                   os.environ.get("XLA_FLAGS", ""))
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=%d" %
                               max(k, 1)).strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    with open(path) as f:
        text = f.read()
    try:
        return _compile_stats(text, k, dump, hlo_out, None)
    except Exception as e:
        # XLA's StableHLO round trip of a while can give it a tuple sharding with more leaves
        # than its shape (a RET_CHECK in hlo_sharding.cc; the corpus's scan programs): drop
        # the whiles' shardings, which XLA's own propagation then gives back
        if "leaf_count == tuple_elements_.size()" not in str(e):
            raise
        lines = [strip_shardings(l) if " while(" in l else l for l in text.split("\n")]
        return _compile_stats("\n".join(lines), k, dump, hlo_out,
                              "XLA's import rejected the while shardings; compiled without them")


def _compile_stats(text, k, dump, hlo_out, note):
    import numpy as np
    import jax
    from jax._src.lib import xla_client as xc, _jax

    module = xc.hlo.hlo_module_from_text(text)
    comp = xc.XlaComputation(module.as_serialized_hlo_module_proto())
    mlir = _jax.mlir.xla_computation_to_mlir_module(comp)
    opts = xc.CompileOptions()
    opts.num_replicas = 1
    opts.num_partitions = k
    eb = opts.executable_build_options
    eb.num_replicas = 1
    eb.num_partitions = k
    eb.use_spmd_partitioning = k > 1
    eb.use_shardy_partitioner = False
    opts.device_assignment = xc.DeviceAssignment.create(
        np.arange(k, dtype=np.int32).reshape(1, k))
    devices = jax.devices()[:k]
    t0 = time.perf_counter()
    ex = devices[0].client.compile_and_load(
        mlir, executable_devices=xc.DeviceList(tuple(devices)), compile_options=opts)
    s = ex.get_compiled_memory_stats()
    rec = {f: int(getattr(s, f)) for f in STAT_FIELDS if hasattr(s, f)}
    rec["compile_seconds"] = round(time.perf_counter() - t0, 3)
    if note:
        rec["note"] = note
    outs = [hlo_out] if hlo_out else []
    if dump:
        outs.append("%s.%s.hlo" % (dump, "partitioned" if k > 1 else "unpartitioned"))
    if outs:
        opt = ex.hlo_modules()[0].to_string()
        for o in outs:
            with open(o + ".tmp", "w") as f:
                f.write(opt)
            os.replace(o + ".tmp", o)
    print(json.dumps(rec, sort_keys=True))
    return 0


def strip_shardings(text):
    """The module text without its sharding={...} attributes and num_partitions=: what XLA
    compiles for one device (the unpartitioned compile ignores shardings), as a cache key
    shared by the programs of one model on every mesh."""
    out, i = [], 0
    pat = re.compile(r", sharding=\{")
    while True:
        m = pat.search(text, i)
        if not m:
            out.append(text[i:])
            break
        out.append(text[i:m.start()])
        j, depth = m.end(), 1
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    return re.sub(r",? ?num_partitions=\d+", "", "".join(out))


_locks = {}
_locks_guard = threading.Lock()


CACHED_ONLY = False


def run_xla(path, text, k, cache, timeout, dump=None, optimized=False):
    """XLA's CompiledMemoryStats of `path` compiled for k devices (k == 1: unpartitioned); with
    `optimized`, rec["optimized_hlo"] names a file with XLA's optimised module (kept in the
    cache, else a temporary file the caller removes)."""
    key = None
    if cache and not dump:
        what = ([text, k, "memory-v2"] if k > 1 else [strip_shardings(text), "memory-v2-u"])
        key = os.path.join(cache, hashlib.sha256(json.dumps(what).encode()).hexdigest()[:24] +
                           (".json" if k > 1 else ".u.json"))
    opt = None
    if optimized:
        opt = key[:-len(".json")] + ".opt.hlo" if key else tempfile.mkstemp(
            prefix="xla-memory.", suffix=".hlo")[1]
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock()) if key else threading.Lock()
    with lock:
        if key and os.path.exists(key):
            # figures cached without the optimised module: compared without it, not
            # compiled again (--xla-dump recompiles)
            with open(key) as f:
                res = json.load(f)
            if opt and os.path.exists(opt):
                res["optimized_hlo"] = opt
            return res
        if CACHED_ONLY:
            return {"error": "not in the cache (--cached-only)"}
        py = VENV_PY if os.path.exists(VENV_PY) else sys.executable
        cmd = ["nice", py, os.path.abspath(__file__), "--xla-worker", path, "-n", str(k)]
        if dump:
            cmd += ["--dump", dump]
        if opt:
            cmd += ["--hlo-out", opt]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": "timeout after %ds" % timeout}
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if p.returncode != 0 or not lines:
            errs = p.stderr.strip().splitlines() or ["exit %d" % p.returncode]
            named = [l for l in errs if re.match(r"^[\w.]*(Error|Exception): ", l)]
            return {"error": (named or errs)[-1][:400]}
        res = json.loads(lines[-1])
        if key:
            tmp = key + ".tmp.%d" % os.getpid()
            with open(tmp, "w") as f:
                json.dump(res, f, sort_keys=True)
            os.replace(tmp, key)
        if opt:
            res["optimized_hlo"] = opt
        return res


# ---- shardlens --------------------------------------------------------------------------

def run_shardlens(tool, path, n, timeout):
    """shardlens's figures from the trace's memory table (schema/trace.sql): "unpartitioned"
    (phase 'before') and "devices" (phase 'after', one row per group of devices)."""
    import sqlite3
    with tempfile.TemporaryDirectory(prefix="xla-memory.") as d:
        db, hlo = os.path.join(d, "t.db"), os.path.join(d, "p.hlo")
        cmd = [tool, "partition", path, "-n", str(n), "--no-propagate", "-o", hlo,
               "--trace", db]
        for s in CPU_SET:
            cmd += ["--set", s]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": "timeout after %ds" % timeout}
        if p.returncode != 0:
            return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[0]}
        secs = round(time.perf_counter() - t0, 3)
        con = sqlite3.connect(db)
        cols = ("phase", "devices", "parameter_bytes", "output_bytes", "alias_bytes",
                "peak_bytes", "peak_temp_bytes", "max_temp_bytes")
        rows = con.execute("SELECT %s FROM memory ORDER BY id" % ", ".join(cols)).fetchall()
        con.close()
        mem = {"devices": [], "seconds": secs}
        for row in rows:
            r = dict(zip(cols, row))
            if r["phase"] == "before":
                mem["unpartitioned"] = r
            else:
                r["devices"] = json.loads(r["devices"] or "[]")
                mem["devices"].append(r)
        if not mem["devices"]:
            return {"error": "the trace has no memory rows"}
        return mem


# ---- comparison -------------------------------------------------------------------------

def devices_in_shardings(text):
    best = 0
    for m in re.finditer(r"devices=\[([0-9,]+)\]", text):
        k = 1
        for d in m.group(1).split(","):
            k *= int(d)
        best = max(best, k)
    for m in re.finditer(r"maximal device=(\d+)", text):
        best = max(best, int(m.group(1)) + 1)
    return best or None


def items_from_target(t):
    if os.path.isdir(t):
        man = os.path.join(t, "manifest.json")
        if not os.path.exists(man):
            raise SystemExit("%s: error: no manifest.json (not a corpus folder)" % t)
        with open(man) as f:
            manifest = json.load(f)
        for prog in manifest["programs"]:
            yield {"name": prog["name"], "path": os.path.join(t, prog["spmd_input"]),
                   "n": prog["devices"], "family": prog.get("family", "-"),
                   "mesh": prog.get("mesh")}
    else:
        with open(t) as f:
            text = f.read()
        m = re.search(r"num_partitions=(\d+)", text.split("\n", 1)[0])
        n = int(m.group(1)) if m else devices_in_shardings(text)
        if not n:
            raise SystemExit("%s: error: no num_partitions= in the header and no tiled "
                             "sharding to take the device count from" % t)
        yield {"name": t, "path": t, "n": n, "family": "files"}


def job(item, tool, unpartitioned, cache, timeout, dump_dir=None, optimized=False):
    with open(item["path"]) as f:
        text = f.read()
    rec = dict(item)
    dump = os.path.join(dump_dir, os.path.basename(item["name"])) if dump_dir else None
    rec["xla"] = {}
    rec["optimized"] = {}
    for mode, k in [("partitioned", item["n"])] + ([("unpartitioned", 1)] if unpartitioned
                                                    else []):
        x = run_xla(item["path"], text, k, cache, timeout * 10, dump, optimized)
        opt = x.pop("optimized_hlo", None)
        rec["xla"][mode] = x
        if opt and "error" not in x:
            # shardlens's estimate of XLA's own optimised module (fused, scheduled): the
            # module as given, its 'before' row
            with open(opt) as f:
                otext = f.read()
            if k == 1:  # its shardings were ignored by XLA: drop them for shardlens too
                otext = strip_shardings(otext)
            fd, sopt = tempfile.mkstemp(prefix="xla-memory.", suffix=".hlo")
            with os.fdopen(fd, "w") as f:
                f.write(otext)
            o = run_shardlens(tool, sopt, k, timeout)
            os.remove(sopt)
            rec["optimized"][mode] = o.get("unpartitioned") or {"error": o.get("error")}
        if opt and not cache and os.path.exists(opt):
            os.remove(opt)
    rec["shardlens"] = run_shardlens(tool, item["path"], item["n"], timeout)
    return rec


def compare(rec):
    """Adds rec["cmp"]: per quantity (xla, ours, equal) and the temp ratio."""
    x = rec["xla"].get("partitioned", {})
    s = rec["shardlens"]
    if "error" in x or "error" in s:
        rec["cmp"] = None
        return
    groups = s.get("devices") or []
    # one SPMD program for every device: compare each group; the figures XLA gives are
    # those of the group that holds device 0 (the program's own shapes are the same for all)
    g = next((g for g in groups if 0 in g.get("devices", [])), groups[0] if groups else {})
    c = {
        "argument": (x["argument_size_in_bytes"], g.get("parameter_bytes")),
        "output": (x["output_size_in_bytes"], g.get("output_bytes")),
        "alias": (x["alias_size_in_bytes"], g.get("alias_bytes")),
        "temp": (x["temp_size_in_bytes"], g.get("max_temp_bytes")),
        "groups": len(groups),
    }
    u = rec["xla"].get("unpartitioned")
    su = s.get("unpartitioned")
    if u and "error" not in u and su:
        c["u_argument"] = (u["argument_size_in_bytes"], su.get("parameter_bytes"))
        c["u_output"] = (u["output_size_in_bytes"], su.get("output_bytes"))
        c["u_alias"] = (u["alias_size_in_bytes"], su.get("alias_bytes"))
        c["u_temp"] = (u["temp_size_in_bytes"], su.get("max_temp_bytes"))
    for mode, pre in (("partitioned", "o_"), ("unpartitioned", "ou_")):
        o = rec.get("optimized", {}).get(mode)
        xx = rec["xla"].get(mode)
        if o and "error" not in o and xx and "error" not in xx:
            c[pre + "argument"] = (xx["argument_size_in_bytes"], o["parameter_bytes"])
            c[pre + "output"] = (xx["output_size_in_bytes"], o["output_bytes"])
            c[pre + "temp"] = (xx["temp_size_in_bytes"], o["max_temp_bytes"])
    rec["cmp"] = c


def ratio(pair):
    x, o = pair
    if o is None:
        return None
    if x == 0:
        return 1.0 if o == 0 else float("inf")
    return o / x


def quantile(v, q):
    v = sorted(v)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def human(b):
    if b is None:
        return "-"
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(b) >= k:
            return "%.3g %s" % (b / k, unit)
    return "%d B" % b


def fmt_pair(pair):
    x, o = pair
    if o == x:
        return "= %s" % human(x)
    return "%s vs %s (%+d B)" % (human(o), human(x), (o or 0) - x)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--xla-worker":
        ap = argparse.ArgumentParser(prog="tools/xla/memory.py --xla-worker")
        ap.add_argument("--xla-worker", metavar="IN.hlo", required=True)
        ap.add_argument("-n", type=int, required=True)
        ap.add_argument("--dump", metavar="PREFIX")
        ap.add_argument("--hlo-out", metavar="FILE")
        a = ap.parse_args()
        return xla_worker(a.xla_worker, a.n, a.dump, a.hlo_out)
    ap = argparse.ArgumentParser(prog="tools/xla/memory.py",
                                 description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[2:]))
    ap.add_argument("--tool", required=True, help="the shardlens binary")
    ap.add_argument("targets", nargs="+", metavar="TARGET", help="corpus folder or HLO files")
    ap.add_argument("--json", metavar="FILE", help="write every figure here")
    ap.add_argument("--jobs", type=int, default=1, help="programs in parallel (default 1)")
    ap.add_argument("--filter", help="only programs whose name contains this")
    ap.add_argument("--limit", type=int, help="only the first N programs")
    ap.add_argument("--timeout", type=int, default=120,
                    help="seconds for shardlens on one program (XLA gets 10 times as much)")
    ap.add_argument("--no-unpartitioned", action="store_true",
                    help="skip XLA's one-device compile of the unpartitioned module")
    ap.add_argument("--xla-cache", metavar="DIR",
                    help="keep XLA's figures here (keyed by module text and device count)")
    ap.add_argument("--xla-dump", metavar="DIR",
                    help="write XLA's optimised module of each compile here "
                         "(NAME.partitioned.hlo, NAME.unpartitioned.hlo; bypasses the cache)")
    ap.add_argument("--optimized", action="store_true",
                    help="also run shardlens's estimate on XLA's optimised module (after fusion "
                         "and scheduling) and compare its temporaries with XLA's: separates "
                         "the liveness model from what XLA's passes change; programs whose "
                         "figures are cached without that module are not compiled again)")
    ap.add_argument("--cached-only", action="store_true",
                    help="compile nothing: programs whose figures are not in --xla-cache are "
                         "not compared")
    ap.add_argument("--quiet", action="store_true", help="no per-program lines")
    args = ap.parse_args()
    global CACHED_ONLY
    CACHED_ONLY = args.cached_only
    for d in (args.xla_cache, args.xla_dump):
        if d:
            os.makedirs(d, exist_ok=True)
    items = [it for t in args.targets for it in items_from_target(t)
             if not args.filter or args.filter in it["name"]]
    if args.limit:
        items = items[:args.limit]
    results = [None] * len(items)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        # smallest modules first (the tables keep the target's order)
        order = sorted(range(len(items)), key=lambda k: os.path.getsize(items[k]["path"]))
        futs = {ex.submit(job, items[k], args.tool, not args.no_unpartitioned, args.xla_cache,
                          args.timeout, args.xla_dump, args.optimized): k for k in order}
        for fut in concurrent.futures.as_completed(futs):
            k = futs[fut]
            try:
                results[k] = fut.result()
            except Exception as e:  # one failure must not lose the others
                results[k] = dict(items[k], xla={"partitioned": {"error": repr(e)}},
                                  shardlens={})
    for r in results:
        compare(r)
    print_tables(results, args.quiet)
    if args.json:
        tmp = args.json + ".tmp.%d" % os.getpid()
        with open(tmp, "w") as f:
            json.dump({"results": results}, f, indent=1, sort_keys=True)
        os.replace(tmp, args.json)
    ok = [r for r in results if r["cmp"]]
    return 0 if ok and all(r["cmp"]["argument"][0] == r["cmp"]["argument"][1] and
                           r["cmp"]["output"][0] == r["cmp"]["output"][1] for r in ok) else 1


def rec_note(r, mode):
    return (r["xla"].get(mode) or {}).get("note")


def _eq(rs, q):
    """(equal, compared) over the records that have quantity q."""
    have = [r for r in rs if q in r["cmp"]]
    return sum(1 for r in have if r["cmp"][q][0] == r["cmp"][q][1]), len(have)


def _ratios(rs, q):
    v = [ratio(r["cmp"][q]) for r in rs if q in r["cmp"]]
    return [t for t in v if t is not None and t != float("inf")]


def _dist(v):
    if not v:
        return "-"
    return "%.2f (%.2f..%.2f)" % (quantile(v, .5), quantile(v, .1), quantile(v, .9))


def print_tables(results, quiet):
    ok = [r for r in results if r["cmp"]]
    if not quiet:
        print("%-40s %3s %7s %7s %7s %10s %10s %6s %6s" % (
            "program", "N", "args", "outputs", "alias", "temp XLA", "temp ours", "ratio",
            "opt"))
    for r in results:
        c = r["cmp"]
        if not c:
            err = r["xla"].get("partitioned", {}).get("error") or r["shardlens"].get("error")
            print("%-40s %3d not compared: %s" % (r["name"], r["n"], err))
            continue
        if quiet:
            continue
        mark = lambda p: "=" if p[0] == p[1] else "%+d" % ((p[1] or 0) - p[0])
        rt = ratio(c["temp"])
        ro = ratio(c["o_temp"]) if "o_temp" in c else None
        print("%-40s %3d %7s %7s %7s %10s %10s %6s %6s" % (
            r["name"][:40], r["n"], mark(c["argument"]), mark(c["output"]),
            mark(c["alias"]), human(c["temp"][0]), human(c["temp"][1]),
            "%.2f" % rt if rt is not None else "-", "%.2f" % ro if ro is not None else "-"))
        for mode in ("partitioned", "unpartitioned"):
            if rec_note(r, mode):
                print("    XLA, %s: %s" % (mode, rec_note(r, mode)))
        for q in ("argument", "output", "alias", "u_argument", "u_output", "u_alias"):
            if q in c and c[q][0] != c[q][1]:
                print("    %s: shardlens %s" % (q, fmt_pair(c[q])))
    fams = {}
    for r in ok:
        fams.setdefault(r["family"], []).append(r)
    print()
    print("per family (partitioned, per device; '1 dev': the unpartitioned module on one "
          "device; 'on XLA's module': shardlens's estimate of XLA's optimised module)")
    print("%-13s %5s %7s %7s %7s %20s %7s %7s %20s %20s" % (
        "family", "progs", "args", "outputs", "alias", "temp ratio (p10..p90)", "1dev arg",
        "1dev out", "1dev temp ratio", "on XLA's module"))
    frac = lambda e: "%d/%d" % e if e[1] else "-"
    for fam in sorted(fams):
        rs = fams[fam]
        print("%-13s %5d %7s %7s %7s %20s %7s %7s %20s %20s" % (
            fam, len(rs), frac(_eq(rs, "argument")), frac(_eq(rs, "output")),
            frac(_eq(rs, "alias")), _dist(_ratios(rs, "temp")), frac(_eq(rs, "u_argument")),
            frac(_eq(rs, "u_output")), _dist(_ratios(rs, "u_temp")),
            _dist(_ratios(rs, "o_temp") + _ratios(rs, "ou_temp"))))
    n = len(results)
    if n - len(ok):
        print("%d of %d not compared (XLA or shardlens failed)" % (n - len(ok), n))
    ua, uo = _eq(ok, "u_argument"), _eq(ok, "u_output")
    if ua[1]:
        print("unpartitioned (one device): arguments equal in %d of %d, outputs equal in %d of "
              "%d, temp ratio median %s" % (ua + uo + (_dist(_ratios(ok, "u_temp")),)))
    oa = _eq(ok, "o_temp")
    if oa[1]:
        ou = _eq(ok, "ou_temp")
        near = lambda q: sum(1 for t in _ratios(ok, q) if abs(t - 1) <= 0.01)
        print("on XLA's optimised module: temp equal in %d of %d partitioned (within 1 %%: %d), "
              "%d of %d unpartitioned (within 1 %%: %d), ratio %s" % (
                  oa + (near("o_temp"),) + ou + (near("ou_temp"),
                  _dist(_ratios(ok, "o_temp") + _ratios(ok, "ou_temp")))))
        for q in ("o_argument", "o_output", "ou_argument", "ou_output"):
            e = _eq(ok, q)
            if e[0] != e[1]:
                print("  on XLA's optimised module, %s equal in %d of %d" % ((q,) + e))
    rts = _ratios(ok, "temp")
    print("arguments equal in %d of %d, outputs equal in %d of %d, aliases equal in %d of %d, "
          "temp ratio median %.2f (p10 %.2f..p90 %.2f)" % (
              _eq(ok, "argument")[0], n, _eq(ok, "output")[0], n, _eq(ok, "alias")[0], n,
              quantile(rts, .5), quantile(rts, .1), quantile(rts, .9)))


if __name__ == "__main__":
    sys.exit(main())
