"""A sweep in the parent process: one tracking store, one MLflow parent run, the closing table.

Hydra calls `SweepCallback` at the start and end of a run or multirun (conf/config.yaml
registers it under hydra.callbacks); each job's task function finds the open `Session`.
Launchers that run jobs in other processes (submitit: local or SLURM; joblib) find none
there: the multirun start writes the session's identity into the sweep folder
(`repro_session.json`), their jobs attach to it, and the closing table is read back from the
ledger by sweep id.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import ClassVar

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from repro import paths, report
from repro.config import validate
from repro.ledger import Ledger
from repro.report.progress import Display
from repro.report import sweep_report
from repro.report.compare import print_comparison
from repro.runner import gitinfo

NOT_OK = ("failed", "killed", "interrupted")
SESSION_FILE = "repro_session.json"

# The preflight plan of this process's command line (set by repro.cli before Hydra runs).
PLAN: validate.Plan | None = None


class Session:
    current: ClassVar["Session | None"] = None
    last_records: ClassVar[list[dict]] = []  # the records of the last closed session

    def __init__(self, primary: dict, multirun: bool, shared: dict | None = None):
        """`shared`: the identity of a session opened by another process (see `attach`)."""
        self.multirun = multirun
        self.ledger_dir = primary["ledger"]["dir"]
        self.experiment = primary["tracking"]["experiment"]
        self.records: list[dict] = []
        self._trackers: dict = {}
        self._parents: dict = {}
        if shared:
            self.jobs, self.sweep_id, self.git, self.code = (shared[k] for k in ("jobs", "sweep_id", "git", "code"))
            self._parent_ids = {tuple(k.split("\n")): v for k, v in shared["parents"].items()}
            self.display = Display("plain", self.jobs)
            return
        self.jobs = len(PLAN.jobs) if PLAN else (None if multirun else 1)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.sweep_id = f"{stamp}-{uuid.uuid4().hex[:6]}"
        self.git = gitinfo.state(paths.repo_root(), Path(primary["ledger"]["dir"]))
        self.code = {"src_sha256": gitinfo.source_sha256(paths.src_dir() / "repro")}
        self.display = Display(primary["progress"]["mode"], self.jobs)
        self._parent_ids: dict = {}

    @classmethod
    def open(cls, config: DictConfig, multirun: bool) -> "Session":
        if PLAN and PLAN.jobs:  # already checked; the config before sweep overrides may be no job at all
            primary = PLAN.jobs[0]
        else:
            primary = validate.check(OmegaConf.masked_copy(config, [k for k in config.keys() if k != "hydra"]))
        cls.current = session = cls(primary, multirun)
        if multirun and not _follower(primary):  # jobs launched elsewhere attach through the sweep folder
            tracker = session.tracker_for(primary)
            session.parent_run_id(tracker)
            folder = Path(str(config.hydra.sweep.dir))
            folder.mkdir(parents=True, exist_ok=True)
            (folder / SESSION_FILE).write_text(json.dumps({
                "sweep_id": session.sweep_id, "jobs": session.jobs, "git": session.git, "code": session.code,
                "parents": {"\n".join(k): run_id for k, (_, run_id) in session._parents.items()}}))
        return session

    @classmethod
    def attach(cls, config: dict, sweep_dir: str) -> "Session":
        """The session of a sweep whose parent process is elsewhere (a launcher's job process)."""
        path = Path(sweep_dir) / SESSION_FILE
        if not path.exists():
            raise RuntimeError(f"no repro session in {sweep_dir} ({SESSION_FILE} is missing): was the "
                               "sweep started by `python -m repro` with the repro_sweep callback?")
        cls.current = cls(config, multirun=True, shared=json.loads(path.read_text()))
        return cls.current

    @classmethod
    def close_current(cls, interrupted: bool = False) -> list[dict]:
        session, cls.current = cls.current, None
        if session:
            cls.last_records = session.close(interrupted)
        return cls.last_records

    def tracker_for(self, config: dict):
        from repro.tracking.mlflow_tracker import Tracker  # MLflow is imported once, here

        key = (config["tracking"]["uri"], config["tracking"]["experiment"])
        if key not in self._trackers:
            self._trackers[key] = Tracker(*key)
        return self._trackers[key]

    def parent_run_id(self, tracker) -> str | None:
        if not self.multirun:
            return None
        key = (tracker.uri, tracker.experiment)
        if key not in self._parents:
            run_id = self._parent_ids.get(key) or tracker.start_run(
                f"{tracker.experiment} sweep {self.sweep_id}", tags={
                    "repro.sweep_id": self.sweep_id, "repro.jobs": str(self.jobs),
                    "git.commit": str(self.git["commit"]), "git.dirty": str(self.git["dirty"])})
            self._parents[key] = (tracker, run_id)
        return self._parents[key][1]

    def sweep_info(self, job: int) -> dict:
        return {"id": self.sweep_id, "job": job, "jobs": self.jobs, "experiment": self.experiment,
                "multirun": self.multirun}

    def finished(self, record: dict) -> None:
        self.records.append(record)

    def _sweep_records(self) -> list[dict]:
        """This sweep's records: those of its jobs run here, and those run by other processes."""
        found = {r["id"]: r for r in self.records}
        if self.multirun:
            for r in Ledger(self.ledger_dir).heads():
                if (r.get("sweep") or {}).get("id") == self.sweep_id and r.get("kind") == "run":
                    found.setdefault(r["id"], r)
        return sorted(found.values(), key=lambda r: r["sweep"]["job"])

    def close(self, interrupted: bool = False) -> list[dict]:
        self.display.close()
        self.records = self._sweep_records()
        print_comparison(report.console(), self.records)
        bad = [r for r in self.records if r["status"] in NOT_OK]
        if self.multirun:
            sweep_report.publish(self.records, self._parents.values(), report.console())
        for tracker, run_id in self._parents.values():
            tracker.log(run_id, metrics={"jobs_ok": sum(r["status"] == "ok" for r in self.records),
                                         "jobs_recorded": len(self.records)})
            tracker.end(run_id, "interrupted" if interrupted else "failed" if bad else "ok")
        return self.records


def _follower(config: dict) -> bool:
    """A node other than node 0 of a multi-node run: it records nothing, so it opens no MLflow run."""
    from repro.config import ConfigError
    from repro.runner import cluster

    try:
        return not cluster.resolve(config.get("cluster")).leader
    except ConfigError:  # cluster=slurm outside the allocation (the launching host): not a node
        return False


class SweepCallback(Callback):
    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        Session.open(config, multirun=False)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        Session.open(config, multirun=True)

    def on_run_end(self, config: DictConfig, **kwargs) -> None:
        Session.close_current()

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        Session.close_current()
