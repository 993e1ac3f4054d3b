"""What a job may ask of its sweep: the typed host `run_job` (job/job.py) and the sweep loop
(loop/sweep.py) talk to. `repro.session.Session` implements it; nothing else changes a
session's state, so every way a job touches its sweep is one of these names.

A protocol rather than the Session class itself: the run path sits below the session's floor
(tests/test_structure.py), and a host that is not a Session (a test's, a future launcher's) can
run jobs through the same loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from repro.config.schema import Config
    from repro.job.warm import WarmStart


class Progress(Protocol):
    """The live progress of a sweep's jobs (report/progress.py `Display`, a floor above: named by
    what the run path calls, not imported)."""

    def expect(self, jobs: int) -> None: ...

    def job_started(self, job: int, label: str, steps: int | str) -> None: ...

    def event(self, job: int, event: dict) -> None: ...

    def job_finished(self, job: int, record: dict, in_ledger: bool = True) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class JobHost(Protocol):
    """Everything a job (job/job.py) and a policy of the sweep loop (loop/sweep.py, repeats.py,
    calibrate.py, replay.py) read of their sweep."""

    sweep_id: str  # the sweep's id, in every record's `sweep` block
    experiment: str  # its MLflow experiment (tracking.experiment)
    ledger_dir: str  # the ledger its records go to
    git: dict  # the sweep's git state, in every record
    code: dict  # the code its jobs run (src sha256, snapshot id)
    records: list[dict]  # what its jobs recorded so far, in the order they ended
    beside: dict | None  # a projector the measured steps ran beside (waited for, in vain)
    display: Progress  # the live progress of the sweep's jobs
    warm: WarmStart  # the next job's worker, started while this one ends
    queue_s: float  # seconds its rounds waited in a scheduler's queue (loop/rounds.py), apart from run time

    def sweep_info(self, job: int) -> dict:
        """The record's `sweep` block for job number `job`."""

    def run_name(self, config: Config | dict, overrides: list[str]) -> str:
        """A job's name, as the comparison will call it (what its overrides vary)."""

    def prepare_tracking(self, config) -> None:
        """Run while a worker starts, before its measured steps may begin."""

    def finished(self, record: dict) -> None:
        """A job's last record (ok or not, in the ledger or only spooled)."""

    def failed(self, message: str) -> None:
        """Something went wrong outside the runs: said now, and in the exit code."""

    def project(self, record: dict, files: list[str] = (), worker_log: Path | None = None, drain: bool = True) -> None:
        """The finished record handed to MLflow's projector."""

    def round_ended(self) -> None:
        """A round run in this process for a launcher ended (loop/rounds.py `run_elsewhere`): what
        the host deferred to the round's end (its runs drained into MLflow once)."""

    def tag(self, record: dict, tags: dict[str, str]) -> None:
        """Tags for a run's MLflow run, added after it was recorded (a replay's verdict)."""

    def say(self, line: str) -> None:
        """A notice for the person running the sweep (above the live progress)."""

    def expect(self, jobs: int) -> None:
        """At most this many jobs will run (the progress counts to it)."""

    def close(self, interrupted: bool = False) -> list[dict]:
        """The sweep's close: the table, the report, the MLflow parent; its records."""
