"""What the MLflow hand-over meets from outside a run: a projector stopped mid-work
(SIGSTOP), one killed, and malformed entries in `<ledger>/.mlflow-pending/`. Nothing waits
without a bound or a word, nothing recorded is lost, and one bad entry stops no other.

Each test gives its commands a machine folder of their own (REPRO_MACHINE_DIR): the machine-wide
projector lock lives there, and a stopped projector must not hold up other tests' runs."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest

from conftest import at_work_on
from repro.tracking import handoff

pytestmark = pytest.mark.slow  # every test here starts a process

TINY = ("framework=jax", "model=mlp", "model.preset=tiny", "run.steps=6", "run.warmup=2")


def _env(sandbox, tmp_path):
    return sandbox.env(XDG_CACHE_HOME=str(tmp_path / "cache"), REPRO_MACHINE_DIR=str(tmp_path / "machine"))


def _run(sandbox, tmp_path, *args):
    return subprocess.run(sandbox.repro_cmd(*TINY, *args), cwd=sandbox.root, env=_env(sandbox, tmp_path),
                          capture_output=True, text=True, timeout=600)


def _projector(sandbox, tmp_path) -> psutil.Process:
    """What took the command's hand-over: the machine's MLflow writer, or a projector of its own."""
    return at_work_on(sandbox.ledger, tmp_path / "machine")


def _drained(sandbox, hang_s: float = 600) -> None:
    """Until what took the hand-over lets go of the ledger; `hang_s` only catches a hang (a claim on how
    fast the drain ends belongs in benchmarks/)."""
    deadline = time.time() + hang_s
    while handoff.busy(sandbox.ledger):
        assert time.time() < deadline, f"the hand-over of {sandbox.ledger} still held after {hang_s} s: hung"
        time.sleep(0.1)


def _sync(sandbox, tmp_path):
    return subprocess.run([sys.executable, "-m", "repro", "sync", "--ledger", str(sandbox.ledger)], cwd=sandbox.root,
                          env=_env(sandbox, tmp_path), capture_output=True, text=True, timeout=300)


def test_a_stopped_projector_holds_the_next_run_at_most_its_bound_and_is_named(sandbox, tmp_path):
    """SIGSTOP to a command's projector (it never finishes): the next command's measured steps
    wait `tracking.projector_wait_s`, name the projector after 2 s, then run beside it, and its
    record says so. On the old code the next command waited for ever."""
    first = _run(sandbox, tmp_path, "tracking.experiment=stopped")
    assert first.returncode == 0, first.stderr[-2000:]
    stuck = _projector(sandbox, tmp_path)
    stuck.send_signal(signal.SIGSTOP)
    try:
        start = time.time()
        second = _run(sandbox, tmp_path, "tracking.experiment=stopped", "tracking.projector_wait_s=4")
        took = time.time() - start
        assert second.returncode == 0, second.stderr[-2000:]
        assert f"waiting for the MLflow projector pid {stuck.pid} (ledger {sandbox.ledger.resolve()}" in second.stderr
        assert f"the MLflow projector pid {stuck.pid}" in second.stderr and "still at work after 4 s" in second.stderr
        assert took < 120, took
        newest = max(sandbox.heads(), key=lambda r: r["created"])
        beside = newest["machine"]["beside_projector"]
        assert beside["pid"] == stuck.pid and beside["waited_s"] >= 4, beside
    finally:
        stuck.send_signal(signal.SIGCONT)
    sandbox.projected()  # resumed, the projectors finish: both runs reach MLflow
    assert sorted(r.data.tags["repro.ledger_id"] for r in sandbox.mlflow_runs("stopped")) == \
        sorted(r["id"] for r in sandbox.heads())


def test_malformed_entries_are_set_aside_named_once_and_the_rest_reach_mlflow(sandbox, tmp_path):
    """A JSON list and a sweep entry without an id in the pending folder: set aside under
    rejected/ with their reasons, named by the next command once and by `repro sync`; the runs
    go on into MLflow. On the old code each crashed every projector of the ledger."""
    pending = handoff.folder(sandbox.ledger)
    for name, content in (("a-list", [1, 2]), ("sweep-noid", {"kind": "sweep", "status": "ok"})):
        (pending / name).mkdir(parents=True)
        (pending / name / handoff.ENTRY).write_text(json.dumps(content))
    first = _run(sandbox, tmp_path, "tracking.experiment=malformed")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "2 malformed MLflow hand-over entries were set aside in" in first.stderr, first.stderr[-2000:]
    reasons = {p.name.rsplit("-", 1)[0]: why for p, why in handoff.rejected(sandbox.ledger)}
    assert reasons == {"a-list": "entry.json holds a JSON list, not an object",
                       "sweep-noid": "entry.json names no id (a sweep entry needs the ledger id it projects)"}
    second = _run(sandbox, tmp_path, "tracking.experiment=malformed")
    # named once (the sentence, not the word: the test's own folder, test_malformed_..., is in the
    # line of a second command that waits for the first's projector, still at work on the store)
    assert second.returncode == 0 and "malformed MLflow hand-over" not in second.stderr, second.stderr[-2000:]
    assert sorted(r.data.tags["repro.ledger_id"] for r in sandbox.mlflow_runs("malformed")) == \
        sorted(r["id"] for r in sandbox.heads())
    sync = _sync(sandbox, tmp_path)
    assert sync.returncode == 0, sync.stderr[-2000:]
    assert "2 malformed MLflow hand-over entries were set aside" in sync.stderr


def test_a_killed_projectors_leftovers_are_announced_and_written_by_the_next_command(sandbox, tmp_path):
    first = _run(sandbox, tmp_path, "tracking.experiment=leftovers")
    assert first.returncode == 0, first.stderr[-2000:]
    killed = _projector(sandbox, tmp_path)
    killed.kill()
    killed.wait(timeout=30)
    assert len(handoff.entries(sandbox.ledger)) == 1
    second = _run(sandbox, tmp_path, "tracking.experiment=leftovers")
    assert second.returncode == 0, second.stderr[-2000:]
    assert "1 entry an earlier command handed to MLflow is not there yet (its projector ended before writing " \
           "them): this command's projector writes them, or `repro sync` now" in second.stderr, second.stderr[-2000:]
    assert sorted(r.data.tags["repro.ledger_id"] for r in sandbox.mlflow_runs("leftovers")) == \
        sorted(r["id"] for r in sandbox.heads())


def test_a_hung_store_is_bounded_and_named_in_one_line(sandbox, tmp_path):
    """An MLflow server that accepts connections and never answers: the command returns at once (its
    projector is detached), the projector gives up within MLflow's own HTTP timeout and retry
    (tracking/mlflow_tracker.py: 1 retry; 1 s here, 30 s by default), the next command names the
    store in one line, and `repro sync` exits 1 saying nothing is lost. The run stays in the ledger."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept_and_never_answer() -> None:
        while True:
            held.append(server.accept()[0])

    threading.Thread(target=accept_and_never_answer, daemon=True).start()
    uri = f"http://127.0.0.1:{server.getsockname()[1]}"
    env = {**_env(sandbox, tmp_path), "MLFLOW_HTTP_REQUEST_TIMEOUT": "1"}

    def repro(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(sandbox.repro_cmd(*args), cwd=sandbox.root, env=env, capture_output=True, text=True,
                              timeout=300)

    start = time.time()
    first = repro(*TINY, f"tracking.uri={uri}", "tracking.experiment=hung")
    assert first.returncode == 0 and time.time() - start < 60, first.stderr[-2000:]
    _drained(sandbox)  # the store's first request times out, once retried: the log says so
    log = (handoff.folder(sandbox.ledger) / "projector.log").read_text()
    assert f"MLflow at {uri} (experiment 'hung') failed: " in log and "1 entries left for `repro sync`" in log, log
    second = repro(*TINY, f"tracking.uri={uri}", "tracking.experiment=hung")
    said = [line for line in second.stderr.splitlines() if "failed while the last projection wrote to it" in line]
    assert len(said) == 1 and f"MLflow at {uri} (experiment 'hung')" in said[0], second.stderr[-2000:]
    sync = subprocess.run([sys.executable, "-m", "repro", "sync", "--ledger", str(sandbox.ledger)], cwd=sandbox.root,
                          env=env, capture_output=True, text=True, timeout=300)
    assert sync.returncode == 1 and "nothing is lost (the ledger holds every run)" in sync.stderr, sync.stderr[-2000:]
    assert uri in sync.stderr and len([h for h in sandbox.heads() if h["status"] == "ok"]) == 2
    server.close()
