"""Where rebuilt environments live (`$XDG_CACHE_HOME/repro`, else `~/.cache/repro`, or $REPRO_ENV_CACHE),
what they really take on disk, when each was last used, and which are in use now.

Sizes: uv hard-links a venv's files from its own cache, so a venv's files are mostly uv's. An
inode is counted once, and as the entry's *own* only when every one of its links lies inside
the entry (removing the entry frees it); one linked from elsewhere (uv's cache, another venv)
is *shared*: removing the entry frees nothing of it.

In use: whatever runs in a cached venv or worktree (a replay, a version sweep) holds a shared
lock on it for the life of its process (`hold`); `repro env prune` removes an entry only under
the exclusive lock (`removable`), so it never deletes one a run is using, and a run that
starts while prune removes it waits, then rebuilds it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from repro import paths

_held: list = []  # this process's shared locks (released when it exits)


def root() -> Path:
    if env := os.environ.get("REPRO_ENV_CACHE"):
        return Path(env)
    return paths.cache_root()


def venvs() -> Path:
    return root() / "venvs"


def worktrees() -> Path:
    return root() / "worktrees"


def locks() -> Path:
    """Locks of interpreters, keyed by their site-packages mtimes (see envs.lock.of_interpreter)."""
    return root() / "locks"


def uv_cache_dir() -> Path | None:
    """uv's cache, where uv finds it (`uv cache dir`: UV_CACHE_DIR, XDG_CACHE_HOME, ...); None if uv does not say."""
    try:
        out = subprocess.run([sys.executable, "-m", "uv", "cache", "dir"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None


@dataclass(frozen=True)
class Usage:
    own: int  # bytes of inodes whose every link is inside: what removing frees
    shared: int  # bytes of inodes also linked from outside (uv's cache, another venv)
    inodes: frozenset = frozenset()

    @property
    def total(self) -> int:
        return self.own + self.shared


def usage(path: Path) -> Usage:
    """Bytes under `path`, each inode once, split into own and shared (hard-linked from outside)."""
    links: dict[tuple[int, int], list] = {}
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            seen = links.setdefault((st.st_dev, st.st_ino), [st.st_size, st.st_nlink, 0])
            seen[2] += 1
    own = sum(size for size, nlink, inside in links.values() if inside >= nlink)
    shared = sum(size for size, nlink, inside in links.values() if inside < nlink)
    return Usage(own, shared, frozenset(links))


def size(path: Path) -> int:
    """Bytes under `path`, each inode once (own and shared)."""
    return usage(path).total


def _use_file(path: Path) -> Path:
    return path.parent / f".{path.name}.use"


def hold(path: Path) -> None:
    """Mark `path` in use by this process until it exits (a shared lock), and note its last use.
    Waits while `repro env prune` removes it (the caller then finds it gone and rebuilds it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(_use_file(path), "a")
    fcntl.flock(f, fcntl.LOCK_SH)
    _held.append(f)


def touch(path: Path) -> None:
    """Note that `path` was used now: the mtime of its use file, beside it (not in it: a worktree stays
    clean), is the time prune --older-than goes by, not the build time."""
    try:
        _use_file(path).touch()
    except OSError:
        pass


def last_used(path: Path) -> float:
    for p in (_use_file(path), path):
        try:
            return p.stat().st_mtime
        except OSError:
            continue
    return 0.0


@contextmanager
def removable(path: Path):
    """Yields True while holding `path` exclusively (no run uses it), False when a run holds it."""
    f = open(_use_file(path), "a")
    try:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        f.close()


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def age_days(path: Path) -> float:
    return (time.time() - last_used(path)) / 86400
