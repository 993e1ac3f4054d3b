"""A sweep in the parent process: one tracking store, one MLflow parent run, the closing table.

MLflow is a view of the ledger: it is imported and its store opened while the first worker
starts (its interpreter, framework import and model build; the worker's measured steps wait
for it, runner/events.py Gate), records are projected after the ledger has them, and any
tracking failure is one warning, after which the sweep leaves that store alone and ends
with "N runs not yet in MLflow: repro sync". A closing step that fails still closes the
MLflow parent, and the failure reaches the exit code (Hydra swallows callbacks' errors).

Hydra calls `SweepCallback` at the start and end of a run or multirun (conf/config.yaml
registers it under hydra.callbacks); each job's task function finds the open `Session`.
Hydra instantiates the callback itself and hands it and the task function nothing but the
composed config, so the checked plan goes in and the session comes out through one slot,
`HYDRA` (see `HydraSweep`): the only module-level state of the sweep path. Everything a sweep
collects (records, failures) belongs to its `Session`; `repro.api` and replay make theirs
directly, passing the plan, without Hydra and without the slot.
Launchers that run jobs in other processes (submitit: local or SLURM; joblib) find none
there: the multirun start writes the session's identity into the sweep folder
(`repro_session.json`), their jobs attach to it, and the closing table is read back from the
ledger by sweep id.
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from repro import paths, report
from repro.config import validate
from repro.config.schema import Config, as_dict
from repro.runner.envcapture import redact
from repro.tracking import failure_line
from repro.ledger import Ledger
from repro.ledger.command import sweep_command
from repro.report.progress import Display
from repro.report import comparison, sweep_report, trajectory, varied
from repro.report.table import print_comparison
from repro.runner import gitinfo, hydra_dirs, lifeline, scheduler

NOT_OK = ("failed", "killed", "timeout", "interrupted")
SESSION_FILE = "repro_session.json"

class Session:
    def __init__(self, primary: Config, multirun: bool, plan: validate.Plan | None = None,
                 shared: dict | None = None):
        """`plan`: the checked sweep (its job count and swept keys); `shared`: the identity of a
        session opened by another process (see `attach`)."""
        self.multirun = multirun
        self.ledger_dir = primary.ledger.dir
        self.experiment = primary.tracking.experiment
        self.records: list[dict] = []
        self.failures: list[str] = []  # what went wrong outside the runs (the exit code says so)
        self.closed = False
        self._trackers: dict = {}
        self._parents: dict = {}
        self._down: set = set()  # tracking stores that failed in this session
        self.pending = 0  # runs recorded in the ledger but not in MLflow
        self.mlflow_run_ids: dict[str, str] = {}  # ledger id -> MLflow run id
        if shared:
            self.jobs, self.sweep_id, self.git, self.code = (shared[k] for k in ("jobs", "sweep_id", "git", "code"))
            self._parent_ids = {tuple(k.split("\n")): v for k, v in shared["parents"].items()}
            self.display = Display("plain", self.jobs, primary.progress.interval_s)
            self.swept = shared.get("swept")  # from the sweep's own process (its plan)
            return
        self.jobs = len(plan.jobs) if plan else (None if multirun else 1)
        # the keys that name its runs (varied.name_keys), as the comparison of its records will
        self.swept = varied.name_keys([{"config": as_dict(c), "overrides": o} for c, o in zip(plan.jobs, plan.overrides)]) \
            if plan else None
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.sweep_id = f"{stamp}-{uuid.uuid4().hex[:6]}"
        self.git = gitinfo.state(paths.repo_root(), Path(primary.ledger.dir))
        self.code = {"src_sha256": gitinfo.source_sha256(paths.src_dir() / "repro")}
        self.display = Display(primary.progress.mode, self.jobs, primary.progress.interval_s)
        self._parent_ids: dict = {}

    @classmethod
    def open(cls, config: DictConfig, multirun: bool, plan: validate.Plan | None = None) -> "Session":
        """The session of a Hydra run or multirun, `plan` its checked jobs (None: checked here)."""
        if plan and plan.jobs:  # already checked; the config before sweep overrides may be no job at all
            primary = plan.jobs[0]
        else:
            primary = validate.check(OmegaConf.masked_copy(config, [k for k in config.keys() if k != "hydra"]))
        # A single run with run.repeats > 1 is a sweep of its repeats: an MLflow parent and children.
        session = cls(primary, multirun or primary.run.repeats > 1, plan)
        launcher = str(config.hydra.launcher.get("_target_", "")) if "hydra" in config else ""
        if multirun and "SlurmLauncher" in launcher:
            scheduler.sacct_stand_in(Path(str(config.hydra.sweep.dir)))  # where accounting is off
        if multirun and "BasicLauncher" not in launcher and not _follower(primary):
            # jobs launched in other processes attach through the sweep folder, parent run id included
            session.tracking(_store(primary), session.parent_run_id)
            folder = Path(str(config.hydra.sweep.dir))
            folder.mkdir(parents=True, exist_ok=True)
            (folder / SESSION_FILE).write_text(json.dumps({
                "sweep_id": session.sweep_id, "jobs": session.jobs, "git": session.git, "code": session.code,
                "swept": session.swept,
                "parents": {"\n".join(k): run_id for k, (_, run_id) in session._parents.items()}}))
        return session

    @classmethod
    def attach(cls, config: Config, sweep_dir: str) -> "Session":
        """The session of a sweep whose parent process is elsewhere (a launcher's job process)."""
        path = Path(sweep_dir) / SESSION_FILE
        if not path.exists():
            raise RuntimeError(f"no repro session in {sweep_dir} ({SESSION_FILE} is missing): was the "
                               "sweep started by `python -m repro` with the repro_sweep callback?")
        return cls(config, multirun=True, shared=json.loads(path.read_text()))

    @property
    def failed_any(self) -> bool:
        """Whether anything went wrong: a run not ok, or a failure outside the runs."""
        return bool(self.failures) or any(r["status"] in NOT_OK for r in self.records)

    def failed(self, message: str) -> None:
        print(f"repro: {message}", file=sys.stderr)
        self.failures.append(message)

    def tracker_for(self, key: tuple[str, str]):
        from repro.tracking.mlflow_tracker import Tracker  # MLflow is imported once, here

        if key not in self._trackers:
            self._trackers[key] = Tracker(*key)
        return self._trackers[key]

    def tracking(self, key: tuple[str, str], call):
        """`call(tracker)` against the store `key` = (tracking URI, experiment); a failure is one
        warning, never fatal."""
        if key in self._down:
            return None
        try:
            return call(self.tracker_for(key))
        except Exception as e:  # noqa: BLE001 - whatever the store does, the run is in the ledger
            self._down.add(key)
            print(f"repro: warning: MLflow at {redact(key[0])} (experiment {key[1]!r}) failed: "
                  f"{failure_line(e)}. Runs stay in the ledger; once the store works, "
                  "`repro sync` puts them into MLflow", file=sys.stderr)
            return None

    def prepare_tracking(self, config: Config) -> None:
        """MLflow imported, its store opened and the sweep's parent run made, while a worker starts
        (runner/launch.py runs this before the worker's measured steps may begin): the finished
        record's projection then costs only its own writes."""
        self.tracking(_store(config), self.parent_run_id)

    def run_name(self, config: Config | dict, overrides: list[str]) -> str:
        """The one name of a job's run (report/varied.py), passed down to `run_job` and to MLflow."""
        config = config if isinstance(config, dict) else as_dict(config)
        return varied.run_name({"config": config, "overrides": list(overrides)}, self.swept or [])

    def project(self, record: dict, files: list[str] = (), worker_log: Path | None = None) -> None:
        """The finished record into MLflow (after the ledger has it)."""
        from repro.tracking.project import project_run

        name = self.run_name(record["config"], record.get("overrides") or [])
        tracking = record["config"]["tracking"]
        run_id = self.tracking((tracking["uri"], tracking["experiment"]), lambda t: project_run(t, record, name, self.parent_run_id(t), files,
                                                                        worker_log))
        if run_id is None:
            self.pending += 1
        else:
            self.mlflow_run_ids[record["id"]] = run_id

    def parent_run_id(self, tracker) -> str | None:
        from repro.tracking.project import sweep_parent

        if not self.multirun:
            return None
        key = (tracker.uri, tracker.experiment)
        if key not in self._parents:
            run_id = self._parent_ids.get(key) or sweep_parent(tracker, self.sweep_info(0), self.git,
                                                                lifeline.identity())
            self._parents[key] = (tracker, run_id)
        return self._parents[key][1]

    def sweep_info(self, job: int) -> dict:
        return {"id": self.sweep_id, "job": job, "jobs": self.jobs, "experiment": self.experiment,
                "multirun": self.multirun, **({"swept": self.swept} if self.swept else {})}

    def finished(self, record: dict) -> None:
        self.records.append(record)

    def _sweep_records(self) -> list[dict]:
        """This sweep's records: those of its jobs run here, and those run by other processes."""
        found = {r["id"]: r for r in self.records}
        if self.multirun:
            for r in Ledger(self.ledger_dir).heads(kind="run", sweep=self.sweep_id):
                found.setdefault(r["id"], r)
        return sorted(found.values(), key=lambda r: r["sweep"]["job"])

    def close(self, interrupted: bool = False) -> list[dict]:
        """Print the closing table, publish the sweep and close its MLflow parent; this session's
        records. A failure here is one of the session's failures (Hydra would swallow the error,
        the exit code must not)."""
        self.closed = True
        try:
            return self._close(interrupted)
        except Exception as e:  # noqa: BLE001
            self.failed(f"the sweep's closing step failed: {type(e).__name__}: {e}")
            return self.records

    def _close(self, interrupted: bool) -> list[dict]:
        from repro.tracking.project import attach_report, close_parent

        self.display.close()
        status, sweep_record, report_dir, comp = "interrupted" if interrupted else "failed", None, None, None
        try:
            self.records = self._sweep_records()
            comp = comparison.build(self.records)  # once: the table, the report and the MLflow parent show it
            print_comparison(report.console(), comp)
            if self.multirun:  # the loss drift between frameworks, stored with the sweep
                sweep_record = trajectory.store(Ledger(self.ledger_dir), {"id": self.sweep_id, "experiment": self.experiment,
                                                                          "jobs": self.jobs}, self.records)
                report_dir = sweep_report.publish(self.records, report.console(), comp)
            if not interrupted and not any(r["status"] in NOT_OK for r in self.records):
                status = "ok"
        finally:  # the MLflow parent is closed whatever happened above
            for (tracker, run_id) in self._parents.values():
                store = (tracker.uri, tracker.experiment)
                if sweep_record:
                    self.tracking(store, lambda t, run_id=run_id: trajectory.log_parent(t, run_id, sweep_record))
                if report_dir:
                    self.tracking(store, lambda t, run_id=run_id: attach_report(
                        t, run_id, comp, sweep_report.swept_params(self.records),
                        sweep_command(self.records, places=False), self.records[0].get("git") or {}, report_dir))
                self.tracking(store, lambda t, run_id=run_id: close_parent(t, run_id, self.records, status))
            if self.pending:
                print(f"repro: {self.pending} runs not yet in MLflow: repro sync", file=sys.stderr)
        return self.records


def _store(config: Config) -> tuple[str, str]:
    """The MLflow store a run's config names: (tracking URI, experiment)."""
    return config.tracking.uri, config.tracking.experiment


def _follower(config: Config) -> bool:
    """A node other than node 0 of a multi-node run: it records nothing, so it opens no MLflow run."""
    from repro.config import ConfigError
    from repro.runner import cluster

    try:
        return not cluster.resolve(config.cluster).leader
    except ConfigError:  # cluster=slurm outside the allocation (the launching host): not a node
        return False


@dataclass
class HydraSweep:
    """What crosses Hydra's boundary during one `hydra_main()`: the plan the caller checked (in)
    and the session the callback opens (out, with its records and failures once closed)."""

    plan: validate.Plan | None = None
    session: Session | None = None

    def close(self, interrupted: bool = False) -> list[dict]:
        """Close the open session (if still open); its records."""
        if self.session is None:
            return []
        if not self.session.closed:
            self.session.close(interrupted)
        return self.session.records


# The one module-level slot of the sweep path, forced by Hydra: Hydra instantiates SweepCallback
# from conf/config.yaml (hydra.callbacks) and calls `app.task(cfg)` with the composed config alone,
# so neither can be handed an object. `hydra_sweep(plan)` fills it for one `hydra_main()` call.
HYDRA = HydraSweep()


@contextmanager
def hydra_sweep(plan: validate.Plan | None) -> Iterator[HydraSweep]:
    """`with hydra_sweep(plan) as sweep: hydra_main()`; then `sweep.session` is the closed session.
    The slot is emptied on the way out."""
    HYDRA.plan, HYDRA.session = plan, None
    try:
        yield HYDRA
    finally:
        HYDRA.plan, HYDRA.session = None, None


class SweepCallback(Callback):
    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        hydra_dirs.prune(config.hydra.run.dir)
        HYDRA.session = Session.open(config, multirun=False, plan=HYDRA.plan)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        hydra_dirs.prune(config.hydra.sweep.dir)
        HYDRA.session = Session.open(config, multirun=True, plan=HYDRA.plan)

    def on_run_end(self, config: DictConfig, **kwargs) -> None:
        HYDRA.close()

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        HYDRA.close()
