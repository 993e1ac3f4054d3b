"""MLflow through its client API: a parent run per sweep, a child run per job.

Every write is batched (`log_batch`: one call per step is ~50× slower on sqlite), and the
store is opened once per sweep. MLflow is imported here only, never in a worker.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

# repro runs offline on clusters; MLflow's usage telemetry would start threads that try the
# network while runs are measured. A user who wants it sets MLFLOW_DISABLE_TELEMETRY=false.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunTag  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

# MLflow's per-call limits for log_batch.
MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100

STATUS = {"ok": "FINISHED", "failed": "FAILED", "oom": "FAILED", "killed": "FAILED", "interrupted": "KILLED"}


def _chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _sqlite_artifact_root(uri: str) -> str | None:
    """For a local sqlite store, artifacts beside the database (not under the cwd)."""
    if uri.startswith("sqlite:///"):
        return (Path(uri[len("sqlite:///"):]).parent / "mlruns").resolve().as_uri()
    return None


class Tracker:
    def __init__(self, uri: str, experiment: str):
        self.uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        found = self.client.get_experiment_by_name(experiment)
        if found is None:
            root = _sqlite_artifact_root(uri)
            self.experiment_id = self.client.create_experiment(
                experiment, artifact_location=f"{root}/{experiment}" if root else None)
        else:
            self.experiment_id = found.experiment_id
        self.experiment = experiment

    def start_run(self, name: str, tags: dict[str, str], parent_id: str | None = None) -> str:
        tags = dict(tags)
        if parent_id:
            tags["mlflow.parentRunId"] = parent_id
        run = self.client.create_run(self.experiment_id, run_name=name, tags=tags)
        return run.info.run_id

    def log(self, run_id: str, *, params: dict | None = None, tags: dict | None = None,
            metrics: dict[str, float] | None = None, series: dict[str, list] | None = None) -> None:
        """`series`: per key, values (step = index, time = now) or (step, value, timestamp ms) points."""
        now = int(time.time() * 1000)
        ms = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items() if v is not None]
        for key, values in (series or {}).items():
            points = (p if isinstance(p, tuple) else (i, p, now) for i, p in enumerate(values))
            ms += [Metric(key, float(v), ts, step) for step, v, ts in points]
        ps = [Param(k, str(v)[:6000]) for k, v in (params or {}).items()]
        ts = [RunTag(k, str(v)) for k, v in (tags or {}).items()]
        for chunk in _chunks(ps, MAX_PARAMS):
            self.client.log_batch(run_id, params=chunk)
        for chunk in _chunks(ts, MAX_TAGS):
            self.client.log_batch(run_id, tags=chunk)
        for chunk in _chunks(ms, MAX_METRICS):
            self.client.log_batch(run_id, metrics=chunk)

    def log_json(self, run_id: str, name: str, obj: Any) -> None:
        self.log_text(run_id, name, json.dumps(obj, indent=1, sort_keys=True, default=str))

    def log_text(self, run_id: str, name: str, text: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(text)
            self.client.log_artifact(run_id, str(path))

    def log_files(self, run_id: str, paths: Iterable[str], folder: str | None = None) -> None:
        for p in paths:
            self.client.log_artifact(run_id, p, artifact_path=folder)

    def log_datasets(self, run_id: str, datasets: list[dict[str, str]]) -> None:
        """MLflow datasets (the UI's Dataset column) from `tracking.content.datasets`."""
        inputs = [DatasetInput(Dataset(d["name"], d["digest"], d["source_type"], d["source"]),
                               tags=[InputTag("mlflow.data.context", d["context"])]) for d in datasets]
        if inputs:
            self.client.log_inputs(run_id, datasets=inputs)

    def log_folder(self, run_id: str, folder: str | Path) -> None:
        self.client.log_artifacts(run_id, str(folder))

    def end(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status=STATUS.get(status, status))

