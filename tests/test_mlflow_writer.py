"""The machine's MLflow writer (tracking/writer.py): back-to-back commands hand their runs to one
long-lived process that imports MLflow once; it holds the machine's projector lock only while it has
work, ends when idle and leaves nothing behind; a store file replaced under it is written anew, not
through the unlinked one; `tracking.writer_idle_s=0` (or a socket path too long) is a projector per
command. A deep machine folder (a socket path longer than AF_UNIX allows) is reached through its
folder's descriptor. Each test gives its commands a machine folder of their own (REPRO_MACHINE_DIR)."""

from __future__ import annotations

import fcntl
import re
import time
from pathlib import Path

import psutil
import pytest

from conftest import Sandbox, at_work_on
from repro.tracking import handoff

pytestmark = pytest.mark.slow  # every test here starts processes

TINY = ("framework=torch", "model=mlp", "model.preset=tiny", "run.steps=4", "run.warmup=2")


def _run(box: Sandbox, machine: Path, *args: str):
    out = box.run(*TINY, *args, REPRO_MACHINE_DIR=str(machine))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out


def _writer_lines(box: Sandbox) -> list[str]:
    return [line for line in (handoff.folder(box.ledger) / handoff.LOG).read_text().splitlines()
            if line.startswith("repro writer pid ")]


def _gone(pid: int, timeout: float) -> bool:
    try:
        psutil.Process(pid).wait(timeout=timeout)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        return False
    return True


def test_back_to_back_commands_on_two_ledgers_share_one_writer_that_imports_mlflow_once(tmp_path):
    """Three commands, two ledgers, one machine folder (deep: its socket is reached through the
    folder's descriptor): one writer pid takes every hand-over, MLflow is imported once, each
    ledger's log holds its own drains, and every run reaches its store."""
    machine = tmp_path / ("m" * 120)
    a, b = Sandbox(tmp_path / "a"), Sandbox(tmp_path / "b")
    _run(a, machine, "tracking.experiment=shared")
    _run(b, machine, "tracking.experiment=shared")
    _run(a, machine, "tracking.experiment=shared", "run.seed=1")
    for box, runs in ((a, 2), (b, 1)):
        assert sorted(r.data.tags["repro.ledger_id"] for r in box.mlflow_runs("shared")) == \
            sorted(r["id"] for r in box.heads()) and len(box.heads()) == runs
    lines = _writer_lines(a) + _writer_lines(b)
    pids = {re.match(r"repro writer pid (\d+)", line).group(1) for line in lines}
    assert len(pids) == 1, lines
    assert sum("MLflow imported in" in line for line in lines) == 1, lines
    pushed = [sum(int(m.group(1)) for line in _writer_lines(box) if (m := re.search(r": (\d+) run\(s\)", line)))
              for box in (a, b)]
    assert pushed == [2, 1], lines  # two hand-overs of a may be drained at once, never twice
    assert "MLflow imported in" in _writer_lines(a)[0]  # the first command's writer, in its ledger's log


