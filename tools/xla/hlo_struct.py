"""A small reader of XLA HLO text, Python standard library only, and the structural summary
that compare.py and the xla-golden test compare: entry parameter and root shapes, the
multiset of collectives per computation (replica groups expanded to explicit lists),
windowed-einsum loops, opcode counts and per-device bytes under shardlens's ring model.

It reads what XLA and shardlens print (short and long operand forms, multi-line
instructions, tuple shapes, /*index=N*/ comments, the iota `[G,S]<=[dims]T(perm)`,
explicit and mesh-axis replica-group forms). It is not a validator: it does what the
comparison needs.
"""

import re

DTYPE_BITS = {
    "pred": 8, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128,
    "f8e5m2": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8, "f8e4m3fnuz": 8,
    "f8e4m3": 8, "f8e3m4": 8, "f8e8m0fnu": 8, "f4e2m1fn": 4, "token": 0,
}

COLLECTIVES = {
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
    "collective-broadcast", "ragged-all-to-all", "all-reduce-start", "all-gather-start",
    "collective-permute-start",
}


class HloError(Exception):
    pass


class Instr:
    __slots__ = ("name", "shape", "opcode", "operands", "attrs", "is_root", "raw_args")

    def __init__(self, name, shape, opcode, operands, attrs, is_root, raw_args):
        self.name, self.shape, self.opcode = name, shape, opcode
        self.operands, self.attrs, self.is_root = operands, attrs, is_root
        self.raw_args = raw_args

    def op_name(self):
        m = re.search(r'op_name="((?:[^"\\]|\\.)*)"', self.attrs.get("metadata", ""))
        return m.group(1) if m else ""


class Computation:
    def __init__(self, name, is_entry):
        self.name, self.is_entry = name, is_entry
        self.instrs, self.by_name, self.root = [], {}, None


class Module:
    def __init__(self, name, header):
        self.name, self.header = name, header
        self.computations, self.entry = {}, None

    def num_partitions(self):
        m = re.search(r"num_partitions=(\d+)", self.header)
        return int(m.group(1)) if m else None


# ---------------------------------------------------------------- lexing helpers

def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = []
    for line in text.split("\n"):
        # a // comment outside strings
        q, i = False, 0
        while i < len(line):
            c = line[i]
            if c == '"' and (i == 0 or line[i - 1] != "\\"):
                q = not q
            elif not q and line.startswith("//", i):
                line = line[:i]
                break
            i += 1
        out.append(line)
    return "\n".join(out)


