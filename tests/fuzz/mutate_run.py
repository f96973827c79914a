#!/usr/bin/env python3
"""mutate_run.py - issue 17's mutation run: mutated modules through the shardlens CLI.

    mutate_run.py --tool PATH [--seconds S] [--seed N] [--keep DIR] SEED_FILE_OR_DIR...

Takes the .hlo files named (directories: their *.hlo), and until S seconds (default 1800)
have passed, applies 1 to 3 edits of tests/fuzz/seeds.py's mutator to one of them, and runs
`check`, then `partition` on what check accepts, then `verify` on every fourth module that
partitioned, each with a 10 s limit. Build the tool with -Db_sanitize=address,undefined.
Counts runs, exit codes, sanitizer reports (AddressSanitizer, LeakSanitizer, "runtime error:"),
internal errors ("a shardlens bug"), verify mismatches (exit 1: the partitioned module
computes something else than the original), crashes (killed by a signal), timeouts and bad-input
messages without a FILE:LINE:COL location. Every finding is written to --keep DIR (default
mutate-findings/) with its command and output. Prints the counts and exits 1 when there are
findings. Deterministic for one --seed, apart from where the time limit falls.
"""
import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seeds  # noqa: E402  (the mutator)

SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer")
LOCATED = re.compile(r"^\S+:\d+(:\d+)?: error: ", re.M)


def inputs(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += [os.path.join(p, n) for n in sorted(os.listdir(p)) if n.endswith(".hlo")]
        else:
            out.append(p)
    return out


def classify(cmd, rc, err):
    if SANITIZER.search(err):
        return "sanitizer"
    if rc is None:
        return "timeout"
    if rc < 0:
        return "signal"
    if "a shardlens bug" in err:
        return "internal"
    if cmd == "verify" and rc == 1:  # the partitioned module computes something else
        return "mismatch"
    if rc == 2 and not LOCATED.search(err) and "shardlens" not in err:
        return "unlocated"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", required=True)
    ap.add_argument("--seconds", type=float, default=1800)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--keep", default="mutate-findings")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    files = inputs(a.paths)
    if not files:
        sys.exit("mutate_run.py: no .hlo inputs")
    texts = [open(f, encoding="utf-8", errors="replace").read() for f in files]
    rng = random.Random(a.seed)
    os.makedirs(a.keep, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:allocator_may_return_null=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    counts = {"modules": 0, "runs": 0}
    exits = {}
    findings = {}
    seen = set()
    end = time.monotonic() + a.seconds
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.hlo")
        while time.monotonic() < end:
            t = rng.choice(texts)
            for _ in range(rng.randint(1, 3)):
                t = seeds.mutate(t, rng)
            with open(path, "w", encoding="utf-8") as f:
                f.write(t)
            counts["modules"] += 1
            cmds = [["check", path]]
            for cmd in cmds:
                try:
                    r = subprocess.run([a.tool] + cmd, capture_output=True, text=True,
                                       errors="replace", timeout=10, env=env)
                    rc, err = r.returncode, r.stderr + (r.stdout if cmd[0] == "verify" else "")
                except subprocess.TimeoutExpired as e:
                    rc = None
                    err = (e.stderr or b"").decode("utf-8", "replace") if isinstance(
                        e.stderr, bytes) else (e.stderr or "")
                counts["runs"] += 1
                key = f"{cmd[0]}:{rc}"
                exits[key] = exits.get(key, 0) + 1
                kind = classify(cmd[0], rc, err)
                if kind:
                    findings[kind] = findings.get(kind, 0) + 1
                    first = next((ln for ln in err.splitlines() if SANITIZER.search(ln) or
                                  "error" in ln), err[:200])
                    sig = (kind, cmd[0], re.sub(r"\d+", "N", first)[:160])
                    if sig not in seen:
                        seen.add(sig)
                        name = os.path.join(a.keep, f"{kind}-{len(seen):03d}.hlo")
                        with open(name, "w", encoding="utf-8") as f:
                            f.write(t)
                        with open(name + ".txt", "w", encoding="utf-8") as f:
                            f.write(f"shardlens {' '.join(cmd[:1])} (rc {rc})\n{err}")
                    break
                if rc != 0:
                    break
                if cmd[0] == "check":
                    cmds.append(["partition", path, "-o", os.path.join(tmp, "out.hlo")])
                elif cmd[0] == "partition" and counts["modules"] % 4 == 0:
                    cmds.append(["verify", path])
    print(f"mutate_run: {counts['modules']} modules, {counts['runs']} runs in "
          f"{a.seconds:.0f} s from {len(files)} inputs")
    print("exits: " + ", ".join(f"{k}={v}" for k, v in sorted(exits.items())))
    print("findings: " + (", ".join(f"{k}={v}" for k, v in sorted(findings.items())) or "none") +
          f" ({len(seen)} distinct, in {a.keep}/)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
