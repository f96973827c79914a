#!/usr/bin/env python3
"""gen_transformer.py - writes an L-layer transformer forward step (a training step up to the loss) as a
sharded HLO text module, for benchmarks and for trying shardlens on something model-sized.

The module is flat (no while loops): a vocab-parallel embedding gather, then per layer a pre-norm
attention block (layer norm, Q/K/V projections, scores dot, softmax by reduce max / exp / reduce add /
divide, context dot, output projection, residual) and a pre-norm MLP block (layer norm, up projection,
sigmoid-approximated GELU, down projection, residual), then a final layer norm, the logits dot against
the tied embedding table, and a softmax cross-entropy loss reduced to a scalar.

Shardings follow Megatron on a data x model mesh (num_partitions = D*M, device id = M*d + m): the
activations are split on batch over `data` and replicated over `model`; attention weights are split on
the heads dim and the MLP weights on the ffn dim over `model` (column- then row-parallel), the embedding
table on the vocab dim over `model`; layer-norm scales and biases are replicated. Every instruction
carries the sharding a propagation pass would have given it, and JAX-like metadata (op_type, op_name
`jit(train_step)/layer_3/attn/...`, source_file, source_line).

Output is deterministic: the same arguments give the same bytes. Python standard library only.
usage: gen_transformer.py [--layers L] [--batch B] [--seq S] [--hidden H] [--heads N] [--ffn F]
                          [--vocab V] [--data D] [--model M] [-o OUT.hlo]
"""

import argparse
import sys

SOURCE_FILE = "/work/models/transformer.py"

# source line of each op kind in the (imaginary) model file: the Python loop repeats the same lines
LINES = {
    "embed": 41, "ln_mean": 22, "ln_var": 23, "ln_norm": 24, "ln_scale": 25,
    "q": 58, "k": 59, "v": 60, "scores": 63, "scale": 64, "softmax": 65, "context": 66,
    "attn_out": 67, "attn_res": 88, "up": 74, "gelu": 75, "down": 76, "mlp_res": 89,
    "logits": 102, "loss_lse": 108, "loss_label": 109, "loss_mean": 110,
}


def parse_args(argv):
    p = argparse.ArgumentParser(description="Generate a sharded L-layer transformer HLO module.")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--data", type=int, default=2, help="devices on the data-parallel mesh axis")
    p.add_argument("--model", type=int, default=4, help="devices on the model-parallel mesh axis")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    a = p.parse_args(argv)
    for name in ("layers", "batch", "seq", "hidden", "heads", "ffn", "vocab", "data", "model"):
        if getattr(a, name) < 1:
            p.error("--%s must be positive" % name)
    checks = [
        (a.hidden % a.heads == 0, "--hidden must be a multiple of --heads"),
        (a.batch % a.data == 0, "--batch must be a multiple of --data"),
        (a.heads % a.model == 0, "--heads must be a multiple of --model"),
        (a.ffn % a.model == 0, "--ffn must be a multiple of --model"),
        (a.vocab % a.model == 0, "--vocab must be a multiple of --model"),
    ]
    for ok, msg in checks:
        if not ok:
            p.error(msg)
    return a


class Mesh:
    """Shardings on the [data, model] device mesh, printed in XLA's iota form."""

    def __init__(self, data, model):
        self.d, self.m = data, model
        self.n = data * model

    def sharding(self, rank, data_dim=None, model_dim=None):
        """Tensor of `rank` dims, split over `data` on data_dim and over `model` on model_dim."""
        d = self.d if data_dim is not None else 1
        m = self.m if model_dim is not None else 1
        if d * m == 1:
            return "{replicated}"
        tile = [1] * rank
        if data_dim is not None:
            tile[data_dim] = d
        if model_dim is not None:
            tile[model_dim] = m
        replicate = self.n // (d * m)  # devices holding the same tile
        # The iota runs over (data, model). A model axis that comes first in the tile order, or
        # that is tiled while data is replicated, needs the transposed iota.
        transposed = (model_dim is not None and self.d > 1 and self.m > 1 and
                      (data_dim is None or model_dim < data_dim))
        iota = "<=[%d,%d]T(1,0)" % (self.d, self.m) if transposed else "<=[%d]" % self.n
        dims = ",".join(str(t) for t in tile)
        if replicate > 1:
            return "{devices=[%s,%d]%s last_tile_dim_replicate}" % (dims, replicate, iota)
        return "{devices=[%s]%s}" % (dims, iota)


