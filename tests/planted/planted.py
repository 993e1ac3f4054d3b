"""A two-layer classifier whose PyTorch twin adds, from its third training step on, a tiny draw from a
generator seeded by the operating system: a planted nondeterminism, different in every process."""

from repro.models.api import Model


class Planted(Model):
    name = "planted"
    task = "classify"
    description = "MLP whose torch twin adds unseeded noise from its third training forward on"
    presets = {"tiny": dict(features=8, width=16, classes=4)}

    def input_shape(self, dims):
        return (dims["features"],)

    def flax_module(self, dims, rngs, *, dtype=None, param_dtype=None):
        import jax.numpy as jnp
        from flax import nnx

        kw = dict(dtype=dtype, param_dtype=param_dtype or jnp.float32, rngs=rngs)

        class Net(nnx.Module):
            def __init__(self):
                self.a = nnx.Linear(dims["features"], dims["width"], **kw)
                self.b = nnx.Linear(dims["width"], dims["classes"], **kw)

            def __call__(self, x):
                return self.b(nnx.relu(self.a(x)))

        return Net()

    def torch_module(self, dims):
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(dims["features"], dims["width"])
                self.b = nn.Linear(dims["width"], dims["classes"])
                self.calls, self.unseeded = 0, torch.Generator()
                self.unseeded.seed()  # the planted fault: entropy from the OS, not from run.seed

            def forward(self, x):
                out = self.b(torch.relu(self.a(x)))
                if self.training:
                    self.calls += 1
                    if self.calls >= 3:
                        out = out + 1e-3 * torch.rand(out.shape, generator=self.unseeded)  # per logit: a constant would not move the loss
                return out

        return Net()