def test_a_writer_holds_the_machine_lock_only_while_it_has_work_and_ends_when_idle(tmp_path):
    """While its drain waits (the test holds the ledger's projection lock), the writer holds the
    machine's projector lock shared and is registered at work on the ledger; once drained it holds
    nothing, and `tracking.writer_idle_s` later it is gone, its socket with it."""
    machine, box = tmp_path / "machine", Sandbox(tmp_path / "box")
    with handoff.lock(box.ledger):
        _run(box, machine, "tracking.experiment=idle", "tracking.writer_idle_s=3")
        taken = at_work_on(box.ledger, machine)
        assert "repro.tracking.writer" in " ".join(taken.cmdline())
        with open(machine / "projectors.lock", "a") as f:
            with pytest.raises(BlockingIOError):  # a worker's measured steps would wait for it
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    box.projected()
    assert _gone(taken.pid, 600), "the writer did not end after tracking.writer_idle_s (600 s: a hang)"
    with open(machine / "projectors.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nothing holds it
    assert not list(machine.glob("writer-*.sock")) and not list((machine / "projectors").glob("*.json"))
    assert [r.data.tags["repro.ledger_id"] for r in box.mlflow_runs("idle")] == [box.heads()[0]["id"]]


def test_a_store_removed_under_a_living_writer_is_created_again_not_written_unlinked(tmp_path):
    """mlflow.db removed between two commands while the writer keeps MLflow's store open: the second
    run goes into a new mlflow.db (MLflow's cached store is dropped), and `repro sync` puts the first
    one back from the ledger."""
    machine, box = tmp_path / "machine", Sandbox(tmp_path / "box")
    _run(box, machine, "tracking.experiment=rebuilt")
    box.projected()
    first = box.heads()[0]["id"]
    box.db.unlink()
    box.store_template = False  # the next command's store is new, as a user's rebuilt one is
    out = _run(box, machine, "tracking.experiment=rebuilt", "run.seed=1")
    assert "creating the store" in out.stdout + out.stderr
    second = next(r["id"] for r in box.heads() if r["id"] != first)
    assert [r.data.tags["repro.ledger_id"] for r in box.mlflow_runs("rebuilt")] == [second]
    assert len({re.match(r"repro writer pid (\d+)", line).group(1) for line in _writer_lines(box)}) == 1
    from conftest import repro_cli

    assert repro_cli("sync", "--ledger", str(box.ledger), env=box.env()).returncode == 0
    assert sorted(r.data.tags["repro.ledger_id"] for r in box.mlflow_runs("rebuilt")) == sorted([first, second])


def test_writer_idle_s_0_is_a_projector_per_command(tmp_path):
    """`tracking.writer_idle_s=0`: the hand-over goes to a projector of the command's own, as before the
    writer, and reaches MLflow."""
    machine, box = tmp_path / "machine", Sandbox(tmp_path / "box")
    with handoff.lock(box.ledger):
        _run(box, machine, "tracking.experiment=own", "tracking.writer_idle_s=0")
        taken = at_work_on(box.ledger, machine)
        assert "repro.tracking.projector" in " ".join(taken.cmdline())
    assert [r.data.tags["repro.ledger_id"] for r in box.mlflow_runs("own")] == [box.heads()[0]["id"]]
    assert not list(machine.glob("writer-*"))


def test_a_command_on_a_new_store_returns_before_the_store_is_made(tmp_path):
    """The first runs into a new sqlite store: the command says it is being made and returns without
    waiting for MLflow's import and its tables (the test holds the ledger's lock, so nothing is made
    before the command ends); once the lock is free the writer makes it beside its path, links it in
    and writes the run; nothing of the making is left beside it."""
    machine, box = tmp_path / "machine", Sandbox(tmp_path / "box", store_template=False)
    with handoff.lock(box.ledger):
        out = box.run(*TINY, "tracking.experiment=new", REPRO_MACHINE_DIR=str(machine), timeout=100)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
        assert "creating the store" in out.stdout + out.stderr
        assert not box.db.exists()  # the command did not wait for it
    box.projected()
    assert [r.data.tags["repro.ledger_id"] for r in box.mlflow_runs("new")] == [box.heads()[0]["id"]]
    assert sorted(p.name for p in box.root.iterdir() if p.name.startswith(".mlflow.db")) == []


def test_a_store_another_client_made_first_is_the_store(tmp_path):
    """A client without repro's file lock (the MLflow UI, a script) that made the store while repro made
    its own beside it keeps its file: repro's link never replaces it, and what repro made is removed, as
    is what a creator killed midway had left beside it."""
    from mlflow.tracking import MlflowClient

    from repro.tracking import mlflow_tracker

    db = tmp_path / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{db}").create_experiment("theirs")
    theirs = db.stat().st_ino
    (tmp_path / ".mlflow.db.1.2.creating").write_bytes(b"a creator killed midway left this")
    assert mlflow_tracker._create_aside(db) is False
    assert db.stat().st_ino == theirs and sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]
    tracker = mlflow_tracker.Tracker(f"sqlite:///{db}", "ours")
    assert {e.name for e in tracker.client.search_experiments()} >= {"theirs", "ours"}