class Writer:
    """Emits instructions with module-unique names `%<kind>.<N>` and JAX-like metadata."""

    def __init__(self, out):
        self.out = out
        self.next_id = 1
        self.scope = ""
        self.n_instrs = 0

    def name(self, kind):
        n = "%s.%d" % (kind, self.next_id)
        self.next_id += 1
        return n

    def emit(self, kind, shape, text, sharding=None, op=None, line_key=None, root=False):
        """text: the opcode and operands plus attributes. Returns the new instruction's name."""
        name = self.name(kind)
        parts = ["  %s%%%s = %s %s" % ("ROOT " if root else "", name, shape, text)]
        if sharding is not None:
            parts.append(", sharding=" + sharding)
        if op is not None:
            op_type, op_name = op
            parts.append(', metadata={op_type="%s" op_name="jit(train_step)/%s%s" source_file="%s" '
                         'source_line=%d}' % (op_type, self.scope, op_name, SOURCE_FILE, LINES[line_key]))
        self.out.write("".join(parts) + "\n")
        self.n_instrs += 1
        return name


def shape(dims, dtype="f32"):
    if not dims:
        return dtype + "[]"
    layout = ",".join(str(i) for i in reversed(range(len(dims))))
    return "%s[%s]{%s}" % (dtype, ",".join(str(d) for d in dims), layout)


