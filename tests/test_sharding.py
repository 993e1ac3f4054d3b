"""Sharded JAX layouts on simulated CPU devices: same losses as unsharded, FSDP's bytes ~1/N."""

from __future__ import annotations

import pytest

from repro.config import ConfigError, plan

LAYOUTS = ("none", "dp", "fsdp", "tp", "dp_tp")
LOSS_RTOL = 1e-5  # reductions over shards run in another order than on one device


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    from conftest import Sandbox

    box = Sandbox(tmp_path_factory.mktemp("sharding"))
    proc = box.run("+exp=sharding_cpu", "model=vit", "run.optimizer=adamw", "run.steps=6", "run.warmup=2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {h["config"]["sharding"]["name"]: h for h in box.heads()}


def test_every_layout_matches_unsharded_loss(layouts):
    assert set(layouts) == set(LAYOUTS) and all(h["status"] == "ok" for h in layouts.values())
    base = layouts["none"]["results"]["loss"]
    for name, h in layouts.items():
        for a, b in zip(base, h["results"]["loss"]):
            assert abs(a - b) <= LOSS_RTOL * abs(a), (name, base, h["results"]["loss"])


def test_per_device_bytes_and_collectives(layouts):
    for name in ("dp", "fsdp", "tp", "dp_tp"):
        sh = layouts[name]["results"]["sharding"]
        assert sh["devices"] == 8 if name != "tp" else sh["devices"] == 2
        assert sum(sh["collectives"].values()) > 0, name  # GSPMD had to communicate
    fsdp = layouts["fsdp"]["results"]["sharding"]
    assert fsdp["param_bytes_per_device"] <= 1.05 * fsdp["param_bytes_total"] / 8
    dp = layouts["dp"]["results"]["sharding"]
    assert dp["param_bytes_per_device"] == dp["param_bytes_total"]  # replicated
    tp = layouts["tp"]["results"]["sharding"]
    assert tp["param_bytes_per_device"] < 0.75 * tp["param_bytes_total"]
    assert "sharding" not in layouts["none"]["results"]


@pytest.mark.parametrize("args,message", [
    (["sharding=dp", "run.batch_size=30"], "run.batch_size=30 does not split over sharding.mesh.data=8 (30 % 8 = 6)"),
    (["sharding=dp_tp", "hardware=h100", "hardware.check=false"], "needs 8 devices, but hardware=h100 has 1"),
    (["sharding=tp", "+sharding.mesh.data=2"], "sharding=tp needs mesh axes {model: N}"),
    (["sharding=fsdp", "framework=torch"], "is built for framework=jax only so far"),
])
def test_impossible_mesh_refused_before_launch(args, message):
    with pytest.raises(ConfigError) as err:
        plan(args)
    assert message in str(err.value)
