#!/usr/bin/env python3
"""An independent numeric check of shardlens's partitioner, with XLA's CPU backend.

usage: tools/xla/numeric.py --tool build/shardlens IN.hlo... [-n N] [--seed S]
                            [--rtol R] [--atol A] [--corpus DIR [--only SUBSTR]]

For each module: shardlens partitions IN.hlo for N devices; XLA compiles shardlens's
partitioned module as an SPMD program (no partitioning of its own) and runs it on N host
devices, each device given its shard of seeded random global inputs (the entry parameters'
shardings say which); XLA also runs IN.hlo itself on one device (shardings removed) on the
same inputs. The root's shards are reassembled with the root's sharding and compared with
the one-device result (allclose, rtol, and atol times the largest |result|). Integer inputs are drawn from [0, 4) so that
index operands stay in range. Prints `MODULE: same`, `MODULE: DIFFERENT (max abs error)` or
`MODULE: not run (reason)`, then `N same, N different, N not run`.

XLA cannot run a module here when: a parameter or the root is a tuple, or has a manual,
unreduced or unknown sharding (no global array to shard), the module has side effects
with host transfers (send/recv/outfeed) or custom-calls XLA's CPU backend lacks, or the
global arrays are too large for this machine (--max-mib, default 64 per module).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hlo_struct  # noqa: E402
import xla_run  # noqa: E402

NP_DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
             "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64", "u8": "uint8",
             "u16": "uint16", "u32": "uint32", "u64": "uint64", "pred": "bool"}


class NotRun(Exception):
    pass


def _dims(shape):
    m = re.match(r"([a-z0-9]+)\[([^\]]*)\]", shape)
    if not m:
        raise NotRun("shape %s" % shape)
    dims = [int(d) for d in m.group(2).split(",") if d.strip()]
    return m.group(1), dims


def _tiles(sharding_text, shape, n):
    """device -> (slices into the global array, padded local shape) for a tiled or
    replicated sharding; uneven tiles are ceil-sized with the tail padded, as the
    partitioner lays them out."""
    from jax._src.lib import xla_client as xc
    s = xc.HloSharding.from_string(sharding_text)
    rank = len(shape)
    if s.is_replicated() or not s.is_tiled():
        if not (s.is_replicated() or s.is_maximal()):
            raise NotRun("sharding %s" % sharding_text)
        return {d: (tuple(slice(0, x) for x in shape), tuple(shape)) for d in range(n)}
    # the tile dimensions and device order as written (jaxlib's accessors report the iota's
    # reshape dimensions for `<=[...]T(...)` forms)
    m = re.search(r"devices=\[([0-9,]+)\]\s*(<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?|([0-9, ]+))",
                  sharding_text)
    if not m:
        raise NotRun("sharding %s" % sharding_text)
    dims = [int(x) for x in m.group(1).split(",")]
    if m.group(3):
        devs = hlo_struct.iota_devices([int(x) for x in m.group(3).split(",")],
                                       [int(x) for x in m.group(4).split(",")]
                                       if m.group(4) else None)
    else:
        devs = [int(x) for x in m.group(5).replace(" ", "").split(",") if x]
    out = {}
    for flat, d in enumerate(devs):
        idx, rem = [], flat
        for k in range(len(dims) - 1, -1, -1):
            idx.append(rem % dims[k])
            rem //= dims[k]
        idx = idx[::-1][:rank]
        sl, loc = [], []
        for k in range(rank):
            size = -(-shape[k] // dims[k])
            lo = min(idx[k] * size, shape[k])
            sl.append(slice(lo, min(lo + size, shape[k])))
            loc.append(size)
        out[d] = (tuple(sl), tuple(loc))
    return out


def _as_replicas(text, n):
    """shardlens's SPMD program as the same program over N replicas: XLA's CPU client runs
    an already partitioned module only that way (with partitions it would partition it
    again, and it refuses partition-id there). partition-id becomes replica-id and the
    collectives lose channel_id/use_global_device_ids, so their groups and pairs name
    replicas, which are the same N devices in the same order."""
    text = _strip_shardings(text)
    # a collective without channel_id is cross-replica in the SPMD program: over one replica,
    # so each device on its own; as replicas it must stay so
    lines = []
    single = "{" + ",".join("{%d}" % d for d in range(n)) + "}"
    for line in text.split("\n"):
        m = re.search(r"\s(all-reduce|all-gather|all-to-all|reduce-scatter|"
                      r"collective-permute)(-start)?\(", line)
        if m and "channel_id=" not in line:
            if m.group(1) == "collective-permute":
                raise NotRun("a cross-replica collective-permute")
            if "replica_groups=" in line:
                line = re.sub(r"replica_groups=(\{[{}0-9, ]*\}|\[[^\]]*\]<=\[[^\]]*\]"
                              r"(T\([^)]*\))?)", "replica_groups=" + single, line)
            else:
                line = line.replace("), ", "), replica_groups=%s, " % single, 1)
        lines.append(line)
    text = "\n".join(lines)
    text = re.sub(r",\s*channel_id=\d+", "", text)
    text = re.sub(r",\s*use_global_device_ids=true", "", text)
    return re.sub(r"\bpartition-id\(\)", "replica-id()", text)


def _compile(text, n, spmd, replicas=1):
    import numpy as np
    import jax
    from jax._src.lib import xla_client as xc, _jax
    module = xc.hlo.hlo_module_from_text(text)
    comp = xc.XlaComputation(module.as_serialized_hlo_module_proto())
    mlir = _jax.mlir.xla_computation_to_mlir_module(comp)
    opts = xc.CompileOptions()
    opts.num_replicas = replicas
    opts.num_partitions = n
    eb = opts.executable_build_options
    eb.num_replicas = replicas
    eb.num_partitions = n
    eb.use_spmd_partitioning = spmd
    eb.use_shardy_partitioner = False
    opts.device_assignment = xc.DeviceAssignment.create(
        np.arange(n * replicas, dtype=np.int32).reshape(replicas, n))
    devs = jax.devices()[:n * replicas]
    return devs[0].client.compile_and_load(
        mlir, executable_devices=xc.DeviceList(tuple(devs)), compile_options=opts), devs


def _strip_shardings(text, keep_partitions=False):
    """The module without sharding attributes (and, unless keep_partitions, for one
    device: num_partitions=1)."""
    if not keep_partitions:
        text = re.sub(r"num_partitions=\d+", "num_partitions=1", text)
    # remove `, sharding={...}` with balanced braces
    res, i = [], 0
    while True:
        j = text.find(", sharding={", i)
        if j < 0:
            res.append(text[i:])
            break
        res.append(text[i:j])
        k = hlo_struct._match_close(text, j + len(", sharding="))
        i = k
    return "".join(res)


def check(tool, path, n, seed, rtol, atol, max_mib, settings=()):
    import numpy as np
    import jax
    from jax._src.lib import xla_client as xc, _jax
    GSPMDSharding = _jax.GSPMDSharding
    with open(path) as f:
        text = f.read()
    mod = hlo_struct.parse_module(text)
    if mod.entry is None:
        raise NotRun("no entry computation")
    n = n or mod.num_partitions()
    if not n or n < 2:
        raise NotRun("no device count above 1")
    entry = mod.entry
    if re.search(r"\b(send|recv|outfeed|infeed)\(", text):
        raise NotRun("host transfers (send/recv/infeed/outfeed)")
    if re.search(r"\b(rng|rng-bit-generator|rng-get-and-update-state)\(|GetRngSeed", text):
        raise NotRun("random numbers: each device draws its own")
    params = sorted((int(hlo_struct._ints(i.raw_args)[0]), i) for i in entry.instrs
                    if i.opcode == "parameter")
    root = entry.root
    total = 0
    for _, p in params + [(None, root)]:
        if p.shape.startswith("("):
            raise NotRun("tuple-shaped %s" % ("root" if p is root else "parameter"))
        sh = p.attrs.get("sharding", "{replicated}")
        if sh.replace(" ", "").startswith("{{"):
            raise NotRun("tuple sharding on %s" % ("the root" if p is root else "a parameter"))
        if any(k in sh for k in ("manual", "unreduced", "unknown")):
            raise NotRun("%s sharding %s" % ("root" if p is root else "parameter", sh))
        total += hlo_struct.shape_bytes(p.shape)
    if total > max_mib * (1 << 20):
        raise NotRun("global arrays of %.0f MiB" % (total / (1 << 20)))
    with tempfile.TemporaryDirectory(prefix="xla-numeric.") as d:
        out = os.path.join(d, "p.hlo")
        argv = [tool, "partition", path, "-n", str(n), "-o", out]
        for kv in settings:
            argv += ["--set", kv]
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            raise NotRun("shardlens exits %d: %s" % (r.returncode, r.stderr.strip()[:200]))
        with open(out) as f:
            part = f.read()
    rng = np.random.RandomState(seed)
    inputs = []
    for _, p in params:
        dt, dims = _dims(p.shape)
        if dt not in NP_DTYPES:
            raise NotRun("parameter type %s" % dt)
        if dt == "pred":
            a = rng.randint(0, 2, size=dims).astype(bool)
        elif dt[0] in "su":
            a = rng.randint(0, 4, size=dims).astype(NP_DTYPES[dt])
        else:
            a = rng.standard_normal(size=dims).astype(np.float32)
            if dt == "bf16":
                a = a.astype(jnp_bf16())
            else:
                a = a.astype(NP_DTYPES[dt])
        inputs.append(a)
    try:
        ref_exe, devs1 = _compile(_strip_shardings(text), 1, False)
        ref_args = [jax.device_put(a, devs1[0]) for a in inputs]
        ref = ref_exe.execute_sharded(ref_args).disassemble_into_single_device_arrays()
        ref = np.asarray(ref[0][0]).astype(np.float64)
    except Exception as e:
        raise NotRun("XLA cannot run the original: %s" % str(e).strip().split("\n")[0][:200])
    try:
        # shardlens's module is already one device's program: without its sharding
        # attributes XLA's partitioner sees only replicated values and leaves it as it is
        exe, devs = _compile(_as_replicas(part, n), 1, False, replicas=n)
        rep = GSPMDSharding(devs, xc.HloSharding.replicate())
        pmod = hlo_struct.parse_module(part)
        pparams = sorted((int(hlo_struct._ints(i.raw_args)[0]), i.shape)
                         for i in pmod.entry.instrs if i.opcode == "parameter")
        args = []
        for k_param, ((_, p), a) in enumerate(zip(params, inputs)):
            tiles = _tiles(p.attrs.get("sharding", "{replicated}"), a.shape, n)
            want = list(tiles[0][1])
            got_shape = _dims(pparams[k_param][1])[1] if k_param < len(pparams) else None
            if got_shape != want:
                # XLA crashes on a buffer of the wrong size; say so instead
                raise NotRun("parameter %d: shardlens's local shape %s, the sharding gives %s"
                             % (k_param, got_shape, want))
            locs = []
            for k, d in enumerate(devs):
                sl, loc = tiles[k]
                buf = np.zeros(loc, dtype=a.dtype)
                part = a[sl]
                buf[tuple(slice(0, x) for x in part.shape)] = part
                locs.append(jax.device_put(buf, d))
            args.append(jax.make_array_from_single_device_arrays(locs[0].shape, rep, locs))
        res = exe.execute_sharded(args).disassemble_into_single_device_arrays()
        dims = list(ref.shape) if root.shape == "?" else _dims(root.shape)[1]
        tiles = _tiles(root.attrs.get("sharding", "{replicated}"), dims, n)
        got = np.full(dims, np.nan)
        for k, shard in enumerate(res[0]):
            sl, _ = tiles[k]
            v = np.asarray(shard).astype(np.float64)
            got[sl] = v[tuple(slice(0, x.stop - x.start) for x in sl)]
    except NotRun:
        raise
    except Exception as e:
        raise NotRun("XLA cannot run shardlens's module: %s" %
                     str(e).strip().split("\n")[0][:200])
    if got.shape != ref.shape:
        return False, "shape %s vs %s" % (got.shape, ref.shape)
    err = float(np.max(np.abs(got - ref))) if got.size else 0.0
    # atol scales with the result: bf16 sums of thousands of products differ by their order
    scale = float(np.max(np.abs(ref[np.isfinite(ref)]))) if np.isfinite(ref).any() else 1.0
    ok = bool(np.allclose(got, ref, rtol=rtol, atol=atol * max(1.0, scale), equal_nan=True))
    return ok, "max abs error %g" % err


def jnp_bf16():
    import ml_dtypes
    return ml_dtypes.bfloat16


def main():
    ap = argparse.ArgumentParser(prog="tools/xla/numeric.py",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool", required=True)
    ap.add_argument("inputs", nargs="*", metavar="IN.hlo",
                    help="HLO files or conformance .jsonl files (each case with its options.set)")
    ap.add_argument("-n", type=int, help="device count (default: the header's)")
    ap.add_argument("--corpus", help="also every spmd_input of this corpus folder")
    ap.add_argument("--only", help="with --corpus: names containing this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="skip the first K modules")
    ap.add_argument("--ids", metavar="FILE", help="only the modules/cases named in FILE (one a line)")
    ap.add_argument("--stop", type=int, help="stop before module K")
    ap.add_argument("--rtol", type=float, default=2e-2)
    ap.add_argument("--atol", type=float, default=2e-2)
    ap.add_argument("--max-mib", type=float, default=64,
                    help="skip modules whose parameters and root exceed this (default 64)")
    args = ap.parse_args()
    jobs = []
    tmpdir = tempfile.mkdtemp(prefix="xla-numeric-cases.")
    for p in args.inputs:
        if not p.endswith(".jsonl"):
            jobs.append((p, args.n, (), p))
            continue
        import json
        with open(p) as f:
            for k, line in enumerate(f):
                if not line.strip():
                    continue
                c = json.loads(line)
                path = os.path.join(tmpdir, "case%04d.hlo" % k)
                with open(path, "w") as g:
                    g.write(c["hlo"])
                jobs.append((path, c["num_partitions"], tuple(c["options"]["set"]), c["id"]))
    if args.corpus:
        import json
        with open(os.path.join(args.corpus, "manifest.json")) as f:
            for p in json.load(f)["programs"]:
                if not args.only or args.only in p["name"]:
                    jobs.append((os.path.join(args.corpus, p["spmd_input"]), p["devices"],
                                 ("threshold_for_windowed_einsum_mib=100000",), p["name"]))
    if not jobs:
        ap.error("no modules")
    jobs = jobs[args.start:args.stop]
    if args.ids:
        with open(args.ids) as f:
            want = {l.strip() for l in f if l.strip()}
        jobs = [j for j in jobs if j[3] in want]
    maxn = 1
    for p, n, _, _ in jobs:
        try:
            maxn = max(maxn, n or hlo_struct.parse_module(open(p).read()).num_partitions() or 1)
        except (OSError, hlo_struct.HloError):
            pass
    xla_run.init(maxn)
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    same = diff = notrun = 0
    for p, n, settings, label in jobs:
        try:
            ok, msg = check(args.tool, p, n, args.seed, args.rtol, args.atol, args.max_mib,
                            settings)
        except NotRun as e:
            notrun += 1
            print("%s: not run (%s)" % (label, e), flush=True)
            continue
        except hlo_struct.HloError as e:
            notrun += 1
            print("%s: not run (cannot read: %s)" % (label, e), flush=True)
            continue
        except Exception as e:  # one module's trouble must not stop the others
            notrun += 1
            print("%s: not run (%s)" % (label, str(e).split("\n")[0][:200]), flush=True)
            continue
        if ok:
            same += 1
            print("%s: same (%s)" % (label, msg), flush=True)
        else:
            diff += 1
            print("%s: DIFFERENT (%s)" % (label, msg), flush=True)
    print("%d same, %d different, %d not run" % (same, diff, notrun))
    import shutil
    shutil.rmtree(tmpdir, ignore_errors=True)
    return 1 if diff else 0


if __name__ == "__main__":
    if os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(
            os.path.dirname(os.path.dirname(HERE)), ".venv-xla")):
        py = os.path.join(os.path.dirname(os.path.dirname(HERE)), ".venv-xla", "bin", "python")
        if os.path.exists(py):
            os.execv(py, [py] + sys.argv)
    sys.exit(main())
