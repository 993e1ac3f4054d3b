"""A sweep in the parent process: one tracking store, one MLflow parent run, the closing table.

Hydra calls `SweepCallback` at the start and end of a run or multirun (conf/config.yaml
registers it under hydra.callbacks); each job's task function finds the open `Session`.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import ClassVar

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from repro import paths, report
from repro.config import validate
from repro.report.progress import Display
from repro.report.compare import print_comparison
from repro.runner import gitinfo

NOT_OK = ("failed", "killed", "interrupted")

# The preflight plan of this process's command line (set by repro.cli before Hydra runs).
PLAN: validate.Plan | None = None


class Session:
    current: ClassVar["Session | None"] = None
    last_records: ClassVar[list[dict]] = []  # the records of the last closed session

    def __init__(self, primary: dict, multirun: bool):
        self.multirun = multirun
        self.jobs = len(PLAN.jobs) if PLAN else (None if multirun else 1)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.sweep_id = f"{stamp}-{uuid.uuid4().hex[:6]}"
        self.experiment = primary["tracking"]["experiment"]
        self.git = gitinfo.state(paths.repo_root(), Path(primary["ledger"]["dir"]))
        self.code = {"src_sha256": gitinfo.source_sha256(paths.src_dir() / "repro")}
        self.display = Display(primary["progress"]["mode"], self.jobs)
        self.records: list[dict] = []
        self._trackers: dict = {}
        self._parents: dict = {}

    @classmethod
    def open(cls, config: DictConfig, multirun: bool) -> "Session":
        job_keys = [k for k in config.keys() if k != "hydra"]
        cls.current = cls(validate.check(OmegaConf.masked_copy(config, job_keys)), multirun)
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
        key = id(tracker)
        if key not in self._parents:
            self._parents[key] = (tracker, tracker.start_run(f"{tracker.experiment} sweep {self.sweep_id}", tags={
                "repro.sweep_id": self.sweep_id, "repro.jobs": str(self.jobs),
                "git.commit": str(self.git["commit"]), "git.dirty": str(self.git["dirty"])}))
        return self._parents[key][1]

    def sweep_info(self, job: int) -> dict:
        return {"id": self.sweep_id, "job": job, "jobs": self.jobs, "experiment": self.experiment,
                "multirun": self.multirun}

    def finished(self, record: dict) -> None:
        self.records.append(record)

    def close(self, interrupted: bool = False) -> list[dict]:
        self.display.close()
        print_comparison(report.console(), self.records)
        bad = [r for r in self.records if r["status"] in NOT_OK]
        for tracker, run_id in self._parents.values():
            tracker.log(run_id, metrics={"jobs_ok": sum(r["status"] == "ok" for r in self.records),
                                         "jobs_recorded": len(self.records)})
            tracker.end(run_id, "interrupted" if interrupted else "failed" if bad else "ok")
        return self.records


class SweepCallback(Callback):
    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        Session.open(config, multirun=False)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        Session.open(config, multirun=True)

    def on_run_end(self, config: DictConfig, **kwargs) -> None:
        Session.close_current()

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        Session.close_current()
