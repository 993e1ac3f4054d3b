"""Where repro's files live. The repo root holds conf/, ledger/ and the default mlflow.db."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The checkout root: REPRO_ROOT if set, else the folder above src/ (editable install)."""
    if env := os.environ.get("REPRO_ROOT"):
        return Path(env).resolve()
    root = Path(__file__).resolve().parents[2]
    # `dvc exp run --temp/--queue` runs in a copy at <repo>/.dvc/tmp/exps/<tmp>/: records
    # belong to the repo itself, not to a folder DVC deletes afterwards.
    parts = root.parts
    for i in range(len(parts) - 3):
        if parts[i : i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i])
    return root


def snapshot_root() -> Path | None:
    """The sweep snapshot this process runs (job/snapshot.py sets REPRO_SNAPSHOT), if any."""
    root = os.environ.get("REPRO_SNAPSHOT")
    return Path(root) if root else None


def conf_dir(checkout: bool = False) -> Path:
    """conf/: the running sweep's snapshot of it, or (`checkout`, or no snapshot) the checkout's."""
    if not checkout and (snap := snapshot_root()):
        return snap / "conf"
    path = repo_root() / "conf"
    if not path.is_dir():
        raise FileNotFoundError(
            f"repro's config folder {path} is missing. Install repro from a checkout with "
            "`pip install -e .` (conf/ lives at the repo root), or set REPRO_ROOT to the checkout."
        )
    return path


def src_dir(checkout: bool = False) -> Path:
    """The folder repro is imported from: the running sweep's snapshot of it, or the checkout's."""
    if not checkout and (snap := snapshot_root()):
        return snap / "src"
    return Path(__file__).resolve().parents[1]


def cache_root() -> Path:
    """repro's caches on this machine: `$XDG_CACHE_HOME/repro`, else `~/.cache/repro`."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repro"


def machine_dir() -> Path:
    """Where this machine's measured windows and MLflow projectors meet (worker/machine_locks.py):
    REPRO_MACHINE_DIR if set, else the cache root. Every repro command on one host shares it, so
    no projector writes beside another command's measured steps; commands that set another keep
    their windows apart (the test suite's workers: their runs are not measurements of each other)."""
    if env := os.environ.get("REPRO_MACHINE_DIR"):
        return Path(env)
    return cache_root()


def default_ledger_dir() -> Path:
    return repo_root() / "ledger"


def default_tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{repo_root() / 'mlflow.db'}"


def default_reports_dir(ledger_dir: str | os.PathLike) -> Path:
    """Where sweeps' reports go unless `--out` says otherwise: `.reports/` inside the ledger they
    come from (a dot-folder: never a record; git ignores it), so two ledgers in one folder never
    share (nor overwrite) each other's reports."""
    return Path(ledger_dir).resolve() / ".reports"


def interpreter(python: str | None) -> str | None:
    """A config's interpreter (framework.python): conf/ gives it relative to the checkout (.venv-xla)."""
    if python and os.sep in python and not os.path.isabs(python):
        return str(repo_root() / python)
    return python


def distribution_name(name: str) -> str:
    """A distribution's name as PEP 503 normalises it (`Hydra_Core` -> `hydra-core`)."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_metadata(path: list[str] | tuple[str, ...] | None = None) -> list[Path]:
    """Every installed distribution's metadata folder (`*.dist-info`, `*.egg-info`) on the import
    path, by a listing of its folders: what decides the installed versions and entry points,
    found without importlib.metadata (its import and a scan of every distribution were ~50 ms of
    each run's start). Sorted within each folder, in import-path order."""
    import sys

    found = []
    for folder in sys.path if path is None else path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        found += [Path(folder or ".") / n for n in names if n.endswith((".dist-info", ".egg-info"))]
    return found
