"""The next job's worker interpreter, started ahead (job/launch.py `warm_start`) and handed to
the next job if that job runs the same interpreter, environment, code and backend.

It starts while the running job's worker starts, imports and builds, none of which is measured,
and the running job's measured steps wait until it has imported what it imports ahead
(`settle`, before the gate: worker/events.py); from then on it blocks on a read of its stdin, so
it runs beside no measured step. The next job then starts from its build: the Python start,
repro's and the framework's imports are off the sweep's path. Where it is not ready within
READY_WAIT_S (an import that hangs), it is ended and the next job starts its own worker.
"""

from __future__ import annotations

from pathlib import Path

READY_WAIT_S = 20.0


class WarmStart:
    def __init__(self) -> None:
        self.upcoming = None  # the Config of the job after the one running (api.run_jobs sets it)
        self._warm = None

    def start_next(self, src: Path | None = None) -> None:
        """Start the upcoming job's worker. A job with its own venv (env.packages) or on several
        nodes starts its worker as usual."""
        from repro.backends.layouts import process_count
        from repro.job import cluster, launch, snapshot
        from repro.worker import seeding

        config, self.upcoming = self.upcoming, None
        if (self._warm is not None or config is None or config.env.packages or config.env.wheelhouse
                or config.cluster.name != "local"):
            return
        try:
            snapshot.ensure_active()  # whole before a worker imports from it (else the job's own check says why)
            rdzv = cluster.resolve(config.cluster)
            env = seeding.worker_env(config, process_count(config, rdzv.nodes, rdzv.jax_processes))
            self._warm = launch.warm_start(launch.make_run_dir(), config.framework.python, env, src,
                                           backend=config.framework.backend, fork=config.run.start == "fork")
        except Exception:  # noqa: BLE001 - an early start is an optimisation: the job starts its own
            self._warm = None

    def ahead_of_session(self, plan) -> None:
        """A single run in this process (the command a person types most): its worker starts as soon
        as the plan is checked, so its Python start and imports run while this process makes the
        session (the ledger's estimate, the sweep's id, the source hash), instead of after it. A
        sweep starts its first worker from the loop (loop/sweep.py), where its order is known; a job
        that turns out to differ (`take` compares the key) or never runs is ended as any other."""
        if plan.runs == 1 and not plan.multirun and plan.launcher.in_process:
            self.upcoming = plan.jobs[0]
            self.start_next()

    def settle(self) -> None:
        """Before the running job's measured steps: wait until the worker started ahead is ready
        (its imports done), or end it."""
        if self._warm is not None and not self._warm.wait_ready(READY_WAIT_S):
            self.discard()

    def take(self, python: str | None, env: dict[str, str], src, backend: str, fork: bool = False):
        """The worker started ahead, if it was started for this job's interpreter, env, code, backend
        and start (`fork`: run.start=fork)."""
        from repro.job import launch

        warm, self._warm = self._warm, None
        if warm is None:
            return None
        if warm.key == launch.warm_key(python, env, src, backend, fork) and warm.proc.poll() is None:
            return warm
        warm.discard()
        return None

    def discard(self) -> None:
        """A job that will not run (interrupted, failed, resumed): its early worker ends."""
        if self._warm is not None:
            self._warm.discard()
            self._warm = None
