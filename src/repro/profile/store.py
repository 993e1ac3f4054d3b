"""Profile traces kept beside the ledger, by content: `<ledger>/.profiles/<sha256>/<name>`.

The record names each file with its sha256 (results.profile.files), so a trace is found
from the record alone, can be checked against it, and is stored once however many records
name it. A dot-folder: the ledger's readers never take it for records.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

FOLDER = ".profiles"


def path_of(ledger_root: str | Path, entry: dict) -> Path:
    return Path(ledger_root) / FOLDER / entry["sha256"] / entry["name"]


def keep(ledger_root: str | Path, files: list[str], entries: list[dict]) -> list[Path]:
    """Copy the worker's trace files into the ledger's store (once per content)."""
    out = []
    for f, entry in zip(files, entries):
        dest = path_of(ledger_root, entry)
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
            shutil.copyfile(f, tmp)
            os.replace(tmp, dest)
        out.append(dest)
    return out


def paths(record: dict, ledger_root: str | Path | None = None) -> list[Path]:
    """The kept trace files a record names, those present (`ledger_root`: else its config's)."""
    entries = ((record.get("results") or {}).get("profile") or {}).get("files") or []
    root = ledger_root or ((record.get("config") or {}).get("ledger") or {}).get("dir")
    if not root:
        return []
    return [p for p in (path_of(root, e) for e in entries) if p.exists()]
