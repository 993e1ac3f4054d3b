"""The MLflow hand-over (`<ledger>/.mlflow-pending/`) reads only regular files inside its
entries, as git reads its tree: a symbolic link is never followed (a `worker.log` linked to any
readable file must not reach MLflow), a FIFO or a device is never opened (a FIFO named tags.json
hung `repro sync` and every later run of the ledger), sizes are bounded; such an entry is set
aside with a one-line reason, as malformed JSON is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from repro.tracking import handoff

TINY = ("framework=jax", "model=mlp", "model.preset=tiny", "run.steps=6", "run.warmup=2")


def _pending_run(sandbox, tmp_path):
    """One tiny run whose store fails (a file stands where its folder should be), so that its
    entry stays in the pending queue; returns (env, store uri, the run's record, its entry)."""
    env = sandbox.env(XDG_CACHE_HOME=str(tmp_path / "cache"), REPRO_MACHINE_DIR=str(tmp_path / "machine"))
    in_the_way = sandbox.root / "later"
    in_the_way.write_text("a file where the store's folder should be")
    uri = f"sqlite:///{in_the_way}/mlflow.db"
    first = subprocess.run(sandbox.repro_cmd(*TINY, f"tracking.uri={uri}", "tracking.experiment=odd"), cwd=sandbox.root,
                           env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    (run,) = sandbox.heads()
    deadline = time.time() + 120
    while handoff.busy(sandbox.ledger) and time.time() < deadline:  # its projector tried the store and failed
        time.sleep(0.2)
    entry = handoff.folder(sandbox.ledger) / run["id"]
    assert (entry / handoff.ENTRY).is_file(), sorted(p.name for p in entry.parent.iterdir())
    in_the_way.unlink()  # the store works again
    return env, uri, run, entry


def _sync(sandbox, env) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "repro", "sync", "--ledger", str(sandbox.ledger)],
                              cwd=sandbox.root, env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("repro sync hung on the pending queue")


def _odd_entry(pending, name: str, record_id: str):
    entry = pending / name
    entry.mkdir()
    (entry / handoff.ENTRY).write_text(json.dumps({"kind": "run", "id": record_id, "ir": []}))
    return entry


@pytest.mark.slow
def test_a_linked_worker_log_is_never_followed_into_mlflow(sandbox, tmp_path):
    """Issue probe: "A symlink inside `.mlflow-pending/<id>/` (e.g. `worker.log` -> any readable
    file) is uploaded to MLflow as an artifact". On the old code the linked file's content was
    in the MLflow store's artifacts."""
    env, uri, run, entry = _pending_run(sandbox, tmp_path)
    secret = tmp_path.parent / f"{tmp_path.name}-private.txt"
    secret.write_text("PRIVATE-KEY-CONTENT-4711\n")
    (entry / "worker.log").unlink(missing_ok=True)
    (entry / "worker.log").symlink_to(secret)  # a link out of the entry
    sync = _sync(sandbox, env)
    assert sync.returncode == 0, sync.stderr[-2000:]
    leaked = [p for p in sandbox.root.rglob("*") if p.is_file() and not p.is_symlink()
              and b"PRIVATE-KEY-CONTENT" in p.read_bytes()]
    assert leaked == []
    assert "1 malformed MLflow hand-over entry was set aside" in sync.stderr, sync.stderr
    reasons = {p.name.rsplit("-", 1)[0]: why for p, why in handoff.rejected(sandbox.ledger)}
    assert reasons == {run["id"]: "worker.log is a symbolic link (the hand-over reads only regular files)"}
    assert secret.read_text() == "PRIVATE-KEY-CONTENT-4711\n"  # the link's target untouched
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)  # the run reached MLflow from the ledger (sync), without the file
    (mlrun,) = client.search_runs([client.get_experiment_by_name("odd").experiment_id])
    assert mlrun.data.tags["repro.ledger_id"] == run["id"]
    secret.unlink()


@pytest.mark.slow
def test_a_fifo_or_an_oversized_file_in_the_queue_hangs_nothing_and_is_set_aside(sandbox, tmp_path):
    """Issue probe: "a FIFO named `tags.json` hangs `repro sync` and every later run on that
    ledger forever". On the old code the sync below hung (its timeout)."""
    env, uri, run, entry = _pending_run(sandbox, tmp_path)
    os.mkfifo(_odd_entry(entry.parent, "fifo-tags", run["id"]) / "tags.json")  # nobody writes it: a read blocks for ever
    with open(_odd_entry(entry.parent, "big-tags", run["id"]) / "tags.json", "wb") as f:
        f.truncate(4 << 20)  # 4 MiB of tags
    sync = _sync(sandbox, env)
    assert sync.returncode == 0, sync.stderr[-2000:]
    assert "2 malformed MLflow hand-over entries were set aside" in sync.stderr, sync.stderr
    reasons = {p.name.rsplit("-", 1)[0]: why for p, why in handoff.rejected(sandbox.ledger)}
    assert reasons == {
        "fifo-tags": "tags.json is a FIFO (the hand-over reads only regular files)",
        "big-tags": f"tags.json holds {4 << 20} bytes, over the hand-over's bound of {handoff.JSON_LIMIT}",
    }
    later = subprocess.run(sandbox.repro_cmd(*TINY, f"tracking.uri={uri}", "tracking.experiment=odd"),
                           cwd=sandbox.root, env=env, capture_output=True, text=True, timeout=300)
    assert later.returncode == 0, later.stderr[-2000:]  # the ledger's later runs go on
    sandbox.projected()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    assert len(client.search_runs([client.get_experiment_by_name("odd").experiment_id])) == 2


def test_a_regular_file_is_read_and_anything_else_refused_with_its_kind(tmp_path):
    (tmp_path / "plain.json").write_text("{}")
    assert handoff.read_text(tmp_path / "plain.json") == "{}"
    (tmp_path / "link.json").symlink_to(tmp_path / "plain.json")
    os.mkfifo(tmp_path / "fifo.json")
    for name, kind in (("link.json", "a symbolic link"), ("fifo.json", "a FIFO")):
        with pytest.raises(handoff.OddFile, match=f"{name} is {kind}"):
            handoff.read_text(tmp_path / name)
    with pytest.raises(handoff.OddFile, match="over the hand-over's bound of 1"):
        handoff.read_text(tmp_path / "plain.json", limit=1)
    assert handoff.odd_file(tmp_path) == "fifo.json is a FIFO (the hand-over reads only regular files)" or \
        handoff.odd_file(tmp_path).startswith("link.json is a symbolic link")