class Model:
    def __init__(self, a, out):
        self.a = a
        self.mesh = Mesh(a.data, a.model)
        self.w = Writer(out)
        self.hd = a.hidden // a.heads
        self.params = []  # (name, dims, dtype, sharding, op_name), in parameter order

    # -- parameters ---------------------------------------------------------------------------
    def add_param(self, label, dims, sharding, op_name, dtype="f32"):
        name = "%s.%d" % (label, self.w.next_id)
        self.w.next_id += 1
        self.params.append((name, dims, dtype, sharding, op_name))
        return name

    def declare_params(self):
        a, mesh = self.a, self.mesh
        B, S, H, V, F = a.batch, a.seq, a.hidden, a.vocab, a.ffn
        NH, HD = a.heads, self.hd
        self.p_embed = self.add_param("Arg_embed", [V, H], mesh.sharding(2, model_dim=0),
                                      "params['embed']['embedding']")
        self.p_ids = self.add_param("Arg_tokens", [B, S], mesh.sharding(2, data_dim=0),
                                    "batch['tokens']", "s32")
        self.p_labels = self.add_param("Arg_labels", [B, S], mesh.sharding(2, data_dim=0),
                                       "batch['labels']", "s32")
        self.p_layers = []
        rep = mesh.sharding(1)
        for i in range(a.layers):
            pre = "params['layer_%d']" % i
            layer = {
                "ln1_g": self.add_param("Arg_ln1_scale", [H], rep, pre + "['ln1']['scale']"),
                "ln1_b": self.add_param("Arg_ln1_bias", [H], rep, pre + "['ln1']['bias']"),
                "wq": self.add_param("Arg_wq", [H, NH, HD], mesh.sharding(3, model_dim=1),
                                     pre + "['attn']['wq']"),
                "wk": self.add_param("Arg_wk", [H, NH, HD], mesh.sharding(3, model_dim=1),
                                     pre + "['attn']['wk']"),
                "wv": self.add_param("Arg_wv", [H, NH, HD], mesh.sharding(3, model_dim=1),
                                     pre + "['attn']['wv']"),
                "wo": self.add_param("Arg_wo", [NH, HD, H], mesh.sharding(3, model_dim=0),
                                     pre + "['attn']['wo']"),
                "ln2_g": self.add_param("Arg_ln2_scale", [H], rep, pre + "['ln2']['scale']"),
                "ln2_b": self.add_param("Arg_ln2_bias", [H], rep, pre + "['ln2']['bias']"),
                "w1": self.add_param("Arg_w_up", [H, F], mesh.sharding(2, model_dim=1),
                                     pre + "['mlp']['w_up']"),
                "w2": self.add_param("Arg_w_down", [F, H], mesh.sharding(2, model_dim=0),
                                     pre + "['mlp']['w_down']"),
            }
            self.p_layers.append(layer)
        self.p_lnf_g = self.add_param("Arg_lnf_scale", [H], rep, "params['ln_f']['scale']")
        self.p_lnf_b = self.add_param("Arg_lnf_bias", [H], rep, "params['ln_f']['bias']")

    # -- helpers ------------------------------------------------------------------------------
    def const(self, value, dtype="f32"):
        return self.w.emit("constant", dtype + "[]", "constant(%s)" % value)

    def bcast(self, operand, dims, bdims, sh, op, key):
        return self.w.emit("broadcast", shape(dims), "broadcast(%%%s), dimensions={%s}"
                           % (operand, ",".join(str(d) for d in bdims)), sh, op, key)

    def scalar_bcast(self, value, dims, sh, op, key):
        return self.bcast(self.const(value), dims, [], sh, op, key)

    def binary(self, opcode, x, y, dims, sh, op, key, dtype="f32"):
        return self.w.emit(opcode, shape(dims, dtype), "%s(%%%s, %%%s)" % (opcode, x, y), sh, op, key)

    def unary(self, opcode, x, dims, sh, op, key):
        return self.w.emit(opcode, shape(dims), "%s(%%%s)" % (opcode, x), sh, op, key)

    def reduce(self, x, init, rdims, out_dims, comp, sh, op, key):
        return self.w.emit("reduce", shape(out_dims), "reduce(%%%s, %%%s), dimensions={%s}, to_apply=%%%s"
                           % (x, init, ",".join(str(d) for d in rdims), comp), sh, op, key)

    def dot(self, lhs, rhs, out_dims, dnums, sh, op, key):
        return self.w.emit("dot", shape(out_dims), "dot(%%%s, %%%s), %s" % (lhs, rhs, dnums), sh, op, key)

    # -- blocks -------------------------------------------------------------------------------
    def layer_norm(self, x, gamma, beta, scope):
        a, mesh = self.a, self.mesh
        B, S, H = a.batch, a.seq, a.hidden
        act3, act2 = mesh.sharding(3, data_dim=0), mesh.sharding(2, data_dim=0)
        p = scope + "/"
        zero = self.const(0)
        s = self.reduce(x, zero, [2], [B, S], "region_add", act2, ("reduce_sum", p + "reduce_sum"), "ln_mean")
        inv_h = self.scalar_bcast(repr(1.0 / H), [B, S], act2, ("div", p + "div"), "ln_mean")
        mean = self.binary("multiply", s, inv_h, [B, S], act2, ("div", p + "div"), "ln_mean")
        mean3 = self.bcast(mean, [B, S, H], [0, 1], act3, ("sub", p + "sub"), "ln_var")
        xc = self.binary("subtract", x, mean3, [B, S, H], act3, ("sub", p + "sub"), "ln_var")
        sq = self.binary("multiply", xc, xc, [B, S, H], act3, ("integer_pow", p + "integer_pow"), "ln_var")
        zero2 = self.const(0)
        vs = self.reduce(sq, zero2, [2], [B, S], "region_add", act2, ("reduce_sum", p + "reduce_sum"), "ln_var")
        var = self.binary("multiply", vs, inv_h, [B, S], act2, ("div", p + "div"), "ln_var")
        eps = self.scalar_bcast("1e-06", [B, S], act2, ("add", p + "add"), "ln_norm")
        ve = self.binary("add", var, eps, [B, S], act2, ("add", p + "add"), "ln_norm")
        r = self.unary("rsqrt", ve, [B, S], act2, ("rsqrt", p + "rsqrt"), "ln_norm")
        r3 = self.bcast(r, [B, S, H], [0, 1], act3, ("mul", p + "mul"), "ln_norm")
        xn = self.binary("multiply", xc, r3, [B, S, H], act3, ("mul", p + "mul"), "ln_norm")
        g3 = self.bcast(gamma, [B, S, H], [2], act3, ("mul", p + "mul"), "ln_scale")
        xg = self.binary("multiply", xn, g3, [B, S, H], act3, ("mul", p + "mul"), "ln_scale")
        b3 = self.bcast(beta, [B, S, H], [2], act3, ("add", p + "add"), "ln_scale")
        return self.binary("add", xg, b3, [B, S, H], act3, ("add", p + "add"), "ln_scale")

    def attention(self, x, L):
        a, mesh = self.a, self.mesh
        B, S, H, NH, HD = a.batch, a.seq, a.hidden, a.heads, self.hd
        heads4 = mesh.sharding(4, data_dim=0, model_dim=2)   # [B,S,NH,HD]
        bh4 = mesh.sharding(4, data_dim=0, model_dim=1)      # [B,NH,S,*]
        bh3 = mesh.sharding(3, data_dim=0, model_dim=1)      # [B,NH,S]
        act3 = mesh.sharding(3, data_dim=0)
        proj = "lhs_contracting_dims={2}, rhs_contracting_dims={0}"
        q = self.dot(x, L["wq"], [B, S, NH, HD], proj, heads4, ("dot_general", "attn/q/dot_general"), "q")
        k = self.dot(x, L["wk"], [B, S, NH, HD], proj, heads4, ("dot_general", "attn/k/dot_general"), "k")
        v = self.dot(x, L["wv"], [B, S, NH, HD], proj, heads4, ("dot_general", "attn/v/dot_general"), "v")
        sc = self.dot(q, k, [B, NH, S, S], "lhs_batch_dims={0,2}, lhs_contracting_dims={3}, "
                      "rhs_batch_dims={0,2}, rhs_contracting_dims={3}", bh4,
                      ("dot_general", "attn/bqhd,bkhd->bhqk/dot_general"), "scores")
        scale = self.scalar_bcast(repr(1.0 / HD ** 0.5), [B, NH, S, S], bh4, ("mul", "attn/mul"), "scale")
        sc = self.binary("multiply", sc, scale, [B, NH, S, S], bh4, ("mul", "attn/mul"), "scale")
        sm = "attn/softmax/"
        ninf = self.const("-inf")
        mx = self.reduce(sc, ninf, [3], [B, NH, S], "region_max", bh3, ("reduce_max", sm + "reduce_max"), "softmax")
        mx4 = self.bcast(mx, [B, NH, S, S], [0, 1, 2], bh4, ("sub", sm + "sub"), "softmax")
        d = self.binary("subtract", sc, mx4, [B, NH, S, S], bh4, ("sub", sm + "sub"), "softmax")
        e = self.unary("exponential", d, [B, NH, S, S], bh4, ("exp", sm + "exp"), "softmax")
        zero = self.const(0)
        sm_sum = self.reduce(e, zero, [3], [B, NH, S], "region_add", bh3, ("reduce_sum", sm + "reduce_sum"),
                             "softmax")
        sum4 = self.bcast(sm_sum, [B, NH, S, S], [0, 1, 2], bh4, ("div", sm + "div"), "softmax")
        pr = self.binary("divide", e, sum4, [B, NH, S, S], bh4, ("div", sm + "div"), "softmax")
        ctx = self.dot(pr, v, [B, NH, S, HD], "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, "
                       "rhs_batch_dims={0,2}, rhs_contracting_dims={1}", bh4,
                       ("dot_general", "attn/bhqk,bkhd->bhqd/dot_general"), "context")
        return self.dot(ctx, L["wo"], [B, S, H], "lhs_contracting_dims={1,3}, rhs_contracting_dims={0,1}",
                        act3, ("dot_general", "attn/out/dot_general"), "attn_out")

    def mlp(self, x, L):
        a, mesh = self.a, self.mesh
        B, S, H, F = a.batch, a.seq, a.hidden, a.ffn
        ffn3 = mesh.sharding(3, data_dim=0, model_dim=2)
        act3 = mesh.sharding(3, data_dim=0)
        h = self.dot(x, L["w1"], [B, S, F], "lhs_contracting_dims={2}, rhs_contracting_dims={0}", ffn3,
                     ("dot_general", "mlp/up/dot_general"), "up")
        c = self.scalar_bcast("1.702", [B, S, F], ffn3, ("mul", "mlp/gelu/mul"), "gelu")
        hc = self.binary("multiply", h, c, [B, S, F], ffn3, ("mul", "mlp/gelu/mul"), "gelu")
        sg = self.unary("logistic", hc, [B, S, F], ffn3, ("logistic", "mlp/gelu/logistic"), "gelu")
        g = self.binary("multiply", h, sg, [B, S, F], ffn3, ("mul", "mlp/gelu/mul"), "gelu")
        return self.dot(g, L["w2"], [B, S, H], "lhs_contracting_dims={2}, rhs_contracting_dims={0}", act3,
                        ("dot_general", "mlp/down/dot_general"), "down")

    def loss(self, x):
        a, mesh = self.a, self.mesh
        B, S, H, V = a.batch, a.seq, a.hidden, a.vocab
        voc3 = mesh.sharding(3, data_dim=0, model_dim=2)
        act2 = mesh.sharding(2, data_dim=0)
        rep = mesh.sharding(0)
        lg = self.dot(x, self.p_embed, [B, S, V], "lhs_contracting_dims={2}, rhs_contracting_dims={1}", voc3,
                      ("dot_general", "logits/dot_general"), "logits")
        ls = "loss/"
        ninf = self.const("-inf")
        mx = self.reduce(lg, ninf, [2], [B, S], "region_max", act2, ("reduce_max", ls + "reduce_max"), "loss_lse")
        mx3 = self.bcast(mx, [B, S, V], [0, 1], voc3, ("sub", ls + "sub"), "loss_lse")
        d = self.binary("subtract", lg, mx3, [B, S, V], voc3, ("sub", ls + "sub"), "loss_lse")
        e = self.unary("exponential", d, [B, S, V], voc3, ("exp", ls + "exp"), "loss_lse")
        zero = self.const(0)
        se = self.reduce(e, zero, [2], [B, S], "region_add", act2, ("reduce_sum", ls + "reduce_sum"), "loss_lse")
        lse = self.unary("log", se, [B, S], act2, ("log", ls + "log"), "loss_lse")
        lse = self.binary("add", lse, mx, [B, S], act2, ("add", ls + "add"), "loss_lse")
        io = self.w.emit("iota", shape([B, S, V], "s32"), "iota(), iota_dimension=2", voc3,
                         ("iota", ls + "iota"), "loss_label")
        lb3 = self.w.emit("broadcast", shape([B, S, V], "s32"), "broadcast(%%%s), dimensions={0,1}"
                          % self.p_labels, voc3, ("eq", ls + "eq"), "loss_label")
        hit = self.w.emit("compare", shape([B, S, V], "pred"), "compare(%%%s, %%%s), direction=EQ" % (io, lb3),
                          voc3, ("eq", ls + "eq"), "loss_label")
        zeros = self.scalar_bcast("0", [B, S, V], voc3, ("select_n", ls + "select_n"), "loss_label")
        picked = self.w.emit("select", shape([B, S, V]), "select(%%%s, %%%s, %%%s)" % (hit, lg, zeros), voc3,
                             ("select_n", ls + "select_n"), "loss_label")
        zero2 = self.const(0)
        ll = self.reduce(picked, zero2, [2], [B, S], "region_add", act2, ("reduce_sum", ls + "reduce_sum"),
                         "loss_label")
        nll = self.binary("subtract", lse, ll, [B, S], act2, ("sub", ls + "sub"), "loss_label")
        zero3 = self.const(0)
        tot = self.reduce(nll, zero3, [0, 1], [], "region_add", rep, ("reduce_sum", ls + "reduce_sum"), "loss_mean")
        inv = self.const(repr(1.0 / (B * S)))
        return self.w.emit("multiply", "f32[]", "multiply(%%%s, %%%s)" % (tot, inv), rep,
                           ("div", ls + "div"), "loss_mean", root=True)

    # -- module -------------------------------------------------------------------------------
    def body(self):
        """Writes the entry computation's instructions to self.w (after the parameters)."""
        a, mesh = self.a, self.mesh
        B, S, H = a.batch, a.seq, a.hidden
        act3 = mesh.sharding(3, data_dim=0)
        w = self.w
        for i, (name, dims, dtype, sh, op_name) in enumerate(self.params):
            w.out.write('  %%%s = %s parameter(%d), sharding=%s, metadata={op_name="%s"}\n'
                        % (name, shape(dims, dtype), i, sh, op_name.replace("'", "\\'")))
            w.n_instrs += 1
        w.scope = ""
        x = w.emit("gather", shape([B, S, H]), "gather(%%%s, %%%s), offset_dims={2}, collapsed_slice_dims={0}, "
                   "start_index_map={0}, index_vector_dim=2, slice_sizes={1,%d}" % (self.p_embed, self.p_ids, H),
                   act3, ("gather", "embed/jit(_take)/gather"), "embed")
        for i, L in enumerate(self.p_layers):
            w.scope = "layer_%d/" % i
            h = self.layer_norm(x, L["ln1_g"], L["ln1_b"], "attn/ln")
            h = self.attention(h, L)
            x = self.binary("add", x, h, [B, S, H], act3, ("add", "attn/add"), "attn_res")
            h = self.layer_norm(x, L["ln2_g"], L["ln2_b"], "mlp/ln")
            h = self.mlp(h, L)
            x = self.binary("add", x, h, [B, S, H], act3, ("add", "mlp/add"), "mlp_res")
        w.scope = ""
        x = self.layer_norm(x, self.p_lnf_g, self.p_lnf_b, "ln_f")
        self.loss(x)

    def write(self, out):
        a = self.a
        self.declare_params()
        sig = ", ".join("%s: %s" % (n, shape(d, t).split("{")[0]) for n, d, t, _, _ in self.params)
        layouts = ", ".join(shape(d, t) for _, d, t, _, _ in self.params)
        out.write("HloModule jit_train_step, entry_computation_layout={(%s)->f32[]}, num_partitions=%d\n\n"
                  % (layouts, self.mesh.n))
        for region, op in (("region_add", "add"), ("region_max", "maximum")):
            x, y, r = self.w.name("Arg_0"), self.w.name("Arg_1"), self.w.name(op)
            out.write("%%%s (%s: f32[], %s: f32[]) -> f32[] {\n"
                      "  %%%s = f32[] parameter(0)\n"
                      "  %%%s = f32[] parameter(1)\n"
                      "  ROOT %%%s = f32[] %s(%%%s, %%%s)\n"
                      "}\n\n" % (region, x, y, x, y, r, op, x, y))
        out.write("ENTRY %%main (%s) -> f32[] {\n" % sig)
        self.body()
        out.write("}\n")


def main(argv):
    a = parse_args(argv)
    if a.output == "-":
        out = sys.stdout
        Model(a, out).write(out)
        out.flush()
    else:
        with open(a.output, "w", encoding="ascii", newline="\n", buffering=1 << 20) as out:
            Model(a, out).write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
