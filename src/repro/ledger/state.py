"""Whether a run whose newest record is `started` still runs, or was lost with its parent process.

The `started` record names its parent (`parent: {host, pid, create_time}`, psutil's create_time).
On this host a parent that is gone, a zombie, or a pid now held by a process started at another
time means the run will never end by itself: it is `lost`. On another host, or in a record from
before `parent` existed, nothing can be told from here, and the state says so rather than guess.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import psutil

# psutil derives create_time from the boot time and the process's start tick: the same process
# reads the same value from any process; a reused pid starts at least this much later or earlier.
SAME_PROCESS_S = 0.5


@dataclass(frozen=True)
class RunState:
    name: str  # the head's status, or for a `started` head: running | lost | started (cannot tell)
    text: str  # e.g. "lost (host h1, pid 4242)"

    def __str__(self) -> str:
        return self.text


def parent_alive(pid: int, create_time: float | None) -> bool:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(proc.create_time() - create_time) <= SAME_PROCESS_S
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # it exists and belongs to someone else
        return True


def state_of(record: dict, host: str | None = None) -> RunState:
    """The state of a run from the newest record of its chain (`Ledger.heads()` gives those)."""
    status = str(record.get("status"))
    if status == "superseded":
        return RunState(status, f"superseded by run {record.get('superseded_by')} (it was lost, then run again)")
    if status != "started":
        return RunState(status, status)
    parent = record.get("parent")
    if not isinstance(parent, dict) or not isinstance(parent.get("pid"), int):
        return RunState("started", "started (its record names no parent process: cannot tell whether it runs)")
    where, pid = parent.get("host"), parent["pid"]
    if where != (host or socket.gethostname()):
        return RunState("started", f"started on host {where} (pid {pid}): not this host, cannot tell whether it runs")
    if parent_alive(pid, parent.get("create_time")):
        return RunState("running", f"running (host {where}, pid {pid})")
    return RunState("lost", f"lost (host {where}, pid {pid})")
