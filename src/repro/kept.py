"""Small facts a process would otherwise recompute on every run's way to its measured steps, kept on
disk between processes under a stamp of everything that decides them (`<cache>/repro/<kind>/`).

A stamp is cheap to take (a listing, a few stats) where the fact is not (reading and parsing every
installed distribution's metadata). A kept value is a hint, never the truth: one that cannot be
read is a miss, the caller computes the fact again and keeps it, and a half-written file is never
left where a reader finds it (written beside its place and renamed in). Only the newest few per
kind are kept: one per installed set, say, on a machine with several environments.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from repro import paths


def _path(kind: str, stamp: Any) -> Path:
    key = hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:32]
    return paths.cache_root() / kind / f"{key}.json"


def load(kind: str, stamp: Any) -> Any | None:
    """What `keep(kind, stamp, ...)` wrote, or None where nothing readable was kept."""
    try:
        return json.loads(_path(kind, stamp).read_text())
    except (OSError, ValueError):
        return None


def keep(kind: str, stamp: Any, value: Any, newest: int = 16) -> None:
    """`value` (JSON) kept under `stamp`; beyond the `newest` of its kind, the oldest go. A failure
    costs nothing but the next process's time."""
    path = _path(kind, stamp)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(value))
        os.replace(tmp, path)
        for old in sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime)[:-newest]:
            old.unlink(missing_ok=True)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def mtime_ns(path: Path) -> int | None:
    """A file's mtime for a stamp; None where it is not there."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
