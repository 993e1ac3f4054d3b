"""model.impl=hf: transformers' PyTorch and Flax classes built from our dims, with our parameter
counts, run through the real run path; refusals before anything runs; old records keep their hash."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from repro import models
from repro.config import ConfigError
from repro.preflight import plan
from repro.config.spec import config_hash
from repro.models.hf import CLASSES, flax_models

REPO = Path(__file__).resolve().parents[1]

# The Flax builders tell transformers to leave torch alone (a JAX worker never imports it), and
# transformers reads that once per process: the torch classes are counted in a process of their own.
TORCH_COUNTS = """
import json, sys, torch
from repro import models
from repro.models.hf import CLASSES, torch_models
out = {}
for name in CLASSES:
    entry = models.get(name)
    torch.manual_seed(0)
    m = torch_models.build(entry, entry.dims("tiny"))
    out[name] = [sum(p.numel() for p in m.parameters()), m.hf.config._attn_implementation]  # tied: once
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def torch_counts() -> dict:
    proc = subprocess.run([sys.executable, "-c", TORCH_COUNTS], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CLASSES))
def test_hf_parameter_counts_equal_ours(name, torch_counts):
    entry = models.get(name)
    dims = entry.dims("tiny")
    fmodel = nnx.eval_shape(lambda: flax_models.build(entry, dims, nnx.Rngs(0)))  # shapes only: no compile
    flax_count = sum(int(np.prod(v.shape)) for v in jax.tree_util.tree_leaves(nnx.state(fmodel, nnx.Param)))
    assert {"torch": torch_counts[name][0], "flax": flax_count} == {"torch": entry.param_count(dims),
                                                                    "flax": entry.param_count(dims)}
    assert torch_counts[name][1] == "eager"


@pytest.mark.slow  # XLA compiles the HF Flax ResNet whole: tens of seconds of CPU
def test_hf_flax_batch_norm_trains_its_running_stats_and_eval_keeps_them():
    entry = models.get("resnet50")
    dims = entry.dims("tiny")
    x = np.random.default_rng(0).standard_normal((2, dims.image, dims.image, 3), dtype=np.float32)

    @jax.jit  # one compile for all of it (eager init costs ~1 s per shape here)
    def stats_after_train_and_eval(x):
        model = flax_models.build(entry, dims, nnx.Rngs(0))
        stats = lambda: jax.tree_util.tree_leaves(nnx.state(model, nnx.BatchStat))  # noqa: E731
        before, logits = stats(), model(x)
        trained = stats()
        model.eval()
        model(x)
        return before, trained, stats(), logits

    before, trained, evaluated, logits = stats_after_train_and_eval(x)
    assert logits.shape == (2, dims.classes)
    assert any(not np.array_equal(a, b) for a, b in zip(before, trained))
    assert all(np.array_equal(a, b) for a, b in zip(trained, evaluated))


def test_hf_refusals_name_what_works():
    with pytest.raises(ConfigError, match="impl=hf works for model vit, resnet50"):
        plan(["model=mlp", "model.impl=hf"])
    with pytest.raises(ConfigError, match="use precision=fp32"):
        plan(["model=vit", "model.impl=hf", "precision=bf16"])
    with pytest.raises(ConfigError, match="model.impl='hff' is not valid; choose one of: native, hf"):
        plan(["model=vit", "model.impl=hff"])
    jobs = plan(["+exp=vit_l4", "hardware=cpu"]).jobs  # the published study (hf) beside ours
    assert {(j.framework.name, j.model.impl) for j in jobs} >= {("jax", "hf"), ("jax", "native"),
                                                                               ("torch", "hf"), ("torch", "native")}


def test_records_made_before_model_impl_keep_their_hash():
    record = json.loads(Path(sorted(glob.glob(str(REPO / "ledger/*/*.json")))[0]).read_text())
    assert "impl" not in record["config"]["model"]
    assert config_hash(record["config"]) == record["config_hash"]
    config = json.loads(json.dumps(record["config"]))
    config["model"]["impl"] = "native"
    assert config_hash(config) == record["config_hash"]
    config["model"]["impl"] = "hf"
    assert config_hash(config) != record["config_hash"]
