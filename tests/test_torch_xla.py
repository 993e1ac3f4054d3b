"""PyTorch/XLA end to end on the CPU: framework=torch_xla / torch_xla_compile through the real CLI.

Their worker runs in its own interpreter (torch-xla 2.9 needs torch 2.9; the main venv has
2.13): `.venv-xla` at the repo root, made by `make xla-env` (`make test` runs it first), or
$REPRO_XLA_PYTHON. Without it the end-to-end tests fail, saying how to create it; the tests
of what a missing environment reports run everywhere. About a minute and a half on 2 cores.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Sandbox
from repro import paths

XLA_PYTHON = Path(os.environ.get("REPRO_XLA_PYTHON") or paths.repo_root() / ".venv-xla" / "bin" / "python")
MAKE_HINT = "make xla-env"


def _unavailable(python: Path) -> str | None:
    """Why `python` cannot run the torch_xla worker, or None when it can."""
    if not python.exists():
        return f"no PyTorch/XLA interpreter at {python}: run `{MAKE_HINT}` (scripts/make_xla_env.sh) to create it"
    proc = subprocess.run([str(python), "-c", "import torch_xla"], env={**os.environ, "PJRT_DEVICE": "CPU"},
                          capture_output=True, text=True, timeout=300)
    if proc.returncode:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return f"{python} cannot import torch_xla ({tail}): run `{MAKE_HINT}` to (re)create it"
    return None


@pytest.fixture(scope="module")
def xla_python() -> str:
    if reason := _unavailable(XLA_PYTHON):  # `make test` creates it; pytest alone may not have
        pytest.fail(reason)
    return str(XLA_PYTHON)


def _one(box: Sandbox, framework: str) -> dict:
    found = [h for h in box.heads() if h["config"]["framework"]["name"] == framework]
    assert len(found) == 1, [h["config"]["framework"]["name"] for h in box.heads()]
    return found[0]


@pytest.fixture(scope="module")
def vit(tmp_path_factory, xla_python) -> Sandbox:
    """The tiny ViT, 6 steps: torch_xla and JAX with their IR captured, plain torch (its first
    loss; it lowers to no IR, so capture_ir=true would be refused for it)."""
    box = Sandbox(tmp_path_factory.mktemp("xla_vit"))
    common = ("model=vit", "run.steps=6", "run.warmup=2", "tracking.experiment=xla")
    for args in (("-m", "framework=torch_xla,jax", "run.capture_ir=true"), ("framework=torch",)):
        proc = box.run(*args, *common, REPRO_XLA_PYTHON=xla_python)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return box


@pytest.mark.slow
def test_vit_run_records_versions_and_effective_settings(vit):
    rec = _one(vit, "torch_xla")
    assert rec["status"] == "ok"
    fw = rec["environment"]["framework"]
    assert fw["name"] == "torch_xla"
    assert fw["versions"]["torch"].startswith("2.9.") and fw["versions"]["torch_xla"].startswith("2.9.")
    assert fw["device_type"] == "CPU" and fw["devices"] == ["xla:0"]
    assert rec["environment"]["packages"]["torch-xla"].startswith("2.9.")
    assert rec["environment"]["python"]["executable"].endswith("python")
    assert rec["environment"]["variables"]["PJRT_DEVICE"] == "CPU"
    eff = rec["effective"]
    assert eff["platform"] == "xla" and eff["xla_device_type"] == "CPU" and eff["lazy_tensors"] is True
    assert eff["xla_mat_mul_precision"] == eff["xla_mat_mul_precision_requested"] == "highest"  # precision=fp32
    assert eff["fp32_matmul"] == "fp32" and eff["param_dtypes"] == ["float32"] and eff["compiled"] is False
    res = rec["results"]
    assert len(res["loss"]) == 6 and all(t > 0 for t in (res["first_step_s"], res["second_step_s"], res["steady_median_s"]))
    # One lazy graph for the whole step, compiled once and reused: no per-step recompilation.
    assert res["compile"]["xla_compiles"] == 1, res["compile"]
    assert res["peak_memory"]["kind"] == "host_rss"


@pytest.mark.slow
def test_vit_starts_where_the_torch_backend_starts(vit):
    """Same seed ⇒ same initial parameters and batches: the first losses agree (fp32 rounding apart)."""
    xla, cpu = _one(vit, "torch_xla"), _one(vit, "torch")
    assert xla["config_hash"] != cpu["config_hash"]
    assert xla["results"]["loss"][0] == pytest.approx(cpu["results"]["loss"][0], rel=1e-4)


@pytest.mark.slow
def test_vit_ir_artifacts_in_mlflow(vit, tmp_path):
    from mlflow.tracking import MlflowClient

    rec = _one(vit, "torch_xla")
    client = MlflowClient(tracking_uri=vit.uri)
    [run] = [r for r in vit.mlflow_runs(rec["sweep"]["experiment"]) if r.data.tags.get("repro.ledger_id") == rec["id"]]
    run_id = run.info.run_id
    assert {a.path for a in client.list_artifacts(run_id, "ir")} == {"ir/stablehlo.mlir", "ir/hlo.txt"}
    stablehlo = Path(client.download_artifacts(run_id, "ir/stablehlo.mlir", str(tmp_path))).read_text()
    assert "stablehlo.dot_general" in stablehlo and "func.func @main" in stablehlo
    hlo = Path(client.download_artifacts(run_id, "ir/hlo.txt", str(tmp_path))).read_text()
    assert hlo.startswith("HloModule")


@pytest.mark.slow
def test_compile_openxla_run(sandbox, xla_python):
    proc = sandbox.run("framework=torch_xla_compile", "model=vit", "run.steps=4", "run.warmup=2",
                       REPRO_XLA_PYTHON=xla_python)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (rec,) = sandbox.heads()
    assert rec["status"] == "ok"
    assert rec["effective"]["compiled"] is True and rec["effective"]["compile_backend"] == "openxla"
    assert rec["results"]["compile"]["compile_backend"] == "openxla"
    assert rec["results"]["compile"]["graph_breaks"] == 0


@pytest.mark.slow
def test_missing_interpreter_is_recorded_with_how_to_create_it(sandbox):
    proc = sandbox.run("framework=torch_xla", "framework.python=/nonexistent/python", "model=mlp",
                       "run.steps=3", "run.warmup=2")
    assert proc.returncode != 0
    (rec,) = sandbox.heads()
    assert rec["status"] == "failed"
    reason = rec["error"]["reason"]
    assert "/nonexistent/python" in reason and "could not start the worker interpreter" in reason
    assert MAKE_HINT in reason


@pytest.mark.slow
def test_interpreter_without_torch_xla_says_how_to_create_it(sandbox):
    assert importlib.util.find_spec("torch_xla") is None, "needs an interpreter without torch_xla (the main venv)"
    proc = sandbox.run("framework=torch_xla", f"framework.python={sys.executable}", "model=mlp",
                       "run.steps=3", "run.warmup=2")
    assert proc.returncode != 0
    (rec,) = sandbox.heads()
    assert rec["status"] == "failed"
    assert "cannot import torch_xla" in rec["error"]["reason"] and MAKE_HINT in rec["error"]["reason"]


def test_default_interpreter_is_the_repo_env(monkeypatch, tmp_path):
    """framework.python defaults to .venv-xla/bin/python under the repo root, whatever the cwd."""
    from repro.preflight import plan
    from repro.job import launch

    monkeypatch.delenv("REPRO_XLA_PYTHON", raising=False)
    for name in ("torch_xla", "torch_xla_compile"):
        (job,) = plan([f"framework={name}"]).jobs
        assert job.framework.backend == "torch_xla" and job.framework.python == ".venv-xla/bin/python"
    monkeypatch.setenv("REPRO_XLA_PYTHON", "/opt/xla/bin/python")
    (job,) = plan(["framework=torch_xla"]).jobs
    assert job.framework.python == "/opt/xla/bin/python"
    monkeypatch.chdir(tmp_path)
    command = launch.worker_command(".venv-xla/bin/python", tmp_path / "spec.json")
    assert command[0] == str(paths.repo_root() / ".venv-xla" / "bin" / "python")


@pytest.mark.slow
def test_ir_diff_jax_against_torch_xla(vit):
    jax_run, xla_run = _one(vit, "jax"), _one(vit, "torch_xla")
    for rec in (jax_run, xla_run):
        assert sum(rec["results"]["ir_ops"]["stablehlo.mlir"].values()) > 0
    proc = subprocess.run([sys.executable, "-m", "repro", "ir", "diff", jax_run["id"], xla_run["id"],
                           "--ledger", str(vit.ledger)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"StableHLO ops: jax {jax_run['id'][:8]} vs torch_xla {xla_run['id'][:8]}" in proc.stdout
    assert "op kinds differ in count" in proc.stdout
    # The Stack Wars finding: PyTorch/XLA lowers layer norm to batch_norm_training/_grad, JAX to
    # explicit reduces; the matmuls (dot_general) are the same in both and so are not listed.
    jax_ops, xla_ops = (r["results"]["ir_ops"]["stablehlo.mlir"] for r in (jax_run, xla_run))
    assert "batch_norm_training" in proc.stdout and xla_ops["batch_norm_training"] > 0
    assert "batch_norm_training" not in jax_ops and jax_ops["reduce"] > xla_ops["reduce"]
    assert jax_ops["dot_general"] == xla_ops["dot_general"] and "dot_general" not in proc.stdout
