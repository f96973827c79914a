"""Run XLA's own SPMD partitioner (jaxlib 0.10.2, CPU) on an HLO text module.

Imported by partition.py and the corpus/numeric tools; needs the .venv-xla environment
(tools/xla/setup.sh). The host device count must be fixed before jax is imported, so
`init(n)` has to be called first.

How the module gets to XLA: jaxlib compiles only MLIR, so the HLO text is parsed by XLA's
own HLO parser (hlo_module_from_text), converted to StableHLO by XLA's importer and handed
to the CPU client's compile. The spmd-partitioning pass dumps its input and its output
(--xla_dump_hlo_pass_re); those dumps are the result. Only the passes of the CPU
"spmd-partitioner" pipeline that the partitioner needs run (xla_enable_hlo_passes_only):
flatten-call-graph, conditional-canonicalizer, spmd-partitioning and the spmd-cleanup passes
it runs inside itself (dce, tuple-simplifier, cse); sharding-propagation too when asked for.
Everything after the pass is skipped, so a failure after the output dump is written is not
an error of the pass.
"""

import glob
import os
import re
import shutil
import sys
import tempfile
import time

_initialised = None

# Options the CPU pipeline passes to StatefulRngSpmdPartitioner: (num_partitions,
# replica_count) and nothing else, so every other SpmdPartitionerOptions field has the value
# of that constructor's defaults. Values in shardlens's --set spelling.
CPU_FIXED = {
    "threshold_for_windowed_einsum_mib": "100000",
    "total_bytes_windowed_einsum_threshold": "-1",
    "max_windowed_einsum_iteration": "32",
    "unroll_windowed_einsum": "false",
    "bidirectional_windowed_einsum": "false",
    "enable_windowed_einsum_for_all_gather": "true",
    "enable_windowed_einsum_for_reduce_scatter": "true",
    "bidirectional_decomposed_windowed_einsum": "false",
    "choose_faster_windowed_einsum_over_mem": "false",
    "allow_module_signature_change": "true",
    "cache_all_gather": "true",
    "skip_checking_windowed_einsum_users": "false",
    "enable_experimental_all_to_all_windowed_einsum": "false",
    "partial_windowed_einsum": "false",
    "disable_ag_rewrite_for_multiple_consumers": "false",
    "conv_halo_exchange_always_on_lhs": "true",
    "report_instruction_count": "5",
    "preferred_gather_partition_methods": "",
    "preferred_scatter_partition_methods": "",
    "enable_enzyme_opt": "false",
    "enable_dynamic_slice_collective_broadcast": "false",
    "max_dynamic_slice_collective_broadcast_partitions": "32",
    "remove_dead_code": "true",
}

# Options that only act when the dot handler considers a windowed einsum loop.
WINDOWED_ONLY = {
    "total_bytes_windowed_einsum_threshold", "max_windowed_einsum_iteration",
    "unroll_windowed_einsum", "bidirectional_windowed_einsum",
    "enable_windowed_einsum_for_all_gather", "enable_windowed_einsum_for_reduce_scatter",
    "bidirectional_decomposed_windowed_einsum", "choose_faster_windowed_einsum_over_mem",
    "skip_checking_windowed_einsum_users", "enable_experimental_all_to_all_windowed_einsum",
    "partial_windowed_einsum", "disable_ag_rewrite_for_multiple_consumers",
}
# shardlens names without any effect in XLA's partitioner.
UNUSED = {"speculative_windowed_einsum", "enable_full_replicated_partition_tiling",
          "xla_gpu_operand_bytes_threshold_for_windowed_einsum",
          "skip_dot_windowed_einsum_check", "use_v3_sharding"}

_BOOL = {"true": "true", "false": "false", "1": "true", "0": "false"}


def _norm(key, value):
    if CPU_FIXED.get(key) in ("true", "false"):
        return _BOOL.get(value.lower(), value)
    return value.strip()


