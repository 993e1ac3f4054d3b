"""GPU paths: skipped cleanly on a machine without an NVIDIA GPU (see conftest)."""

from __future__ import annotations

import pytest

from repro import hardware

pytestmark = pytest.mark.slow  # every test here starts a process

PROFILES = ("h200", "h100", "a100", "l4")


def _profile() -> list[str]:
    name = hardware.VENDORS["nvidia"].devices()[0]["name"].upper()
    match = next((p for p in PROFILES if p.upper() in name), None)
    return [f"hardware={match}"] if match else ["hardware=h100", "hardware.check=false"]


@pytest.mark.gpu
@pytest.mark.parametrize("framework", ["jax", "torch", "torch_compile"])
def test_tf32_vit_on_gpu_reads_back_precision(sandbox, framework):
    proc = sandbox.run(f"framework={framework}", "model=vit", "precision=tf32", *_profile())
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rec,) = sandbox.heads()
    eff = rec["effective"]
    if framework == "jax":
        assert eff["platform"] == "gpu" and eff["matmul_precision"] == "tensorfloat32"
    else:
        assert eff["platform"] == "cuda" and eff["matmul_precision"] == "high" and eff["cuda_matmul_allow_tf32"]
    assert rec["results"]["peak_memory"]["kind"] == "device"
    assert rec["environment"]["gpus"]
