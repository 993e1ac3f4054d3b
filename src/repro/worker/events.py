"""The worker → parent stream: one JSON object per line on a pipe of its own.

The worker's stdout and stderr stay free for the frameworks' own chatter; the parent reads
this pipe with blocking reads (no polling: on a 2-core machine a polling parent slows the
measured steps).
"""

from __future__ import annotations

import json
import os
import time
from typing import IO, Any, Iterator

EVENTS_FD_ENV = "REPRO_EVENTS_FD"
GATE_FD_ENV = "REPRO_GATE_FD"
READY = "warm_ready"  # a worker started ahead has imported what it imports before its job (job/launch.py Warm)
READY_LINE = (json.dumps({"event": READY}) + "\n").encode()


class EventWriter:
    def __init__(self, stream: IO[str]):
        self._stream = stream

    @classmethod
    def from_env(cls) -> "EventWriter":
        fd = int(os.environ.pop(EVENTS_FD_ENV))
        os.set_inheritable(fd, False)  # processes the worker starts must not hold the pipe open
        return cls(os.fdopen(fd, "w", buffering=1))

    def emit(self, kind: str, **payload: Any) -> None:
        """One event, stamped with the wall clock when it was sent (`at`, comparable with the
        parent's: job/wall_split.py places each part of a job's wall between two stamps)."""
        payload.setdefault("at", time.time())
        self._stream.write(json.dumps({"event": kind, **payload}, default=str) + "\n")
        self._stream.flush()


class Gate:
    """The worker waits here, before its measured steps, until the parent has done what it does
    beside the worker's unmeasured start (importing MLflow, opening its store): one byte on a
    pipe of its own, or EOF (a parent that is gone; the lifeline ends the worker then)."""

    def __init__(self, fd: int | None):
        self._fd = fd

    @classmethod
    def from_env(cls) -> "Gate":
        fd = os.environ.pop(GATE_FD_ENV, None)  # popped: processes the worker starts do not wait
        if fd is not None:
            os.set_inheritable(int(fd), False)
        return cls(None if fd is None else int(fd))

    def wait(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.read(fd, 1)
            finally:
                os.close(fd)


def open_gate(fd: int) -> None:
    """In the parent: let the worker's measured steps begin."""
    try:
        os.write(fd, b"g")
    except OSError:  # the worker has already ended: nothing waits
        pass
    finally:
        os.close(fd)


def read_events(stream: IO[str]) -> Iterator[dict]:
    """The worker's events; a warm worker's READY line, where the parent did not read it, is not one."""
    for line in stream:
        line = line.strip()
        if line and (event := json.loads(line))["event"] != READY:
            yield event


def read_ready(fd: int, timeout_s: float) -> bool:
    """In the parent: wait for a warm worker's READY line on its event pipe (read byte by byte, so
    that nothing after it is taken from the stream `read_events` reads next); False where the
    worker ended or `timeout_s` passed first."""
    import select

    line, deadline = b"", time.monotonic() + timeout_s
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return False
        chunk = os.read(fd, 1)
        if not chunk:
            return False
        line += chunk
    return line == READY_LINE
