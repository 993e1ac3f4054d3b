"""Progress of a run of several processes: global rank 0's step events, relayed to the parent.

The ranks of a sharded torch run and the processes of a multi-process JAX run are spawned
(multiprocessing's "spawn": only the pipes it makes are inherited), so they cannot write the
worker's event pipe. The worker makes a FIFO in its own temp folder and a thread that copies
each line rank 0 writes there into the event pipe, as if the worker had measured the steps
itself; the other ranks stay quiet (N ranks' progress lines would say the same N times).
Only step lines pass: the run's other events (result, error) stay the worker's.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable

FIFO = "rank0-progress.fifo"


class Relay:
    """In the worker (node 0): `start()` before the ranks start, `stop()` once they ended."""

    def __init__(self, out_dir: str, emit: Callable[..., None]):
        self.path = Path(out_dir) / FIFO
        self._emit = emit
        self._thread: threading.Thread | None = None
        self._keep = -1

    def start(self) -> str:
        """The FIFO's path, for the ranks' spec. Both ends are opened here (a non-blocking read end
        made blocking, then a write end the relay keeps): nothing blocks on a rank that never
        opens it, and the reader sees EOF only once stop() closes that kept end and rank 0 is done."""
        os.mkfifo(self.path)
        read_fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(read_fd, True)
        self._keep = os.open(self.path, os.O_WRONLY)
        self._thread = threading.Thread(target=self._copy, args=(read_fd,), name="rank0-progress", daemon=True)
        self._thread.start()
        return str(self.path)

    def _copy(self, fd: int) -> None:
        with open(fd, encoding="utf-8") as f:
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.pop("event", None) == "step":
                    self._emit("step", **event)

    def stop(self) -> None:
        if self._thread is None:
            return
        os.close(self._keep)  # the ranks have ended: the reader reaches EOF
        self._thread.join(timeout=5)
        self.path.unlink(missing_ok=True)


def emitter(spec, is_rank0: bool) -> Callable[..., None]:
    """The emit function of one rank: rank 0 writes its step events to the relay's FIFO; every
    other rank (and a node without a relay) says nothing."""
    path = spec.progress_fifo  # WorkerSpec: set by the worker for its ranks
    if not is_rank0 or not path:
        return _quiet
    stream = open(path, "w", buffering=1, encoding="utf-8")

    def emit(kind: str, **payload: Any) -> None:
        if kind == "step":
            stream.write(json.dumps({"event": kind, **payload}, default=str) + "\n")

    return emit


def _quiet(*args, **kwargs) -> None:
    pass
