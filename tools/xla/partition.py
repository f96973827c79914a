#!/usr/bin/env python3
"""XLA's SPMD partitioner on an HLO text module.

usage: tools/xla/partition.py IN.hlo -n N [--set KEY=VALUE]... -o OUT.hlo
                              [--input-out FILE] [--propagate]

Writes exactly the module XLA's `spmd-partitioning` pass produces for IN.hlo, taken from
XLA's own dump of that pass (jaxlib 0.10.2, CPU, N host devices), and prints the pass's own
time as XLA's pass pipeline logs it. Runs in .venv-xla (tools/xla/setup.sh); it re-executes
itself there when started with another python.

--set takes shardlens's partitioner option names. XLA's CPU pipeline builds its partitioner
with fixed options (StatefulRngSpmdPartitioner(num_partitions, replica_count)); a --set is
accepted when it equals what that pipeline uses, or when it cannot change the result (the
windowed-einsum options, when no dot is large enough for a loop under either threshold).
Any other is refused (exit 2): XLA exposes no flag for it on CPU.

IN.hlo reaches XLA through XLA's HLO parser and its HLO->StableHLO importer (jaxlib compiles
MLIR only); --input-out keeps the pass's input as XLA saw it. Sharding propagation is off:
instructions without a sharding are the partitioner's business, as in XLA's partitioner
tests; --propagate runs XLA's sharding-propagation pass first (GSPMD, not Shardy).

Exit status: 0 success, 2 bad usage, bad input, an option XLA cannot honour, or a module XLA
rejects (XLA's message is printed).
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV_PY = os.path.join(ROOT, ".venv-xla", "bin", "python")


def _ensure_venv():
    import importlib.util
    if importlib.util.find_spec("jax") is not None:
        return
    venv = os.path.dirname(os.path.dirname(VENV_PY))
    if os.path.exists(VENV_PY) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(VENV_PY, [VENV_PY] + sys.argv)
    sys.stderr.write("error: jax is not installed; run tools/xla/setup.sh first\n")
    sys.exit(2)


def _write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="tools/xla/partition.py",
        description="Partition an HLO module with XLA's own spmd-partitioning pass "
                    "(jaxlib's CPU compiler) and write the pass's output.")
    ap.add_argument("input", metavar="IN.hlo", help="HLO text module with shardings")
    ap.add_argument("-n", "--num-partitions", type=int,
                    help="device count (default: the header's num_partitions=)")
    ap.add_argument("-o", "--output", metavar="OUT.hlo", required=True,
                    help="where to write spmd-partitioning's output (atomically)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="partitioner option by shardlens's (XLA's) name; refused unless "
                         "XLA's CPU pipeline partitions that way")
    ap.add_argument("--input-out", metavar="FILE",
                    help="also write the pass's input as XLA saw it")
    ap.add_argument("--propagate", action="store_true",
                    help="run XLA's sharding-propagation before partitioning")
    ap.add_argument("--quiet", action="store_true", help="do not print the pass time")
    args = ap.parse_args(argv)

    try:
        with open(args.input) as f:
            text = f.read()
    except OSError as e:
        sys.stderr.write("%s: error: %s\n" % (args.input, e.strerror))
        return 2
    settings = []
    for s in args.set:
        k, eq, v = s.partition("=")
        if not eq or not k:
            sys.stderr.write("error: --set wants KEY=VALUE, got '%s'\n" % s)
            return 2
        settings.append((k.strip(), v))

    sys.path.insert(0, HERE)
    import hlo_struct
    import xla_run
    n = args.num_partitions
    if n is None:
        try:
            n = hlo_struct.parse_module(text).num_partitions()
        except hlo_struct.HloError:
            n = None
    if not n or n < 1:
        sys.stderr.write("%s: error: no device count: give -n or num_partitions= in the "
                         "header\n" % args.input)
        return 2
    if n == 1:
        sys.stderr.write("%s: error: XLA's CPU pipeline does not run spmd-partitioning for "
                         "one partition (it strips the shardings instead)\n" % args.input)
        return 2
    try:
        why = xla_run.check_options(settings, text)
    except hlo_struct.HloError as e:
        why = "cannot read the module to check the options: %s" % e
    if why:
        sys.stderr.write("%s: error: %s\n" % (args.input, why))
        return 2

    if not os.environ.get("SHARDLENS_XLA_LOG"):
        # XLA aborts the process on a failed CHECK; run it in a child so that its message,
        # which goes to the captured standard error, can still be reported
        import subprocess
        import tempfile
        import shutil
        with tempfile.NamedTemporaryFile(prefix="xla-log.", suffix=".txt") as log:
            dump = tempfile.mkdtemp(prefix="xla-dump.")
            try:
                env = dict(os.environ, SHARDLENS_XLA_LOG=log.name, SHARDLENS_XLA_DUMP=dump)
                p = subprocess.run([sys.executable] + sys.argv, env=env)
                if p.returncode >= 0 and p.returncode != 134:
                    return p.returncode
                text_log = open(log.name, errors="replace").read()
                # an abort after the pass wrote its output (a later CPU pass) is no failure
                # of the pass
                res = xla_run.read_dump(dump, text_log)
            finally:
                shutil.rmtree(dump, ignore_errors=True)
        if res is not None:
            return _finish(args, res)
        fatal = [l for l in text_log.splitlines()
                 if l[:1] == "F" or "Check failed" in l or "RET_CHECK" in l]
        msg = fatal[-1].split("] ", 1)[-1] if fatal else "killed by signal %d" % -p.returncode
        sys.stderr.write("%s: error: XLA rejects the module: XLA aborts: %s\n" % (args.input, msg))
        return 2

    xla_run.init(n)
    _ensure_venv()
    try:
        res = xla_run.partition(text, n, propagate=args.propagate)
    except xla_run.XlaError as e:
        sys.stderr.write("%s: error: XLA rejects the module: %s\n" % (args.input, e))
        return 2
    return _finish(args, res)


def _finish(args, res):
    _write_atomic(args.output, res["output"])
    if args.input_out and res["input"] is not None:
        _write_atomic(args.input_out, res["input"])
    if not args.quiet:
        t = res["pass_seconds"]
        c = res.get("compile_seconds")
        print("xla spmd-partitioning pass: %s (compile call %s)" % (
            "%.6f s" % t if t is not None else "time not logged",
            "%.3f s" % c if c is not None else "aborted after the pass"))
    return 0


if __name__ == "__main__":
    _ensure_venv()
    sys.exit(main())
