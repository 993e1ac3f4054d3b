"""End to end through the real CLI, real MLflow (sqlite), real worker processes.

The quickstart sweep (one round of it) runs once per session (under a minute on 2 cores) with secrets
planted in its environment; several tests read what it recorded.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import pytest

from conftest import Sandbox, worker_of
from repro.report import reruns

pytestmark = pytest.mark.slow  # every test here starts a process

SECRETS = {"HF_TOKEN": "abc123-hf-secret-value", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-K7MDENG-bPxRfiCY"}


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory) -> tuple[Sandbox, subprocess.CompletedProcess]:
    box = Sandbox(tmp_path_factory.mktemp("quickstart"))
    # the path, not the step count or the repeats (test_sweep_loop.py runs those): short, one round
    proc = box.run("+exp=quickstart", "run.steps=15", "run.repeats=1", timeout=900, **SECRETS)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return box, proc


def test_quickstart_parent_children_records_table(quickstart):
    box, proc = quickstart
    runs = box.mlflow_runs("quickstart")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    heads = box.heads()
    # {jax, torch} × {mlp, vit}, one round; a round telemetry flagged ran again (loop/sweep.py),
    # its first runs kept in the ledger and MLflow, left out of every view (report/reruns.py)
    assert len(reruns.kept(heads)) == 4 and all(h["status"] == "ok" for h in heads)
    assert len(parents) == 1 and len(children) == len(heads)
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert all(c.info.status == "FINISHED" for c in children)
    assert {c.data.tags["repro.ledger_id"] for c in children} == {h["id"] for h in heads}
    runs = [r for r in box.records() if r["kind"] == "run"]
    assert len(runs) == 2 * len(heads)  # a "started" and a "finished" record per job
    (sweep,) = [r for r in box.records() if r["kind"] == "sweep"]  # run.init=shared: frameworks agree
    assert {a["model"] for a in sweep["trajectory"]} == {"mlp/tiny", "vit/tiny"}
    assert all(a["same_init"] and a["first_step_over"] is None for a in sweep["trajectory"]), sweep
    assert parents[0].data.tags["repro.trajectory_ledger_id"] == sweep["id"]  # and on the MLflow parent run
    assert len([k for k in parents[0].data.metrics if k.startswith("trajectory/")]) == 2 * len(sweep["trajectory"])
    for model in ("mlp/tiny", "vit/tiny"):
        assert f"{model} · batch 32 · fp32 · cpu" in proc.stdout
    for h in heads:
        res = h["results"]
        assert res["first_step_s"] > 0 and res["steady_steps"] == 10 and len(res["loss"]) == 15
        assert len(res["loss_sha256"]) == len(res["params_sha256"]) == 64
        assert h["environment"]["packages"]["numpy"] and h["environment"]["fingerprint"]
        assert h["git"]["commit"] is None or len(h["git"]["commit"]) == 40
        child = next(c for c in children if c.data.tags["repro.ledger_id"] == h["id"])
        assert child.data.params["run.batch_size"] == "32"
        assert child.data.metrics["steady_median_ms"] == pytest.approx(res["steady_median_s"] * 1e3)
        assert child.data.tags["repro.config_hash"] == h["config_hash"]


def test_quickstart_artifacts_in_mlflow(quickstart):
    from mlflow.tracking import MlflowClient

    box, _ = quickstart
    client = MlflowClient(tracking_uri=box.uri)
    child = next(r for r in box.mlflow_runs("quickstart") if "mlflow.parentRunId" in r.data.tags)
    names = {a.path for a in client.list_artifacts(child.info.run_id)}
    assert {"config.yaml", "environment.json", "ledger_record.json"} <= names
    history = client.get_metric_history(child.info.run_id, "loss")
    assert [m.step for m in history] == list(range(1, 15))  # step 0 (compile) is first_step_loss


def test_secrets_appear_nowhere(quickstart):
    box, proc = quickstart
    blobs = [p.read_bytes() for p in box.root.rglob("*") if p.is_file()]
    assert blobs, "the sandbox holds the ledger, the MLflow store and its artifacts"
    for value in SECRETS.values():
        assert not any(value.encode() in b for b in blobs), f"secret value found under {box.root}"
        assert value not in proc.stdout + proc.stderr


def test_ledger_verify_then_one_byte_changed(quickstart, tmp_path):
    box, _ = quickstart
    copy = tmp_path / "ledger"
    shutil.copytree(box.ledger, copy)
    verify = [*box.repro_cmd()[:3], "ledger", "verify", "--ledger", str(copy)]
    assert subprocess.run(verify, capture_output=True).returncode == 0
    victim = sorted(copy.glob("*/*.json"))[3]
    data = bytearray(victim.read_bytes())
    i = data.index(b'"status"')
    data[i + 1] = ord("S")
    victim.write_bytes(bytes(data))
    proc = subprocess.run(verify, capture_output=True, text=True)
    assert proc.returncode == 1 and victim.stem in proc.stderr


def test_same_config_twice_same_hashes(quickstart, tmp_path):
    """Two more processes run two quickstart configs: bitwise the same losses and parameters."""
    box, _ = quickstart
    again = Sandbox(tmp_path)
    proc = again.run("+exp=quickstart", "run.steps=15", "model=mlp", "framework=jax,torch",
                     "run.repeats=1")  # repeats hash alike; a fixed count: the same steps, bitwise
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = {(h["config"]["framework"]["name"], h["config_hash"]): h for h in box.heads()}
    heads = again.heads()
    assert sorted(h["config"]["framework"]["name"] for h in heads) == ["jax", "torch"]  # one process each
    for h in heads:
        twin = first[(h["config"]["framework"]["name"], h["config_hash"])]
        assert h["results"]["loss_sha256"] == twin["results"]["loss_sha256"]
        assert h["results"]["params_sha256"] == twin["results"]["params_sha256"]
        assert h["results"]["loss"] == twin["results"]["loss"]


def test_killed_worker_is_recorded_and_sweep_goes_on(sandbox):
    cmd = sandbox.repro_cmd("-m", "model=mlp", "framework=jax", "run.steps=1000000,20",
                            "tracking.experiment=killtest")
    parent = subprocess.Popen(cmd, cwd=sandbox.root, env=sandbox.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    worker = worker_of(parent)
    time.sleep(4)  # well into the timed loop
    worker.send_signal(signal.SIGKILL)
    out, _ = parent.communicate(timeout=300)
    assert parent.returncode == 1, out  # the sweep finished, with a job that did not succeed
    heads = sorted(sandbox.heads(), key=lambda r: r["sweep"]["job"])
    assert [h["status"] for h in heads] == ["killed", "ok"], out
    assert "SIGKILL" in heads[0]["error"]["reason"]
    runs = {r.data.tags.get("repro.ledger_id"): r for r in sandbox.mlflow_runs("killtest")}
    assert runs[heads[0]["id"]].info.status == "FAILED"
    assert runs[heads[1]["id"]].info.status == "FINISHED"
