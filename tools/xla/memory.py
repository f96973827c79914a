#!/usr/bin/env python3
"""shardlens's memory estimate against XLA's compiled.memory_analysis(), program by program.

usage: tools/xla/memory.py --tool build/shardlens TARGET... [--jobs N] [--filter SUBSTR]
                           [--limit N] [--json FILE] [--xla-cache DIR] [--no-unpartitioned]

A TARGET is a corpus folder (tools/xla/make-corpus.sh; manifest.json: each program's
NAME.spmd_input.hlo on its device count, grouped by family) or HLO files (the device count
from the header's num_partitions=, else from the shardings).

XLA's side: the module is compiled in full by the CPU backend (every pass, fusion and buffer
assignment included) with N partitions, GSPMD partitioning on, and the executable's
CompiledMemoryStats are read: argument, output, alias, temp and generated-code bytes per
device (one SPMD program serves every device). With --unpartitioned off by default, the same
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

XLA runs in .venv-xla (tools/xla/setup.sh), one process per program (this file with
--xla-worker); the rest needs only the standard library.
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

def xla_worker(path, n, unpartitioned, dump=None):
    """Prints one JSON object: {"partitioned": stats|{"error"}, "unpartitioned": ...}."""
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "",
                   os.environ.get("XLA_FLAGS", ""))
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=%d" %
                               max(n, 1)).strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import numpy as np
    import jax
    from jax._src.lib import xla_client as xc, _jax

    with open(path) as f:
        text = f.read()
    out = {}

    def compile_stats(k):
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
        if dump:
            with open("%s.%s.hlo" % (dump, "partitioned" if k > 1 else "unpartitioned"),
                      "w") as f:
                f.write(ex.hlo_modules()[0].to_string())
        return rec

    modes = [("partitioned", n)] + ([("unpartitioned", 1)] if unpartitioned else [])
    for name, k in modes:
        try:
            out[name] = compile_stats(k)
        except Exception as e:  # XLA's message, for the table
            out[name] = {"error": str(e).strip().split("\n")[0][:400]}
    print(json.dumps(out, sort_keys=True))
    return 0


def run_xla(path, text, n, unpartitioned, cache, timeout, dump=None):
    key = None
    if cache and not dump:
        h = hashlib.sha256(json.dumps([text, n, unpartitioned, "memory-v1"]).encode())
        key = os.path.join(cache, h.hexdigest()[:24] + ".json")
        if os.path.exists(key):
            with open(key) as f:
                return json.load(f)
    py = VENV_PY if os.path.exists(VENV_PY) else sys.executable
    cmd = ["nice", py, os.path.abspath(__file__), "--xla-worker", path, "-n", str(n)]
    if unpartitioned:
        cmd.append("--unpartitioned")
    if dump:
        cmd += ["--dump", dump]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"partitioned": {"error": "timeout after %ds" % timeout}}
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        err = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        return {"partitioned": {"error": err[:400]}}
    res = json.loads(lines[-1])
    if key:
        tmp = key + ".tmp.%d" % os.getpid()
        with open(tmp, "w") as f:
            json.dump(res, f, sort_keys=True)
        os.replace(tmp, key)
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


def job(item, tool, unpartitioned, cache, timeout, dump_dir=None):
    with open(item["path"]) as f:
        text = f.read()
    rec = dict(item)
    dump = os.path.join(dump_dir, os.path.basename(item["name"])) if dump_dir else None
    rec["xla"] = run_xla(item["path"], text, item["n"], unpartitioned, cache, timeout * 10,
                         dump)
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
        ap.add_argument("--unpartitioned", action="store_true")
        ap.add_argument("--dump", metavar="PREFIX")
        a = ap.parse_args()
        return xla_worker(a.xla_worker, a.n, a.unpartitioned, a.dump)
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
    ap.add_argument("--quiet", action="store_true", help="no per-program lines")
    args = ap.parse_args()
    for d in (args.xla_cache, args.xla_dump):
        if d:
            os.makedirs(d, exist_ok=True)
    items = [it for t in args.targets for it in items_from_target(t)
             if not args.filter or args.filter in it["name"]]
    if args.limit:
        items = items[:args.limit]
    results = [None] * len(items)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        futs = {ex.submit(job, it, args.tool, not args.no_unpartitioned, args.xla_cache,
                          args.timeout, args.xla_dump): k for k, it in enumerate(items)}
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


def print_tables(results, quiet):
    ok = [r for r in results if r["cmp"]]
    if not quiet:
        print("%-44s %4s %10s %10s %10s %10s %10s %6s" % (
            "program", "N", "args", "outputs", "alias", "temp XLA", "temp ours", "ratio"))
    for r in results:
        c = r["cmp"]
        if not c:
            err = r["xla"].get("partitioned", {}).get("error") or r["shardlens"].get("error")
            print("%-44s %4d not compared: %s" % (r["name"], r["n"], err))
            continue
        if quiet:
            continue
        mark = lambda p: "=" if p[0] == p[1] else "%+d" % ((p[1] or 0) - p[0])
        rt = ratio(c["temp"])
        print("%-44s %4d %10s %10s %10s %10s %10s %6s" % (
            r["name"][:44], r["n"], mark(c["argument"]), mark(c["output"]),
            mark(c["alias"]), human(c["temp"][0]), human(c["temp"][1]),
            "%.2f" % rt if rt is not None else "-"))
        for q in ("argument", "output", "alias"):
            if c[q][0] != c[q][1]:
                print("    %s: shardlens %s" % (q, fmt_pair(c[q])))
    fams = {}
    for r in ok:
        fams.setdefault(r["family"], []).append(r)
    print()
    print("%-14s %5s %9s %9s %9s %22s %9s %9s %22s" % (
        "family", "progs", "args =", "outputs =", "alias =", "temp ratio med (p10..p90)",
        "1-dev arg", "1-dev out", "1-dev temp med"))
    for fam in sorted(fams):
        rs = fams[fam]
        eq = lambda q: sum(1 for r in rs if r["cmp"][q][0] == r["cmp"][q][1])
        rts = [ratio(r["cmp"]["temp"]) for r in rs]
        rts = [t for t in rts if t is not None and t != float("inf")]
        us = [r for r in rs if "u_argument" in r["cmp"]]
        ueq = lambda q: sum(1 for r in us if r["cmp"][q][0] == r["cmp"][q][1])
        urt = [ratio(r["cmp"]["u_temp"]) for r in us]
        urt = [t for t in urt if t is not None and t != float("inf")]
        print("%-14s %5d %9s %9s %9s %22s %9s %9s %22s" % (
            fam, len(rs), "%d/%d" % (eq("argument"), len(rs)),
            "%d/%d" % (eq("output"), len(rs)), "%d/%d" % (eq("alias"), len(rs)),
            "%.2f (%.2f..%.2f)" % (quantile(rts, .5), quantile(rts, .1), quantile(rts, .9)),
            "%d/%d" % (ueq("u_argument"), len(us)) if us else "-",
            "%d/%d" % (ueq("u_output"), len(us)) if us else "-",
            "%.2f (%.2f..%.2f)" % (quantile(urt, .5), quantile(urt, .1), quantile(urt, .9))
            if urt else "-"))
    n = len(results)
    eq = lambda q: sum(1 for r in ok if r["cmp"][q][0] == r["cmp"][q][1])
    rts = [ratio(r["cmp"]["temp"]) for r in ok]
    rts = [t for t in rts if t is not None and t != float("inf")]
    us = [r for r in ok if "u_argument" in r["cmp"]]
    if us:
        ueq = lambda q: sum(1 for r in us if r["cmp"][q][0] == r["cmp"][q][1])
        print("unpartitioned (one device): arguments equal in %d of %d, outputs equal in %d "
              "of %d" % (ueq("u_argument"), len(us), ueq("u_output"), len(us)))
    if n - len(ok):
        print("%d of %d not compared (XLA or shardlens failed)" % (n - len(ok), n))
    print("arguments equal in %d of %d, outputs equal in %d of %d, aliases equal in %d of %d, "
          "temp ratio median %.2f (p10 %.2f..p90 %.2f)" % (
              eq("argument"), n, eq("output"), n, eq("alias"), n, quantile(rts, .5),
              quantile(rts, .1), quantile(rts, .9)))


if __name__ == "__main__":
    sys.exit(main())
