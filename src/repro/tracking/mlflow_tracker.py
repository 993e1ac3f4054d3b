"""MLflow through its client API: a parent run per sweep, a child run per job.

Every write is batched (`log_batch`: one call per step is ~50× slower on sqlite), and the
store is opened once per sweep. MLflow is imported here only, never in a worker.

A tracking store is a view of the ledger, so a store that is down must fail fast: unless
the user set them, MLflow's HTTP client makes one retry with a 30 s timeout (its defaults,
7 retries with backoff and 120 s, spend minutes per call on a dead server). A refused
connection fails at once whatever the timeout; the timeout is for a server that is up but
busy (one worker serving parallel jobs on a loaded machine answered in over 5 s in CI), which
must not be taken for a dead one. A new sqlite
store is created under an inter-process file lock (MLflow's alembic migrations race when
several processes create one store at once), in a file beside its path that is then linked
into place whole (`_create_aside`), and a write that meets "database is locked" is retried a
few times.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any, Iterable

# repro runs offline on clusters; MLflow's usage telemetry would start threads that try the
# network while runs are measured. A user who wants it sets MLFLOW_DISABLE_TELEMETRY=false.
HTTP_DEFAULTS = {"MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


def apply_defaults() -> None:
    """repro's MLflow settings where the environment sets none: at import, and by the MLflow writer
    in each command's environment it drains in (tracking/writer.py)."""
    for name, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(name, value)


apply_defaults()

import mlflow  # noqa: E402
from filelock import FileLock  # noqa: E402
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunTag  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from repro.redaction import redact, redact_data  # noqa: E402
from repro.tracking import store_template  # noqa: E402

# MLflow's per-call limits for log_batch.
MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100

LOCKED_RETRIES, LOCKED_WAIT_S = 5, 0.5
DEFAULT_EXPERIMENT = "0"  # the experiment every MLflow store has, made by MLflow on a store's first open
CREATE_LOCK_TIMEOUT_S = 120

# MLflow's sqlite store logs every database error at ERROR with two chained tracebacks (~60
# lines) and then raises it; repro catches what it raises and says it in one line (the real
# cause and the `repro sync` hint), so those records are dropped once repro opens a store.
DB_LOGGER = "mlflow.store.db.utils"


def _not_a_reraised_error(record: logging.LogRecord) -> bool:
    return record.levelno < logging.ERROR or not record.exc_info


def quiet_db_errors() -> None:
    logger = logging.getLogger(DB_LOGGER)
    if _not_a_reraised_error not in logger.filters:
        logger.addFilter(_not_a_reraised_error)


STATUS = {"ok": "FINISHED", "failed": "FAILED", "oom": "FAILED", "killed": "FAILED", "timeout": "FAILED", "interrupted": "KILLED"}


def _chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _sqlite_path(uri: str) -> Path | None:
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def _sqlite_artifact_root(uri: str) -> str | None:
    """For a local sqlite store, artifacts beside the database (not under the cwd)."""
    db = _sqlite_path(uri)
    return (db.parent / "mlruns").resolve().as_uri() if db else None


def _locked(e: Exception) -> bool:
    return "database is locked" in str(e)


