"""The worker → parent stream: one JSON object per line on a pipe of its own.

The worker's stdout and stderr stay free for the frameworks' own chatter; the parent reads
this pipe with blocking reads (no polling: on a 2-core machine a polling parent slows the
measured steps).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass
from typing import IO, Any, Iterator, Mapping

from repro.blocks import typed

EVENTS_FD_ENV = "REPRO_EVENTS_FD"
GATE_FD_ENV = "REPRO_GATE_FD"
READY = "warm_ready"  # a worker started ahead has imported what it imports before its job (job/launch.py Warm)
READY_LINE = (json.dumps({"event": READY}) + "\n").encode()
EXIT = "exit"  # the worker's last event: the code it exits with, said before its memory is freed (worker.exit_now)


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


@dataclass(frozen=True)
class Setup:
    """`results.setup`: the worker's seconds around its measured steps (job/wall_split.py places them)."""

    import_s: float = 0.0  # the framework's import (a worker started ahead: its own, before the job)
    build_s: float = 0.0
    data_s: float = 0.0
    imported_ahead: bool = False
    waited_ahead_s: float | None = None
    results_s: float | None = None  # hashes, evaluation, FLOPs, IR, settings
    profile_s: float | None = None  # run.profile's steps; None: not profiled (the key is left out)
    # run.start=fork: the pid of the fork server that forked this worker, and whose import `import_s`
    # is, shared by every worker it forked (job/forked.py); None: a fresh interpreter (the key is left out)
    forked_by: int | None = None

    def as_dict(self) -> dict:
        out = dataclasses.asdict(self)
        for optional in ("results_s", "profile_s", "forked_by"):  # absent until measured
            if out[optional] is None:
                del out[optional]
        return out


@dataclass(frozen=True)
class Series:
    """The first SERIES_STEPS steps' losses and times (worker/window.py)."""

    loss: list = dataclasses.field(default_factory=list)
    step_time_s: list = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class EnvironmentPayload:
    """The "environment" event: what the run ran in, its seeds, its data."""

    environment: Mapping = dataclasses.field(default_factory=dict)
    seeds: Mapping = dataclasses.field(default_factory=dict)
    data: Mapping = dataclasses.field(default_factory=dict)
    at: float | None = None

    def payload(self) -> dict:
        """As emitted (the stream stamps `at`)."""
        return {"environment": self.environment, "seeds": self.seeds, "data": self.data}


@dataclass(frozen=True)
class ResultPayload:
    """The "result" event: what the run measured (`results`, the record's block as it is stored), its
    series, the settings read back, the files it wrote, the machine's state and its canary. A node
    other than node 0 of a parallel run says only `follower` and its `ranks`."""

    results: dict = dataclasses.field(default_factory=dict)
    series: Series = dataclasses.field(default_factory=Series)
    effective: Mapping | None = None
    ir_files: list = dataclasses.field(default_factory=list)
    profile_files: list = dataclasses.field(default_factory=list)
    machine: Mapping | None = None
    canary: Mapping | None = None
    follower: bool = False
    ranks: list | None = None
    at: float | None = None

    @classmethod
    def of(cls, node: Mapping | None) -> "ResultPayload | None":
        got = typed(cls, node)
        if got is not None and not isinstance(got.series, Series):
            got = dataclasses.replace(got, series=typed(Series, got.series))
        return got

    @property
    def setup(self) -> Setup | None:
        """`results.setup`; None where the result has none."""
        node = self.results.get("setup")
        return typed(Setup, node) if node else None

    def payload(self) -> dict:
        """As emitted (the keys a rank-0 result always says)."""
        return {"results": self.results, "series": dataclasses.asdict(self.series), "effective": self.effective,
                "ir_files": self.ir_files, "profile_files": self.profile_files, "machine": self.machine,
                "canary": self.canary}


@dataclass(frozen=True)
class ErrorPayload:
    """The "error" event: how the worker failed, its exception and traceback."""

    status: str = "failed"  # failed | oom
    type: str = ""
    message: str = ""
    requested_bytes: int | None = None
    traceback: list = dataclasses.field(default_factory=list)
    at: float | None = None


STAMPED = ("hello", "environment", "measure_start", "step", "measure_end", "result")  # in the order they are said


@dataclass(frozen=True)
class Events:
    """A worker's last event of each kind, typed once (the parent's `WorkerOutcome.events`): when it said
    each thing on the wall clock (None: never), its last step's number and the payloads."""

    hello_at: float | None = None
    environment_at: float | None = None
    measure_start_at: float | None = None
    step_at: float | None = None
    measure_end_at: float | None = None
    result_at: float | None = None
    last_step: int | None = None
    environment: EnvironmentPayload | None = None
    result: ResultPayload | None = None
    error: ErrorPayload | None = None

    @classmethod
    def of(cls, events: Mapping[str, Mapping]) -> "Events":
        stamps = {f"{kind}_at": node.get("at") for kind, node in events.items() if kind in STAMPED}
        step = typed(StepPayload, events.get("step"))
        return cls(**stamps, last_step=step.step if step else None,
                   environment=typed(EnvironmentPayload, events.get("environment")),
                   result=ResultPayload.of(events.get("result")), error=typed(ErrorPayload, events.get("error")))

    def stamps(self) -> list[tuple[str, float]]:
        """(kind, when) of each stamped event the worker said, in STAMPED's order."""
        said = zip(STAMPED, (self.hello_at, self.environment_at, self.measure_start_at, self.step_at,
                             self.measure_end_at, self.result_at))
        return [(kind, at) for kind, at in said if at is not None]


@dataclass(frozen=True)
class StepPayload:
    """A "step" event (worker/measure.py): the step, the loop's total as far as known, its time and loss."""

    step: int | None = None
    steps: int | None = None
    step_s: float | None = None
    loss: float | None = None
    at: float | None = None
