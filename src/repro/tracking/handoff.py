"""What a session hands to the MLflow projector, kept in the ledger: `<ledger>/.mlflow-pending/`.

MLflow is a view of the ledger, so its writes need not hold up the command: a session that runs
its jobs in this process (repro, repro.run, replay) never imports MLflow. Each finished run
leaves an entry here (the worker's log and IR files, which the ledger record does not hold,
plus any tags added after the run, e.g. a replay's verdict); at its close the session adds the
sweep's entry (its report folder, trajectory record and status) and starts the projector
(tracking/projector.py), a process that outlives the command and writes them into MLflow.
Entries are removed once MLflow has them, so whatever is left (the projector killed, a store
that failed) is what `repro sync` finishes, under the same lock, with the same content.

No MLflow import here: this module is on the run path.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse

FOLDER = ".mlflow-pending"
ENTRY = "entry.json"  # written last, by rename: an entry without it is incomplete and left alone
TAGS = "tags.json"
LOCK = ".lock"
LOG = "projector.log"
FAILED = "failed.json"  # the projector's last failure, shown by the next session and `repro sync`
SWEEP_PREFIX = "sweep-"


def folder(ledger_root: str | Path) -> Path:
    return Path(ledger_root) / FOLDER


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def add_run(ledger_root: str | Path, record_id: str, files: list[str] = (), worker_log: Path | None = None) -> Path:
    """A finished run's entry: the files its MLflow run gets beside the record (copied, since the
    run's temp folder is removed when the job ends)."""
    entry = folder(ledger_root) / record_id
    (entry / "ir").mkdir(parents=True, exist_ok=True)
    if worker_log and Path(worker_log).exists():
        shutil.copyfile(worker_log, entry / "worker.log")
    names = []
    for f in files:
        if Path(f).is_file():
            shutil.copyfile(f, entry / "ir" / Path(f).name)
            names.append(Path(f).name)
    _write_json(entry / ENTRY, {"kind": "run", "id": record_id, "ir": names})
    return entry


def add_tags(ledger_root: str | Path, record_id: str, tags: dict[str, str]) -> bool:
    """Tags for a run not yet projected (a replay's verdict); False where its entry is gone."""
    entry = folder(ledger_root) / record_id
    if not (entry / ENTRY).exists():
        return False
    old = json.loads((entry / TAGS).read_text()) if (entry / TAGS).exists() else {}
    _write_json(entry / TAGS, {**old, **tags})
    return True


def add_sweep(ledger_root: str | Path, sweep_id: str, info: dict) -> Path:
    """A closed sweep's entry: what its MLflow parent run gets (report folder, trajectory record,
    status, tracking stores)."""
    entry = folder(ledger_root) / f"{SWEEP_PREFIX}{sweep_id}"
    entry.mkdir(parents=True, exist_ok=True)
    _write_json(entry / ENTRY, {"kind": "sweep", "id": sweep_id, **info})
    return entry


def entries(ledger_root: str | Path) -> list[tuple[Path, dict]]:
    """The complete entries: runs first (a sweep's parent closes after its children), oldest first."""
    base = folder(ledger_root)
    found = []
    for entry in base.iterdir() if base.is_dir() else []:
        try:
            data = json.loads((entry / ENTRY).read_text())
            if (entry / TAGS).exists():
                data["tags"] = json.loads((entry / TAGS).read_text())
            found.append((entry.stat().st_mtime, data["kind"] != "run", entry, data))
        except (OSError, ValueError, KeyError):
            continue  # being written, or not an entry
    return [(entry, data) for _, _, entry, data in sorted(found, key=lambda t: (t[1], t[0]))]


def done(entry: Path) -> None:
    shutil.rmtree(entry, ignore_errors=True)


