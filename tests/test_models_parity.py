"""Flax and torch twins compute the same function: same logits, same gradients, same BatchNorm
running statistics, at every model's `tiny` preset, in fp32 on CPU.

Tolerances (relative to the torch side's magnitude, so they are scale-free):
- logits:        max|flax - torch| / max|torch|                              <= 1e-5
- each gradient: max|flax - torch| / max(max|torch|, 1e-3 * G)  per tensor  <= 1e-4
                 G = the largest |gradient| of any tensor. The floor exists because some true
                 gradients are exactly zero (attention key biases: softmax ignores a constant
                 added to all of a query's scores), so both sides hold pure rounding noise there.
- running stats: max|flax - torch| / max|torch| per buffer                   <= 1e-5
Measured fp32 errors here are <= 2e-6 (logits) and <= 1e-5 (gradients, ResNet BatchNorm worst);
backward through softmax and normalisation amplifies rounding, hence the looser gradient bound.
A wrong weight mapping gives errors of order 1 (see the negative tests at the end).

The flax twin is built abstractly (`nnx.eval_shape`) and filled by the converter: XLA compiles
every initializer shape separately, which on a 2-core CPU costs ~1 s per shape, and the copy
overwrites every variable anyway. `test_flax_init_round_trip` covers real flax initialisation.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch
import torch.nn.functional as F
from flax import nnx

from repro.models import MODEL_NAMES, get
from repro.models import common_convert as cc

LOGIT_TOL = 1e-5
GRAD_TOL = 1e-4
GRAD_FLOOR = 1e-3
STAT_TOL = 1e-5
BATCH = 4


@pytest.fixture(autouse=True)
def _full_precision():
    with jax.default_matmul_precision("highest"):
        yield


def rel_err(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


@dataclasses.dataclass
class Report:
    logits: float
    grads: dict[str, float]
    stats: dict[str, float]

    @property
    def ok(self) -> bool:
        return (self.logits <= LOGIT_TOL and all(e <= GRAD_TOL for e in self.grads.values())
                and all(e <= STAT_TOL for e in self.stats.values()))

    def __str__(self) -> str:
        worst = lambda d: max(d.items(), key=lambda kv: kv[1], default=("-", 0.0))  # noqa: E731
        return f"logits {self.logits:.2e}, worst grad {worst(self.grads)}, worst stat {worst(self.stats)}"


def modules(name: str):
    e = get(name)
    return e, e.module("flax"), e.module("torch"), cc  # one converter for every zoo model


def build(name: str, seed: int = 0):
    """Seeded torch twin and an abstract flax twin (fill it with the converter before use)."""
    e, fm, tm, _ = modules(name)
    d = e.dims("tiny")
    torch.manual_seed(seed)
    return e, d, tm.build(d), nnx.eval_shape(lambda: fm.build(d, nnx.Rngs(seed)))


def flax_loss(out, y, task):
    if task == "regress":
        return jnp.mean((out - y) ** 2)
    return optax.softmax_cross_entropy_with_integer_labels(out, y).mean()


def torch_loss(out, y, task):
    if task == "regress":
        return F.mse_loss(out, y)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1).long())


@nnx.jit(static_argnames="task")
def flax_step(model, x, y, task):
    """Logits and parameter gradients of one train-mode forward+backward (BatchStats update)."""
    def loss_fn(m):
        out = m(x)
        return flax_loss(out, y, task), out

    (_, out), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model)
    return out, grads


@nnx.jit
def flax_forward(model, x):
    return model(x)


def compare(entry, d, tmodel, fmodel, mapping) -> Report:
    """One forward+backward (train mode) of both twins on the same batch; compare everything the
    mapping pairs up: logits, every parameter's gradient, every BatchNorm running statistic."""
    x, y = entry.make_batch(d, BATCH, np.random.default_rng(0))
    xt = torch.from_numpy(x.transpose(0, 3, 1, 2).copy() if entry.image_input else x)

    f_out, f_grads = flax_step(fmodel, jnp.asarray(x), jnp.asarray(y), entry.task)
    f_grads = {path: np.asarray(g[...]) for path, g in nnx.to_flat_state(f_grads)}

    tmodel.zero_grad(set_to_none=True)
    t_out = tmodel(xt)
    torch_loss(t_out, torch.from_numpy(y), entry.task).backward()
    t_params, t_state = dict(tmodel.named_parameters()), tmodel.state_dict()

    floor = GRAD_FLOOR * max(float(t.grad.abs().max()) for t in t_params.values())
    grads, stats = {}, {}
    for p in mapping:
        if p.flax in f_grads:
            a, b = cc.to_torch_layout(f_grads[p.flax], p.kind), t_params[p.torch].grad.numpy()
            grads[p.torch] = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), floor))
        else:  # a BatchStat: compare the updated running statistic
            stats[p.torch] = rel_err(cc.variable(fmodel, p.flax)[...], t_state[p.torch])
    assert len(grads) == len(t_params), "every torch parameter must have a flax gradient"
    return Report(rel_err(f_out, t_out.detach()), grads, stats)


