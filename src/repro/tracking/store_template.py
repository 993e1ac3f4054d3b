"""An empty sqlite MLflow store, made by MLflow once per MLflow version and copied for each new store.

MLflow makes a new sqlite store's tables by running its alembic migrations: 2.25 s on the 2-core
reference machine (MLflow 3.17), paid by the machine's MLflow writer for every new store, and by a
command that follows it (its measured steps wait for the writer), and once per test folder in the
suite. Opening a store that has its tables takes ~0.06 s.

The template is such a store as MLflow made it, less its Default experiment (experiment 0), kept in
repro's cache (`TEMPLATES`) under the MLflow version that made it, written whole (a temp file renamed)
under a file lock (a temp file a killed maker left is removed by the next). A new store starts as a
copy of it (`copy_to`), and MLflow's own first open of the copy makes the Default experiment, as it
does for any store that lacks one (`SqlAlchemyStore`), with that store's own artifact location and
times: what a store made from scratch holds. The caller
(mlflow_tracker `_create_aside`) checks that it did; otherwise it lets MLflow make the store as before
and removes the template (`forget`), which the next new store makes anew.

Why one SQL statement of our own (`DELETE FROM experiments` in the template): MLflow's API cannot
remove experiment 0 (`delete_experiment` marks it deleted, and MLflow would then not make it again).
The template has no other experiment, and nothing else in it names its path or its time.
"""

from __future__ import annotations

import glob
import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Callable

from repro import paths

TEMPLATES = "mlflow-store"  # under repro's cache root
FORMAT = 1  # bump when what a template holds changes
LOCK_TIMEOUT_S = 120


def template_path(mlflow_version: str) -> Path:
    return paths.cache_root() / TEMPLATES / f"mlflow-{mlflow_version}-v{FORMAT}.db"


def copy_to(aside: Path, mlflow_version: str, make: Callable[[Path], None]) -> bool:
    """`aside` written as a copy of the template for `mlflow_version` (made first, by `make(path)`:
    MLflow's own creation of a store at `path`, where none is kept yet). False where there is none
    and one cannot be made, or the copy fails: the caller then makes the store as before."""
    try:
        template = _kept(template_path(mlflow_version), make)
        shutil.copyfile(template, aside)
        return True
    except Exception:  # noqa: BLE001 - a template is an optimisation: MLflow makes the store itself
        Path(aside).unlink(missing_ok=True)
        return False


def forget(mlflow_version: str) -> None:
    """The template for `mlflow_version` removed (a copy MLflow did not open as a store it made): the
    next new store makes it anew."""
    template_path(mlflow_version).unlink(missing_ok=True)


def _kept(path: Path, make: Callable[[Path], None]) -> Path:
    from filelock import FileLock

    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT_S):
        if path.exists():  # made by another process meanwhile
            return path
        for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):  # a killed maker's
            stale.unlink(missing_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            make(tmp)
            with closing(sqlite3.connect(tmp)) as db:
                db.execute("DELETE FROM experiments")  # experiment 0, which a store's first open makes anew
                db.commit()
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return path
