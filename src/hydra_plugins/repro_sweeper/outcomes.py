"""Each job's outcome read on its own under Hydra's submitit launchers (local and SLURM).

hydra-submitit-launcher ends its `launch` with `[j.results()[0] for j in jobs]`: a job that SLURM
cancelled, requeued past its limit or failed raises submitit's UncompletedJobError (or
FailedJobError) there, out of Hydra, while the jobs after it in that list still run. The
traceback reached the user and the sweep closed before its last jobs ended. `PerJobOutcomes`
wraps the launcher so that, while it launches, the executor's jobs answer `results()` with a
JobReturn for such a job (one line said, no traceback) and the loop goes on to wait for the next
job. How the job itself ended is in the ledger: its own process recorded it (killed, naming
scancel; a timeout; a failure), before SLURM ended it.

A wrapper that swaps the executor's `map_array` only during `launch`, rather than a copy of the
plugin's `launch`: the plugin's submission logic (its parameters, folders, array jobs) stays its own.
"""

from __future__ import annotations

from contextlib import contextmanager

from hydra.core.utils import JobReturn, JobStatus


class _Outcome:
    """A submitit job whose `results()` never raises: a job that ended without a result gives a
    completed JobReturn whose value says so."""

    def __init__(self, job, overrides):
        self.job, self.overrides = job, overrides

    def results(self):
        try:
            return self.job.results()
        except Exception as e:  # noqa: BLE001 - submitit's UncompletedJobError, FailedJobError, ...
            from repro.console import say

            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            say(f"job {self.job.job_id} ({' '.join(self.overrides)}) ended without returning to Hydra "
                f"({type(e).__name__}: {first}); its record in the ledger says how it ended")
            return [JobReturn(overrides=list(self.overrides), status=JobStatus.COMPLETED,
                              _return_value={"status": "ended by the scheduler", "reason": first})]

    def __getattr__(self, name):
        return getattr(self.job, name)


@contextmanager
def _each_job_on_its_own():
    import submitit

    original = submitit.AutoExecutor.map_array

    def map_array(executor, fn, *iterable):
        args = [list(a) for a in iterable]
        jobs = original(executor, fn, *args)
        return [_Outcome(job, args[0][i] if args else []) for i, job in enumerate(jobs)]

    submitit.AutoExecutor.map_array = map_array
    try:
        yield
    finally:
        del submitit.AutoExecutor.map_array  # the class's own (Executor's) again


class PerJobOutcomes:
    """A Hydra launcher whose jobs' outcomes are read each on its own (module docstring)."""

    def __init__(self, launcher):
        self._launcher = launcher

    def __getattr__(self, name):
        return getattr(self._launcher, name)

    def launch(self, job_overrides, initial_job_idx):
        with _each_job_on_its_own():
            return self._launcher.launch(job_overrides, initial_job_idx)


def wrap(launcher):
    """`launcher` wrapped where it is one of submitit's, else as it is."""
    try:
        from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher
    except ImportError:  # the plugin is not installed: no submitit launcher can have been chosen
        return launcher
    return PerJobOutcomes(launcher) if isinstance(launcher, BaseSubmititLauncher) else launcher
