"""Llama-style decoder layers: RMSNorm, RoPE, grouped-query attention, SwiGLU; the forward
pass of a stack (unrolled) and a training step (loss, grads, AdamW update)."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from common import (HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM, VOCAB, SEQ, BATCH, Roles,
                    make_mesh, sds, constrain, rmsnorm, rope)


def layer_param_specs(ro):
    return {
        "attn_norm": ro.vec, "mlp_norm": ro.vec,
        "wq": ro.w_col, "wk": ro.w_col, "wv": ro.w_col, "wo": ro.w_row,
        "w_gate": ro.w_col, "w_up": ro.w_col, "w_down": ro.w_row,
    }


def layer_param_shapes():
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    return {
        "attn_norm": (HIDDEN,), "mlp_norm": (HIDDEN,),
        "wq": (HIDDEN, q), "wk": (HIDDEN, kv), "wv": (HIDDEN, kv), "wo": (q, HIDDEN),
        "w_gate": (HIDDEN, FFN), "w_up": (HIDDEN, FFN), "w_down": (FFN, HIDDEN),
    }


def decoder_layer(p, x, positions, mesh, ro):
    b, s, _ = x.shape
    h = rmsnorm(x, p["attn_norm"])
    q = (h @ p["wq"]).reshape(b, s, HEADS, HEAD_DIM)
    k = (h @ p["wk"]).reshape(b, s, KV_HEADS, HEAD_DIM)
    v = (h @ p["wv"]).reshape(b, s, KV_HEADS, HEAD_DIM)
    q, k = rope(q, positions), rope(k, positions)
    g = HEADS // KV_HEADS
    q = q.reshape(b, s, KV_HEADS, g, HEAD_DIM)
    logits = jnp.einsum("bskgd,btkd->bkgst", q, k).astype(jnp.float32) / (HEAD_DIM ** 0.5)
    mask = jnp.tril(jnp.ones((s, s), dtype=bool))
    logits = jnp.where(mask, logits, -1e9)
    w = jax.nn.softmax(logits, axis=-1).astype(x.dtype)
    o = jnp.einsum("bkgst,btkd->bskgd", w, v).reshape(b, s, HEADS * HEAD_DIM)
    x = x + constrain(o @ p["wo"], mesh, ro.act)
    h = rmsnorm(x, p["mlp_norm"])
    a = jax.nn.silu(h @ p["w_gate"]) * (h @ p["w_up"])
    a = constrain(a, mesh, ro.hidden_act)
    return x + constrain(a @ p["w_down"], mesh, ro.act)


def stack_args(mesh, ro, layers, batch=BATCH):
    specs, shapes = layer_param_specs(ro), layer_param_shapes()
    params = [{k: sds(shapes[k], mesh, specs[k]) for k in shapes} for _ in range(layers)]
    x = sds((batch, SEQ, HIDDEN), mesh, ro.act)
    pos = sds((batch, SEQ), mesh, ro.tokens, jnp.int32)
    return params, x, pos


def forward_program(kind, n, layers):
    mesh, ro = make_mesh(kind, n), Roles(kind)

    def fwd(params, x, pos):
        for p in params:
            x = decoder_layer(p, x, pos, mesh, ro)
        return x

    params, x, pos = stack_args(mesh, ro, layers)
    return jax.jit(fwd, out_shardings=x.sharding), (params, x, pos)


def train_program(kind, n, layers):
    mesh, ro = make_mesh(kind, n), Roles(kind)
    emb_spec = ro.emb

    def loss_fn(params, emb, tokens, targets, pos):
        x = jnp.take(emb, tokens, axis=0)
        x = constrain(x, mesh, ro.act)
        for p in params:
            x = decoder_layer(p, x, pos, mesh, ro)
        logits = (x @ emb.T).astype(jnp.float32)
        logz = jax.nn.logsumexp(logits, axis=-1)
        gold = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
        return jnp.mean(logz - gold)

    def adamw(p, g, m, v, step, lr=1e-4, b1=0.9, b2=0.95, eps=1e-8, wd=0.1):
        m = b1 * m + (1 - b1) * g.astype(jnp.float32)
        v = b2 * v + (1 - b2) * jnp.square(g.astype(jnp.float32))
        mh = m / (1 - b1 ** step)
        vh = v / (1 - b2 ** step)
        new = p.astype(jnp.float32) - lr * (mh / (jnp.sqrt(vh) + eps) + wd * p.astype(jnp.float32))
        return new.astype(p.dtype), m, v

    def step_fn(state, tokens, targets, pos):
        params, emb, m, v, step = state
        loss, (gp, ge) = jax.value_and_grad(loss_fn, argnums=(0, 1))(
            params, emb, tokens, targets, pos)
        step = step + 1
        allp = jax.tree_util.tree_leaves((params, emb))
        allg = jax.tree_util.tree_leaves((gp, ge))
        outs = [adamw(p, g, mm, vv, step) for p, g, mm, vv in
                zip(allp, allg, jax.tree_util.tree_leaves(m), jax.tree_util.tree_leaves(v))]
        treedef = jax.tree_util.tree_structure((params, emb))
        newp = jax.tree_util.tree_unflatten(treedef, [o[0] for o in outs])
        newm = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(m), [o[1] for o in outs])
        newv = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(v), [o[2] for o in outs])
        return (newp[0], newp[1], newm, newv, step), loss

    params, x, pos = stack_args(mesh, ro, layers, batch=BATCH // 2 if n < 64 else BATCH)
    b = x.shape[0]
    emb = sds((VOCAB, HIDDEN), mesh, emb_spec)
    f32 = lambda t: jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(a.shape, jnp.float32, sharding=a.sharding), t)
    m = f32((params, emb))
    v = f32((params, emb))
    step = sds((), mesh, P(), jnp.float32)
    tokens = sds((b, SEQ), mesh, ro.tokens, jnp.int32)
    targets = sds((b, SEQ), mesh, ro.tokens, jnp.int32)
    pos = sds((b, SEQ), mesh, ro.tokens, jnp.int32)
    state = (params, emb, m, v, step)
    state_sh = jax.tree_util.tree_map(lambda a: a.sharding, state)
    return jax.jit(step_fn, out_shardings=(state_sh, None), donate_argnums=0), \
        (state, tokens, targets, pos)


KINDS = ("data", "fsdp", "tensor", "dp_tp", "seq")


def programs():
    for kind in KINDS:
        for n in (4, 8, 16, 64):
            yield ("llama_fwd", kind, n, "layers2", lambda k=kind, n=n: forward_program(k, n, 2))
            yield ("llama_train", kind, n, "layers1",
                   lambda k=kind, n=n: train_program(k, n, 1))
    # deep unrolled stacks: the largest modules of the corpus
    yield ("llama_train", "dp_tp", 8, "layers32", lambda: train_program("dp_tp", 8, 32))
    yield ("llama_fwd", "tensor", 64, "layers96", lambda: forward_program("tensor", 64, 96))
    yield ("llama_train", "fsdp", 16, "layers16", lambda: train_program("fsdp", 16, 16))
