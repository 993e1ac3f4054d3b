"""This machine's locks and registry between measured windows and MLflow's projectors.

A worker's measured window is held open on a machine-wide lock (`open_window`, job/launch.py);
a projector or `repro sync` does each unit of its work (`quiet_turn`) only while no window is open,
and says who it is while it works (`at_work`), so a waiting command can name it and a worker can
count its CPU (worker/machine.py). At the run path's floor: a job opens windows, the
tracking package (tracking/handoff.py re-exports these) takes turns.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from repro import paths


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def machine_lock() -> Path:
    """Held shared by every projector on this machine (whatever its ledger): a worker about to
    begin its measured steps waits for all of them (`wait_for_projectors`)."""
    path = paths.machine_dir() / "projectors.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _windows_lock() -> Path:
    return machine_lock().parent / "windows.lock"


def open_window(limit_s: float, poll_s: float = 0.01):
    """A measured window opens (job/launch.py, as the gate opens): this machine's windows lock,
    held shared until the returned file is closed (the worker's `window_end`, or its end). A
    projector writes only between windows (`quiet_turn`); one at its turn is waited for, at most
    `limit_s` (then the window opens anyway: the record's machine.repro_cpu_s says what ran
    beside it), and None is returned. None at once where `WINDOWS` is off."""
    if not WINDOWS:
        return None
    f = open(_windows_lock(), "a")
    deadline = time.monotonic() + limit_s
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return f
        except BlockingIOError:
            if time.monotonic() >= deadline:
                f.close()
                return None
            time.sleep(poll_s)


# Whether this process's workers open measured windows at all: `repro calibrate --loud` turns
# them off for one command, to measure what the quiet window buys (projectors then write
# beside the measured steps, as they did before windows existed)
WINDOWS = True

TURN_WAIT_S = 5.0  # the most a projector's unit of work waits for open windows to close


@contextmanager
def quiet_turn(limit_s: float = TURN_WAIT_S, poll_s: float = 0.01) -> Iterator[None]:
    """A projector's (or sync's) unit of work (opening a store, writing one run, one sweep's report):
    begun once no measured window is open on this machine, and no window opens until it is done.
    It waits at most `limit_s`: flock grants new shared locks while an exclusive one waits, so on a
    machine whose windows follow each other (two sweeps, a test suite's workers) a projector would
    otherwise never get its turn; past the limit it works beside the window, and that window's
    record says so (machine.repro_cpu_s)."""
    with open(_windows_lock(), "a") as f:
        deadline, held = time.monotonic() + limit_s, False
        while not held:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(poll_s)
        try:
            yield
        finally:
            if held:
                fcntl.flock(f, fcntl.LOCK_UN)


def _registry() -> Path:
    return machine_lock().parent / "projectors"


def _register(pid: int, ledger_root: str | Path) -> Path:
    me = _registry() / f"{pid}.json"
    me.parent.mkdir(parents=True, exist_ok=True)
    _write_json(me, {"pid": pid, "ledger": str(Path(ledger_root).resolve()), "since": time.time()})
    return me


@contextmanager
def at_work(ledger_root: str | Path) -> Iterator[None]:
    """A projector says who it is while it works (pid, ledger, since), for a waiting command to name."""
    me = _register(os.getpid(), ledger_root)
    try:
        yield
    finally:
        me.unlink(missing_ok=True)


def projectors_at_work() -> list[dict]:
    """The projectors on this machine that said so and are still alive (a killed one leaves its file)."""
    import psutil

    found = []
    for path in _registry().glob("*.json") if _registry().is_dir() else []:
        try:
            info = json.loads(path.read_text())
            if psutil.Process(info["pid"]).create_time() <= info["since"] + 1:
                found.append(info)
                continue
        except (OSError, ValueError, KeyError, psutil.Error):
            pass
        path.unlink(missing_ok=True)
    return sorted(found, key=lambda i: i["since"])


