"""A small convolutional classifier with one residual block, as a repro workload.

This one file is the whole model: the Flax NNX twin, the PyTorch twin and what repro needs to know
(`repro.models.api.Model`). The frameworks are imported inside the builders, so a JAX run never
imports torch and a torch run never imports flax. The twins name their layers differently on
purpose: `run.init=shared` pairs them by shape and kind in declaration order (repro's default
converter), and the preflight proves the pairing on one batch before anything runs.
"""

from repro.models.api import Model


class ResConvNet(Model):
    name = "resconv"
    task = "classify"
    image_input = True  # NHWC batches (torch gets NCHW)
    description = "conv stem, one residual block (conv-relu-conv + skip), mean pool, linear head"
    presets = {
        "tiny": dict(image=16, channels=3, width=16, classes=10),
        "small": dict(image=32, channels=3, width=64, classes=100),
    }

    def input_shape(self, dims):
        return (dims["image"], dims["image"], dims["channels"])

    def flax_module(self, dims, rngs, *, dtype=None, param_dtype=None):
        import jax.numpy as jnp
        from flax import nnx

        kw = dict(dtype=dtype, param_dtype=param_dtype or jnp.float32, rngs=rngs)
        c, w = dims["channels"], dims["width"]

        class Net(nnx.Module):
            def __init__(self):
                self.stem = nnx.Conv(c, w, (3, 3), padding="SAME", **kw)
                self.block_a = nnx.Conv(w, w, (3, 3), padding="SAME", **kw)
                self.block_b = nnx.Conv(w, w, (3, 3), padding="SAME", **kw)
                self.head = nnx.Linear(w, dims["classes"], **kw)

            def __call__(self, x):
                x = nnx.relu(self.stem(x))
                x = nnx.relu(x + self.block_b(nnx.relu(self.block_a(x))))
                return self.head(x.mean(axis=(1, 2)))

        return Net()

    def torch_module(self, dims):
        import torch
        from torch import nn

        c, w = dims["channels"], dims["width"]

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv_in = nn.Conv2d(c, w, 3, padding=1)
                self.res1 = nn.Conv2d(w, w, 3, padding=1)
                self.res2 = nn.Conv2d(w, w, 3, padding=1)
                self.fc = nn.Linear(w, dims["classes"])

            def forward(self, x):
                x = torch.relu(self.conv_in(x))
                x = torch.relu(x + self.res2(torch.relu(self.res1(x))))
                return self.fc(x.mean(dim=(2, 3)))

        return Net()
