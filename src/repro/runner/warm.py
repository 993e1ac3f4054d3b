"""The next job's worker interpreter, started while the running job ends (runner/launch.py
`warm_start`): started once the running job's measured steps are over, so it runs beside none,
and handed to the next job if that job runs the same interpreter, environment, code and backend."""

from __future__ import annotations

from pathlib import Path


class WarmStart:
    def __init__(self) -> None:
        self.upcoming = None  # the Config of the job after the one running (api.run_jobs sets it)
        self._warm = None

    def start_next(self, src: Path | None = None) -> None:
        """Start the upcoming job's worker. A job with its own venv (env.packages) or on several
        nodes starts its worker as usual."""
        from repro.backends.layouts import process_count
        from repro.runner import cluster, launch, seeding, snapshot
        from repro.runner.job import make_run_dir

        config, self.upcoming = self.upcoming, None
        if self._warm is not None or config is None or config.env.packages or config.cluster.name != "local":
            return
        try:
            snapshot.ensure_active()  # whole before a worker imports from it (else the job's own check says why)
            rdzv = cluster.resolve(config.cluster)
            env = seeding.worker_env(config, process_count(config, rdzv.nodes, rdzv.jax_processes))
            self._warm = launch.warm_start(make_run_dir(), config.framework.python, env, src,
                                           backend=config.framework.backend)
        except Exception:  # noqa: BLE001 - an early start is an optimisation: the job starts its own
            self._warm = None

    def take(self, python: str | None, env: dict[str, str], src, backend: str):
        """The worker started ahead, if it was started for this job's interpreter, env, code and backend."""
        from repro.runner import launch

        warm, self._warm = self._warm, None
        if warm is None:
            return None
        if warm.key == launch.warm_key(python, env, src, backend) and warm.proc.poll() is None:
            return warm
        warm.discard()
        return None

    def discard(self) -> None:
        """A job that will not run (interrupted, failed, resumed): its early worker ends."""
        if self._warm is not None:
            self._warm.discard()
            self._warm = None
