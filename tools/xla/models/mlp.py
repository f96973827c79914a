"""Megatron MLP: column-parallel then row-parallel linear with GELU between."""

import jax
import jax.numpy as jnp

from common import HIDDEN, SEQ, BATCH, Roles, make_mesh, sds, constrain

FFN4 = 4 * HIDDEN


def program(kind, n, train):
    mesh, ro = make_mesh(kind, n), Roles(kind)

    def mlp(w1, b1, w2, x):
        h = jax.nn.gelu(x @ w1 + b1)
        h = constrain(h, mesh, ro.hidden_act)
        return constrain(h @ w2, mesh, ro.act)

    def loss(w1, b1, w2, x):
        return jnp.mean(jnp.square(mlp(w1, b1, w2, x).astype(jnp.float32)))

    w1 = sds((HIDDEN, FFN4), mesh, ro.w_col)
    b1 = sds((FFN4,), mesh, jax.sharding.PartitionSpec(ro.model_axis))
    w2 = sds((FFN4, HIDDEN), mesh, ro.w_row)
    x = sds((BATCH, SEQ, HIDDEN), mesh, ro.act)
    if train:
        return jax.jit(jax.grad(loss, argnums=(0, 1, 2))), (w1, b1, w2, x)
    return jax.jit(mlp, out_shardings=x.sharding), (w1, b1, w2, x)


def programs():
    for kind in ("data", "fsdp", "tensor", "dp_tp", "seq"):
        for n in (4, 8, 16, 64):
            yield ("mlp", kind, n, "fwd", lambda k=kind, n=n: program(k, n, False))
            yield ("mlp", kind, n, "grad", lambda k=kind, n=n: program(k, n, True))
