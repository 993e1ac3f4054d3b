"""The life of one sweep in the parent process: plan → jobs → close.

A `Session` gives a sweep its identity (id, git state, the code snapshot its jobs run:
job/snapshot.py), collects its jobs' records and failures, hands each finished run to
MLflow's projector (tracking/handoff.py, the only way into MLflow whatever the launcher) and
closes the sweep (repro/sweep_close.py). It holds no MLflow state and imports no MLflow.

Jobs run in this process (`repro.api.run_jobs`, replay) or, under a launcher adapter that runs a
round in another process (loop/rounds.py: submitit local or SLURM, joblib), in that one: it gets
the session's identity (SHARED) with the round, `attached` makes its host there, and such a round
drains its runs into MLflow inline (bounded) once, as it ends (`round_ended`), since no command
outlives its process to start a projector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import functools
import json
import uuid
from datetime import datetime, timezone
from pathlib import Path

from repro import paths
from repro.config.schema import Config, ProgressConfig, as_dict
from repro.report import varied
from repro import gitinfo
from repro.job import forked, snapshot
from repro.worker import lifeline
from repro.job.warm import WarmStart
from repro.tracking import handoff

if TYPE_CHECKING:
    from repro.report.progress import Display

NOT_OK = ("failed", "killed", "timeout", "interrupted", "lost")
SHARED = ("sweep_id", "jobs", "git", "code", "swept", "owner")  # what a job in another process attaches to


class Session:
    """A sweep in its parent process: the host its jobs run in (job/host.py `JobHost`)."""

    def __init__(self, primary: Config, multirun: bool, plan=None, shared: dict | None = None,
                 warm: WarmStart | None = None):
        """`plan`: the checked sweep (its jobs and swept keys); `shared`: a session opened elsewhere (`attached`);
        `warm`: the first job's worker, started before the session (job/warm.py `ahead_of_session`)."""
        self.multirun, self.ledger_dir, self.experiment = multirun, primary.ledger.dir, primary.tracking.experiment
        self.drain_s = primary.tracking.inline_drain_s
        self.writer_idle_s = primary.tracking.writer_idle_s  # handoff.start_projector
        self.records: list[dict] = []
        self.failures: list[str] = []  # what went wrong outside the runs (the exit code says so)
        self.handed: list[str] = []  # ledger ids handed to MLflow's projector
        self.closed, self.pending, self.beside = False, 0, None  # beside: a projector the measured steps ran beside
        self.undrained = 0  # runs of a launcher's round handed to MLflow's queue, drained when it ends
        self.queue_s = 0.0  # rounds' time in a scheduler's queue (loop/rounds.py), apart from their run time
        self.warm = warm or WarmStart()
        self.attached = shared is not None
        self.snapshot = snapshot.active()
        if shared:
            self.sweep_id, self.jobs, self.git, self.code, self.swept, self.owner = (shared.get(k) for k in SHARED)
            self._progress = ProgressConfig("plain", primary.progress.interval_s)
            return
        self.jobs = plan.runs if plan else (None if multirun else 1)
        # the keys that name its runs (varied.name_keys), as the comparison of its records will
        self.swept = varied.name_keys([{"config": as_dict(c), "overrides": o} for c, o in zip(plan.jobs, plan.overrides)]) \
            if plan else None
        self.sweep_id = f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:6]}"
        self.owner = lifeline.identity()
        self._ledger_path = Path(primary.ledger.dir)
        self.code = {"src_sha256": gitinfo.source_sha256(paths.src_dir() / "repro"),
                     **({"snapshot": self.snapshot.id} if self.snapshot else {})}
        self._progress = primary.progress
        for line in handoff.news(self.ledger_dir):
            _say(f"warning: {line}")

    @functools.cached_property
    def display(self) -> Display:
        """The live progress, made when the sweep starts (after its first worker: it imports rich)."""
        from repro.report.progress import Display

        return Display(self._progress.mode, self.jobs, self._progress.interval_s)

    @functools.cached_property
    def git(self) -> dict:
        """The checkout's git state as the sweep started: read at its first record, so that the
        first job's worker starts first (loop/sweep.py); a session attached elsewhere has it given."""
        return gitinfo.state(paths.repo_root(), self._ledger_path)

    @classmethod
    def replaying(cls, primary: Config, originals: list[dict]) -> "Session":
        """The session of a replay: its runs named as the recorded runs they replay."""
        session = cls(primary, multirun=len(originals) > 1)
        session.jobs, session.swept = len(originals), varied.name_keys(originals)
        return session

    def shared(self) -> dict:
        """What a round run in another process needs of this sweep (`attached` makes its host there)."""
        return {k: getattr(self, k) for k in SHARED}

    @property
    def failed_any(self) -> bool:
        """Whether anything went wrong: a run not ok, or a failure outside the runs."""
        return bool(self.failures) or any(r["status"] in NOT_OK for r in self.records)

    def failed(self, message: str) -> None:
        _say(message)
        self.failures.append(message)

    def prepare_tracking(self, config: Config) -> None:
        """While a worker starts (job/launch.py runs this before the worker's measured steps may
        begin): the close's modules are imported, and a projector at work on this machine is
        waited for, at most `tracking.projector_wait_s` (`beside` names one still at work then)."""
        from repro import sweep_close

        sweep_close.prepare()
        self.beside = handoff.wait_for_projectors(config.tracking.projector_wait_s, _say)

    def run_name(self, config: Config | dict, overrides: list[str]) -> str:
        """The one name of a job's run (report/varied.py), passed down to `run_job` and to MLflow."""
        config = config if isinstance(config, dict) else as_dict(config)
        return varied.run_name({"config": config, "overrides": list(overrides)}, self.swept or [])

    def project(self, record: dict, files: list[str] = (), worker_log: Path | None = None, drain: bool = True) -> None:
        """The finished record (already in the ledger) handed to MLflow's projector; in a
        launcher's round (`attached`), drained once when the round ends (`round_ended`), not between
        its jobs (`drain=False`: SLURM is ending the job, so it is left for `repro sync`)."""
        try:
            handoff.add_run(self.ledger_dir, record["id"], files, worker_log, self.owner)
            self.handed.append(record["id"])
        except OSError as e:  # the record is in the ledger: `repro sync` projects it
            self.failed(f"the run {record['id']} could not be handed to MLflow's projector ({e}); "
                        "`repro sync` puts it into MLflow")
            return
        if self.attached:
            self.undrained += 1
            if not drain:
                self.round_ended(drain=False)

    def round_ended(self, drain: bool = True) -> None:
        """A launcher's round ended in this process: its runs drained into MLflow at once, bounded by
        tracking.inline_drain_s (one projector for the round, not one per job); what it cannot is
        left for `repro sync`, and said. tracking.inline_drain_s=0: none here (no MLflow import on the
        round's node); the sweep's close hands the ledger's entries over, as for its own runs."""
        if not self.undrained:
            return
        if drain and not self.drain_s:
            _say(f"{self.undrained} run(s) of this round left for the sweep's close to hand to MLflow "
                 f"(tracking.inline_drain_s=0); if it does not: repro sync --ledger {self.ledger_dir}")
            self.undrained = 0
            return
        if not (drain and handoff.drain_inline(self.ledger_dir, self.drain_s, _say)):
            self.pending += self.undrained
            _say(f"{self.pending} run(s) of this round not yet in MLflow: repro sync --ledger {self.ledger_dir}")
        self.undrained = 0

    def tag(self, record: dict, tags: dict[str, str]) -> None:
        """Tags for a run's MLflow run, added after it was recorded (a replay's verdict)."""
        handoff.add_tags(self.ledger_dir, record["id"], tags)

    def sweep_info(self, job: int) -> dict:
        return {"id": self.sweep_id, "job": job, "jobs": self.jobs, "experiment": self.experiment,
                "multirun": self.multirun, **({"swept": self.swept} if self.swept else {})}

    def finished(self, record: dict) -> None:
        self.records.append(record)

    def say(self, line: str) -> None:
        _say(line)

    def expect(self, jobs: int) -> None:
        """At most this many jobs will run: the sweep's count and the progress's "[3/20]"."""
        self.jobs = jobs
        self.display.expect(jobs)

    def close(self, interrupted: bool = False) -> list[dict]:
        """The sweep's close (repro/sweep_close.py); this session's records. A failure here is one
        of the session's failures (Hydra would swallow the error, the exit code must not)."""
        from repro import sweep_close

        self.closed = True
        self.warm.discard()
        forked.close_all()  # run.start=fork: the sweep's fork servers
        try:
            return sweep_close.close(self, interrupted)
        except Exception as e:  # noqa: BLE001
            self.failed(f"the sweep's closing step failed: {type(e).__name__}: {e}")
            return self.records


def attached(shared: dict, config: Config) -> Session:
    """The host of a sweep whose parent process is elsewhere (a launcher's round: loop/rounds.py);
    `shared`: the parent's `Session.shared()`, `config`: the round's first job."""
    return Session(config, multirun=True, shared=shared)


def _say(line: str) -> None:
    from repro.console import say

    say(line)
