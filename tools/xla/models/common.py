"""Shared pieces of the corpus models: meshes and the sharding roles of each mesh kind.

A mesh kind names how a program is parallelised; `roles(kind)` gives the PartitionSpec of
each kind of array (activations [B,S,H], column- and row-parallel weights, vectors,
embeddings, expert weights). The models only ask for roles, so every family runs on every
mesh kind it makes sense for.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

HIDDEN = 1024
FFN = 2816
HEADS = 8
KV_HEADS = 2
HEAD_DIM = 128
VOCAB = 32000
SEQ = 256
BATCH = 64

MESH_KINDS = ("data", "fsdp", "tensor", "dp_tp", "seq", "expert", "dp_ep")


def mesh_shape(kind, n):
    if kind in ("dp_tp", "dp_ep"):
        a = {4: 2, 8: 2, 16: 4, 64: 8}[n]
        names = ("data", "model") if kind == "dp_tp" else ("data", "expert")
        return (a, n // a), names
    return (n,), ({"data": "data", "fsdp": "fsdp", "tensor": "model", "seq": "seq",
                   "expert": "expert"}[kind],)


def make_mesh(kind, n):
    shape, names = mesh_shape(kind, n)
    return jax.make_mesh(shape, names, axis_types=(jax.sharding.AxisType.Auto,) * len(shape),
                         devices=jax.devices()[:n])


class Roles:
    """PartitionSpecs by role for one mesh kind."""

    def __init__(self, kind):
        self.kind = kind
        r = P()
        batch = {"data": "data", "fsdp": "fsdp", "dp_tp": "data", "dp_ep": "data",
                 "expert": "expert"}.get(kind)
        model = {"tensor": "model", "dp_tp": "model"}.get(kind)
        self.batch_axis, self.model_axis = batch, model
        self.act = P(batch, "seq" if kind == "seq" else None, None)      # [B, S, H]
        self.tokens = P(batch, "seq" if kind == "seq" else None)         # [B, S]
        self.w_col = P("fsdp", None) if kind == "fsdp" else P(None, model)   # [H, F]
        self.w_row = P("fsdp", None) if kind == "fsdp" else P(model, None)   # [F, H]
        self.vec = P("fsdp") if kind == "fsdp" else r                    # [H]
        self.emb = P(model, None) if model else (P(None, "fsdp") if kind == "fsdp" else r)
        self.expert = "expert" if kind in ("expert", "dp_ep") else None
        self.hidden_act = P(batch, "seq" if kind == "seq" else None, model)  # [B, S, F]


def sds(shape, mesh, spec, dtype=jnp.bfloat16):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))


def constrain(x, mesh, spec):
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))


def rmsnorm(x, w, eps=1e-6):
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (y * w.astype(jnp.float32)).astype(x.dtype)


def rope(x, positions):
    """Rotary position embedding on [B, S, heads, D]."""
    d = x.shape[-1]
    inv = 1.0 / (10000.0 ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d))
    ang = positions[:, :, None].astype(jnp.float32) * inv[None, None, :]
    sin, cos = jnp.sin(ang)[:, :, None, :], jnp.cos(ang)[:, :, None, :]
    x1, x2 = x[..., ::2].astype(jnp.float32), x[..., 1::2].astype(jnp.float32)
    y = jnp.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
    return y.reshape(x.shape).astype(x.dtype)