def largest_dot_mib(text):
    """The largest operand or result (global size, MiB) of any dot or convolution in the
    module, read with the stdlib HLO reader."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hlo_struct
    mod = hlo_struct.parse_module(text)
    best = 0.0
    for comp in mod.computations.values():
        for ins in comp.instrs:
            if ins.opcode not in ("dot", "convolution"):
                continue
            sizes = [hlo_struct.shape_bytes(ins.shape)]
            sizes += [hlo_struct.shape_bytes(comp.by_name[o].shape)
                      for o in ins.operands if o in comp.by_name]
            best = max(best, max(sizes) / (1 << 20))
    return best


def check_options(settings, text):
    """Returns None when XLA's CPU pipeline partitions exactly as with these --set options,
    else the reason it cannot. The windowed-einsum options are honoured when no dot or
    convolution is large enough for the dot handler to consider a loop under either
    threshold (then they have no effect, in XLA as in SpmdPartitionerOptions)."""
    known = set(CPU_FIXED) | UNUSED | {"num_partitions"}
    windowed = {}
    for key, value in settings:
        if key not in known:
            return "unknown partitioner option '%s'" % key
        if key in UNUSED or key == "num_partitions":
            continue
        v = _norm(key, value)
        if v == CPU_FIXED[key]:
            continue
        if key == "threshold_for_windowed_einsum_mib" or key in WINDOWED_ONLY:
            windowed[key] = v
            continue
        return ("XLA's CPU pipeline cannot honour %s=%s (it always partitions with %s=%s)"
                % (key, value, key, CPU_FIXED[key] or "''"))
    if not windowed:
        return None
    limits = [100000.0]
    t = dict(settings).get("threshold_for_windowed_einsum_mib")
    if t is not None:
        try:
            limits.append(float(t))
        except ValueError:
            return "bad value for threshold_for_windowed_einsum_mib: '%s'" % t
    tb = dict(settings).get("total_bytes_windowed_einsum_threshold")
    if tb is not None and tb.strip() not in ("-1", ""):
        try:
            limits.append(float(tb) / (1 << 20))
        except ValueError:
            return "bad value for total_bytes_windowed_einsum_threshold: '%s'" % tb
    big = largest_dot_mib(text)
    if big < min(limits):
        return None
    k = sorted(windowed)[0]
    return ("XLA's CPU pipeline cannot honour %s=%s: it always partitions with %s=%s, and "
            "a dot of %.1f MiB may be windowed under one setting and not the other"
            % (k, windowed[k], k, CPU_FIXED[k], big))


def init(n):
    """Sets up n host devices; must run before jax is imported anywhere."""
    global _initialised
    if _initialised is not None:
        if _initialised < n:
            raise RuntimeError("jax already initialised with %d devices" % _initialised)
        return
    flags = os.environ.get("XLA_FLAGS", "")
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", flags)
    # large constants in full: the dump otherwise prints them as {...}
    flags = flags.replace("--xla_dump_large_constants=true", "")
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=%d"
                               " --xla_dump_large_constants=true" % n).strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # the pass pipeline logs each pass's time at VLOG(1); read once, when XLA starts
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    os.environ["TF_CPP_VMODULE"] = "hlo_pass_pipeline=1"
    _initialised = n


class XlaError(Exception):
    pass


_TIME_RE = re.compile(r"HLO pass: spmd-partitioning time: ([0-9.]+) (us|ms|s|min|h)\b")
_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}


def _capture_stderr(fn):
    """Runs fn() with the process's fd 2 redirected to a file; returns (result, text)."""
    sys.stderr.flush()
    saved = os.dup(2)
    named = os.environ.get("SHARDLENS_XLA_LOG")
    with (open(named, "w+b") if named else tempfile.TemporaryFile(mode="w+b")) as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            result = fn()
            exc = None
        except Exception as e:  # re-raised after fd 2 is back
            result, exc = None, e
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode("utf-8", "replace")
    return result, text, exc


