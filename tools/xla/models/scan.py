"""A lax.scan over stacked layers (a while loop in HLO): a pre-norm residual MLP block per
layer, weights stacked on a leading layer dimension, forward and with gradients."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from common import HIDDEN, SEQ, BATCH, Roles, make_mesh, sds, constrain, rmsnorm

LAYERS = 8


def program(kind, n, grad):
    mesh, ro = make_mesh(kind, n), Roles(kind)

    def body(x, p):
        w1, w2, g = p
        h = jax.nn.gelu(rmsnorm(x, g) @ w1)
        h = constrain(h, mesh, ro.hidden_act)
        return constrain(x + h @ w2, mesh, ro.act), None

    def fwd(w1, w2, g, x):
        y, _ = jax.lax.scan(body, x, (w1, w2, g))
        return y

    def loss(w1, w2, g, x):
        return jnp.mean(jnp.square(fwd(w1, w2, g, x).astype(jnp.float32)))

    w1 = sds((LAYERS, HIDDEN, 4 * HIDDEN), mesh, P(None, *ro.w_col))
    w2 = sds((LAYERS, 4 * HIDDEN, HIDDEN), mesh, P(None, *ro.w_row))
    g = sds((LAYERS, HIDDEN), mesh, P(None, *ro.vec))
    x = sds((BATCH, SEQ, HIDDEN), mesh, ro.act)
    if grad:
        return jax.jit(jax.grad(loss, argnums=(0, 1, 2))), (w1, w2, g, x)
    return jax.jit(fwd, out_shardings=x.sharding), (w1, w2, g, x)


def programs():
    for kind in ("data", "fsdp", "tensor", "dp_tp", "seq"):
        for n in (4, 8, 16, 64):
            yield ("scan_layers", kind, n, "fwd", lambda k=kind, n=n: program(k, n, False))
            yield ("scan_layers", kind, n, "grad", lambda k=kind, n=n: program(k, n, True))
