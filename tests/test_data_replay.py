"""DVC-tracked data and replay, through the real CLIs (repro, dvc, git)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import Sandbox, shipped_ledger
from repro import paths
from repro.ledger import Ledger

pytestmark = pytest.mark.slow  # every test here starts a process

REPO = paths.repo_root()
BIN = Path(sys.executable).parent
DIGITS = ["data=digits", "model.preset=digits", "run.steps=60", "run.warmup=5", "run.batch_size=64",
          "run.optimizer=adamw", "run.lr=0.003"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"  # `python` in dvc.yaml is this interpreter
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def dvc_repo(tmp_path_factory) -> Path:
    """A fresh git+DVC checkout of repro's data pipeline: `dvc repro` prepares the digits."""
    root = tmp_path_factory.mktemp("dvcrepo")
    for name in ("conf", ".dvc", "src", "pipelines"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("tmp", "cache", "__pycache__"))
    for name in ("dvc.yaml", "dvc.lock", ".dvcignore", ".gitignore"):
        shutil.copy(REPO / name, root / name)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    proc = subprocess.run(["dvc", "repro", "prepare_digits"], cwd=root, env=_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root


def test_dvc_repro_reproduces_the_locked_bytes(dvc_repo):
    assert (dvc_repo / "dvc.lock").read_text() == (REPO / "dvc.lock").read_text()


def test_digits_run_records_dvc_lock_md5(dvc_repo, tmp_path):
    box = Sandbox(tmp_path)
    proc = subprocess.run(box.repro_cmd(*DIGITS), cwd=tmp_path, env={**box.env(), "REPRO_ROOT": str(dvc_repo)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lock = yaml.safe_load((dvc_repo / "dvc.lock").read_text())
    locked = {o["path"]: o["md5"] for o in lock["stages"]["prepare_digits"]["outs"]}
    (record,) = box.heads()
    assert record["data"]["md5"] == locked
    assert 0.5 < record["results"]["test_accuracy"] <= 1.0
    (run,) = box.mlflow_runs("repro")
    assert run.data.tags["repro.data_sha256"] == record["data"]["sha256"]
    # MLflow's Dataset column: each DVC file with its dvc.lock md5; its Source column: the command
    assert {(d.dataset.source, d.dataset.digest) for d in run.inputs.dataset_inputs} == set(locked.items())
    assert run.data.tags["mlflow.source.name"].startswith("python -m repro ")
    assert run.data.tags.get("mlflow.source.git.commit") == record["git"]["commit"]  # None: not a git checkout


def test_one_byte_changed_refuses_naming_the_file(dvc_repo, tmp_path):
    box = Sandbox(tmp_path)
    victim = dvc_repo / "data/digits/train_y.npy"
    original = victim.read_bytes()
    try:
        data = bytearray(original)
        data[-1] ^= 1
        victim.write_bytes(bytes(data))
        proc = subprocess.run(box.repro_cmd(*DIGITS), cwd=tmp_path, env={**box.env(), "REPRO_ROOT": str(dvc_repo)},
                              capture_output=True, text=True, timeout=300)
    finally:
        victim.write_bytes(original)
    assert proc.returncode == 2
    assert "data/digits/train_y.npy does not match dvc.lock" in proc.stderr and "dvc pull" in proc.stderr
    assert not box.ledger.exists()


def test_dvc_exp_run_lands_in_ledger_and_mlflow(dvc_repo, tmp_path):
    box = Sandbox(tmp_path)
    subprocess.run(["git", "add", "-A"], cwd=dvc_repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"], cwd=dvc_repo,
                   check=True)
    env = _env(MLFLOW_TRACKING_URI=box.uri, REPRO_ROOT=str(dvc_repo))
    proc = subprocess.run(["dvc", "exp", "run", "pipelines/run/dvc.yaml", "-S", "framework=torch", "-S", "run.steps=8", "-S",
                           f"ledger.dir={box.ledger}"], cwd=dvc_repo, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (record,) = box.heads()
    assert record["status"] == "ok" and record["config"]["framework"]["name"] == "torch"
    assert record["overrides"] == ["dvc:params.yaml"]
    (run,) = box.mlflow_runs("repro")
    assert run.data.tags["repro.ledger_id"] == record["id"]


def _replay(box: Sandbox, *args: str, **env: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "repro", "replay", *args, "--ledger", str(box.ledger), "--progress", "plain"]
    return subprocess.run(cmd, cwd=box.root, env=box.env(**env), capture_output=True, text=True, timeout=600)


def test_replay_jax_and_torch_exact(recorded):
    proc = _replay(recorded, "--experiment", "reporttest")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    verdicts = [r for r in recorded.records() if r["kind"] == "replay"]
    assert sorted(v["status"] for v in verdicts) == ["exact", "exact"]
    originals = {r["id"]: r for r in recorded.records() if r.get("sweep", {}).get("experiment") == "reporttest"}
    assert {v["of"] for v in verdicts} <= set(originals)
    assert "environment differs" not in proc.stdout and "data differs" not in proc.stdout
    runs = recorded.mlflow_runs("reporttest")
    assert sum(r.data.tags.get("repro.replay_verdict") == "exact" for r in runs) == 2


def test_replay_after_model_code_change_differs(recorded, tmp_path):
    torch_run = next(r for r in recorded.heads() if r.get("kind") == "run"
                     and r["config"]["framework"]["name"] == "torch" and "replay_of" not in r)
    src = tmp_path / "src"
    shutil.copytree(REPO / "src" / "repro", src / "repro", ignore=shutil.ignore_patterns("__pycache__"))
    model = src / "repro/models/mlp/torch_model.py"
    model.write_text(model.read_text().replace("nn.functional.gelu(layer(x))", "nn.functional.relu(layer(x))"))
    proc = _replay(recorded, torch_run["id"], PYTHONPATH=str(src), REPRO_ROOT=str(REPO))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    verdict = next(r for r in recorded.records() if r["kind"] == "replay" and r["of"] == torch_run["id"]
                   and r["status"] != "exact")
    assert verdict["status"] == "differs"
    assert any("losses first differ at step 1" in reason for reason in verdict["reasons"])
    assert "src_sha256" in proc.stdout and "verdict: differs" in proc.stdout


def test_replay_lists_package_versions_that_differ(recorded):
    ledger = Ledger(recorded.ledger)
    jax_run = next(r for r in ledger.heads() if r.get("kind") == "run" and r["config"]["framework"]["name"] == "jax")
    old = {k: v for k, v in jax_run.items() if k not in ("id", "created")}
    old["environment"] = {**old["environment"], "packages": {**old["environment"]["packages"], "numpy": "1.0.0"}}
    if then := old["environment"].get("env_hash"):  # the whole environment is what a replay compares
        from repro.envs import lock

        old["environment"]["env_hash"] = lock.store(ledger.root, lock.with_pins(lock.load(ledger.root, then),
                                                                                ["numpy==1.0.0"]))
    doctored = ledger.append(old)
    proc = _replay(recorded, doctored["id"])
    before_run = proc.stdout.split("starting")[0]
    assert "packages.numpy: '1.0.0' →" in before_run, proc.stdout[-3000:]


def test_ledger_diff_names_what_differs(recorded):
    runs = sorted((r for r in recorded.heads() if r.get("kind") == "run"), key=lambda r: r["created"])
    jax_run, torch_run = (next(r for r in runs if r["config"]["framework"]["name"] == f) for f in ("jax", "torch"))
    proc = subprocess.run([sys.executable, "-m", "repro", "ledger", "diff", jax_run["id"], torch_run["id"],
                           "--ledger", str(recorded.ledger)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "config.framework.name" in proc.stdout and "results.loss_sha256" in proc.stdout
    assert "environment.framework.name" in proc.stdout


ACCURACY_MARGIN = 0.04  # JAX vs PyTorch test accuracy after the same 300 AdamW steps (different inits)


def test_digits_accuracy_close_across_frameworks(dvc_repo, tmp_path):
    box = Sandbox(tmp_path)
    proc = subprocess.run(box.repro_cmd("+exp=digits", "model=mlp"), cwd=tmp_path,
                          env={**box.env(), "REPRO_ROOT": str(dvc_repo)}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    acc = {h["config"]["framework"]["name"]: h["results"]["test_accuracy"] for h in box.heads()}
    assert set(acc) == {"jax", "torch"} and min(acc.values()) > 0.9, acc
    assert abs(acc["jax"] - acc["torch"]) <= ACCURACY_MARGIN, acc
    assert "test acc" in proc.stdout


def test_published_records_verify_and_replay(tmp_path):
    """ledger/ ships the quickstart's records: they verify, and a replay is exact where nothing differs."""
    copy = tmp_path / "ledger"
    shutil.copytree(shipped_ledger(), copy)  # what ships, not what a user ran since (replays are added to it)
    published = Ledger(copy)
    sweeps: dict[str, list] = {}
    for r in published.heads():
        if r.get("kind") == "run" and r["status"] == "ok" and r["sweep"]["experiment"] == "quickstart":
            sweeps.setdefault(r["sweep"]["id"], []).append(r)
    assert sweeps and all(len(runs) == 6 for runs in sweeps.values()) and published.verify() == []
    runs = max(sweeps.values(), key=lambda runs: max(r["created"] for r in runs))  # the newest publication
    target = next(r for r in runs if r["config"]["framework"]["name"] == "jax" and r["config"]["model"]["name"] == "mlp")
    box = Sandbox(tmp_path)
    proc = _replay(box, target["id"])
    verdict = next(r for r in Ledger(copy).records() if r.get("kind") == "replay")
    if not {"environment", "data"} & set(verdict["differences_before"]):
        # Same machine kind and data; only code may have changed since publishing. A change of
        # numerics must be deliberate: re-publish the records (`make quickstart`, commit ledger/).
        assert verdict["status"] == "exact", proc.stdout[-3000:]
    else:  # another machine: the replay must say what differs
        assert "differs:" in proc.stdout and verdict["status"] in ("exact", "close", "differs")
