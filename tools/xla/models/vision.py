"""Vision blocks: a ViT patch embedding (16x16 patches, a strided convolution) followed by
a transformer-style MLP, and a ResNet basic block (two 3x3 convolutions with batch norm and
a residual), data-, tensor- and spatially-partitioned."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from common import HIDDEN, Roles, make_mesh, sds, constrain, rmsnorm


def vit_program(kind, n):
    mesh, ro = make_mesh(kind, n), Roles(kind)
    ba, ma = ro.batch_axis, ro.model_axis

    def patch_embed(w, b, w1, w2, img):
        y = jax.lax.conv_general_dilated(img, w, (16, 16), "VALID",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = y + b
        bsz, hh, ww, c = y.shape
        t = constrain(y.reshape(bsz, hh * ww, c), mesh, P(ba, None, None))
        h = jax.nn.gelu(rmsnorm(t, jnp.ones((c,), t.dtype)) @ w1)
        h = constrain(h, mesh, P(ba, None, ma))
        return constrain(t + h @ w2, mesh, P(ba, None, None))

    fs = "fsdp" if kind == "fsdp" else None
    w = sds((16, 16, 3, HIDDEN), mesh, P(None, None, None, ma or fs))
    b = sds((HIDDEN,), mesh, P(ma))
    w1 = sds((HIDDEN, 4 * HIDDEN), mesh, ro.w_col)
    w2 = sds((4 * HIDDEN, HIDDEN), mesh, ro.w_row)
    img = sds((64, 224, 224, 3), mesh, P(ba, None, None, None))
    return jax.jit(patch_embed), (w, b, w1, w2, img)


def resnet_program(kind, n):
    mesh, ro = make_mesh(kind, n), Roles(kind)
    ba, ma = ro.batch_axis, ro.model_axis
    spatial = "seq" if kind == "seq" else None
    act = P(ba, spatial, None, ma)

    def bn(x, g, b):
        x32 = x.astype(jnp.float32)
        mu = jnp.mean(x32, axis=(0, 1, 2))
        var = jnp.mean(jnp.square(x32 - mu), axis=(0, 1, 2))
        return ((x32 - mu) * jax.lax.rsqrt(var + 1e-5) * g + b).astype(x.dtype)

    def block(w1, g1, b1, w2, g2, b2, x):
        dn = ("NHWC", "HWIO", "NHWC")
        y = jax.lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn)
        y = jax.nn.relu(bn(constrain(y, mesh, act), g1, b1))
        y = jax.lax.conv_general_dilated(y, w2, (1, 1), "SAME", dimension_numbers=dn)
        y = bn(constrain(y, mesh, act), g2, b2)
        return jax.nn.relu(x + y)

    c = 1024
    w1 = sds((3, 3, c, c), mesh, P(None, None, None, ma))
    w2 = sds((3, 3, c, c), mesh, P(None, None, ma, None))
    g = sds((c,), mesh, P(ma), jnp.float32)
    x = sds((64, 32, 32, c), mesh, P(ba, spatial, None, None))
    return jax.jit(block, out_shardings=x.sharding), (w1, g, g, w2, g, g, x)


def programs():
    for kind in ("data", "fsdp", "tensor", "dp_tp"):
        for n in (4, 8, 16, 64):
            yield ("vit_patch", kind, n, "embed", lambda k=kind, n=n: vit_program(k, n))
    for kind in ("data", "seq", "dp_tp"):
        for n in (4, 8, 16):
            yield ("resnet_block", kind, n, "basic", lambda k=kind, n=n: resnet_program(k, n))
