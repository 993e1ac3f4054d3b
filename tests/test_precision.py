"""Precision policies: each backend's effective settings read back and recorded; fairness audit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from repro.backends.precision import jax_fp32_matmul, torch_fp32_matmul
from repro.config import ConfigError
from repro.preflight import plan

POLICIES = ["fp32", "tf32", "bf16", "amp_bf16", "framework_default"]
EXPECTED = {  # policy -> (jax matmul setting, torch matmul setting, param dtype, torch autocast)
    "fp32": ("highest", "highest", "float32", None),
    "tf32": ("tensorfloat32", "high", "float32", None),
    "bf16": ("None", "highest", "bfloat16", None),
    "amp_bf16": ("highest", "highest", "float32", "bfloat16"),
    "framework_default": ("None", "highest", "float32", None),
}


@pytest.fixture(scope="module")
def policy_runs(tmp_path_factory):
    from conftest import Sandbox

    box = Sandbox(tmp_path_factory.mktemp("precision"))
    proc = box.run("-m", "model=mlp", "framework=jax,torch", f"precision={','.join(POLICIES)}", "run.steps=4",
                   "run.warmup=2", "tracking.experiment=precision")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return box


@pytest.mark.slow
def test_each_policy_read_back_and_recorded(policy_runs):
    heads = policy_runs.heads()
    assert len(heads) == 2 * len(POLICIES)
    runs = {r.data.tags["repro.ledger_id"]: r for r in policy_runs.mlflow_runs("precision")
            if "repro.ledger_id" in r.data.tags}
    for h in heads:
        fw, policy = h["config"]["framework"]["name"], h["config"]["precision"]["name"]
        jax_mm, torch_mm, dtype, autocast = EXPECTED[policy]
        eff = h["effective"]
        assert eff["matmul_precision"] == (jax_mm if fw == "jax" else torch_mm), (fw, policy)
        assert eff["param_dtypes"] == [dtype]
        assert eff["fp32_matmul"] == "fp32"  # a CPU has no reduced-precision fp32 matmul
        if fw == "torch":
            assert eff["autocast"] == autocast and eff["deterministic_algorithms"] is True
        assert runs[h["id"]].data.params["effective.matmul_precision"] == str(eff["matmul_precision"])


def test_fp16_amp_refused_on_cpu():
    with pytest.raises(ConfigError, match="precision=fp16_amp needs a GPU"):
        plan(["precision=fp16_amp"])


def _compare(box, *ids):
    cmd = [sys.executable, "-m", "repro", "compare", *ids, "--ledger", str(box.ledger)]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.slow
def test_compare_lists_precision_difference_or_none(policy_runs):
    pick = {(h["config"]["framework"]["name"], h["config"]["precision"]["name"]): h["id"] for h in policy_runs.heads()}
    unequal = _compare(policy_runs, pick["jax", "fp32"], pick["torch", "tf32"])
    assert unequal.returncode == 0, unequal.stderr
    # precision was swept on purpose: listed as varied, with what it changed, not warned about
    assert "varied on purpose: framework, precision" in unequal.stdout and "WARNING" not in unequal.stdout
    assert "precision policy" in unequal.stdout and "matmul precision setting" in unequal.stdout
    equal = _compare(policy_runs, pick["jax", "fp32"], pick["torch", "fp32"])
    assert "differ only in the framework" in equal.stdout and "WARNING" not in equal.stdout
    bf16 = _compare(policy_runs, pick["jax", "fp32"], pick["torch", "bf16"])
    assert "parameter dtypes" in bf16.stdout


def test_default_precision_is_unequal_on_gpus():
    """What JAX's and PyTorch's defaults compute in on an Ampere+ GPU: TF32 against fp32."""
    assert jax_fp32_matmul(None, "gpu", tf32_capable=True) == "tf32"
    assert torch_fp32_matmul("highest", "cuda", tf32_capable=True) == "fp32"
    assert jax_fp32_matmul("highest", "gpu", True) == torch_fp32_matmul("highest", "cuda", True) == "fp32"
    assert jax_fp32_matmul("tensorfloat32", "gpu", True) == torch_fp32_matmul("high", "cuda", True) == "tf32"
    assert jax_fp32_matmul(None, "tpu", False) == "bf16"
