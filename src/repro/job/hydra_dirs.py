"""Hydra's per-run folders under `${XDG_CACHE_HOME:-~/.cache}/repro/hydra/{runs,multirun}/<date>/<time>`
(submitit's job files and logs of a sweep's rounds): nothing reads them
once their run is over (the ledger holds the config), so each new run keeps the newest KEEP of
its kind and removes the older ones. A `hydra.run.dir` / `hydra.sweep.dir` of the user's own
(any folder not under `repro/hydra/`) is never touched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

KEEP = 100  # per kind (runs, multirun): a few MiB at most


def prune(current: str | Path, keep: int = KEEP) -> list[Path]:
    """Remove all but the newest `keep` folders beside `current` (a `<kind>/<date>/<time>` folder
    under repro's cache); returns what was removed."""
    current = Path(current)
    kind = current.parent.parent
    if kind.name not in ("runs", "multirun") or kind.parent.name != "hydra" or kind.parent.parent.name != "repro":
        return []
    folders = sorted(p for p in kind.glob("*/*") if p.is_dir() and p != current)  # names sort by time
    removed = folders[: max(len(folders) - keep, 0)]
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    for date in {f.parent for f in removed}:
        if date != current.parent and not any(date.iterdir()):
            date.rmdir()
    return removed
