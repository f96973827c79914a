#!/usr/bin/env python3
"""Measure how many conformance cases that partition also verify (issue 8).

  tools/verify_conformance.py [--tool build/src/cli/shardlens] [--timeout 60] [--jobs N]
                              [--filter SUBSTR] [--json OUT.json] [-v] CASES.jsonl

For every case: write `hlo` to IN.hlo, run `shardlens partition -n N IN.hlo -o OUT.hlo` with
one `--set KEY=VALUE` per entry of `options.set`; a case that partitions (exit 0) is then run
through `shardlens verify -n N IN.hlo` with the same options, under a per-case timeout.

Prints one line per case that partitions but does not verify, then the figure (verified / cases
that partition), the same figure without the cases refused as too large or not comparable, and
a breakdown of the rest by exit reason: the verify exit status, plus the opcode or custom-call
target named in the message. Standard library only; the output does not depend on job order.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def load_cases(path, filt):
    cases = []
    with open(path) as f:
        for line in f:
            if line.strip():
                c = json.loads(line)
                if not filt or filt in c["id"]:
                    cases.append(c)
    return cases


def run(cmd, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired:
        return None, "", time.monotonic() - t0


def sets(case):
    out = []
    for kv in (case.get("options") or {}).get("set") or []:
        out += ["--set", kv]
    return out


def error_line(text):
    """The diagnostic line (`...: error: ...`), else the last line."""
    lines = [l for l in text.strip().splitlines() if l.strip()]
    for l in lines:
        if "error:" in l:
            return l
    return lines[-1] if lines else ""


def reason(code, text):
    """A short, stable label for why a case did not verify."""
    if code is None:
        return "timeout"
    last = error_line(text)
    if code == 1:
        return "mismatch" if "differs at element" in text else "partitioned module failed to run"
    if "too large to simulate" in text:
        return "too large to simulate"
    m = re.search(r"not comparable[^:]*: ([\w$-]+)", text)
    if m:
        return "not comparable: " + m.group(1)
    m = re.search(r'custom-call target "?([^" ]+)"? not simulated', text)
    if m:
        return "custom-call " + re.sub(r"\d+$", "", m.group(1))
    m = re.search(r"%[\w.\-]+ \(([\w\-]+)\) in %[\w.\-]+: (.*)", last)
    if m:
        return "%s: %s" % (m.group(1), re.sub(r"\d+", "N", m.group(2))[:70])
    return "exit %d: %s" % (code, re.sub(r"\d+", "N", last)[-90:])


def one(case, tool, timeout, tmp):
    n = str(case["num_partitions"])
    safe = re.sub(r"[^\w.#-]", "_", case["id"])
    src = os.path.join(tmp, safe + ".hlo")
    dst = os.path.join(tmp, safe + ".out.hlo")
    with open(src, "w") as f:
        f.write(case["hlo"])
    code, _, _ = run([tool, "partition", "-n", n, src, "-o", dst] + sets(case), timeout)
    res = {"id": case["id"], "partitions": code == 0}
    if code != 0:
        return res
    code, text, secs = run([tool, "verify", "-n", n, src] + sets(case), timeout)
    res.update(exit=code, seconds=round(secs, 2), verified=code == 0)
    if code != 0:
        res["reason"] = reason(code, text)
        res["message"] = error_line(text)[:300]
    return res


NOT_SIMULABLE = ("too large to simulate", "not comparable")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases")
    ap.add_argument("--tool", default="build/src/cli/shardlens")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--filter")
    ap.add_argument("--json")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    args = ap.parse_args()
    cases = load_cases(args.cases, args.filter)
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda c: one(c, args.tool, args.timeout, tmp), cases))
    part = [r for r in results if r["partitions"]]
    ok = [r for r in part if r["verified"]]
    rest = [r for r in part if not r["verified"]]
    for r in results:
        if args.verbose or (r["partitions"] and not r["verified"]):
            print("%-70s %s%s" % (r["id"], "ok" if r.get("verified") else r.get("reason", "-"),
                                  " (%.1fs)" % r["seconds"] if "seconds" in r else ""))
    unsim = [r for r in rest if r["reason"].startswith(NOT_SIMULABLE)]
    pct = 100.0 * len(ok) / len(part) if part else 0.0
    sim = len(part) - len(unsim)
    print()
    print("%d cases, %d partition, %d verify: %d/%d = %.1f %%" %
          (len(results), len(part), len(ok), len(ok), len(part), pct))
    print("without %d cases that cannot be simulated (too large, outputs not comparable): "
          "%d/%d = %.1f %%" % (len(unsim), len(ok), sim, 100.0 * len(ok) / sim if sim else 0.0))
    counts = {}
    for r in rest:
        counts[r["reason"]] = counts.get(r["reason"], 0) + 1
    print("not verified, by exit reason:")
    for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print("  %4d  %s" % (v, k))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"timeout_s": args.timeout, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
