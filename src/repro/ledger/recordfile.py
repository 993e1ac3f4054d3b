"""One record file: its bytes on disk, and reading one back (or saying why it is not a record)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from repro.hashing import sha256_json

try:  # orjson (a dependency of dvc-data): ~3x faster to parse, ~6x to dump than json; see content_id
    import orjson
except ImportError:  # pragma: no cover - without the tracking extra
    orjson = None
_fast_loads = orjson.loads if orjson else json.loads


ID_LEN = 16


def record_id(record: dict) -> str:
    """The first 16 hex digits of sha256 over the record's canonical JSON without its `id`."""
    return sha256_json({k: v for k, v in record.items() if k != "id"})[:ID_LEN]


def content_id(record: dict, data: bytes) -> str:
    """The id that `record`, read from `data`, hashes to: `record_id` of the exact content, but
    ~5x quicker for most records (verify hashes every file).

    orjson's sorted compact bytes equal the stdlib's canonical JSON for nearly every record. Where
    they parse back to the same content and hash to the record's own id, they are the bytes the id
    was made from: the content is intact. Otherwise (floats under 1e-4 are written 0.00001, not
    1e-05; NaN becomes null; integers past 64 bits, which orjson reads as floats) the file is read
    again by the stdlib, exactly, and `record_id` decides."""
    if orjson is not None:
        body = {k: v for k, v in record.items() if k != "id"}
        try:
            fast = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # orjson.JSONEncodeError
            fast = b""
        if fast and hashlib.sha256(fast).hexdigest()[:ID_LEN] == record.get("id") and orjson.loads(fast) == body:
            return record["id"]
    return record_id(json.loads(data))


class NotARecord(ValueError):
    """A file under the ledger that cannot be read as a record: the reason, one line."""


def dumps(body: dict) -> bytes:
    """A record as written: indented, keys sorted, UTF-8 (the id hashes the canonical JSON, not these bytes)."""
    return (json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False, default=str) + "\n").encode()


def dump_compact(value) -> bytes:
    """Compact JSON of repro's own derived files (the index, the verify cache), by orjson where there."""
    if orjson is not None:
        return orjson.dumps(value)
    return json.dumps(value, separators=(",", ":")).encode()


def parse_json(data: bytes):
    """JSON by orjson, or the stdlib where orjson refuses it (NaN, infinities). orjson reads
    integers past 64 bits as floats; nothing in a record is that large (content_id copes)."""
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


def read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise NotARecord(f"unreadable ({e.strerror})") from None


def load(path: Path) -> dict:
    return parse(read(path))
