"""A derived summary of every record file, so readers find ids, chains and heads without
parsing every record.

Where: `<ledger>/.index/files.json`, in a dot-folder of the ledger (never a record) that holds
its own `.gitignore` (`*`). So it follows the ledger wherever `ledger.dir` points, two ledgers
never share one, git never sees it, and deleting it costs one rebuild. It is never the source
of truth: an entry is reused only while its file's size and mtime (ns) are unchanged; a file it
does not know (written by another process, merged from a branch) is parsed and added, a gone
one dropped; an index that does not parse or has another format is rebuilt. It is saved by temp
file and rename without fsync: concurrent readers each write a whole index, a torn one after a
crash reads as corrupt and is rebuilt. A ledger that cannot be written keeps it in memory.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from repro.ledger import recordfile, schema

FOLDER = ".index"
FILE = "files.json"
FORMAT = 1
# A record is a few KiB to a few MiB (its loss series); a larger file is not one, and is never read.
MAX_RECORD_BYTES = 32 << 20
SUMMARY = ("id", "prev", "created", "kind", "status", "sweep")
log = logging.getLogger("repro.ledger")


@dataclass(frozen=True)
class Entry:
    path: Path
    id: str = ""
    prev: str | None = None
    created: str = ""
    kind: str | None = None
    status: str | None = None
    sweep: str | None = None  # the sweep's id
    problem: str | None = None  # why the file is not a record; then the rest is empty


def record_files(root: Path) -> Iterator[tuple[str, os.stat_result | str]]:
    """(`<folder>/<name>.json`, its stat) for every record file; dot-files and dot-folders are never
    records. A path that cannot be a record file (a symlink loop in the root or a date folder, a
    file too large for a record) comes as (its name, why) instead, without being read."""
    for folder in os.scandir(root):
        if folder.name.startswith("."):
            continue
        try:
            if not folder.is_dir():
                continue
            files = list(os.scandir(folder.path))
        except OSError as e:
            yield folder.name, _unreadable(Path(folder.path), e)
            continue
        for f in files:
            if not f.name.endswith(".json") or f.name.startswith("."):
                continue
            try:
                st = f.stat() if f.is_file() else None
            except OSError as e:
                yield f"{folder.name}/{f.name}", _unreadable(Path(f.path), e)
                continue
            if st is not None:
                yield f"{folder.name}/{f.name}", st if st.st_size <= MAX_RECORD_BYTES else \
                    f"{st.st_size >> 20} MiB, larger than any record ({MAX_RECORD_BYTES >> 20} MiB at most): not read"


def _unreadable(path: Path, e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return "a symlink loop (it never reaches a file or folder): remove the link"
    return f"unreadable ({e.strerror or e})"


def summarize(path: Path) -> dict | str:
    try:
        record = recordfile.load(path)
    except recordfile.NotARecord as e:
        return str(e)
    if errors := schema.errors(record):  # a foreign JSON file that happens to hold an `id`
        return f"not a record: it does not match the record schema ({errors[0]})"
    sweep = record.get("sweep")
    return {"id": record["id"], "prev": record.get("prev"), "created": str(record.get("created", "")),
            "kind": record.get("kind"), "status": record.get("status"),
            "sweep": sweep.get("id") if isinstance(sweep, dict) else None}


class Index:
    def __init__(self, root: Path):
        self.root = root
        self.path = root / FOLDER / FILE
        self._files: dict[str, list] | None = None  # name -> [size, mtime_ns, summary dict | problem]

    def entries(self) -> list[Entry]:
        """Every record file in name order, its summary reused while the file is unchanged."""
        known = self._load() if self._files is None else self._files
        files = {}
        skipped = []
        for name, st in record_files(self.root):
            if isinstance(st, str):
                skipped.append(Entry(self.root / name, problem=st))
                continue
            old = known.get(name)
            files[name] = old if old and old[0] == st.st_size and old[1] == st.st_mtime_ns \
                else [st.st_size, st.st_mtime_ns, summarize(self.root / name)]
        changed = files.keys() != known.keys() or any(files[n] is not known[n] for n in files)
        self._files = files
        if changed:
            self._save()
        return sorted(skipped + [Entry(self.root / name, **summary) if isinstance(summary, dict)
                                 else Entry(self.root / name, problem=summary)
                                 for name, (_, _, summary) in files.items()], key=lambda e: e.path)

    def _load(self) -> dict[str, list]:
        try:
            saved = recordfile.parse_json(self.path.read_bytes())
            files = saved["files"] if saved.get("format") == FORMAT else {}
            if all(isinstance(v, list) and len(v) == 3 and isinstance(v[1], int) and (
                    isinstance(v[2], str) or set(v[2]) == set(SUMMARY) and isinstance(v[2]["id"], str))
                   for v in files.values()):
                return files
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            pass  # missing, corrupt or another format: rebuilt from the records
        return {}

    def _save(self) -> None:
        folder = self.path.parent
        tmp = folder / f".{FILE}-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            folder.mkdir(exist_ok=True)
            ignore = folder / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# repro's derived ledger index: rebuilt from the records, never committed\n*\n")
            tmp.write_text(json.dumps({"format": FORMAT, "files": self._files}, separators=(",", ":")))
            os.replace(tmp, self.path)
        except OSError:  # a read-only or full ledger: the index lives in memory for this process
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
