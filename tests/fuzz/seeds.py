#!/usr/bin/env python3
"""seeds.py - seed corpora for the fuzz targets (tools/fuzz.sh runs it).

    seeds.py ROOT TARGET OUT_DIR [--mutants N] [--seed S]

Gathers the inputs the tree already has (samples/*.hlo and tests/golden/ for HLO; every
`sharding={...}` of those for the sharding target; tests/golden/*.json for summary.json; a few
byte patterns for the trace target), plus HLO modules written as plain string literals in
tests/*.c, and adds N mutants of each (our own small mutator: numbers swapped for edge values,
operands dropped or repeated, opcodes and types swapped, lines deleted or repeated, braces
cut). Writes one file per input into OUT_DIR, named by content hash (so reruns are idempotent).
"""
import hashlib
import os
import random
import re
import sys

EDGE_NUMBERS = ["0", "1", "-1", "2", "3", "7", "65536", "65537", "2147483647", "2147483648",
                "4294967296", "9223372036854775807", "9223372036854775808",
                "-9223372036854775808", "1e309", "nan"]


def c_string_modules(path):
    """HLO modules written as runs of adjacent C string literals (no macros) in a test file."""
    src = open(path, encoding="utf-8", errors="replace").read()
    out = []
    for run in re.finditer(r'(?:"(?:[^"\\\n]|\\.)*"\s*)+', src):
        parts = re.findall(r'"((?:[^"\\\n]|\\.)*)"', run.group(0))
        text = "".join(parts)
        if "ENTRY" not in text:
            continue
        text = (text.replace("\\n", "\n").replace('\\"', '"').replace("\\t", "\t")
                .replace("\\\\", "\\"))
        out.append(text)
    return out


def hlo_seeds(root):
    seeds = []
    for d in ("samples", os.path.join("tests", "golden")):
        full = os.path.join(root, d)
        for name in sorted(os.listdir(full)):
            if name.endswith(".hlo"):
                seeds.append(open(os.path.join(full, name), encoding="utf-8").read())
    tests = os.path.join(root, "tests")
    for name in sorted(os.listdir(tests)):
        if name.endswith(".c"):
            seeds.extend(c_string_modules(os.path.join(tests, name)))
    return seeds


def balanced(text, start):
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return None


def sharding_seeds(root):
    seen, out = set(), []
    for text in hlo_seeds(root):
        for m in re.finditer(r"sharding=\{", text):
            s = balanced(text, m.end() - 1)
            if s and s not in seen:
                seen.add(s)
                out.append(s)
    out += ['{mesh["a"=2,"b"=4], [{"a"}, {"b"}]}', '{mesh["x"=8], [{"x":(2)2}, {}]}',
            '{mesh["a"=4,"b"=2], device_ids=([2,4]T(1,0)), [{"b"}, {"a"}], replicated={}}',
            '{mesh["a"=2,"b"=2], [{}, {}], manual={"a"}}', '{maximal_mesh[device_id=3]}',
            '{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dims={manual, replicated}}',
            '{devices=[4,1]0,2,1,3 last_tile_dim_replicate}', '{{replicated}, {maximal device=1}}']
    return out


def summary_seeds(root):
    d = os.path.join(root, "tests", "golden")
    return [open(os.path.join(d, n), encoding="utf-8").read()
            for n in sorted(os.listdir(d)) if n.endswith(".json")]


OPCODES = ["add", "reverse", "bitcast", "opt-barrier", "add-dependency", "select-and-scatter",
           "triangular-solve", "constant", "ragged-dot", "collective-broadcast", "dot", "tuple",
           "get-tuple-element", "while", "call", "all-reduce", "all-gather", "reduce",
           "transpose", "reshape", "broadcast", "slice", "pad", "concatenate", "gather",
           "scatter", "sort", "convolution", "custom-call", "fusion", "iota", "partition-id"]
TYPES = ["f32", "s32", "pred", "bf16", "f64", "u8", "token", "s4", "c64"]


def mutate(text, rng):
    """One random edit of `text` (our own mutator)."""
    kind = rng.randrange(8)
    if kind == 0:  # a number becomes an edge value
        nums = list(re.finditer(r"-?\d+", text))
        if nums:
            m = rng.choice(nums)
            return text[:m.start()] + rng.choice(EDGE_NUMBERS) + text[m.end():]
    if kind == 1:  # an operand list loses or repeats an operand
        calls = list(re.finditer(r"\(([^()]*)\)", text))
        if calls:
            m = rng.choice(calls)
            ops = [o for o in m.group(1).split(",")]
            if ops and rng.random() < 0.5:
                ops.pop(rng.randrange(len(ops)))
            elif ops:
                ops.insert(rng.randrange(len(ops) + 1), rng.choice(ops))
            return text[:m.start(1)] + ",".join(ops) + text[m.end(1):]
    if kind == 2:  # opcode swap
        ops = list(re.finditer(r" ([a-z][a-z-]*)\(", text))
        if ops:
            m = rng.choice(ops)
            return text[:m.start(1)] + rng.choice(OPCODES) + text[m.end(1):]
    if kind == 3:  # type swap
        ts = list(re.finditer(r"\b(f32|s32|pred|bf16|f64|u32|s64)\[", text))
        if ts:
            m = rng.choice(ts)
            return text[:m.start(1)] + rng.choice(TYPES) + text[m.end(1):]
    lines = text.split("\n")
    if kind == 4 and len(lines) > 2:  # delete a line
        del lines[rng.randrange(len(lines))]
        return "\n".join(lines)
    if kind == 5 and lines:  # repeat a line
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
        return "\n".join(lines)
    if kind == 6 and text:  # cut at a random place
        return text[:rng.randrange(len(text))]
    # a dim list gets an extra huge dim
    dims = list(re.finditer(r"\[(\d+(?:,\d+)*)\]", text))
    if dims:
        m = rng.choice(dims)
        return text[:m.end(1)] + "," + rng.choice(EDGE_NUMBERS[5:]) + text[m.end(1):]
    return text


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    root, target, out_dir = args[:3]
    n_mut = int(args[args.index("--mutants") + 1]) if "--mutants" in args else 4
    rng = random.Random(int(args[args.index("--seed") + 1]) if "--seed" in args else 17)
    if target in ("hlo", "partition"):
        seeds = hlo_seeds(root)
    elif target == "sharding":
        seeds = sharding_seeds(root)
    elif target == "summary":
        seeds = summary_seeds(root)
    elif target == "trace":
        seeds = ["\x00" + "".join(chr(rng.randrange(256)) for _ in range(4 * k))
                 for k in range(1, 20)]
        seeds += ["\x01" + "".join(chr(rng.randrange(256)) for _ in range(5 * k))
                  for k in range(1, 20)]
        n_mut = 0
    else:
        sys.exit("seeds.py: unknown target " + target)
    os.makedirs(out_dir, exist_ok=True)
    inputs = []
    for s in seeds:
        inputs.append(s)
        t = s
        for _ in range(n_mut):
            t = mutate(t if rng.random() < 0.5 else s, rng)
            inputs.append(t)
    for text in inputs:
        data = text.encode("latin-1" if target == "trace" else "utf-8", errors="replace")
        name = hashlib.sha1(data).hexdigest()
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    print(f"seeds.py: {len(inputs)} inputs ({len(seeds)} seeds) for {target} in {out_dir}")


if __name__ == "__main__":
    main()
