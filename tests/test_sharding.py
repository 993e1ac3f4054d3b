"""Sharded layouts: JAX on simulated CPU devices, torch on gloo processes, PyTorch/XLA SPMD on
simulated PJRT CPU devices. Same losses as unsharded, FSDP's bytes ~1/N, impossible meshes
refused, a dead rank fails the run."""

from __future__ import annotations

import pytest

from repro.config import ConfigError
from repro.preflight import plan

LAYOUTS = ("none", "dp", "fsdp", "tp", "dp_tp")
LOSS_RTOL = 1e-5  # reductions over shards run in another order than on one device


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    from conftest import Sandbox

    box = Sandbox(tmp_path_factory.mktemp("sharding"))
    # torch's dp and fsdp on 2 rank processes, not the exp's 4 (each rank a process importing torch:
    # ~6.5 s of CPU per layout saved): the same layouts over N ranks. Four torch ranks run in
    # test_scaleout.py (dp over two nodes: ranks 0-3, the unsharded loss) and in dp_tp here
    # (2 x 2); the exp's own meshes are checked in test_exp_meshes_as_shipped.
    proc = box.run("+exp=sharding_cpu", "run.optimizer=adamw", "run.steps=6", "run.warmup=2",
                   f"+sharding.mesh_by_framework.torch={{dp: {{data: {TORCH_DATA}}}, fsdp: {{data: {TORCH_DATA}}}}}",
                   timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {(h["config"]["framework"]["name"], h["config"]["sharding"]["name"]): h for h in box.heads()}


FRAMEWORKS = ("jax", "torch", "torch_xla")
TORCH_DATA = 2  # torch's data axis in `layouts` (the exp's own: 4)


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_layout_matches_unsharded_loss(layouts, framework):
    runs = {s: h for (f, s), h in layouts.items() if f == framework}
    assert set(runs) == set(LAYOUTS) and all(h["status"] == "ok" for h in runs.values())
    base = runs["none"]["results"]["loss"]
    for name, h in runs.items():
        for a, b in zip(base, h["results"]["loss"]):
            assert abs(a - b) <= LOSS_RTOL * abs(a), (framework, name, base, h["results"]["loss"])


# +exp=sharding_cpu: JAX and PyTorch/XLA on 8 simulated devices, torch on 4 rank processes (tp on 2);
# `layouts` runs torch's dp and fsdp on TORCH_DATA ranks.
EIGHT = {"dp": 8, "fsdp": 8, "tp": 8, "dp_tp": 8}
DEVICES = {"jax": EIGHT, "torch_xla": EIGHT, "torch": {"dp": 4, "fsdp": 4, "tp": 2, "dp_tp": 4}}
RUN_DEVICES = {**DEVICES, "torch": {**DEVICES["torch"], "dp": TORCH_DATA, "fsdp": TORCH_DATA}}


def test_exp_meshes_as_shipped():
    """The exp's own meshes (what `layouts` narrows for torch), each framework's device count."""
    for job in plan(["+exp=sharding_cpu"]).jobs:
        mesh = job.sharding.mesh
        devices = 1
        for n in mesh.values():
            devices *= n
        assert devices == DEVICES[job.framework.name].get(job.sharding.name, 1), (job.framework.name, job.sharding.name, mesh)


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_per_device_bytes(layouts, framework):
    sharded = {s: layouts[framework, s]["results"]["sharding"] for s in ("dp", "fsdp", "tp", "dp_tp")}
    for name, sh in sharded.items():
        assert sh["devices"] == RUN_DEVICES[framework][name], (name, sh)
    fsdp, dp, tp = sharded["fsdp"], sharded["dp"], sharded["tp"]
    n = fsdp["devices"]
    assert fsdp["param_bytes_per_device"] <= 1.05 * fsdp["param_bytes_total"] / n  # ~1/N (bias rounding)
    assert dp["param_bytes_per_device"] == dp["param_bytes_total"]  # replicated
    assert tp["param_bytes_per_device"] < 0.75 * tp["param_bytes_total"]
    assert "sharding" not in layouts[framework, "none"]["results"]


@pytest.mark.slow
def test_equal_layouts_hold_equal_bytes_in_both_xla_frameworks(layouts):
    """The same rules over the same 8-device mesh: torch's [out, in] weights split as Flax's [in, out]."""
    for name in ("dp", "fsdp", "tp", "dp_tp"):
        jax_sh, xla_sh = (layouts[f, name]["results"]["sharding"] for f in ("jax", "torch_xla"))
        assert xla_sh["spmd"] is True
        assert (xla_sh["param_bytes_total"], xla_sh["param_bytes_per_device"]) == \
            (jax_sh["param_bytes_total"], jax_sh["param_bytes_per_device"]), name
    assert layouts["torch_xla", "fsdp"]["environment"]["variables"]["CPU_NUM_DEVICES"] == "8"


@pytest.mark.slow
def test_jax_collectives_and_torch_ranks_recorded(layouts):
    for name in ("dp", "fsdp", "tp", "dp_tp"):
        assert sum(layouts["jax", name]["results"]["sharding"]["collectives"].values()) > 0, name
        ranks = layouts["torch", name]["results"]["ranks"]
        assert [r["rank"] for r in ranks] == list(range(RUN_DEVICES["torch"][name]))
        assert all(r["steady_median_s"] > 0 and r["fingerprint"] for r in ranks)


@pytest.mark.parametrize("args,message", [
    (["sharding=dp", "run.batch_size=30"], "run.batch_size=30 does not split over sharding.mesh.data=4 (30 % 4 = 2)"),
    (["sharding=dp_tp", "hardware=h100", "hardware.check=false"], "needs 4 devices, but hardware=h100 has 1"),
    (["sharding=tp", "+sharding.mesh.data=2"], "sharding=tp needs mesh axes {model: N}"),
    (["sharding=fsdp", "framework=torch_compile"], "framework=torch_compile runs unsharded"),
    (["sharding=fsdp", "framework=torch_xla_compile"], "framework=torch_xla_compile runs unsharded"),
    (["sharding=tp", "framework=torch", "model=vit"], "declares partitioning['torch_tp'] (model ffn, mlp;"),
])
def test_impossible_mesh_refused_before_launch(args, message):
    with pytest.raises(ConfigError) as err:
        plan(args)
    assert message in str(err.value)


@pytest.mark.slow
def test_dead_rank_fails_the_run_naming_it(sandbox):
    heads, out, after_kill = sandbox.kill_one_process_mid_run(
        "framework=torch", "model=mlp", "sharding=dp", "sharding.mesh.data=2", "run.steps=1000000,8",
        "run.timeout_s=240", "tracking.experiment=deadrank", settle_s=6)  # into the timed loop
    assert [h["status"] for h in heads] == ["failed", "ok"], out[-3000:]
    reason = heads[0]["error"]["reason"]
    assert "rank" in reason and "SIGKILL" in reason, reason
    assert heads[0]["wall_s"] < 240 and after_kill < 240