def _match_close(s, i):
    """Index just past the bracket group opening at s[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack, q = [], False
    j = i
    while j < len(s):
        c = s[j]
        if q:
            if c == "\\":
                j += 1
            elif c == '"':
                q = False
        elif c == '"':
            q = True
        elif c in pairs:
            stack.append(pairs[c])
        elif c in ")]}":
            if not stack or stack.pop() != c:
                raise HloError("unbalanced '%s'" % c)
            if not stack:
                return j + 1
        j += 1
    raise HloError("unterminated group")


def split_top(s, sep=","):
    """Splits at sep outside brackets and strings."""
    parts, depth, q, cur, i = [], 0, False, [], 0
    while i < len(s):
        c = s[i]
        if q:
            cur.append(c)
            if c == "\\" and i + 1 < len(s):
                cur.append(s[i + 1])
                i += 1
            elif c == '"':
                q = False
        elif c == '"':
            q = True
            cur.append(c)
        elif c in "([{":
            depth += 1
            cur.append(c)
        elif c in ")]}":
            depth -= 1
            cur.append(c)
        elif c == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _read_shape(s, i):
    """Reads a shape at s[i:]; returns (shape text without layouts, end index)."""
    while i < len(s) and s[i].isspace():
        i += 1
    if s[i] == "(":
        j = _match_close(s, i)
        inner = split_top(s[i + 1:j - 1])
        return "(" + ", ".join(_norm_shape(p) for p in inner) + ")", j
    m = re.compile(r"[a-z0-9]+(\[[^\]]*\])?").match(s, i)
    if not m:
        raise HloError("expected a shape at '%s'" % s[i:i + 30])
    j = m.end()
    if j < len(s) and s[j] == "{":
        j = _match_close(s, j)
    return m.group(0), j


def _norm_shape(p):
    p = p.strip()
    if p.startswith("("):
        return _read_shape(p, 0)[0]
    return re.sub(r"\{[^}]*\}$", "", p).replace(" ", "")


_INSTR_START = re.compile(
    r"^\s*(ROOT\s+)?%?([A-Za-z_][\w.\-]*)\s*=\s*(?=\(|[a-z][a-z0-9]*\[|[a-z][\w\-]*\()")
_COMP_START = re.compile(r"^\s*(ENTRY\s+)?%?([A-Za-z_][\w.\-]*)\s*(\(.*)?\{\s*$")


def _continues(stmt):
    """The statement so far is unfinished: it ends with a comma or has open brackets."""
    if not stmt:
        return False
    if stmt[-1].rstrip().endswith(","):
        return True
    depth = 0
    for line in stmt:
        q = False
        for c in line:
            if c == '"':
                q = not q
            elif not q and c in "([{":
                depth += 1
            elif not q and c in ")]}":
                depth -= 1
    return depth > 0


def parse_module(text):
    text = _strip_comments(text)
    lines = text.split("\n")
    mod = None
    comp = None
    stmt = []
    stmts = []

    def flush():
        if stmt:
            stmts.append((comp, " ".join(x.strip() for x in stmt)))
            stmt.clear()

    for ln, line in enumerate(lines, 1):
        s = line.strip()
        if not s:
            continue
        if mod is None:
            if s.startswith("HloModule"):
                m = re.match(r"HloModule\s+([^\s,]+)", s)
                mod = Module(m.group(1) if m else "", s)
                continue
            if not _COMP_START.match(s):
                raise HloError("line %d: expected 'HloModule'" % ln)
            mod = Module("", "")  # XLA's parser also takes a module without a header
        if comp is None:
            m = _COMP_START.match(s)
            if m and "=" not in s.split("(")[0]:
                comp = Computation(m.group(2), bool(m.group(1)))
                if comp.name in mod.computations:
                    raise HloError("line %d: duplicate computation %s" % (ln, comp.name))
                mod.computations[comp.name] = comp
                if comp.is_entry:
                    mod.entry = comp
                continue
            # the FileNames/FunctionNames/FileLocations/StackFrames tables newer XLA
            # prints between the header and the computations
            continue
        if s == "}":
            flush()
            comp = None
            continue
        if _INSTR_START.match(s) and not _continues(stmt):
            flush()
        stmt.append(s)
    if comp is not None:
        raise HloError("unterminated computation %s" % comp.name)
    if mod is None:
        raise HloError("no HloModule header")
    for c, st in stmts:
        ins = _parse_instr(st)
        c.instrs.append(ins)
        c.by_name[ins.name] = ins
        if ins.is_root:
            c.root = ins
    for c in mod.computations.values():
        if c.root is None and c.instrs:
            c.root = c.instrs[-1]
    if mod.entry is None and mod.computations:
        mod.entry = list(mod.computations.values())[-1]
    return mod


def _parse_instr(st):
    m = _INSTR_START.match(st)
    is_root, name = bool(m.group(1)), m.group(2)
    if re.compile(r"[a-z][\w\-]*\(").match(st, m.end()):
        shape, i = "?", m.end()  # the shape may be left out (XLA infers it)
    else:
        shape, i = _read_shape(st, m.end())
    m2 = re.compile(r"\s*([a-z][\w\-]*)\s*\(").match(st, i)
    if not m2:
        raise HloError("cannot read instruction '%s'" % st[:80])
    opcode = m2.group(1)
    j = _match_close(st, m2.end() - 1)
    args = st[m2.end():j - 1]
    operands = []
    if opcode not in ("constant", "parameter", "iota", "rng-get-and-update-state"):
        for a in split_top(args):
            tok = a.split()[-1] if a.split() else ""
            if tok:
                operands.append(tok.lstrip("%"))
    attrs = {}
    rest = st[j:].strip()
    if rest.startswith(","):
        last = None
        for a in split_top(rest[1:]):
            k, _, v = a.partition("=")
            k = k.strip()
            if k == "device_ids" and last == "replica_groups":
                # mesh['a'=2,...], device_ids=(...) {...}: one value with a comma in it
                attrs[last] += ", " + a.strip()
                continue
            attrs[k] = v.strip()
            last = k
    return Instr(name, shape, opcode, operands, attrs, is_root, args)


# ---------------------------------------------------------------- shapes and groups

def shape_leaves(shape):
    shape = shape.strip()
    if shape.startswith("("):
        out = []
        for p in split_top(shape[1:-1]):
            out.extend(shape_leaves(p))
        return out
    return [shape]


def shape_bytes(shape):
    total = 0
    for leaf in shape_leaves(shape):
        m = re.match(r"([a-z0-9]+)(?:\[([^\]]*)\])?", leaf)
        if not m:
            continue
        bits = DTYPE_BITS.get(m.group(1), 0)
        n = 1
        if m.group(2):
            for d in m.group(2).split(","):
                d = d.strip().lstrip("<=")
                if d:
                    n *= int(d)
        total += n * bits
    return total / 8.0


def _ints(s):
    return [int(x) for x in re.findall(r"-?\d+", s)]


def iota_devices(dims, perm=None):
    """Devices of iota(prod(dims)) reshaped to dims and transposed by perm, flattened."""
    total = 1
    for d in dims:
        total *= d
    perm = perm if perm is not None else list(range(len(dims)))
    strides = [1] * len(dims)
    for k in range(len(dims) - 2, -1, -1):
        strides[k] = strides[k + 1] * dims[k + 1]
    tdims = [dims[p] for p in perm]
    out = []
    idx = [0] * len(tdims)
    for _ in range(total):
        out.append(sum(idx[k] * strides[perm[k]] for k in range(len(tdims))))
        for k in range(len(tdims) - 1, -1, -1):
            idx[k] += 1
            if idx[k] < tdims[k]:
                break
            idx[k] = 0
    return out


def expand_groups(text, n):
    """replica_groups text -> tuple of tuples of devices. `{}` is one group of all n."""
    t = text.strip()
    if t.startswith("mesh["):
        return _expand_mesh_groups(t)
    if t.startswith("["):
        m = re.match(r"\[([^\]]*)\]<=\[([^\]]*)\](?:T\(([^)]*)\))?\s*$", t)
        if not m:
            raise HloError("bad iota replica groups '%s'" % t)
        gs = _ints(m.group(1))
        dims = _ints(m.group(2))
        perm = _ints(m.group(3)) if m.group(3) else None
        devs = iota_devices(dims, perm)
        size = gs[-1] if len(gs) > 1 else len(devs)
        return tuple(tuple(devs[k:k + size]) for k in range(0, len(devs), size))
    inner = t[1:-1].strip() if t.startswith("{") else t
    if not inner:
        return (tuple(range(n)),) if n else ()
    groups = []
    for g in split_top(inner):
        groups.append(tuple(_ints(g)))
    return tuple(groups)


def _expand_mesh_groups(t):
    """mesh['a'=2,'b'=4] {'b'}: a mesh of named axes over iota devices (or the listed
    device ids); one group for each index of the axes not named, spanning the named axes in
    the order they are listed. Sub-axes 'b':(k)m take m of the axis' factors, starting
    after the first k (pre-size k)."""
    m = re.match(r"mesh\[([^\]]*)\](?:\s*,?\s*device_ids=\((.*)\))?\s*\{([^}]*)\}\s*$", t)
    if not m:
        raise HloError("unsupported mesh replica groups '%s'" % t)
    axes = []
    for a in split_top(m.group(1)):
        k, _, v = a.partition("=")
        axes.append((k.strip().strip("'\""), int(v)))
    devs = None
    if m.group(2):
        d = m.group(2).strip()
        im = re.match(r"\[([^\]]*)\](?:T\(([^)]*)\))?$", d)
        if im:
            devs = iota_devices(_ints(im.group(1)), _ints(im.group(2)) if im.group(2) else None)
        else:
            devs = _ints(d)
    # split axes into sub-axes as the group spec needs
    used = []
    for a in split_top(m.group(3)):
        a = a.strip()
        sm = re.match(r"'([^']*)'(?::\((\d+)\)(\d+))?$", a)
        if not sm:
            raise HloError("bad mesh axis '%s'" % a)
        used.append((sm.group(1), int(sm.group(2)) if sm.group(2) else None,
                     int(sm.group(3)) if sm.group(3) else None))
    # factor every axis into (name, pre, size) pieces
    pieces = []
    for name, size in axes:
        cuts = {1, size}
        for u in used:
            if u[0] == name and u[1] is not None:
                cuts.add(u[1])
                cuts.add(u[1] * u[2])
        cuts = sorted(cuts)
        for lo, hi in zip(cuts, cuts[1:]):
            pieces.append((name, lo, hi // lo))
        if size == 1:
            pieces.append((name, 1, 1))
    dims = [p[2] for p in pieces]
    span = []
    for name, pre, size in used:
        for k, p in enumerate(pieces):
            if p[0] != name:
                continue
            if pre is None or (p[1] >= pre and p[1] * p[2] <= pre * size):
                span.append(k)
    rest = [k for k in range(len(pieces)) if k not in span]
    flat = iota_devices(dims, rest + span)
    if devs is not None:
        flat = [devs[d] for d in flat]
    size = 1
    for k in span:
        size *= dims[k]
    return tuple(tuple(flat[k:k + size]) for k in range(0, len(flat), size))


def parse_pairs(text):
    nums = _ints(text)
    return tuple((nums[k], nums[k + 1]) for k in range(0, len(nums) - 1, 2))


# ---------------------------------------------------------------- the summary

def _callees(ins):
    out = []
    for key in ("to_apply", "body", "condition", "calls", "true_computation",
                "false_computation"):
        v = ins.attrs.get(key)
        if v:
            for p in v.strip("{}").split(","):
                if p.strip():
                    out.append((key, p.strip().lstrip("%")))
    v = ins.attrs.get("branch_computations")
    if v:
        for k, p in enumerate(v.strip("{}").split(",")):
            out.append(("branch%d" % k, p.strip().lstrip("%")))
    return out


def trip_count(mod, comp, ins):
    """A while's trip count: known_trip_count in backend_config, else the simple
    `i < constant` condition on a counter starting at a constant; None when unknown."""
    m = re.search(r'known_trip_count"?\s*:\s*\{\s*"?n"?\s*:\s*"?(\d+)', ins.attrs.get(
        "backend_config", ""))
    if m:
        return int(m.group(1))
    cond = mod.computations.get(ins.attrs.get("condition", "").lstrip("%"))
    if cond is None or cond.root is None or cond.root.opcode != "compare":
        return None
    d = cond.root.attrs.get("direction", "")
    consts = [cond.by_name.get(o) for o in cond.root.operands]
    lim = None
    for c in consts:
        if c is not None and c.opcode == "constant":
            v = _ints(c.raw_args)
            lim = v[0] if v else None
    if lim is None:
        return None
    # the initial value: the tuple operand's element that the condition compares
    init = comp.by_name.get(ins.operands[0]) if ins.operands else None
    gte = None
    for c in consts:
        if c is not None and c.opcode == "get-tuple-element":
            gte = int(c.attrs.get("index", "-1"))
    start = 0
    if init is not None and init.opcode == "tuple" and gte is not None and \
            gte < len(init.operands):
        src = comp.by_name.get(init.operands[gte])
        if src is not None and src.opcode == "constant":
            v = _ints(src.raw_args)
            start = v[0] if v else 0
        else:
            return None
    if d == "LT":
        return max(0, lim - start)
    if d == "LE":
        return max(0, lim - start + 1)
    return None


def _state_key(shape):
    """A while's tuple shape with its top-level elements sorted: the key of its body and
    condition. XLA's Shardy round trip (HLO -> StableHLO -> HLO) may put the loop state in
    another order than the module it was given; the order names no communication (the
    collectives inside are compared one by one), so both sides are keyed by the same set."""
    if not shape.startswith("(") or not shape.endswith(")"):
        return shape
    parts, depth, cur = [], 0, []
    for ch in shape[1:-1]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur:
        parts.append("".join(cur).strip())
    return "(" + ", ".join(sorted(parts)) + ")"


def _unwrap_1tuple(shape):
    """`(T)` as `T`: XLA's HLO import returns a conditional's or call's single result as a
    1-tuple; the role key should not tell the two apart."""
    if shape.startswith("(") and shape.endswith(")"):
        inner = shape[1:-1].strip()
        depth = 0
        for ch in inner:
            depth += ch in "([{"
            depth -= ch in ")]}"
            if ch == "," and depth == 0:
                return shape
        return inner
    return shape


def summarize(mod, n=None, clean=False):
    """The structural summary of a partitioned module (a dict of plain values); with clean,
    of the module after simplify()."""
    n = n or mod.num_partitions() or 1
    if clean:
        simplify(mod)
    # computation roles: a key built from the call path, independent of names
    roles = {}
    trips = {}
    reducers = set()
    order = [mod.entry] if mod.entry else []
    roles[mod.entry.name] = "ENTRY"
    trips[mod.entry.name] = 1
    seen = {mod.entry.name}
    k = 0
    while k < len(order):
        c = order[k]
        k += 1
        for ins in c.instrs:
            for role, callee in _callees(ins):
                if callee in seen or callee not in mod.computations:
                    continue
                seen.add(callee)
                if role == "to_apply" and ins.opcode != "call":
                    reducers.add(callee)
                shape = (_state_key(ins.shape) if ins.opcode == "while"
                         else _unwrap_1tuple(ins.shape))
                key = "%s/%s.%s:%s" % (roles[c.name], ins.opcode, role, shape)
                roles[callee] = key
                t = trips[c.name]
                if ins.opcode == "while" and role == "body":
                    tc = trip_count(mod, c, ins)
                    t = None if (t is None or tc is None) else t * tc
                trips[callee] = t
                order.append(mod.computations[callee])

    entry = mod.entry
    params = sorted((int(_ints(i.raw_args)[0]), i.shape) for i in entry.instrs
                    if i.opcode == "parameter")
    summary = {
        "params": [s for _, s in params],
        "root": entry.root.shape if entry.root else None,
        "collectives": {},
        "windowed_loops": [],
        "opcodes": {},
        "sites": {},
        "device_bytes": [0.0] * n,
        "unknown_trip_bytes": 0.0,
    }
    for c in order:
        role = roles[c.name]
        if c.name in reducers:
            continue
        for ins in c.instrs:
            summary["opcodes"][ins.opcode] = summary["opcodes"].get(ins.opcode, 0) + 1
            site = "%s %s|%s" % (ins.opcode, ins.shape, ins.op_name())
            summary["sites"][site] = summary["sites"].get(site, 0) + 1
            if ins.opcode == "while":
                body = mod.computations.get(ins.attrs.get("body", "").lstrip("%"))
                if body is not None and _is_windowed(mod, body):
                    summary["windowed_loops"].append(trip_count(mod, c, ins))
            if ins.opcode not in COLLECTIVES:
                continue
            rec = collective_record(c, ins, n)
            summary["collectives"].setdefault(role, []).append(rec)
            sent = ring_bytes(c, ins, rec, n)
            t = trips[c.name]
            for d, b in enumerate(sent):
                if t is None:
                    summary["unknown_trip_bytes"] += b
                else:
                    summary["device_bytes"][d] += b * t
    for role in summary["collectives"]:
        summary["collectives"][role].sort(key=lambda r: r["key"])
    summary["windowed_loops"].sort(key=lambda x: (x is None, x or 0))
    return summary


def _is_windowed(mod, body):
    ops = {i.opcode for i in body.instrs}
    return ("dot" in ops or "convolution" in ops) and (
        "collective-permute" in ops or "collective-permute-start" in ops)


def collective_record(comp, ins, n):
    kind = ins.opcode.replace("-start", "")
    operand_shapes = [comp.by_name[o].shape if o in comp.by_name else "?"
                      for o in ins.operands]
    groups = None
    if "replica_groups" in ins.attrs:
        groups = expand_groups(ins.attrs["replica_groups"], n)
    elif kind not in ("collective-permute",):
        groups = (tuple(range(n)),)
    if groups is not None:
        groups = tuple(sorted(groups))  # the order of groups carries no meaning
    pairs = parse_pairs(ins.attrs["source_target_pairs"]) if \
        "source_target_pairs" in ins.attrs else None
    if pairs is not None:
        pairs = tuple(sorted(pairs))
    dims = ins.attrs.get("dimensions")
    key = "%s %s -> %s" % (kind, ", ".join(operand_shapes), ins.shape)
    if dims:
        key += " dimensions=%s" % dims
    if groups is not None:
        key += " groups=%s" % _fmt_groups(groups)
    if pairs is not None:
        key += " pairs=%s" % ",".join("%d->%d" % p for p in pairs)
    return {"key": key, "kind": kind, "op_name": ins.op_name(), "name": ins.name,
            "groups": [list(g) for g in groups] if groups is not None else None,
            "pairs": [list(p) for p in pairs] if pairs is not None else None}


def _fmt_groups(groups):
    return "{" + ",".join("{" + ",".join(str(d) for d in g) + "}" for g in groups) + "}"


def ring_bytes(comp, ins, rec, n):
    """Bytes each device sends for one execution of the collective (product.md)."""
    kind = rec["kind"]
    out = [0.0] * n
    if kind == "collective-permute":
        s = sum(shape_bytes(comp.by_name[o].shape) for o in ins.operands[:1]
                if o in comp.by_name)
        for src, _ in rec["pairs"] or []:
            if 0 <= src < n:
                out[src] += s
        return out
    operand = sum(shape_bytes(comp.by_name[o].shape) for o in ins.operands
                  if o in comp.by_name)
    result = shape_bytes(ins.shape)
    for g in rec["groups"] or []:
        k = len(g)
        if k <= 1:
            continue
        if kind == "all-gather":
            b = (k - 1) / k * result
        elif kind == "reduce-scatter":
            b = (k - 1) / k * operand
        elif kind == "all-reduce":
            b = 2 * (k - 1) / k * operand
        elif kind in ("all-to-all", "ragged-all-to-all"):
            b = (k - 1) / k * operand
        elif kind == "collective-broadcast":
            b = (k - 1) / k * operand
        else:
            b = 0.0
        for d in g:
            if 0 <= d < n:
                out[d] += b
    return out


def compare(xla, ours, limit=6):
    """Differences between two summaries, XLA's first: a list of readable lines (empty when
    identical) and the categories that differ."""
    diffs, cats = [], []

    def add(cat, line):
        if cat not in cats:
            cats.append(cat)
        diffs.append(line)

    if xla["params"] != ours["params"]:
        for k in range(max(len(xla["params"]), len(ours["params"]))):
            a = xla["params"][k] if k < len(xla["params"]) else None
            b = ours["params"][k] if k < len(ours["params"]) else None
            if a != b:
                add("params", "entry parameter %d: XLA has %s, shardlens has %s" % (k, a, b))
    if xla["root"] != ours["root"]:
        add("root", "entry root: XLA has %s, shardlens has %s" % (xla["root"], ours["root"]))
    roles = sorted(set(xla["collectives"]) | set(ours["collectives"]),
                   key=lambda r: (r != "ENTRY", r))
    for role in roles:
        a = list(xla["collectives"].get(role, []))
        b = list(ours["collectives"].get(role, []))
        bk = [r["key"] for r in b]
        only_a = []
        for r in a:
            if r["key"] in bk:
                bk.remove(r["key"])
            else:
                only_a.append(r)
        ak = [r["key"] for r in a]
        only_b = []
        for r in b:
            if r["key"] in ak:
                ak.remove(r["key"])
            else:
                only_b.append(r)
        where = "in %s" % role
        while only_a or only_b:
            x = only_a.pop(0) if only_a else None
            y = None
            if only_b:
                same = [r for r in only_b if x and r["kind"] == x["kind"]]
                y = same[0] if same else (only_b[0] if x is None else None)
                if y is not None:
                    only_b.remove(y)
            src = (x or y)["op_name"]
            add("collectives", "%s, op_name \"%s\": XLA has %s, shardlens has %s" % (
                where, src, x["key"] if x else "nothing", y["key"] if y else "nothing"))
    if xla["windowed_loops"] != ours["windowed_loops"]:
        add("windowed_loops", "windowed-einsum loops (trip counts): XLA has %s, shardlens has "
            "%s" % (xla["windowed_loops"], ours["windowed_loops"]))
    if xla["opcodes"] != ours["opcodes"]:
        ks = sorted(set(xla["opcodes"]) | set(ours["opcodes"]))
        d = ["%s %d vs %d" % (k, xla["opcodes"].get(k, 0), ours["opcodes"].get(k, 0))
             for k in ks if xla["opcodes"].get(k, 0) != ours["opcodes"].get(k, 0)]
        add("opcodes", "opcode counts (XLA vs shardlens): " + ", ".join(d))
        xs, os_ = xla.get("sites", {}), ours.get("sites", {})
        differ = [k for k in ks if xla["opcodes"].get(k, 0) != ours["opcodes"].get(k, 0)]
        sites = [k for k in sorted(set(xs) | set(os_))
                 if xs.get(k, 0) != os_.get(k, 0) and k.split(" ", 1)[0] in differ]
        for k in sites[:limit]:
            what, op = k.split("|", 1)
            add("opcodes", "  %s, op_name \"%s\": XLA has %d, shardlens has %d" % (
                what, op, xs.get(k, 0), os_.get(k, 0)))
    xb, ob = xla["device_bytes"], ours["device_bytes"]
    if len(xb) != len(ob) or any(abs(p - q) > 1e-6 * max(1.0, abs(p)) for p, q in zip(xb, ob)):
        add("bytes", "per-device bytes sent (ring model): XLA has %s, shardlens has %s" % (
            _fmt_bytes(xb), _fmt_bytes(ob)))
    if abs(xla["unknown_trip_bytes"] - ours["unknown_trip_bytes"]) > 1e-6:
        add("bytes", "bytes in loops of unknown trip count: XLA has %g, shardlens has %g" % (
            xla["unknown_trip_bytes"], ours["unknown_trip_bytes"]))
    return diffs, cats


def _fmt_bytes(v):
    if len(v) > 8 and len(set(v)) == 1:
        return "%g on each of %d devices" % (v[0], len(v))
    if len(v) > 8:
        return "[%s, ...] (total %g)" % (", ".join("%g" % x for x in v[:4]), sum(v))
    return "[%s]" % ", ".join("%g" % x for x in v)


# ---------------------------------------------------------------- normalisation

_NO_CSE = COLLECTIVES | {
    "parameter", "rng", "rng-get-and-update-state", "rng-bit-generator", "infeed", "outfeed",
    "send", "send-done", "recv", "recv-done", "while", "conditional", "call", "custom-call",
    "after-all", "all-reduce-done", "all-gather-done", "collective-permute-done", "domain",
    "add-dependency", "optimization-barrier"}
_COMMUTATIVE = {"add", "multiply", "maximum", "minimum", "and", "or", "xor"}
_IGNORED_ATTRS = {"metadata", "sharding", "frontend_attributes", "origin", "statistics",
                  "backend_config"}


def simplify(mod):
    """What XLA's spmd-cleanup does after partitioning, applied to any module: forwards
    get-tuple-element(tuple(...)), merges identical side-effect-free instructions (CSE,
    layouts ignored, constants by value) and removes dead ones, per computation. Used to
    compare opcode counts net of those clean-ups."""
    for comp in mod.computations.values():
        alias = {}
        table = {}
        keep = []
        for ins in comp.instrs:
            ins.operands = [alias.get(o, o) for o in ins.operands]
            if ins.opcode == "get-tuple-element" and ins.operands:
                src = comp.by_name.get(ins.operands[0])
                idx = int(ins.attrs.get("index", "-1"))
                if src is not None and src.opcode == "tuple" and 0 <= idx < len(src.operands):
                    alias[ins.name] = src.operands[idx]
                    continue
            elided = ins.opcode == "constant" and "..." in ins.raw_args
            if ins.opcode not in _NO_CSE and not ins.is_root and not elided:
                ops = tuple(ins.operands)
                if ins.opcode in _COMMUTATIVE:
                    ops = tuple(sorted(ops))
                key = (ins.opcode, ins.shape, ops,
                       ins.raw_args if ins.opcode in ("constant", "iota") else "",
                       tuple(sorted((k, v) for k, v in ins.attrs.items()
                                    if k not in _IGNORED_ATTRS)))
                if key in table:
                    alias[ins.name] = table[key]
                    continue
                table[key] = ins.name
            keep.append(ins)
        # dead code: what the root (and side effects) do not need
        by = {i.name: i for i in keep}
        live = set()
        work = [i.name for i in keep if i.is_root or i.opcode in (
            "send", "send-done", "outfeed", "custom-call", "rng-get-and-update-state",
            "infeed", "recv", "recv-done", "after-all") or i is keep[-1]]
        while work:
            nme = work.pop()
            if nme in live or nme not in by:
                continue
            live.add(nme)
            work.extend(by[nme].operands)
        comp.instrs = [i for i in keep if i.name in live or i.opcode == "parameter"]
        comp.by_name = {i.name: i for i in comp.instrs}
        for i in comp.instrs:
            for o in i.operands:
                if o not in comp.by_name and o in alias:
                    pass
    return mod
