"""run.deterministic means the same in every framework: the worker environment a GPU or TPU profile
gives each framework (read without a device), a user XLA_FLAGS that contradicts it refused, and the
fairness audit comparing what each worker ran with, not the config value."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from repro.backends import determinism
from repro.config import ConfigError
from repro.config.schema import as_dict
from repro.preflight import plan
from repro.report.audit import audit
from repro.worker import seeding

PAIR = ("-m", "framework=jax,torch", "model=mlp", "hardware.check=false")


def jobs(*overrides: str):
    p = plan([*PAIR, *overrides])
    return {c.framework.name: (c, list(o)) for c, o in zip(p.jobs, p.overrides)}


@pytest.fixture(autouse=True)
def no_user_flags(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)


def test_a_gpu_profile_gives_jax_deterministic_ops_beside_torchs_switches():
    on = jobs("hardware=h100", "run.deterministic=true")
    jax_env, torch_env = (seeding.worker_env(on[f][0]) for f in ("jax", "torch"))
    assert jax_env["XLA_FLAGS"] == "--xla_gpu_deterministic_ops=true"
    assert "XLA_FLAGS" not in torch_env and torch_env["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    off = jobs("hardware=h100", "run.deterministic=false")
    assert all("XLA_FLAGS" not in seeding.worker_env(off[f][0]) for f in ("jax", "torch"))
    assert all("CUBLAS_WORKSPACE_CONFIG" not in seeding.worker_env(off[f][0]) for f in ("jax", "torch"))


def test_the_users_xla_flags_are_kept_and_merged(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/hlo --xla_gpu_autotune_level=2")
    config = plan(["framework=jax", "model=mlp", "hardware=h200", "hardware.check=false"]).jobs[0]
    assert seeding.worker_env(config)["XLA_FLAGS"] == \
        "--xla_dump_to=/tmp/hlo --xla_gpu_autotune_level=2 --xla_gpu_deterministic_ops=true"
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_deterministic_ops")  # already on: not said twice
    assert "XLA_FLAGS" not in seeding.worker_env(config)
    sharded = plan(["framework=jax", "model=mlp", "sharding=dp"]).jobs[0]  # a CPU mesh of 4
    assert seeding.worker_env(sharded)["XLA_FLAGS"] == \
        "--xla_gpu_deterministic_ops --xla_force_host_platform_device_count=4"


def test_a_tpu_profile_sets_no_flag_and_says_why():
    config = plan(["framework=jax", "model=mlp", "hardware=tpu_v6e", "hardware.check=false"]).jobs[0]
    env = seeding.worker_env(config)
    assert "XLA_FLAGS" not in env
    assert "XLA:TPU kernels are deterministic" in determinism.planned(True, True, "tpu", env)
    assert determinism.xla_effective("tpu", "", None)["deterministic_kernels"] is True


def test_xla_flags_that_contradict_deterministic_are_refused_naming_both(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x --xla_gpu_deterministic_ops=false")
    with pytest.raises(ConfigError) as e:
        plan([*PAIR, "hardware=h100"])
    assert "run.deterministic=true" in str(e.value) and "--xla_gpu_deterministic_ops=false" in str(e.value)
    assert len(str(e.value).splitlines()) == 1
    assert plan([*PAIR, "hardware=h100", "run.deterministic=false"]).jobs  # asked for nondeterminism: fine
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_exclude_nondeterministic_ops=0")
    with pytest.raises(ConfigError, match="exclude_nondeterministic_ops=0"):
        plan([*PAIR, "hardware=h100"])


# A GPU worker's settings, read on this CPU machine: the worker's own environment (from
# seeding.worker_env), torch's own configure() and JAX's XLA_FLAGS reader, each in a fresh process
# as the worker would be; only the device is pretended (on_gpu / platform "gpu").
WORKER = """
import json, os, sys
from repro.backends import determinism
from repro.preflight import plan
config = plan(sys.argv[1:]).jobs[0]
if config.framework.backend == "jax":
    import jax
    out = determinism.xla_effective("gpu", os.environ.get("XLA_FLAGS", ""), jax.config.jax_default_matmul_precision)
