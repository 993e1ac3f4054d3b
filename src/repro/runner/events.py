"""The worker → parent stream: one JSON object per line on a pipe of its own.

The worker's stdout and stderr stay free for the frameworks' own chatter; the parent reads
this pipe with blocking reads (no polling: on a 2-core machine a polling parent slows the
measured steps).
"""

from __future__ import annotations

import json
import os
from typing import IO, Any, Iterator

EVENTS_FD_ENV = "REPRO_EVENTS_FD"


class EventWriter:
    def __init__(self, stream: IO[str]):
        self._stream = stream

    @classmethod
    def from_env(cls) -> "EventWriter":
        fd = int(os.environ.pop(EVENTS_FD_ENV))
        os.set_inheritable(fd, False)  # processes the worker starts must not hold the pipe open
        return cls(os.fdopen(fd, "w", buffering=1))

    def emit(self, kind: str, **payload: Any) -> None:
        self._stream.write(json.dumps({"event": kind, **payload}, default=str) + "\n")
        self._stream.flush()


def read_events(stream: IO[str]) -> Iterator[dict]:
    for line in stream:
        line = line.strip()
        if line:
            yield json.loads(line)
