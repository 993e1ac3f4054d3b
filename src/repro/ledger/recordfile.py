"""One record file: its bytes on disk, and reading one back (or saying why it is not a record)."""

from __future__ import annotations

import json
from pathlib import Path

try:  # orjson (a dependency of dvc-data) parses ~3x faster; it refuses NaN and ints over 64 bits: json then
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - without the tracking extra
    _fast_loads = json.loads


class NotARecord(ValueError):
    """A file under the ledger that cannot be read as a record: the reason, one line."""


def dumps(body: dict) -> bytes:
    """A record as written: indented, keys sorted, UTF-8 (the id hashes the canonical JSON, not these bytes)."""
    return (json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False, default=str) + "\n").encode()


def parse_json(data: bytes):
    try:
        return _fast_loads(data)
    except ValueError:
        return json.loads(data)


def parse(data: bytes) -> dict:
    try:
        record = parse_json(data)
    except ValueError as e:  # UnicodeDecodeError is one
        raise NotARecord(f"not valid JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(record, dict):
        raise NotARecord(f"not a record: a JSON {type(record).__name__}, not an object")
    if not isinstance(record.get("id"), str):
        raise NotARecord("not a record: it has no id")
    return record


def load(path: Path) -> dict:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise NotARecord(f"unreadable ({e.strerror})") from None
    return parse(data)
