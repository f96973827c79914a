"""Mixture of experts with top-2 routing (GShard-style dispatch/combine with an expert
capacity) and expert parallelism: expert weights and dispatched tokens sharded on the
expert axis."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from common import HIDDEN, SEQ, Roles, make_mesh, sds, constrain

EXPERTS = 64
EXPERT_FFN = 2048
TOKENS_PER_GROUP = 1024


def program(kind, n):
    mesh, ro = make_mesh(kind, n), Roles(kind)
    ea = ro.expert
    ba = ro.batch_axis
    groups = 64
    cap = 2 * TOKENS_PER_GROUP // EXPERTS * 2

    def moe(router, w_in, w_out, x):
        # x: [G, T, H] token groups
        logits = jnp.einsum("gth,he->gte", x, router).astype(jnp.float32)
        probs = jax.nn.softmax(logits, axis=-1)
        top_p, top_i = jax.lax.top_k(probs, 2)
        top_p = top_p / jnp.sum(top_p, axis=-1, keepdims=True)
        onehot = jax.nn.one_hot(top_i, EXPERTS, dtype=jnp.float32)        # [G,T,2,E]
        pos = jnp.cumsum(onehot.reshape(groups, -1, EXPERTS), axis=1).reshape(onehot.shape)
        pos = (pos - 1.0) * onehot
        keep = (pos < cap) * onehot
        slot = jax.nn.one_hot(jnp.sum(pos * keep, axis=-1), cap, dtype=jnp.float32)  # [G,T,2,C]
        dispatch = jnp.einsum("gtke,gtkc->gtec", keep, slot)
        combine = jnp.einsum("gtke,gtkc,gtk->gtec", keep, slot, top_p)
        xe = jnp.einsum("gtec,gth->egch", dispatch.astype(x.dtype), x)
        xe = constrain(xe, mesh, P(ea, ba if ba != ea else None, None, None))
        h = jax.nn.gelu(jnp.einsum("egch,ehf->egcf", xe, w_in))
        ye = jnp.einsum("egcf,efh->egch", h, w_out)
        ye = constrain(ye, mesh, P(ea, ba if ba != ea else None, None, None))
        y = jnp.einsum("egch,gtec->gth", ye, combine.astype(x.dtype))
        return constrain(y, mesh, P(ba, None, None))

    tok_axis = ba
    router = sds((HIDDEN, EXPERTS), mesh, P())
    w_in = sds((EXPERTS, HIDDEN, EXPERT_FFN), mesh, P(ea, None, ro.model_axis))
    w_out = sds((EXPERTS, EXPERT_FFN, HIDDEN), mesh, P(ea, ro.model_axis, None))
    x = sds((groups, TOKENS_PER_GROUP, HIDDEN), mesh, P(tok_axis, None, None))
    return jax.jit(moe, out_shardings=x.sharding), (router, w_in, w_out, x)


def programs():
    for kind in ("expert", "dp_ep", "data", "tensor"):
        for n in (4, 8, 16, 64):
            yield ("moe", kind, n, "top2", lambda k=kind, n=n: program(k, n))