@contextmanager
def lock(ledger_root: str | Path, wait: bool = True) -> Iterator[bool]:
    """One projector (or `repro sync`) at a time per ledger; yields whether it holds the lock
    (always True with `wait`). The kernel drops it when the holder dies, however it dies."""
    base = folder(ledger_root)
    base.mkdir(parents=True, exist_ok=True)
    with open(base / LOCK, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def busy(ledger_root: str | Path) -> bool:
    """Whether a projector (or sync) holds this ledger's lock now."""
    if not (folder(ledger_root) / LOCK).exists():
        return False
    with lock(ledger_root, wait=False) as held:
        return not held


def machine_lock() -> Path:
    """Held shared by every projector on this machine (whatever its ledger): a worker about to
    begin its measured steps waits for all of them (`wait_for_projectors`)."""
    path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repro" / "projectors.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def wait_for_projectors() -> None:
    """Return once no projector on this machine is at work (each holds `machine_lock` shared)."""
    with open(machine_lock(), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        fcntl.flock(f, fcntl.LOCK_UN)


def start_projector(ledger_root: str | Path, wait_for_stores: bool = False, timeout_s: float = 120) -> int:
    """The projector, detached (its own session: a Ctrl-C or the terminal closing does not reach
    it), its output appended to the pending folder's log; its pid. It is handed the ledger's lock
    already taken where it is free (the open lock file is inherited), so that from the moment
    this returns a next command sees it busy; else it waits for the projector at work.
    `wait_for_stores`: return only once it has opened its stores (a new sqlite store is created
    then: a client another process opens meanwhile would race its creation), or timed out."""
    import select

    base = folder(ledger_root)
    base.mkdir(parents=True, exist_ok=True)
    ready_read, ready_write = os.pipe() if wait_for_stores else (None, None)
    with open(base / LOCK, "a") as held, open(machine_lock(), "a") as shared, open(base / LOG, "ab") as log:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # the one at work holds it: the new one waits for it (projector.main)
        fcntl.flock(shared, fcntl.LOCK_SH)
        fds = (held.fileno(), shared.fileno(), *((ready_write,) if wait_for_stores else ()))
        proc = subprocess.Popen([sys.executable, "-m", "repro.tracking.projector", str(Path(ledger_root)),
                                 str(held.fileno()), *((str(ready_write),) if wait_for_stores else ())],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, pass_fds=fds)
    if wait_for_stores:  # a byte once open, or EOF if it ended first
        os.close(ready_write)
        select.select([ready_read], [], [], timeout_s)
        os.close(ready_read)
    return proc.pid  # our copies of the lock files are closed: the locks are the projector's alone


def new_sqlite_store(uri: str) -> bool:
    """Whether `uri` is a sqlite store whose database does not exist yet."""
    return uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).exists()


def unreachable(uri: str, timeout_s: float = 2.0) -> str | None:
    """Why the tracking store at `uri` cannot be reached, found without MLflow (a TCP connect to a
    server, the folder of a sqlite file); None where it looks reachable."""
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite" or parsed.scheme == "file" or not parsed.scheme:
        path = Path(parsed.path if parsed.scheme else uri)
        where = path.parent if parsed.scheme == "sqlite" else path
        while not where.exists() and where != where.parent:
            where = where.parent  # MLflow creates missing folders below an existing one
        return None if os.access(where, os.W_OK) else f"{where} is not writable"
    if parsed.hostname:
        port = parsed.port or {"https": 443, "http": 80}.get(parsed.scheme.split("+")[0])
        if port is None:
            return None
        try:
            with socket.create_connection((parsed.hostname, port), timeout=timeout_s):
                return None
        except OSError as e:
            return f"ConnectionError: {parsed.hostname}:{port}: {e.strerror or e}"
    return None


def record_failure(ledger_root: str | Path, uri: str, experiment: str, line: str, runs: int) -> None:
    _write_json(folder(ledger_root) / FAILED, {"uri": uri, "experiment": experiment, "error": line, "runs": runs})


def clear_failure(ledger_root: str | Path) -> None:
    (folder(ledger_root) / FAILED).unlink(missing_ok=True)


def recorded_failure(ledger_root: str | Path) -> dict | None:
    """The last projection's failure as recorded (None: the last one succeeded)."""
    try:
        return json.loads((folder(ledger_root) / FAILED).read_text())
    except (OSError, ValueError):
        return None


def last_failure(ledger_root: str | Path) -> dict | None:
    """The background projection's last failure, while entries wait and no projector is at work."""
    failed = recorded_failure(ledger_root)
    return failed if failed and entries(ledger_root) and not busy(ledger_root) else None
