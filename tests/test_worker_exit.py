"""A worker's last event says the code it exits with (worker.exit_now): the parent takes the run's
outcome from it and goes on while the kernel frees the worker's memory, and `launch.settle` waits
for the worker's end (or kills a worker that said it exits and did not) before the next worker
goes and before the command ends. A worker that says nothing (older code) is waited for as before.

The workers here are stand-ins that speak the event protocol (worker/events.py): the protocol's
bookkeeping is the subject, not a framework's run."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import pytest

from repro.job import launch

STAND_IN = """#!{python}
import json, os, sys, time
events = os.fdopen(int(os.environ["REPRO_EVENTS_FD"]), "w", buffering=1)
os.read(int(os.environ["REPRO_GATE_FD"]), 1)  # the parent's gate
events.write(json.dumps({{"event": "result", "at": time.time()}}) + "\\n")
mode = os.environ["STAND_IN_MODE"]
if mode != "silent":
    events.write(json.dumps({{"event": "exit", "code": 0, "at": time.time()}}) + "\\n")
if mode == "watches":  # as the worker's lifeline: EOF on its stdin is its parent's end, and its folder goes
    import select
    if select.select([0], [], [], 2.0)[0] and not os.read(0, 1):
        os.remove(os.environ["STAND_IN_LOG"])
        os._exit(3)
    os._exit(0)
time.sleep(3600 if mode == "hangs" else 1.0)  # its memory being freed: longer than a parent needs to go on
os._exit(0)
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(launch.pinning, "pin_parent", lambda: {})  # the test's process stays where it is
    path = tmp_path / "python"
    path.write_text(STAND_IN.format(python=sys.executable))
    path.chmod(0o755)
    yield path
    launch.settle()


def _run(stand_in: Path, mode: str, seen: list) -> tuple[launch.WorkerOutcome, int]:
    pids = []
    real = launch._spawn

    def spawn(*a, **k):
        spawned = real(*a, **k)
        pids.append(spawned[0].pid)
        return spawned

    launch._spawn = spawn
    try:
        outcome = launch.run_worker(stand_in.parent / "spec.json", stand_in.parent / "worker.log", str(stand_in),
                                    {"STAND_IN_MODE": mode, "STAND_IN_LOG": str(stand_in.parent / "worker.log")},
                                    timeout_s=600, on_event=seen.append)
    finally:
        launch._spawn = real
    return outcome, pids[0]


def _gone(pid: int) -> bool:
    """Ended and reaped (its reaper waited for it)."""
    return not psutil.pid_exists(pid)


@pytest.mark.slow
def test_a_worker_that_says_it_exits_is_settled_later_not_waited_for(stand_in):
    seen = []
    outcome, pid = _run(stand_in, "says", seen)
    assert (outcome.status, outcome.returncode) == ("ok", 0), outcome.reason
    assert [e["event"] for e in seen] == ["result"]  # the exit is the protocol's, not an event of the run
    assert [p for p, *_ in launch._EXITING] == [pid]  # its end is owed
    launch.settle()
    assert launch._EXITING == [] and _gone(pid)


@pytest.mark.slow
def test_a_worker_that_says_it_exits_and_does_not_is_killed_when_settled(stand_in, monkeypatch):
    monkeypatch.setattr(launch, "EXIT_WAIT_S", 0.5)
    outcome, pid = _run(stand_in, "hangs", [])
    assert (outcome.status, outcome.returncode) == ("ok", 0), outcome.reason
    launch.settle()
    assert launch._EXITING == [] and _gone(pid)


@pytest.mark.slow
def test_a_worker_that_says_nothing_is_waited_for_to_its_end(stand_in):
    outcome, pid = _run(stand_in, "silent", [])
    assert (outcome.status, outcome.returncode) == ("ok", 0), outcome.reason
    assert launch._EXITING == [] and _gone(pid)


@pytest.mark.slow
def test_the_next_worker_goes_only_once_the_one_before_is_gone(stand_in):
    _, first = _run(stand_in, "says", [])
    _, second = _run(stand_in, "says", [])  # run_worker settles the first before it starts the second
    assert _gone(first)
    assert [p for p, *_ in launch._EXITING] == [second]
    launch.settle()
    assert _gone(second)


@pytest.mark.slow
def test_a_worker_between_its_word_and_its_exit_does_not_see_its_parent_gone(stand_in):
    """Its stdin stays open until it is gone: a lifeline reading EOF there would remove its run folder,
    its log with it, before the parent hands the log to MLflow (suite 19a: a sweep's worker.log was lost)."""
    outcome, pid = _run(stand_in, "watches", [])
    assert (outcome.status, outcome.returncode) == ("ok", 0), outcome.reason
    launch.settle()
    assert _gone(pid) and (stand_in.parent / "worker.log").exists()
