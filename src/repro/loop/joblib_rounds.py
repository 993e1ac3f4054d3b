"""The launcher adapter of `hydra/launcher=joblib` (loop/rounds.py): a round in joblib's workers.

`hydra.launcher.n_jobs` says how many of a round's jobs run at once, as it did under Hydra's joblib
launcher. n_jobs=1: the round is one joblib task, its jobs one after another in the round's order.
n_jobs > 1: its jobs run side by side on this host's cores, so none of them measured the others'
speed, even where the machine's quiet window (worker/machine_locks.py) kept their measured steps
apart: each repeated job's `repeat` field says `side_by_side`, and the comparison never calls such
runs interleaved and refuses their speed verdict, naming it (report/comparison.py); the sweep says
so as it starts.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Sequence

from repro.loop import rounds
from repro.job.host import JobHost


class Joblib:
    def __init__(self, params: dict, attach: Callable):
        self.name, self.attach, self.between_rounds = "joblib", attach, True
        self.n_jobs = int(params.get("n_jobs") or 1)
        self.params = {k: v for k, v in params.items() if k in ("backend", "prefer", "require", "verbose",
                                                               "timeout", "pre_dispatch", "batch_size",
                                                               "temp_folder", "max_nbytes", "mmap_mode")
                       and v is not None}
        self.said = False

    def run_round(self, host: JobHost, jobs: Sequence, first_job_no: int, hooks: rounds.Hooks = rounds.NO_HOOKS) -> list:
        from joblib import Parallel, delayed

        at_once = min(self.n_jobs, len(jobs))
        jobs = [_side_by_side(hooks.before(job), at_once) for job in jobs]
        if at_once > 1 and not self.said:
            self.said = True
            host.say(f"hydra.launcher.n_jobs={self.n_jobs}: {at_once} jobs of each round run at the same time on "
                     "this host's cores, so their speeds cannot be compared (the close names the overlap); "
                     "n_jobs=1 runs each round's jobs one after another")
        batches = [[(i, job)] for i, job in enumerate(jobs)] if at_once > 1 else [list(enumerate(jobs))]
        submitted = time.time()
        try:
            results = Parallel(n_jobs=at_once, **self.params)(
                delayed(rounds.run_elsewhere)(self.attach, [j for _, j in batch], first_job_no + batch[0][0])
                for batch in batches)
        except Exception as e:  # noqa: BLE001 - a worker that died (loky's TerminatedWorkerError, ...)
            reason = f"joblib's worker ended without handing back its records ({type(e).__name__}: {e})"
            host.say(reason)
            return [rounds.Lost(reason)] * len(jobs)
        merged = {"started": min(r["started"] for r in results), "records": [rec for r in results for rec in r["records"]]}
        if at_once > 1:  # the records of each one-job batch, in the round's order (a batch that lost its record: None)
            merged["records"] = [(r["records"] or [None])[0] for r in results]
        return rounds.adopt(host, jobs, first_job_no, merged, "joblib's worker handed back no record", submitted, hooks,
                            shown=True)  # its workers print to this command's terminal

    def close(self) -> None:
        pass


def _side_by_side(job, at_once: int):
    """A repeated job run beside others of its round says so in its `repeat` field (`side_by_side`:
    how many ran at once): the comparison never calls such runs interleaved and refuses their verdict."""
    rep = (job.fields or {}).get("repeat")
    if at_once < 2 or rep is None:
        return job
    return replace(job, fields={**job.fields, "repeat": {**rep, "side_by_side": at_once}})