def read_dump(dump, log, wall=None):
    """The pass's output and input from a dump folder, the pass time from the log; None when
    the pass wrote no output."""
    outs = sorted(glob.glob(os.path.join(dump, "*.after_spmd-partitioning.*txt")))
    ins = sorted(glob.glob(os.path.join(dump, "*before_spmd-partitioning.txt")))
    if not outs:
        return None
    m = _TIME_RE.findall(log)
    secs = float(m[-1][0]) * _UNIT[m[-1][1]] if m else None
    with open(outs[-1]) as f:
        out_text = f.read()
    in_text = None
    if ins:
        with open(ins[-1]) as f:
            in_text = f.read()
    return {"output": out_text, "input": in_text, "pass_seconds": secs,
            "compile_seconds": wall}


def partition(text, n, propagate=False, dump_dir=None):
    """Partitions HLO text with XLA for n devices. Returns a dict with 'output' (the text
    of spmd-partitioning's output), 'input' (the text of its input as XLA saw it after the
    import) and 'pass_seconds'. Raises XlaError with XLA's message."""
    init(n)
    import numpy as np
    import jax
    from jax._src.lib import xla_client as xc, _jax

    try:
        module = xc.hlo.hlo_module_from_text(text)
    except Exception as e:
        raise XlaError("XLA's HLO parser: %s" % str(e).strip())
    try:
        comp = xc.XlaComputation(module.as_serialized_hlo_module_proto())
        mlir = _jax.mlir.xla_computation_to_mlir_module(comp)
    except Exception as e:
        raise XlaError("XLA's HLO to StableHLO import: %s" % str(e).strip())

    if dump_dir is None and os.environ.get("SHARDLENS_XLA_DUMP"):
        dump_dir = os.environ["SHARDLENS_XLA_DUMP"]
    own = dump_dir is None
    dump = tempfile.mkdtemp(prefix="xla-dump.") if own else dump_dir
    try:
        opts = xc.CompileOptions()
        opts.num_replicas = 1
        opts.num_partitions = n
        eb = opts.executable_build_options
        eb.num_replicas = 1
        eb.num_partitions = n
        eb.use_spmd_partitioning = True
        eb.use_shardy_partitioner = False
        opts.device_assignment = xc.DeviceAssignment.create(
            np.arange(n, dtype=np.int32).reshape(1, n))
        dbg = eb.debug_options
        dbg.xla_dump_to = dump
        dbg.xla_dump_hlo_pass_re = "spmd-partitioning"
        dbg.xla_dump_hlo_as_text = True
        passes = ["flatten-call-graph", "conditional-canonicalizer", "spmd-partitioning",
                  "dce", "tuple-simplifier", "cse"]
        if propagate:
            passes.append("sharding-propagation")
        dbg.xla_enable_hlo_passes_only = ",".join(passes)
        devices, _, exc = _capture_stderr(lambda: jax.devices()[:n])
        if exc:
            raise XlaError(str(exc))
        client = devices[0].client

        def run():
            return client.compile_and_load(
                mlir, executable_devices=xc.DeviceList(tuple(devices)), compile_options=opts)

        t0 = time.perf_counter()
        _, log, exc = _capture_stderr(run)
        wall = time.perf_counter() - t0
        outs = sorted(glob.glob(os.path.join(dump, "*.after_spmd-partitioning.*txt")))
        ins = sorted(glob.glob(os.path.join(dump, "*before_spmd-partitioning.txt")))
        if not outs:
            msg = str(exc).strip() if exc else "the spmd-partitioning pass wrote no output"
            fatal = [l for l in log.splitlines() if l[:1] in "EF" and "] " in l]
            if fatal and not exc:
                msg = fatal[-1].split("] ", 1)[1]
            raise XlaError(msg)
        return read_dump(dump, log, wall)
    finally:
        if own:
            shutil.rmtree(dump, ignore_errors=True)
