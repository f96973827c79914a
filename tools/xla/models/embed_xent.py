"""Token embedding and the output head: embedding lookup, final RMSNorm, vocabulary
projection (vocabulary-parallel under tensor meshes) and the cross-entropy loss, forward
and with gradients."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from common import HIDDEN, VOCAB, SEQ, BATCH, Roles, make_mesh, sds, constrain, rmsnorm


def program(kind, n, grad):
    mesh, ro = make_mesh(kind, n), Roles(kind)

    def loss(emb, norm, head, tokens, targets):
        x = constrain(jnp.take(emb, tokens, axis=0), mesh, ro.act)
        x = rmsnorm(x, norm)
        logits = constrain((x @ head).astype(jnp.float32), mesh,
                           P(ro.batch_axis, "seq" if kind == "seq" else None, ro.model_axis))
        logz = jax.nn.logsumexp(logits, axis=-1)
        onehot = jax.nn.one_hot(targets, VOCAB, dtype=jnp.float32)
        return jnp.mean(logz - jnp.sum(logits * onehot, axis=-1))

    emb = sds((VOCAB, HIDDEN), mesh, ro.emb)
    norm = sds((HIDDEN,), mesh, ro.vec)
    head = sds((HIDDEN, VOCAB), mesh, P(None, ro.model_axis) if ro.model_axis else ro.w_col)
    tokens = sds((BATCH, SEQ), mesh, ro.tokens, jnp.int32)
    targets = sds((BATCH, SEQ), mesh, ro.tokens, jnp.int32)
    f = jax.value_and_grad(loss, argnums=(0, 1, 2)) if grad else loss
    return jax.jit(f), (emb, norm, head, tokens, targets)


def programs():
    for kind in ("data", "fsdp", "tensor", "dp_tp", "seq"):
        for n in (4, 8, 16, 64):
            yield ("embed_xent", kind, n, "loss", lambda k=kind, n=n: program(k, n, False))
            yield ("embed_xent", kind, n, "grad", lambda k=kind, n=n: program(k, n, True))
