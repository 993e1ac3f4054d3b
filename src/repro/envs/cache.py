"""Where rebuilt environments live: `$XDG_CACHE_HOME/repro` (else `~/.cache/repro`), or $REPRO_ENV_CACHE."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def root() -> Path:
    if env := os.environ.get("REPRO_ENV_CACHE"):
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repro"


def venvs() -> Path:
    return root() / "venvs"


def worktrees() -> Path:
    return root() / "worktrees"


def locks() -> Path:
    """Locks of interpreters, keyed by their site-packages mtimes (see envs.lock.of_interpreter)."""
    return root() / "locks"


def size(path: Path) -> int:
    """Bytes under `path`, each file once (uv hard-links venvs from its own cache: shared inodes count once)."""
    seen, total = set(), 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