else:
    import torch
    from repro.backends.base import BuildContext
    from repro.backends.torch_backend import configure
    configure(BuildContext(config=config, entry=None, dims={}, seeds={"torch": 0}, batches=[], threads=1,
                           cache_dir="/tmp"))
    out = determinism.torch_effective(torch, True, os.environ)
json.dump(out, sys.stdout)
"""


def worker_record(config, overrides: list[str], n: int) -> dict:
    env = {**seeding.worker_env(config)}
    import os

    proc = subprocess.run([sys.executable, "-c", WORKER, *overrides], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"id": f"{config.framework.name}{n}", "status": "ok", "kind": "run", "config": as_dict(config),
            "overrides": overrides, "effective": {"determinism": json.loads(proc.stdout)}}


@pytest.fixture(scope="module")
def gpu_records() -> dict[str, list[dict]]:
    out = {}
    for flag in ("true", "false"):
        pair = plan(["-m", "framework=jax,torch", "model=mlp", "hardware=h100", "hardware.check=false",
                     f"run.deterministic={flag}"])
        out[flag] = [worker_record(c, [o for o in overrides if o != "-m"], i)
                     for i, (c, overrides) in enumerate(zip(pair.jobs, pair.overrides))]
    return out


@pytest.mark.slow  # starts a process
def test_the_audit_of_a_gpu_pair_reads_what_each_worker_ran_with(gpu_records):
    names = lambda r: r["config"]["framework"]["name"]  # noqa: E731
    for flag, records in gpu_records.items():
        ran = {names(r): r["effective"]["determinism"] for r in records}
        assert ran["jax"]["deterministic_kernels"] is ran["torch"]["deterministic_kernels"] is (flag == "true")
        assert ran["jax"]["autotuning"] is ran["torch"]["autotuning"] is (flag == "false")
        found = audit(records, names)
        assert not found.differences, found.differences
    on = {names(r): r["effective"]["determinism"] for r in gpu_records["true"]}
    assert on["jax"]["xla_flags"] == "--xla_gpu_deterministic_ops=true"
    assert on["torch"]["torch_deterministic_algorithms"] and on["torch"]["cudnn_deterministic"]
    assert not on["torch"]["cudnn_benchmark"] and on["torch"]["cublas_workspace_config"] == ":4096:8"
    off = {names(r): r["effective"]["determinism"] for r in gpu_records["false"]}
    assert off["torch"]["cudnn_benchmark"] and off["jax"]["xla_flags"] == ""


@pytest.mark.slow  # starts a process
def test_a_jax_worker_without_the_flag_beside_a_deterministic_torch_is_a_difference(gpu_records):
    """What the first GPU pass ran: torch's switches on, JAX's XLA free. The config values were equal."""
    jax_free = next(r for r in gpu_records["false"] if r["config"]["framework"]["name"] == "jax")
    torch_on = next(r for r in gpu_records["true"] if r["config"]["framework"]["name"] == "torch")
    jax_free = {**jax_free, "config": torch_on["config"] | {"framework": jax_free["config"]["framework"]},
                "overrides": ["framework=jax"]}
    torch_on = {**torch_on, "overrides": ["framework=torch"]}
    found = audit([jax_free, torch_on], lambda r: r["config"]["framework"]["name"])
    labels = {label: values for label, values in found.differences}
    assert labels["deterministic kernels"] == {jax_free["id"]: False, torch_on["id"]: True}
    assert labels["autotuning"] == {jax_free["id"]: True, torch_on["id"]: False}
    assert "xla_flags=—" in found.details[("deterministic kernels", jax_free["id"])]
    assert "cudnn_deterministic=True" in found.details[("deterministic kernels", torch_on["id"])]
