from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from repro.models.common_flax import linear
from repro.models.resnet50 import BN_EPS, BN_MOMENTUM, EXPANSION, ResNetDims


@jax.custom_vjp
def _batch_norm(x: jax.Array, scale: jax.Array, bias: jax.Array):
    """Training-mode batch norm over N, H, W of float32 NHWC `x`: (y, batch mean, biased variance).

    The variance is two-pass, E[(x - mean)^2], torch's formula (one-pass E[x^2] - E[x]^2 drifts
    from torch's gradients by 3e-3 at tiny batches). The backward is the closed form that
    torch's and cuDNN's kernels compute, not autodiff through the two passes: XLA's CPU fusions
    of that autodiff recomputed the normalisation and took 1.14x the step of HF's Flax ResNet
    (benchmarks/impl_speed.py). The mean and variance outputs feed only the running averages,
    under stop_gradient, so their cotangents are zero and the backward ignores them."""
    return _batch_norm_fwd(x, scale, bias)[0]


def _batch_norm_fwd(x, scale, bias):
    mean = x.mean(axis=(0, 1, 2))
    var = jnp.square(x - mean).mean(axis=(0, 1, 2))
    rstd = jax.lax.rsqrt(var + BN_EPS)
    xhat = (x - mean) * rstd
    return (xhat * scale + bias, mean, var), (xhat, rstd, scale)


def _batch_norm_bwd(res, cotangents):
    xhat, rstd, scale = res
    dy = cotangents[0]
    n = xhat.size // xhat.shape[-1]
    dbias = dy.sum(axis=(0, 1, 2))
    dscale = (dy * xhat).sum(axis=(0, 1, 2))
    dx = (scale * rstd / n) * (n * dy - dbias - xhat * dscale)
    return dx, dscale, dbias


_batch_norm.defvjp(_batch_norm_fwd, _batch_norm_bwd)


class BatchNorm(nnx.Module):
    """torch.nn.BatchNorm2d semantics on NHWC: the batch's biased variance normalises, the unbiased
    one (n/(n-1)) goes into the running average (nnx.BatchNorm would store the biased one).
    `use_running_average` is flipped by `model.train()` / `model.eval()`."""

    def __init__(self, c: int, *, rngs: nnx.Rngs, dtype=None, param_dtype=jnp.float32):
        self.scale = nnx.Param(jnp.ones((c,), param_dtype))
        self.bias = nnx.Param(jnp.zeros((c,), param_dtype))
        self.mean = nnx.BatchStat(jnp.zeros((c,), param_dtype))
        self.var = nnx.BatchStat(jnp.ones((c,), param_dtype))
        self.use_running_average = False
        self.dtype = dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        xf = x.astype(jnp.float32)
        scale, bias = self.scale[...].astype(jnp.float32), self.bias[...].astype(jnp.float32)
        if self.use_running_average:
            mean, var = self.mean[...].astype(jnp.float32), self.var[...].astype(jnp.float32)
            y = (xf - mean) * jax.lax.rsqrt(var + BN_EPS) * scale + bias
        else:
            y, mean, var = _batch_norm(xf, scale, bias)
            n = xf.size // xf.shape[-1]
            m = BN_MOMENTUM
            unbiased = jax.lax.stop_gradient(var * n / max(n - 1, 1))
            self.mean[...] = (m * self.mean[...] + (1 - m) * jax.lax.stop_gradient(mean)).astype(self.mean.dtype)
            self.var[...] = (m * self.var[...] + (1 - m) * unbiased).astype(self.var.dtype)
        return y.astype(self.dtype or x.dtype)


class Bottleneck(nnx.Module):
    def __init__(self, c_in: int, width: int, stride: int, *, rngs: nnx.Rngs, dtype=None,
                 param_dtype=jnp.float32):
        kw = dict(rngs=rngs, dtype=dtype, param_dtype=param_dtype)
        c_out = width * EXPANSION
        self.conv1 = nnx.Conv(c_in, width, (1, 1), padding="VALID", use_bias=False, **kw)
        self.bn1 = BatchNorm(width, **kw)
        self.conv2 = nnx.Conv(width, width, (3, 3), strides=stride, padding=((1, 1), (1, 1)), use_bias=False, **kw)
        self.bn2 = BatchNorm(width, **kw)
        self.conv3 = nnx.Conv(width, c_out, (1, 1), padding="VALID", use_bias=False, **kw)
        self.bn3 = BatchNorm(c_out, **kw)
        if stride != 1 or c_in != c_out:
            self.down_conv = nnx.Conv(c_in, c_out, (1, 1), strides=stride, padding="VALID", use_bias=False, **kw)
            self.down_bn = BatchNorm(c_out, **kw)
        else:
            self.down_conv = self.down_bn = None

    def __call__(self, x: jax.Array) -> jax.Array:
        y = jax.nn.relu(self.bn1(self.conv1(x)))
        y = jax.nn.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        if self.down_conv is not None:
            x = self.down_bn(self.down_conv(x))
        return jax.nn.relu(x + y)


class ResNet(nnx.Module):
    def __init__(self, d: ResNetDims, *, rngs: nnx.Rngs, dtype=None, param_dtype=jnp.float32):
        kw = dict(rngs=rngs, dtype=dtype, param_dtype=param_dtype)
        w = d.width
        self.conv1 = nnx.Conv(d.channels, w, (7, 7), strides=2, padding=((3, 3), (3, 3)), use_bias=False, **kw)
        self.bn1 = BatchNorm(w, **kw)
        stages, c_in = [], w
        for i, n in enumerate(d.blocks):
            width = w * 2**i
            stages.append(nnx.List([
                Bottleneck(c_in if j == 0 else width * EXPANSION, width, 2 if (i > 0 and j == 0) else 1, **kw)
                for j in range(n)
            ]))
            c_in = width * EXPANSION
        self.stages = nnx.List(stages)
        self.fc = linear(c_in, d.classes, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:  # x [B, H, W, C]
        x = jax.nn.relu(self.bn1(self.conv1(x)))
        x = nnx.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        for stage in self.stages:
            for block in stage:
                x = block(x)
        return self.fc(x.mean(axis=(1, 2)))


def build(dims: ResNetDims, rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> ResNet:
    return ResNet(dims, rngs=rngs, dtype=dtype, param_dtype=param_dtype)
