#!/usr/bin/env python3
"""Build the XLA corpus: compile every program of tools/xla/models/*.py with JAX up to and
including XLA's spmd-partitioning pass and keep three modules per program.

usage: .venv-xla/bin/python tools/xla/corpus.py OUTDIR [--only SUBSTR] [--list]
                                                   [--propagation shardy|gspmd]

Per program NAME (family.variant.mesh.devices) OUTDIR gets
  NAME.before_optimizations.hlo  the module JAX hands to XLA
  NAME.spmd_input.hlo            the input of spmd-partitioning (after propagation)
  NAME.spmd_output.hlo           XLA's output of spmd-partitioning
and manifest.json lists every program (family, mesh, devices, files, instruction counts,
sha256). manifest.json is deterministic; timings.json holds the pass times XLA logged.
Only the passes up to spmd-partitioning run (xla_enable_hlo_passes_only), so the rest of
the CPU compile is skipped: the compile call may then fail after the dumps are written,
which is expected.

--propagation picks the sharding propagation JAX asks XLA for: shardy (JAX 0.10.2's
default; before_optimizations carries xla.sdy.* attributes and the pass before
spmd-partitioning is shardy-xla) or gspmd (jax_use_shardy_partitioner=False: plain GSPMD
sharding={...} and Sharding custom-calls, and the spmd input is the output of XLA's
sharding-propagation pass). manifest.json records which one made the corpus.
"""

import argparse
import glob
import hashlib
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "models"))
import xla_run  # noqa: E402

MAX_DEVICES = 64
PASSES = ["async-collective-replacer", "strip-memory-placement-annotations",
          "flatten-call-graph", "call-inliner", "zero_sized_hlo_elimination",
          "conditional-canonicalizer", "shardy-xla", "sharding-propagation",
          "spmd-partitioning", "dce", "tuple-simplifier", "cse"]
FAMILY_MODULES = ["mlp", "llama", "moe", "vision", "embed_xent", "scan"]


def all_programs():
    import importlib
    for mod in FAMILY_MODULES:
        m = importlib.import_module(mod)
        for family, kind, n, variant, build in m.programs():
            yield "%s.%s.%s.%d" % (family, variant, kind, n), family, kind, n, build


def count_instrs(text):
    import hlo_struct
    mod = hlo_struct.parse_module(text)
    return sum(len(c.instrs) for c in mod.computations.values())


def build_one(name, build, outdir):
    import jax
    fn, args = build()
    lowered = fn.lower(*args)
    dump = tempfile.mkdtemp(prefix="corpus-dump.")
    try:
        opts = {"xla_dump_to": dump, "xla_dump_hlo_pass_re": "spmd-partitioning",
                "xla_dump_large_constants": True,
                "xla_enable_hlo_passes_only": ",".join(PASSES)}
        _, log, exc = xla_run._capture_stderr(lambda: lowered.compile(compiler_options=opts))
        pick = lambda pat: sorted(glob.glob(os.path.join(dump, pat)))
        before = pick("*.before_optimizations.txt")
        sin = pick("*before_spmd-partitioning.txt")
        sout = pick("*after_spmd-partitioning*.txt")
        if not (before and sin and sout):
            raise RuntimeError("no spmd-partitioning dump for %s: %s" % (name, exc))
        files = {}
        for key, src in (("before_optimizations", before[-1]), ("spmd_input", sin[-1]),
                         ("spmd_output", sout[-1])):
            dst = "%s.%s.hlo" % (name, key)
            shutil.copyfile(src, os.path.join(outdir, dst))
            files[key] = dst
        m = xla_run._TIME_RE.findall(log)
        secs = float(m[-1][0]) * xla_run._UNIT[m[-1][1]] if m else None
        return files, secs
    finally:
        shutil.rmtree(dump, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--only", help="only programs whose name contains this")
    ap.add_argument("--list", action="store_true", help="list the programs and exit")
    ap.add_argument("--propagation", choices=("shardy", "gspmd"), default="shardy",
                    help="XLA's sharding propagation: shardy (JAX's default) or gspmd")
    args = ap.parse_args()
    xla_run.init(MAX_DEVICES)
    import jax
    jax.config.update("jax_use_shardy_partitioner", args.propagation == "shardy")
    progs = [p for p in all_programs() if not args.only or args.only in p[0]]
    if args.list:
        for p in progs:
            print(p[0])
        return 0
    os.makedirs(args.outdir, exist_ok=True)
    entries, timings = [], {}
    for name, family, kind, n, build in progs:
        files, secs = build_one(name, build, args.outdir)
        import common
        shape, axes = common.mesh_shape(kind, n)
        e = {"name": name, "family": family, "mesh": kind, "devices": n,
             "mesh_shape": list(shape), "mesh_axes": list(axes)}
        for key, f in files.items():
            with open(os.path.join(args.outdir, f), "rb") as fh:
                data = fh.read()
            e[key] = f
            e[key + "_sha256"] = hashlib.sha256(data).hexdigest()
            e[key + "_instructions"] = count_instrs(data.decode())
        entries.append(e)
        timings[name] = secs
        print("%-40s %6d -> %6d instructions, pass %s" % (
            name, e["spmd_input_instructions"], e["spmd_output_instructions"],
            "%.3f s" % secs if secs is not None else "?"), flush=True)
    import jax
    manifest = {"jax": jax.__version__, "jaxlib": jax.lib.__version__
                if hasattr(jax.lib, "__version__") else None,
                "propagation": "shardy" if jax.config.jax_use_shardy_partitioner else "gspmd",
                "programs": entries}
    for fname, obj in (("manifest.json", manifest), ("timings.json", timings)):
        tmp = os.path.join(args.outdir, fname + ".tmp")
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, os.path.join(args.outdir, fname))
    fams = sorted({e["family"] for e in entries})
    meshes = sorted({e["mesh"] for e in entries})
    print("%d programs (%d modules), %d families, %d mesh kinds, largest input %d instructions"
          % (len(entries), 3 * len(entries), len(fams), len(meshes),
             max(e["spmd_input_instructions"] for e in entries)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
