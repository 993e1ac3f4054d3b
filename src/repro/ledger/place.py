"""Where a ledger can live: the one check of a ledger folder, for the preflight (`ledger.dir`) and
for `Ledger.check_writable` alike, and the fix named when a write there fails.

`unusable(path, write=True)` returns what is wrong with the place, as a phrase that follows its
name ("ledger.dir='x' " or "ledger dir x "), or None. It writes nothing.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

# A run's records (a `started`, a finished one with its loss series) and its spooled copy take
# tens of KiB; with less than this free a run would do its work and fail to record it.
MIN_FREE = 1 << 20
PSEUDO_FILESYSTEMS = (Path("/proc"), Path("/sys"))
FIX = {
    errno.ENOSPC: "the filesystem is full: free space on it or set ledger.dir to another folder",
    errno.EDQUOT: "the disk quota is used up: free space or set ledger.dir to another folder",
    errno.EROFS: "the filesystem is read-only: set ledger.dir to a writable folder",
    errno.EACCES: "no permission to write there: fix its permissions or set ledger.dir to a folder you can write",
    errno.EPERM: "no permission to write there: fix its permissions or set ledger.dir to a folder you can write",
    errno.ENOTDIR: "a part of that path is a file: set ledger.dir to a folder",
    errno.EEXIST: "a part of that path is a file: set ledger.dir to a folder",
}


def write_error(path: Path, e: OSError) -> str:
    fix = FIX.get(e.errno, "check that folder, or set ledger.dir to another one")
    return f"cannot write ledger record {path}: {e.strerror or e} ({fix})"


def symlink_loop(path: str | os.PathLike) -> Path | None:
    """The first part of `path` that is a symlink loop (resolving it never ends), if any."""
    path = Path(os.path.abspath(path))
    for part in [*reversed(path.parents), path]:
        try:
            os.stat(part)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return part
            return None  # missing (created on the first write) or refused: other checks say so
    return None


def loop_text(link: Path) -> str:
    try:
        target = os.readlink(link)
    except OSError:
        target = "?"
    return f"is a symlink loop ({link} -> {target} never reaches a folder): point the link at a folder or remove it"


def unusable(path: str | os.PathLike, write: bool = True, key: str = "") -> str | None:
    """What keeps `path` from holding a ledger (reading it; with `write`, appending records), or None.
    `key`: what the user sets instead of `ledger.dir` to move it (e.g. the variable REPRO_MACHINE_DIR)."""
    why = _unusable(path, write)
    return why.replace("ledger.dir / --ledger", key).replace("ledger.dir", key) if why and key else why


def _unusable(path: str | os.PathLike, write: bool) -> str | None:
    if (link := symlink_loop(path)) is not None:
        return loop_text(link)
    real = Path(os.path.realpath(path))
    for pseudo in PSEUDO_FILESYSTEMS:
        if real == pseudo or pseudo in real.parents:
            return f"lies under {pseudo}, a kernel filesystem that cannot hold records: set ledger.dir / --ledger " \
                   "to a folder on disk"
    existing = real
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"is a file, not a folder ({existing}): set ledger.dir / --ledger to a folder (it is created if missing)"
    if real.is_dir() and not os.access(real, os.R_OK | os.X_OK):
        return "cannot be read: fix its permissions or set ledger.dir / --ledger to another folder"
    if not write:
        return None
    st = os.statvfs(existing)
    if st.f_flag & os.ST_RDONLY:
        return f"is not writable: {FIX[errno.EROFS]}"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"is not writable ({existing} refuses new files): {FIX[errno.EACCES]}"
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE:
        return f"is on a full disk ({free >> 10} KiB free, {MIN_FREE >> 10} KiB needed): {FIX[errno.ENOSPC]}"
    return None
