"""PyTorch/XLA on an NVIDIA GPU profile is refused before anything runs (no CUDA wheels since
2.8, pytorch/xla PRs #9295 and #9533); vit_l4 leaves it out there; and a torch_xla run whose XLA device
is not the one its hardware profile names ends `failed`, naming both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from repro.config.schema import ConfigError
from repro.preflight import plan

REPO = Path(__file__).resolve().parents[1]
NVIDIA = ("l4", "a100", "h100", "h200")


@pytest.mark.parametrize("framework", ["torch_xla", "torch_xla_compile"])
@pytest.mark.parametrize("hardware", NVIDIA)
def test_torch_xla_on_an_nvidia_profile_is_refused_naming_why(framework, hardware):
    with pytest.raises(ConfigError, match=rf"framework={framework} on hardware={hardware}.*deprecated its CUDA "
                                          r"backend in 2.8.*#9295, #9533.*hardware=cpu"):
        plan([f"framework={framework}", f"hardware={hardware}", "hardware.check=false", "model=mlp"])


@pytest.mark.slow
def test_torch_xla_on_h100_exits_2_and_writes_nothing(tmp_path):
    out = subprocess.run([sys.executable, "-m", "repro", "framework=torch_xla", "hardware=h100", "model=mlp",
                          f"ledger.dir={tmp_path / 'ledger'}", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "pytorch/xla PRs #9295, #9533" in out.stderr, out.stdout + out.stderr
    assert not (tmp_path / "ledger").exists() and not (tmp_path / "m.db").exists()


@pytest.mark.parametrize("hardware", NVIDIA)
def test_vit_l4_leaves_torch_xla_out_on_nvidia_profiles(hardware):
    jobs = plan(["+exp=vit_l4", f"hardware={hardware}", "hardware.check=false"]).jobs
    assert {j.framework.name for j in jobs} == {"jax", "torch", "torch_compile"}
    assert "PyTorch/XLA (torch_xla, torch_xla_compile) is left out" in (REPO / "conf/exp/vit_l4.yaml").read_text()


def test_torch_xla_on_cpu_and_tpu_profiles_passes_the_preflight():
    assert plan(["framework=torch_xla", "model=mlp"]).jobs[0].hardware.platform == "cpu"
    assert plan(["framework=torch_xla", "hardware=tpu_v6e", "hardware.check=false", "model=mlp"]).jobs


@pytest.mark.slow
def test_an_xla_device_that_is_not_the_profiles_ends_the_run_failed_naming_both(tmp_path):
    """A TPU profile whose worker's XLA runtime came up on the CPU (PJRT_DEVICE=CPU in the environment
    wins over the profile): recorded `failed`, not a TPU run."""
    xla_python = REPO / ".venv-xla" / "bin" / "python"
    if not xla_python.exists():  # make test builds it first: its absence is a broken setup, not a pass
        pytest.fail(f"no PyTorch/XLA interpreter at {xla_python}: run `make xla-env` (make test does)")
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    out = subprocess.run([sys.executable, "-m", "repro", "framework=torch_xla", "hardware=tpu_v6e",
                          "hardware.check=false", "model=mlp", "run.steps=4", "run.warmup=2", "progress.mode=plain",
                          f"ledger.dir={tmp_path / 'ledger'}", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    records = [json.loads(p.read_text()) for p in (tmp_path / "ledger").glob("2*/*.json")]
    ended = [r for r in records if r["kind"] == "run" and r["status"] != "started"]
    assert len(ended) == 1 and ended[0]["status"] == "failed", out.stdout + out.stderr
    error = json.dumps(ended[0].get("error") or ended[0])
    assert "CPU" in error and "tpu_v6e" in error and "TPU" in error, error[:2000]


def test_the_close_of_vit_l4_on_a_gpu_says_torch_xla_is_left_out():
    """What the closing output prints (sweep_close): the planned jobs of `+exp=vit_l4` as records."""
    from repro.config.schema import as_dict
    from repro.preflight import xla_hardware

    def records(*args):
        return [{"config": as_dict(c), "sweep": {"experiment": "vit_l4"}} for c in plan(["+exp=vit_l4", *args]).jobs]

    line = xla_hardware.left_out(records("hardware=h100", "hardware.check=false"))
    assert line.startswith("PyTorch/XLA (torch_xla, torch_xla_compile), which the published vit_l4 study ran, is left "
                           "out on h100: PyTorch/XLA deprecated its CUDA backend in 2.8") and "#9533" in line
    assert xla_hardware.left_out(records("hardware=cpu")) is None
    with_xla = records("hardware=cpu", "framework=jax,torch_xla")
    assert xla_hardware.left_out(with_xla) is None
