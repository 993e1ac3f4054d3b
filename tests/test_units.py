"""Small pieces of the run path: identity hash, seeds, environment capture, git state, stats."""

from __future__ import annotations

import subprocess

import pytest

from repro.config import config_hash
from repro.preflight import plan
from repro import gitinfo
from repro.worker import envcapture, measure, seeding


def test_config_hash_ignores_output_places_but_not_results_keys():
    a = plan(["model=mlp"]).jobs[0]
    b = plan(["model=mlp", "ledger.dir=/elsewhere", "tracking.experiment=x", "progress.mode=none"]).jobs[0]
    c = plan(["model=mlp", "run.seed=1"]).jobs[0]
    d = plan(["model=mlp", "model.preset=tiny", "model.width=128"]).jobs[0]  # = the preset's value
    assert config_hash(a) == config_hash(b) == config_hash(d)
    assert config_hash(a) != config_hash(c)


def test_seeds_are_stable_and_distinct():
    s = seeding.derive(0)
    assert s == seeding.derive(0)
    assert len(set(s.values())) == len(s)
    assert s != seeding.derive(1)


def test_secret_variables_never_captured(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "abc123")
    monkeypatch.setenv("TORCH_SECRET_KEY", "zzz999")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    vars_ = envcapture.result_variables()
    assert "XLA_FLAGS" in vars_ and "TORCH_SECRET_KEY" not in vars_ and "HF_TOKEN" not in vars_
    assert envcapture.redact("token abc123 in a traceback") == "token *** in a traceback"


@pytest.mark.slow
def test_ledger_records_do_not_make_the_tree_dirty(tmp_path):
    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    (tmp_path / "ledger" / "2026-01-01").mkdir(parents=True)
    (tmp_path / "ledger" / "2026-01-01" / "abc.json").write_text("{}")
    clean = gitinfo.state(tmp_path, tmp_path / "ledger")
    assert clean["dirty"] is False and clean["diff_sha256"] is None
    (tmp_path / "code.py").write_text("x = 2\n")
    dirty = gitinfo.state(tmp_path, tmp_path / "ledger")
    assert dirty["dirty"] is True and dirty["changed"] == ["code.py"] and dirty["diff_sha256"]


def test_summary_separates_first_second_and_steady():
    times = [5.0, 2.0, 1.0, 1.0, 1.1, 0.9, 1.0]
    s = measure.summarise(times, [3.0] * 7, warmup=2, batch_size=10)
    assert (s["first_step_s"], s["second_step_s"], s["steady_steps"]) == (5.0, 2.0, 5)
    assert s["steady_median_s"] == 1.0 and s["samples_per_s"] == 10.0
    assert s["steady_p10_s"] < s["steady_median_s"] < s["steady_p90_s"]


@pytest.mark.slow
def test_repo_root_escapes_dvc_temporary_copies(tmp_path):
    """`dvc exp run --temp/--queue` runs in <repo>/.dvc/tmp/exps/<tmp>/: records belong to <repo>."""
    import os
    import shutil
    import sys

    from repro import paths

    copy = tmp_path / "repo" / ".dvc" / "tmp" / "exps" / "tmpab12" / "src"
    shutil.copytree(paths.src_dir() / "repro", copy / "repro", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "REPRO_ROOT"}
    env["PYTHONPATH"] = str(copy)
    out = subprocess.run([sys.executable, "-c", "from repro import paths; print(paths.repo_root())"],
                         env=env, capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()
    assert out == str(tmp_path / "repo")


def test_sharding_specs_follow_the_shared_layout_rules():
    """The SPMD specs of JAX and PyTorch/XLA: FSDP on the largest divisible dim, Megatron TP on
    [out, in] weights (both backends' layout), undividable dims kept whole."""
    from repro.backends.layouts import param_spec

    mesh = {"data": 4, "model": 2}
    assert param_spec("fsdp", mesh, ["hidden", "0", "weight"], (256, 64), 3) == ("data", None)
    assert param_spec("fsdp", mesh, ["hidden", "0", "weight"], (6, 64), 3) == (None, "data")
    assert param_spec("fsdp", mesh, ["head", "bias"], (10,), 3) == (None,)  # 10 % 4: whole
    assert param_spec("dp_tp", mesh, ["blocks", "0", "attn", "q", "weight"], (64, 32), None) == ("model", None)
    assert param_spec("dp_tp", mesh, ["blocks", "0", "attn", "o", "weight"], (32, 64), None) == (None, "model")
    assert param_spec("tp", mesh, ["blocks", "0", "attn", "q", "bias"], (64,), None) == ("model",)
    assert param_spec("tp", mesh, ["blocks", "0", "attn", "o", "bias"], (32,), None) == (None,)
    assert param_spec("tp", mesh, ["hidden", "2", "weight"], (64, 64), 3) == (None, None)  # unpaired last layer
    assert param_spec("tp", {"model": 3}, ["blocks", "0", "mlp", "fc1", "weight"], (64, 32), None) == (None, None)
    assert param_spec("dp", mesh, ["blocks", "0", "mlp", "fc1", "weight"], (64, 32), None) == (None, None)


def test_fingerprint_and_replay_see_the_cpu_instruction_sets():
    """One "AMD EPYC" model string covered AVX-512 and AVX2-only machines whose XLA results differ
    in the last bits: the ISA is part of the fingerprint, and a replay lists it."""
    from repro import replay

    env = envcapture.capture({"devices": ["cpu"]})
    assert env["cpu"]["isa"] and env["fingerprint"] == envcapture.fingerprint(env)
    other = {**env, "cpu": {**env["cpu"], "isa": [*env["cpu"]["isa"], "avx512f"]}}
    assert envcapture.fingerprint(other) != env["fingerprint"]
    config = plan(["model=mlp"]).jobs[0]
    then = replay.environment_then({"environment": {**other, "variables": {"REPRO_THREADS": "2"}}})
    assert then["cpu"]["isa"] != replay.environment_now(config)["cpu"]["isa"]
    assert replay.environment_then({"environment": {"cpu": {"model": "x"}}})["cpu"]["isa"] is None  # older records
