"""Check the data files a config reads against what DVC recorded in dvc.lock.

Runs in the parent before any job starts, through DVC's own API (DVCFileSystem reports the
md5 the lock file records; the file on disk is hashed here).
"""

from __future__ import annotations

from pathlib import Path

from repro import paths
from repro.data import DATASETS, DataError, file_md5


def recorded_md5(root: Path, relpath: str) -> str | None:
    from dvc.api import DVCFileSystem

    try:
        info = DVCFileSystem(str(root)).info(relpath)
    except FileNotFoundError:
        return None
    return (info.get("dvc_info") or {}).get("md5")


def check(data) -> dict[str, str]:
    """{path: md5} of the dataset's files, or DataError naming the bad file and the fix."""
    if data.name not in DATASETS:
        return {}
    import importlib

    root = paths.repo_root()
    module = importlib.import_module(DATASETS[data.name]["module"])
    found = {}
    for name in module.FILES:
        rel = f"{data.path}/{name}"
        expected = recorded_md5(root, rel)
        if expected is None:
            raise DataError(f"{rel} is not tracked by DVC (no entry in dvc.lock): run `dvc repro` first")
        path = root / rel
        if not path.exists():
            raise DataError(f"{rel} is missing: run `dvc pull` (from a remote) or `dvc repro` (to rebuild it)")
        actual = file_md5(path)
        if actual != expected:
            raise DataError(
                f"{rel} does not match dvc.lock (md5 {actual} on disk, {expected} recorded): "
                f"run `dvc pull` to restore it, or `dvc repro` to rebuild it and record the new hash"
            )
        found[rel] = actual
    return found
