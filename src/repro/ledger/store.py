"""The append-only ledger: one small JSON file per record, named by its content hash.

- A record's id is the first 16 hex digits of sha256 over its canonical JSON (without `id`).
- Files are written to a temp file, fsynced and hard-linked into place: linking never
  replaces an existing file, so a record is never rewritten, and concurrent writers (or two
  git branches) never touch the same file.
- A status change is a new record whose `prev` names the earlier one; the newest record of
  a chain is the run's current state.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from repro.hashing import sha256_json

ID_LEN = 16


def record_id(record: dict) -> str:
    return sha256_json({k: v for k, v in record.items() if k != "id"})[:ID_LEN]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class LedgerError(RuntimeError):
    pass


@dataclass(frozen=True)
class Problem:
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class Ledger:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def append(self, record: dict) -> dict:
        """Write a new record (adds `id` and `created`); returns the record as written."""
        body = {k: v for k, v in record.items() if k != "id"}
        body.setdefault("created", now_iso())
        body["id"] = rid = record_id(body)
        folder = self.root / body["created"][:10]
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"{rid}.json"
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(body, f, indent=1, sort_keys=True, ensure_ascii=False, default=str)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, final)
            except FileExistsError:
                pass  # the same content is already recorded under the same id
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        finally:
            os.unlink(tmp)
        return body

    def paths(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.glob("*/*.json") if not p.name.startswith(".")
                      and not p.parent.name.startswith("."))  # dot-folders (.spool) hold no records

    def records(self) -> Iterator[dict]:
        for path in self.paths():
            yield json.loads(path.read_text())

    def get(self, prefix: str) -> dict:
        matches = [p for p in self.paths() if p.stem.startswith(prefix)]
        if not matches:
            raise LedgerError(f"no record with id {prefix!r} in {self.root} (repro ledger list shows them)")
        if len(matches) > 1:
            raise LedgerError(f"id {prefix!r} is ambiguous in {self.root}: {', '.join(p.stem for p in matches)}")
        return json.loads(matches[0].read_text())

    def heads(self) -> list[dict]:
        """The newest record of each chain (a run's current state), oldest first."""
        records = list(self.records())
        superseded = {r.get("prev") for r in records}
        heads = [r for r in records if r["id"] not in superseded]
        return sorted(heads, key=lambda r: (r.get("created", ""), r["id"]))

    def chain(self, record: dict) -> list[dict]:
        """The record and every earlier one it names, newest first."""
        out = [record]
        while out[-1].get("prev"):
            out.append(self.get(out[-1]["prev"]))
        return out

    def verify(self) -> list[Problem]:
        problems = []
        ids = set()
        loaded = []
        for path in self.paths():
            try:
                record = json.loads(path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                problems.append(Problem(path, f"not valid JSON ({e})"))
                continue
            expected = record_id(record)
            if record.get("id") != expected:
                problems.append(Problem(path, f"content hash is {expected}, record says {record.get('id')}: it was changed after it was written"))
            elif path.stem != expected:
                problems.append(Problem(path, f"file name does not match the record id {expected}"))
            ids.add(record.get("id"))
            loaded.append((path, record))
        for path, record in loaded:
            if record.get("prev") and record["prev"] not in ids:
                problems.append(Problem(path, f"names an earlier record {record['prev']} that is not in the ledger"))
        return problems