def torch_to_flax_parity(name: str, edit=lambda pairs: pairs) -> Report:
    """Copy torch -> flax through `edit(mapping)`, then compare (the mapping, edited or not, is
    also what pairs the gradients, exactly as a user of the converter would)."""
    e, d, tmodel, fmodel = build(name)
    mapping = edit(cc.pairs(fmodel))
    modules(name)[3].torch_to_flax(tmodel, fmodel, mapping)
    return compare(e, d, tmodel, fmodel, mapping)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_torch_to_flax_parity(name):
    report = torch_to_flax_parity(name)
    assert report.ok, str(report)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_flax_to_torch_round_trip(name):
    """torch A -> flax -> torch B (differently initialised) -> flax again: all bit-identical, and
    B and the flax twin agree in logits and gradients."""
    e, d, source, fmodel = build(name, seed=1)
    conv = modules(name)[3]
    conv.torch_to_flax(source, fmodel)
    _, _, tmodel, again = build(name, seed=2)
    conv.flax_to_torch(fmodel, tmodel)
    for key, value in source.state_dict().items():
        torch.testing.assert_close(tmodel.state_dict()[key], value, rtol=0, atol=0, msg=key)
    conv.torch_to_flax(tmodel, again)
    original = dict(nnx.to_flat_state(nnx.state(fmodel)))
    for path, v in nnx.to_flat_state(nnx.state(again)):
        np.testing.assert_array_equal(np.asarray(v[...]), np.asarray(original[path][...]), err_msg=str(path))
    report = compare(e, d, tmodel, fmodel, cc.pairs(fmodel))
    assert report.ok, str(report)


@pytest.mark.parametrize("name", ["mha", "ffn"])
def test_flax_init_round_trip(name):
    """A really initialised flax model (not abstract) copies into torch and matches it."""
    e, fm, tm, conv = modules(name)
    d = e.dims("tiny")
    fmodel, tmodel = fm.build(d, nnx.Rngs(3)), tm.build(d)
    conv.flax_to_torch(fmodel, tmodel)
    report = compare(e, d, tmodel, fmodel, cc.pairs(fmodel))
    assert report.ok, str(report)


def test_resnet_running_stats_and_eval_mode():
    e, d, tmodel, fmodel = build("resnet50")
    modules("resnet50")[3].torch_to_flax(tmodel, fmodel)
    before = {p: np.array(v[...]) for p, v in nnx.to_flat_state(nnx.state(fmodel, nnx.BatchStat))}
    report = compare(e, d, tmodel, fmodel, cc.pairs(fmodel))  # one train step, batch statistics
    assert report.ok, str(report)
    assert len(report.stats) == 2 * sum(isinstance(m, torch.nn.BatchNorm2d) for m in tmodel.modules())
    after = {p: np.array(v[...]) for p, v in nnx.to_flat_state(nnx.state(fmodel, nnx.BatchStat))}
    assert all(not np.allclose(before[p], after[p]) for p in before), "running stats must move"
    # Eval mode normalises with the (equally updated) running statistics.
    tmodel.eval()
    fmodel.eval()
    x, _ = e.make_batch(d, BATCH, np.random.default_rng(1))
    f_out = np.asarray(flax_forward(fmodel, jnp.asarray(x)))
    with torch.no_grad():
        t_out = tmodel(torch.from_numpy(x.transpose(0, 3, 1, 2).copy())).numpy()
    assert rel_err(f_out, t_out) <= LOGIT_TOL


# --- the parity check can fail: deliberately wrong mappings go through the same helper ---------

def _transpose(key):
    def edit(pairs):
        return [dataclasses.replace(p, kind="linear") if p.torch == key else p for p in pairs]
    return edit


def _swap(key_a, key_b):
    def edit(pairs):
        swap = {key_a: key_b, key_b: key_a}
        return [dataclasses.replace(p, torch=swap.get(p.torch, p.torch)) for p in pairs]
    return edit


@pytest.mark.parametrize("name, edit", [
    ("vit", _transpose("blocks.0.attn.o.weight")),  # square weight transposed on the way
    ("gpt2_small", _swap("blocks.0.attn.o.weight", "blocks.1.attn.o.weight")),  # two layers' o swapped
    ("llama3_8b", _transpose("blocks.1.attn.o.weight")),
    ("resnet50", _swap("stages.0.0.bn1.running_mean", "stages.0.0.bn1.running_var")),  # only stats differ
], ids=["vit-transposed-o", "gpt2-swapped-layers", "llama-transposed-o", "resnet-swapped-stats"])
def test_wrong_mapping_fails_parity(name, edit):
    report = torch_to_flax_parity(name, edit)
    assert not report.ok, f"a wrong mapping passed the parity check: {report}"
    assert max([report.logits, *report.grads.values(), *report.stats.values()]) > 1e-2


def test_incomplete_mapping_is_rejected():
    _, _, tmodel, fmodel = build("bert_base")
    with pytest.raises(ValueError, match="twins differ"):
        cc.torch_to_flax(tmodel, fmodel, cc.pairs(fmodel)[1:])
    with pytest.raises(ValueError, match="shape"):  # a non-square weight transposed
        cc.torch_to_flax(tmodel, fmodel, _transpose("layers.0.mlp.fc.weight")(cc.pairs(fmodel)))
