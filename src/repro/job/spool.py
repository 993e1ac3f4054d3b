"""A run's results on disk before the `finished` record: `<ledger>/.spool/<started id>.json`.

Before the worker starts, the job reserves the spool's blocks (`posix_fallocate`), so that
writing the results still succeeds when the disk fills while the run works. The results are
written into that reservation (padded with blanks), fsynced and renamed to `<started id>.json`: the complete
`finished` record body (without `id`), which `repro ledger recover` appends if the ledger
write fails. A spool whose record reached the ledger is deleted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SPOOL_DIR = ".spool"
BASE_BYTES = 256 * 1024
BYTES_PER_STEP = 64  # the loss and the step time of one step, as JSON


def folder(ledger_root: Path) -> Path:
    return Path(ledger_root) / SPOOL_DIR


def reserve(ledger_root: Path, started_id: str, steps: int | str) -> Path:
    """Allocate room for the results of a run of `steps` steps (`run.steps`: a count or auto; a record
    keeps the series of its first SERIES_STEPS steps at most); returns the reservation."""
    from repro.worker.window import SERIES_STEPS

    steps = min(steps, SERIES_STEPS) if isinstance(steps, int) else SERIES_STEPS
    path = folder(ledger_root) / f"{started_id}.reserved"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, BASE_BYTES + BYTES_PER_STEP * steps)
    finally:
        os.close(fd)
    return path


def write(reserved: Path, body: dict) -> Path:
    """Write the record body into its reservation, durably; returns the spool file."""
    data = (json.dumps(body, sort_keys=True, ensure_ascii=False, default=str) + "\n").encode()
    # Into the reserved blocks, padded with blanks (valid JSON) rather than truncated: freeing
    # them would hand the space to whatever fills the disk before the ledger write.
    data += b" " * max(0, os.path.getsize(reserved) - len(data))
    fd = os.open(reserved, os.O_WRONLY | os.O_CREAT, 0o644)  # no O_TRUNC: keep the reserved blocks
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    spooled = reserved.with_suffix(".json")
    os.rename(reserved, spooled)
    dir_fd = os.open(reserved.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return spooled


def discard(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
