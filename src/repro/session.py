"""A sweep in the parent process: one tracking store, one MLflow parent run, the closing table.

MLflow is a view of the ledger. A session whose jobs run in this process (`handoff`) never
imports it: each finished run, then the closed sweep, is handed to the projector through the
ledger (tracking/handoff.py), which a detached process writes into MLflow after the command's
last measured step (tracking/projector.py); a store that cannot be reached is one warning and
"N runs not yet in MLflow: repro sync". Sessions whose jobs run in other processes (submitit,
joblib, SLURM) project each run in the job's process, as it ends. A closing step that fails
still closes the MLflow parent, and the failure reaches the exit code (Hydra swallows
callbacks' errors).

Hydra calls `SweepCallback` (repro/hydra_callback.py) at the start and end of a run or multirun (conf/config.yaml
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

from omegaconf import DictConfig, OmegaConf

import importlib

from repro import paths
from repro import preflight
from repro.config.schema import Config, as_dict
from repro.runner.envcapture import redact
from repro.tracking import failure_line
from repro.ledger import Ledger
from repro.report.progress import Display
from repro.report import varied
from repro.runner import gitinfo, lifeline, scheduler

NOT_OK = ("failed", "killed", "timeout", "interrupted")
# What the session's close needs (the table, the report, the trajectory): imported while the
# first worker starts (Session.prepare_tracking), not on the way to it nor after it.
CLOSING_MODULES = ("repro.report.comparison", "repro.report.table", "repro.report.sweep_report",
                   "repro.report.trajectory", "repro.ledger.command", "repro.tracking.project")
SESSION_FILE = "repro_session.json"

class Session:
    def __init__(self, primary: Config, multirun: bool, plan: preflight.Plan | None = None,
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
        self.mlflow_run_ids: dict[str, str] = {}  # ledger id -> MLflow run id (projected here)
        self.handoff = not shared  # jobs run in this process: MLflow is the projector's (see open())
        self.handed: list[str] = []  # ledger ids handed to the projector
        self.upcoming: Config | None = None  # the job after the one running (api.run_jobs sets it)
        self._warm = None  # its worker interpreter, started once the running job's measured steps end
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
        _say_last_projection_failure(self.ledger_dir)

    @classmethod
    def open(cls, config: DictConfig, multirun: bool, plan: preflight.Plan | None = None) -> "Session":
        """The session of a Hydra run or multirun, `plan` its checked jobs (None: checked here)."""
        if plan and plan.jobs:  # already checked; the config before sweep overrides may be no job at all
            primary = plan.jobs[0]
        else:
            primary = preflight.check(OmegaConf.masked_copy(config, [k for k in config.keys() if k != "hydra"]))
        # A single run with run.repeats > 1 is a sweep of its repeats: an MLflow parent and children.
        session = cls(primary, multirun or primary.run.repeats > 1, plan)
        launcher = str(config.hydra.launcher.get("_target_", "")) if "hydra" in config else ""
        if multirun and "SlurmLauncher" in launcher:
            scheduler.sacct_stand_in(Path(str(config.hydra.sweep.dir)))  # where accounting is off
        if multirun and "BasicLauncher" not in launcher:
            session.handoff = False  # each job's process projects its own run
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
        record's projection then costs only its own writes. A handoff session instead waits here
        for any projector still at work on this machine (a command just before this one), so that
        it does not run beside this worker's measured steps."""
        for module in CLOSING_MODULES:
            importlib.import_module(module)
        if not self.handoff:
            self.tracking(_store(config), self.parent_run_id)
            return
        from repro.tracking import handoff

        handoff.wait_for_projectors()

    def run_name(self, config: Config | dict, overrides: list[str]) -> str:
        """The one name of a job's run (report/varied.py), passed down to `run_job` and to MLflow."""
        config = config if isinstance(config, dict) else as_dict(config)
        return varied.run_name({"config": config, "overrides": list(overrides)}, self.swept or [])

    def project(self, record: dict, files: list[str] = (), worker_log: Path | None = None) -> None:
        """The finished record into MLflow (after the ledger has it): handed to the projector, or
        projected here."""
        from repro.tracking import handoff

        if self.handoff:
            try:
                handoff.add_run(self.ledger_dir, record["id"], files, worker_log)
                self.handed.append(record["id"])
            except OSError as e:  # the record is in the ledger: `repro sync` projects it
                self.failed(f"the run {record['id']} could not be handed to MLflow's projector ({e}); "
                            "`repro sync` puts it into MLflow")
            return
        from repro.tracking.project import project_run

        name = self.run_name(record["config"], record.get("overrides") or [])
        tracking = record["config"]["tracking"]
        run_id = self.tracking((tracking["uri"], tracking["experiment"]), lambda t: project_run(t, record, name, self.parent_run_id(t), files,
                                                                        worker_log))
        if run_id is None:
            self.pending += 1
        else:
            self.mlflow_run_ids[record["id"]] = run_id

    def warm_next(self) -> None:
        """Start the upcoming job's worker interpreter (runner/launch.py warm_start) while this one
        ends: called once the running job's measured steps are over, so it runs beside none. A
        job with its own venv (env.packages) or on several nodes starts its worker as usual."""
        from repro.backends.layouts import process_count
        from repro.runner import cluster, launch, seeding
        from repro.runner.job import make_run_dir

        config, self.upcoming = self.upcoming, None
        if self._warm is not None or config is None or config.env.packages or config.cluster.name != "local":
            return
        try:
            rdzv = cluster.resolve(config.cluster)
            env = seeding.worker_env(config, process_count(config, rdzv.nodes, rdzv.jax_processes))
            self._warm = launch.warm_start(make_run_dir(), config.framework.python, env, backend=config.framework.backend)
        except Exception:  # noqa: BLE001 - an early start is an optimisation: the job starts its own
            self._warm = None

    def take_warm(self, python: str | None, env: dict[str, str], src, backend: str):
        """The worker started ahead, if it was started for this job's interpreter, env, code and
        framework backend."""
        from repro.runner import launch

        warm, self._warm = self._warm, None
        if warm is None:
            return None
        if warm.key == launch.warm_key(python, env, src, backend) and warm.proc.poll() is None:
            return warm
        warm.discard()
        return None

    def tag(self, record: dict, tags: dict[str, str]) -> None:
        """Tags for a run's MLflow run, added after it was recorded (a replay's verdict)."""
        from repro.tracking import handoff

        if self.handoff:
            handoff.add_tags(self.ledger_dir, record["id"], tags)
        elif run_id := self.mlflow_run_ids.get(record["id"]):
            tracking = record["config"]["tracking"]
            self.tracking((tracking["uri"], tracking["experiment"]), lambda t: t.client.set_tags(run_id, tags))

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
        if self._warm is not None:  # a job that will not run (interrupted, failed, resumed)
            self._warm.discard()
            self._warm = None
        try:
            return self._close(interrupted)
        except Exception as e:  # noqa: BLE001
            self.failed(f"the sweep's closing step failed: {type(e).__name__}: {e}")
            return self.records

    def _close(self, interrupted: bool) -> list[dict]:
        from repro import report
        from repro.ledger.command import sweep_command
        from repro.report import comparison, sweep_report, trajectory
        from repro.report.table import print_comparison
        from repro.tracking.project import attach_report, close_parent

        self.display.close()
        status, sweep_record, report_dir, comp = "interrupted" if interrupted else "failed", None, None, None
        try:
            self.records = self._sweep_records()
            comp = comparison.build(self.records)  # once: the table, the report and the MLflow parent show it
            print_comparison(report.console(), comp, hint=f"every column: repro compare --sweep {self.sweep_id} --wide"
                             if self.multirun else "")
            if self.multirun:  # the loss drift between frameworks, stored with the sweep
                sweep_record = trajectory.store(Ledger(self.ledger_dir), {"id": self.sweep_id, "experiment": self.experiment,
                                                                          "jobs": self.jobs}, self.records)
                report_dir = (sweep_report.announce(self.records, report.console()) if self.handoff
                              else sweep_report.publish(self.records, report.console(), comp))
            if not interrupted and not any(r["status"] in NOT_OK for r in self.records):
                status = "ok"
        finally:  # the MLflow parent is closed whatever happened above
            if self.handoff:
                self._hand_over(status, sweep_record, report_dir)
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


    def _hand_over(self, status: str, sweep_record: dict | None, report_dir: Path | None) -> None:
        """The closed sweep to the projector, which writes its report (announced, not yet written)
        and then MLflow. A store that cannot be reached is said here: its runs wait for `repro
        sync`, and the projector is started only if there is a report to write."""
        from repro.tracking import handoff

        if self.multirun and self.records:
            handoff.add_sweep(self.ledger_dir, self.sweep_id, {
                "status": status, "trajectory": sweep_record["id"] if sweep_record else None,
                "report_dir": str(report_dir) if report_dir else None, "write_report": bool(report_dir)})
        if not self.handed and not (self.multirun and self.records):
            return
        stores = {(r["config"]["tracking"]["uri"], r["config"]["tracking"]["experiment"]) for r in self.records}
        for uri, experiment in sorted(stores):
            if why := handoff.unreachable(uri):
                print(f"repro: warning: MLflow at {redact(uri)} (experiment {experiment!r}) failed: {why}. Runs stay "
                      "in the ledger; once the store works, `repro sync` puts them into MLflow", file=sys.stderr)
                self.pending += sum(r["id"] in self.handed for r in self.records
                                    if (r["config"]["tracking"]["uri"], r["config"]["tracking"]["experiment"]) == (uri, experiment))
                if report_dir:
                    handoff.start_projector(self.ledger_dir)
                return
        from repro import report

        new = sorted(uri for uri, _ in stores if handoff.new_sqlite_store(uri))
        if new:  # its first runs: the command returns once the projector has created it
            report.console().print(f"[dim]MLflow: creating the store {redact(new[0])} (its first runs)[/]")
        handoff.start_projector(self.ledger_dir, wait_for_stores=bool(new))

        report.console().print(f"[dim]MLflow: {len(self.handed)} run(s) being written in the background "
                               f"(log {handoff.folder(self.ledger_dir) / handoff.LOG}); `repro sync` finishes "
                               "what it does not[/]")


def _say_last_projection_failure(ledger_dir: str) -> None:
    """A background projection that failed is told to the next session on its ledger."""
    from repro.tracking import handoff

    if failed := handoff.last_failure(ledger_dir):
        print(f"repro: warning: MLflow at {redact(failed['uri'])} (experiment {failed['experiment']!r}) failed "
              f"while the last projection wrote to it: {failed['error']}. {failed['runs']} entries are only in "
              "the ledger; once the store works, `repro sync` puts them into MLflow", file=sys.stderr)


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

    plan: preflight.Plan | None = None
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
def hydra_sweep(plan: preflight.Plan | None) -> Iterator[HydraSweep]:
    """`with hydra_sweep(plan) as sweep: hydra_main()`; then `sweep.session` is the closed session.
    The slot is emptied on the way out."""
    HYDRA.plan, HYDRA.session = plan, None
    try:
        yield HYDRA
    finally:
        HYDRA.plan, HYDRA.session = None, None