def retry_locked(call, *args, **kwargs):
    """`call(...)`, again a few times while sqlite says "database is locked"."""
    for attempt in range(LOCKED_RETRIES):
        try:
            return call(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - MLflow wraps sqlite's error in its own types
            if not _locked(e) or attempt == LOCKED_RETRIES - 1:
                raise
            time.sleep(LOCKED_WAIT_S * (attempt + 1))


def _create_aside(db: Path) -> bool:
    """A new sqlite store's tables made in a file beside it, then put in place whole (a hard link,
    which never replaces a file another client made meanwhile). Other repro processes wait on the
    file lock; a client that takes no lock (the MLflow UI, a script) and opens the store while it is
    made finds no file and makes its own, which is then the store: it never meets half a migration,
    so no command needs to wait for the creation. False where that client's file was there first.
    The file beside starts as a copy of the empty store kept for this MLflow (store_template.py), whose
    first open here makes its Default experiment; where that copy cannot be had or is not opened so,
    MLflow makes the tables. The caller holds the file lock: a file another creator left beside it is
    a killed one's."""
    for stale in glob.glob(glob.escape(str(db.with_name(f".{db.name}."))) + "*.creating"):
        Path(stale).unlink(missing_ok=True)
    def beside() -> Path:  # a new name each time: MLflow keeps an engine per URI, on the file it first opened
        return db.with_name(f".{db.name}.{os.getpid()}.{time.monotonic_ns()}.creating")

    aside = copied = beside()
    try:
        from_template = store_template.copy_to(copied, mlflow.__version__, _make_store)
        if not (from_template and _opens_as_made(copied)):
            if from_template:  # a template this MLflow does not open as its own: made anew next time
                store_template.forget(mlflow.__version__)
            aside = beside()
            _make_store(aside)
        os.link(aside, db)
        return True
    except FileExistsError:
        return False  # made by another client meanwhile: that one is the store
    except OSError:  # a file system without hard links: MLflow makes it in place, as it would alone
        return True
    finally:
        copied.unlink(missing_ok=True)
        aside.unlink(missing_ok=True)


def _make_store(path: Path) -> None:
    """MLflow's own creation of a sqlite store at `path`: its first use runs the migrations."""
    client = MlflowClient(tracking_uri=f"sqlite:///{path}")
    try:
        client.search_experiments(max_results=1)
    finally:
        _dispose(client)
        _forget_stores()  # MLflow's cached store on that file, which is renamed or gone next


def _opens_as_made(path: Path) -> bool:
    """Whether MLflow opens the copied template at `path` as a store it made: its first open made the
    Default experiment there, whose artifacts lie beside the store as a store made from scratch has them."""
    client = None
    try:
        client = MlflowClient(tracking_uri=f"sqlite:///{path}")  # opens the store
        default = client.get_experiment(DEFAULT_EXPERIMENT)
        return default is not None and default.name == "Default"
    except Exception:  # noqa: BLE001 - MLflow's and sqlite's errors vary by version: the store is made anew
        return False
    finally:
        if client is not None:
            _dispose(client)
        _forget_stores()


def _retry_racing(call, wait_s: float = 30.0):
    """`call()`, again for up to `wait_s` while it fails: a store that another client (one without
    repro's file lock) is still making fails to open until its tables are all there."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return call()
        except Exception:  # noqa: BLE001 - MLflow's and sqlite's errors of a half-made store vary by version
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def _dispose(client) -> None:
    """Close a client's database connections. Why private MLflow API: its client has no close."""
    engine = getattr(getattr(getattr(client, "_tracking_client", None), "store", None), "engine", None)
    if engine is not None:
        engine.dispose()


# sqlite files this process opened a store on, with their device and inode; None for a relative
# path (MLflow caches its store by the URI as written, which names another file from another folder)
_opened: dict[Path, tuple[int, int] | None] = {}


def _identity(db: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(db)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def forget_changed_stores() -> None:
    """MLflow keeps each store it opened (one per URI, its sqlite engine with it). Where a sqlite file a
    store was opened on is gone or another file now (a user rebuilt mlflow.db), or was named by a
    relative path, every store is opened again on next use, so that the current file is written, not
    the unlinked one (the MLflow writer, tracking/writer.py, before each drain)."""
    if any(seen is None or _identity(db) != seen for db, seen in _opened.items()):
        _forget_stores()


def _forget_stores() -> None:
    """Every store MLflow keeps is opened again on its next use. Why private MLflow API: its store
    cache has no public clear."""
    from mlflow.tracking._tracking_service.registry import TrackingStoreRegistry

    TrackingStoreRegistry._get_store_with_resolved_uri.cache_clear()
    _opened.clear()


class Tracker:
    def __init__(self, uri: str, experiment: str):
        self.uri = uri
        self.experiment = experiment
        quiet_db_errors()
        db = _sqlite_path(uri)
        if db is None:
            self._open()
            return
        db.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{db}.lock", timeout=CREATE_LOCK_TIMEOUT_S):  # creation and migration, one process at a time
            if db.exists() or _create_aside(db):
                self._open()
            else:  # another client's, perhaps half made yet
                _retry_racing(self._open)
        _opened[db.resolve()] = _identity(db) if db.is_absolute() else None

    def _open(self) -> None:
        self.client = MlflowClient(tracking_uri=self.uri)
        found = retry_locked(self.client.get_experiment_by_name, self.experiment)
        if found is None:
            root = _sqlite_artifact_root(self.uri)
            self.experiment_id = retry_locked(self.client.create_experiment, self.experiment,
                                              artifact_location=f"{root}/{self.experiment}" if root else None)
        else:
            self.experiment_id = found.experiment_id

    def close(self) -> None:
        """Close the store's database connections (a sqlite file: none kept open once a drain is done, so a
        long-lived writer holds no file of a disk someone unmounts); the store reconnects when used again."""
        _dispose(self.client)

    def find_runs(self, tag: str, value: str | None = None) -> list:
        """Runs of this experiment that carry `tag` (with `value`, when given), deleted ones left out."""
        where = f"tags.`{tag}` = '{value}'" if value is not None else f"tags.`{tag}` LIKE '%'"
        runs, token = [], None
        while True:
            page = retry_locked(self.client.search_runs, [self.experiment_id], where, max_results=1000,
                                page_token=token)
            runs += page
            token = page.token
            if not token:
                return runs

    def start_run(self, name: str, tags: dict[str, str], parent_id: str | None = None,
                  start_time: int | None = None) -> str:
        """`start_time` (ms since the epoch): when the run really began (None: now)."""
        tags = redact_data(dict(tags))
        if parent_id:
            tags["mlflow.parentRunId"] = parent_id
        run = retry_locked(self.client.create_run, self.experiment_id, start_time=start_time, run_name=name, tags=tags)
        return run.info.run_id

    def log(self, run_id: str, *, params: dict | None = None, tags: dict | None = None,
            metrics: dict[str, float] | None = None, series: dict[str, list] | None = None) -> None:
        """`series`: per key, values (step = index, time = now) or (step, value, timestamp ms) points."""
        now = int(time.time() * 1000)
        ms = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items() if v is not None]
        for key, values in (series or {}).items():
            points = (p if isinstance(p, tuple) else (i, p, now) for i, p in enumerate(values))
            ms += [Metric(key, float(v), ts, step) for step, v, ts in points]
        ps = [Param(k, redact(str(v))[:6000]) for k, v in (params or {}).items()]
        ts = [RunTag(k, redact(str(v))) for k, v in (tags or {}).items()]
        for chunk in _chunks(ps, MAX_PARAMS):
            retry_locked(self.client.log_batch, run_id, params=chunk)
        for chunk in _chunks(ts, MAX_TAGS):
            retry_locked(self.client.log_batch, run_id, tags=chunk)
        for chunk in _chunks(ms, MAX_METRICS):
            retry_locked(self.client.log_batch, run_id, metrics=chunk)

    def log_json(self, run_id: str, name: str, obj: Any) -> None:
        self.log_text(run_id, name, json.dumps(obj, indent=1, sort_keys=True, default=str))

    def log_text(self, run_id: str, name: str, text: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(redact(text), encoding="utf-8")
            retry_locked(self.client.log_artifact, run_id, str(path))

    def log_files(self, run_id: str, paths: Iterable[str], folder: str | None = None) -> None:
        for p in paths:
            retry_locked(self.client.log_artifact, run_id, p, artifact_path=folder)

    def log_datasets(self, run_id: str, datasets: list[dict[str, str]]) -> None:
        """MLflow datasets (the UI's Dataset column) from `tracking.content.datasets`."""
        inputs = [DatasetInput(Dataset(d["name"], d["digest"], d["source_type"], d["source"]),
                               tags=[InputTag("mlflow.data.context", d["context"])]) for d in datasets]
        if inputs:
            retry_locked(self.client.log_inputs, run_id, datasets=inputs)

    def log_folder(self, run_id: str, folder: str | Path) -> None:
        retry_locked(self.client.log_artifacts, run_id, str(folder))

    def end(self, run_id: str, status: str, end_time: int | None = None, retry: bool = True) -> None:
        """`retry=False`: one try (sqlite's own busy wait aside), for a process that is on its way out."""
        terminate = partial(self.client.set_terminated, run_id, status=STATUS.get(status, status), end_time=end_time)
        if retry:
            retry_locked(terminate)
        else:
            terminate()

