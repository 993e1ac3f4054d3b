"""The launcher adapter of `hydra/launcher=joblib` (loop/rounds.py): a round in joblib's workers.

`hydra.launcher.n_jobs` says how many of a round's jobs run at once, as it did under Hydra's joblib
launcher. n_jobs=1: the round is one joblib task, its jobs one after another in the round's order.
n_jobs > 1: its jobs run side by side on this host's cores, so none of them measured the others'
speed, even where the machine's quiet window (worker/machine_locks.py) kept their measured steps
apart: each repeated job's `repeat` field says `side_by_side`, and the comparison never calls such
runs interleaved and refuses their speed verdict, naming it (report/comparison.py); the sweep says
so as it starts. Ctrl-C stops a round as the default launcher stops a sweep (rounds.Stop): the runs
that run are recorded `interrupted`, the rest do not run, the sweep ends (exit 130).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from repro.loop import rounds
from repro.loop.launchers import HOST, Launch, launcher
from repro.job.host import JobHost

TRACKER_QUIET = "ignore:resource_tracker:UserWarning"  # its messages all begin "resource_tracker: "


class Joblib(rounds.Elsewhere):
    name = "joblib"

    def __init__(self, params: dict, attach: Callable):
        self.attach = attach
        self.n_jobs = int(params.get("n_jobs") or 1)
        self.params = {k: v for k, v in params.items() if k in ("backend", "prefer", "require", "verbose",
                                                               "timeout", "pre_dispatch", "batch_size",
                                                               "temp_folder", "max_nbytes", "mmap_mode")
                       and v is not None}
        self.said = False
        self.stop: rounds.Stop | None = None  # side by side: Ctrl-C reaches the round's processes through it

    def run_round(self, host: JobHost, jobs: Sequence, first_job_no: int, hooks: rounds.Hooks = rounds.NO_HOOKS) -> list:
        from joblib import delayed

        at_once = min(self.n_jobs, len(jobs))
        jobs = [_side_by_side(hooks.before(job), at_once) for job in jobs]
        if at_once > 1 and not self.said:
            self.said = True
            host.say(f"hydra.launcher.n_jobs={self.n_jobs}: {at_once} jobs of each round run at the same time on "
                     "this host's cores, so their speeds cannot be compared (the close names the overlap); "
                     "n_jobs=1 runs each round's jobs one after another")
        batches = [[(i, job)] for i, job in enumerate(jobs)] if at_once > 1 else [list(enumerate(jobs))]
        taken = rounds.taken(host)
        if len(batches) > 1 and self.stop is None:
            self.stop = rounds.Stop.under(Path(tempfile.gettempdir()))
        stop = str(self.stop.folder) if len(batches) > 1 else None
        calls = [delayed(rounds.run_elsewhere)(self.attach, [j for _, j in batch], first_job_no + batch[0][0], taken,
                                               0, stop) for batch in batches]
        submitted = time.time()
        if len(batches) == 1:  # one call: joblib runs it in this process (n_jobs=1), where Ctrl-C is heard as here
            results, error, interrupted = self._here(calls)
        else:
            results, error, interrupted = self._parallel(len(batches), calls)
        if error is not None:  # a worker that died (loky's TerminatedWorkerError, ...)
            if interrupted:
                raise KeyboardInterrupt
            reason = f"joblib's worker ended without handing back its records ({type(error).__name__}: {error})"
            host.say(reason)
            return [rounds.Lost(reason)] * len(jobs)
        if results is None:  # asked to stop, and it did not within Stop.WAIT_S: what it recorded is in the ledger
            raise KeyboardInterrupt
        # at once: the records of each one-job batch, in the round's order (a batch that lost its record: None)
        records = [(r.records or [None])[0] for r in results] if at_once > 1 else [rec for r in results for rec in r.records]
        merged = rounds.RoundResult(min(r.started for r in results), max(r.ended for r in results), records,
                                    any(r.interrupted for r in results))
        out = rounds.adopt(host, jobs, first_job_no, merged, "joblib's worker handed back no record", submitted, hooks,
                           shown=True)  # its workers print to this command's terminal
        if interrupted or merged.interrupted:  # Ctrl-C: the sweep ends, as it would here
            raise KeyboardInterrupt
        return out

    def _here(self, calls: list) -> tuple[list | None, BaseException | None, bool]:
        from joblib import Parallel

        try:
            return Parallel(n_jobs=1, **self.params)(calls), None, False
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 - handed to the caller
            return None, e, False

    def _parallel(self, at_once: int, calls: list) -> tuple[list | None, BaseException | None, bool]:
        """The round's calls through joblib (`at_once` workers: one call each, so no idle worker of its pool
        meets the terminal's Ctrl-C outside a call) in a thread of this process, so that Ctrl-C here neither
        reaches joblib (which would kill its workers mid-record) nor goes unheard: the round is asked
        to stop (rounds.Stop) and waited for, at most Stop.WAIT_S. (results, error, interrupted)."""
        import sys
        import threading

        from joblib import Parallel

        # loky's resource tracker, a process joblib starts with this interpreter's -W flags, outlives an
        # interrupted sweep and warns of the semaphores it finds unlinked already, after repro's last
        # line: a Ctrl-C would not end in one line as under every other launcher (test_launcher_parity)
        if TRACKER_QUIET not in sys.warnoptions:
            sys.warnoptions.append(TRACKER_QUIET)
        outcome: dict = {}
        done = threading.Event()  # not Thread.join: one interrupted by Ctrl-C marks a running thread ended (3.11)

        def run() -> None:
            try:
                outcome["results"] = Parallel(n_jobs=at_once, **self.params)(calls)
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                outcome["error"] = e
            finally:
                done.set()

        threading.Thread(target=run, name="repro-joblib-round", daemon=True).start()
        interrupted = False
        try:
            while not done.wait(0.2):
                pass
        except KeyboardInterrupt:
            interrupted = True
            self.stop.ask()
            deadline = time.time() + rounds.Stop.WAIT_S
            try:
                while not done.wait(0.2) and time.time() < deadline:
                    pass
            except KeyboardInterrupt:  # a second Ctrl-C: stop waiting
                pass
        return outcome.get("results"), outcome.get("error"), interrupted

    def close(self) -> None:
        if self.stop is not None:
            self.stop.remove()


@launcher("joblib", target="hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", where=HOST,
          needs=("joblib", "hydra_plugins.hydra_joblib_launcher"), extra="launchers")
def _joblib(launch: Launch) -> Joblib:
    return Joblib(launch.node, launch.attach)


def _side_by_side(job, at_once: int):
    """A repeated job run beside others of its round says so in its `repeat` field (`side_by_side`:
    how many ran at once): the comparison never calls such runs interleaved and refuses their verdict."""
    rep = (job.fields or {}).get("repeat")
    if at_once < 2 or rep is None:
        return job
    return replace(job, fields={**job.fields, "repeat": {**rep, "side_by_side": at_once}})
