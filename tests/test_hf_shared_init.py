"""run.init=shared for model.impl=hf: one canonical draw loaded into transformers' PyTorch and Flax
classes gives the same logits and the same init hash, a run records that hash, the two frameworks'
loss trajectories agree, and a model without a converter is refused naming it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from flax import nnx

from repro import models
from repro.config import ConfigError
from repro.models import canonical, state_flax
from repro.models.hf import SHARED_INIT, flax_models
from repro.preflight import plan
from repro.report import trajectory

# transformers reads USE_TORCH / USE_FLAX once per process (repro.models.hf.transformers_for): the
# PyTorch side runs in a process of its own, as a torch worker would.
TORCH_SIDE = """
import json, sys, numpy as np, torch
from repro import models
from repro.models import canonical, state_torch
from repro.models.hf import torch_models
out = {}
for name in sys.argv[1:]:
    entry = models.get(name)
    dims = entry.dims("tiny")
    m = torch_models.build(entry, dims)
    state_torch.write(m, canonical.draw(state_torch.shapes(m), 0)).eval()
    x = np.random.default_rng(0).standard_normal((2, dims.image, dims.image, dims.channels), dtype=np.float32)
    with torch.no_grad():
        logits = m(torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()).numpy()
    out[name] = {"logits": logits.tolist(), "sha256": canonical.sha256(state_torch.read(m))}
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def torch_side() -> dict:
    proc = subprocess.run([sys.executable, "-c", TORCH_SIDE, *SHARED_INIT], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("name", SHARED_INIT)
def test_one_draw_gives_both_frameworks_the_same_logits_and_hash(name, torch_side):
    entry = models.get(name)
    dims = entry.dims("tiny")
    fmodel = nnx.eval_shape(lambda: flax_models.build(entry, dims, nnx.Rngs(0)))  # nothing drawn by Flax
    state_flax.write(fmodel, canonical.draw(state_flax.shapes(fmodel), 0))
    fmodel.eval()
    x = np.random.default_rng(0).standard_normal((2, dims.image, dims.image, dims.channels), dtype=np.float32)
    logits = np.asarray(fmodel(x))
    assert canonical.sha256(state_flax.read(fmodel)) == torch_side[name]["sha256"]
    np.testing.assert_allclose(logits, np.asarray(torch_side[name]["logits"]), atol=1e-5, rtol=1e-5)


def test_a_model_without_a_converter_is_refused_naming_it():
    with pytest.raises(ConfigError, match="no weight converter for model=bert_base"):
        plan(["model=bert_base", "model.impl=hf", "run.init=shared"])
    with pytest.raises(ConfigError, match="run.init=shared works with impl=hf for model vit, resnet50"):
        plan(["model=llama3_8b", "model.impl=hf", "run.init=shared"])
    assert plan(["model=vit", "model.impl=hf", "run.init=shared"]).jobs  # the study's model is not


@pytest.mark.slow
def test_hf_jax_and_torch_start_alike_and_their_trajectories_agree(sandbox):
    proc = sandbox.run("-m", "framework=jax,torch", "model=vit", "model.impl=hf", "run.init=shared",
                       "run.steps=12", "run.warmup=2", "tracking.experiment=hf_shared")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    heads = sandbox.heads()
    assert sorted(h["config"]["framework"]["name"] for h in heads) == ["jax", "torch"]
    init = {h["results"]["init_params_sha256"] for h in heads}
    assert len(init) == 1 and None not in init
    (agreement,) = trajectory.agreements(heads)
    assert agreement.same_init is True
    assert agreement.steps == 12 and agreement.first_step_over is None, agreement.max_rel_diff
    ours = models.get("vit").param_count(models.get("vit").dims("tiny"))  # the zoo's count of the same model
    for h in heads:  # HF's ViT in both frameworks, through the worker (once tests/test_hf.py ran it again)
        assert h["status"] == "ok" and h["config"]["model"]["impl"] == "hf" and h["effective"]["model_impl"] == "hf"
        assert h["effective"]["param_count"] == ours  # counted on the built model (results.* is the spec's)
        assert np.isfinite(h["results"]["steady_median_s"])
