"""run.steps=auto resolved once per config in a sweep (`StepCounts`): the sweep loop (loop/sweep.py)
keeps one for the sweep, and a round run elsewhere (loop/rounds.py `run_elsewhere`) one for its own
jobs, so a round's first runs of a config share its count even before the parent heard of it."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from repro.ledger.record import view


class StepCounts:
    """run.steps=auto, resolved once per config in a sweep: the first ok run of a config takes as many
    steps as the machine's speed allows; every later run of it in the sweep (its repeats, reruns)
    takes that count, recorded as `steps_resolved` {count, from: the run that resolved it}. So K
    processes of one config run the same steps and can be compared bit for bit (report/identity.py)."""

    def __init__(self):
        self.resolved: dict[str, dict] = {}

    @staticmethod
    def key(job) -> str | None:
        """The config the count belongs to (its config hash: calibrate's two labels of one config share
        it, as an A/A must), or None: a fixed count, a replay's own count, or a run outside rounds."""
        from repro.config import config_hash
        from repro.config.schema import as_dict
        from repro.worker.window import adaptive

        if "repeat" not in job.fields or not adaptive(job.config.run.steps) or "replay_steps" in job.fields:
            return None
        return config_hash(as_dict(job.config))

    def pending(self, jobs: Sequence) -> bool:
        """Whether a job's config still waits for its count (its first ok run resolves it)."""
        return any((key := self.key(job)) and key not in self.resolved for job in jobs)

    def take(self, job):
        if (key := self.key(job)) and key in self.resolved:
            return replace(job, fields={**job.fields, "steps_resolved": self.resolved[key]})
        return job

    def resolve(self, job, record: dict) -> None:
        key = self.key(job)
        run = view(record)
        if key and key not in self.resolved and run.status == "ok" and (steps := run.results.steps):
            self.resolved[key] = {"count": steps, "from": run.id}
