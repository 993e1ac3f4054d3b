"""The index that travels with the ledger: `<ledger>/.checked/<name>.json`, committed with the
records, so that a clone, a new machine or a CI job does not parse, schema-check and content-hash
every record before its first command (10,000 records: 3-4 s cold against 0.7 s warm before it).

What a segment holds: for each record file that passed every per-file check of `ledger verify`
(JSON, schema, content hash), keyed by the sha256 of its bytes (verified.digest), what the
whole-ledger checks need of it (verify.KEPT) and its index summary (index.SUMMARY). It speaks of
bytes, not of files: no names, sizes or times, which a clone does not keep.

Never trusted blindly:
- An entry is used only after the file's bytes were read and hashed: a record changed in any way
  has another digest and is checked in full; the file's name is checked against the entry's id.
- A segment is named by the sha256 of its own bytes: one whose entries were changed (by hand, by a
  merge gone wrong) no longer matches its name and is ignored whole (a warning names it): every
  file it covered is read in full, and a new segment replaces it.
- A segment of another checker (another schema, other kept fields, another format) is ignored and
  replaced, silently: it is stale, not wrong.
- AUDIT files, drawn at random each time from those read, are checked in full whatever a segment
  says (every file of a small ledger); one that disagrees with its entry (a segment forged with its
  name recomputed) sets the travelling index aside: every file is read in full, the segments are
  replaced, and a warning names the file. `ledger verify --full` checks every entry so.
- A segment claims what the records' own ids already claim: whoever can rewrite a record and its
  id can rewrite a segment and its name. It adds no trust the records lacked, and takes none away.

Merging: a segment is never rewritten, only added (named by its content) or deleted, so two
branches that both ran experiments and both verified merge without conflict in `.checked/`
(different names; the same name is the same bytes). Records a merge brought that no segment covers
are read in full by the next check, which adds a segment for them. Past MAX_SEGMENTS, all but the
largest are merged into one (a 100,000-record ledger's big segment is not rewritten by every run).

Written by any check (verify, list, compare, report) of a ledger of TRAVEL_FROM records or more, or
one that has a `.checked/` already, when files passed that no segment covers: commit it with the
records (`git add <ledger>`). Deleting it costs one full read of every file. A ledger that cannot
be written (a read-only mount) is checked as before.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from repro.ledger import recordfile, schema, verified
from repro.ledger.index import SUMMARY
from repro.ledger.verify import KEPT, Problem, Seen

FOLDER = ".checked"
FORMAT = 1
TRAVEL_FROM = 1000  # records: below this a cold check takes well under a second
MAX_SEGMENTS = 16
AUDIT = 64  # files checked in full on every check, whatever a segment says
NAME_LEN = 16  # hex digits of sha256 over a segment's bytes, its file name
README = ("repro's travelling ledger index (src/repro/ledger/travel.py): what `repro ledger verify` found of\n"
          "each record's bytes, so a fresh clone need not parse every record. Commit it with the records.\n"
          "Each file is named by the sha256 of its content; a changed one is ignored. Deleting it is safe.\n")
log = logging.getLogger("repro.ledger")


def checker_id() -> str:
    """Changes whenever what an entry says changes: segments of another checker are replaced."""
    return hashlib.sha256(recordfile.dump_compact(
        [FORMAT, schema.SCHEMA, list(KEPT), list(SUMMARY), verified.DIGEST_LEN])).hexdigest()[:16]


@dataclass
class Segments:
    """The segments under `<ledger>/.checked/` as found: the entries of the valid ones merged. Each
    entry is checked where it is used (verify.usable): a malformed one vouches for nothing."""
    folder: Path
    seen: Seen = field(default_factory=dict)  # digest -> [kept, summary]
    valid: dict[Path, int] = field(default_factory=dict)  # segment -> its size in bytes
    stale: list[Path] = field(default_factory=list)  # another checker or format: replaced silently
    tampered: list[Problem] = field(default_factory=list)  # changed after written: ignored, named, replaced
    loaded: bool = True  # False: only named (`names`), their entries not read: nothing vouched for

    @classmethod
    def names(cls, root: Path) -> dict[str, int]:
        """name -> size of each segment file, unread ({} when there is none)."""
        try:
            return {f.name: f.stat().st_size for f in os.scandir(root / FOLDER)
                    if f.name.endswith(".json") and not f.name.startswith(".")}
        except OSError:
            return {}

    @classmethod
    def named(cls, root: Path, names: dict[str, int]) -> Segments:
        """The segments as the last check left them, not read again (it read every file then)."""
        return cls(root / FOLDER, valid={root / FOLDER / n: size for n, size in names.items()}, loaded=False)

    @classmethod
    def load(cls, root: Path) -> Segments:
        out = cls(root / FOLDER)
        checker = checker_id()
        for name in sorted(cls.names(root)):
            path = out.folder / name
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if hashlib.sha256(data).hexdigest()[:NAME_LEN] != path.stem:
                out.tampered.append(Problem(path, "a travelling index segment that does not hash to its name: changed "
                                                  "after it was written; ignored (the files it covered were read in "
                                                  "full) and replaced"))
                continue
            try:
                saved = recordfile.parse_json(data)
                if saved.get("format") != FORMAT or saved.get("checker") != checker:
                    out.stale.append(path)
                    continue
                records = saved["records"]
                ok = isinstance(records, dict)
            except (ValueError, TypeError, KeyError, AttributeError):
                ok = False
            if not ok:
                out.tampered.append(Problem(path, "a travelling index segment that is not one repro wrote (no "
                                                  "records in it); ignored and replaced"))
                continue
            out.seen.update(records)
            out.valid[path] = len(data)
        return out


def active(root: Path, files: int) -> bool:
    """Whether checks of this ledger keep a travelling index (big enough, or one is there already)."""
    return files >= TRAVEL_FROM or (root / FOLDER).is_dir()


def writable(root: Path) -> bool:
    return os.access(root, os.W_OK) and (not (root / FOLDER).exists() or os.access(root / FOLDER, os.W_OK))


def audit_sample(names: list[str], k: int | None = None) -> set[str]:
    k = AUDIT if k is None else k
    return set(names) if len(names) <= k else set(random.sample(names, k))


def write(folder: Path, records: dict[str, list]) -> Path:
    """A new segment of `records` (digest -> [kept, summary]), named by its content; never replaces one."""
    data = recordfile.dump_compact({"format": FORMAT, "checker": checker_id(), "records": dict(sorted(records.items()))})
    folder.mkdir(exist_ok=True)
    readme = folder / "README"
    if not readme.exists():
        readme.write_text(README)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:NAME_LEN]}.json"
    tmp = folder / f".tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        tmp.write_bytes(data)
        try:
            os.link(tmp, path)
        except FileExistsError:  # the same content is already there, or bytes changed under its name
            if path.read_bytes() != data:
                os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def update(segments: Segments, new: dict[str, list], distrusted: bool = False) -> bool:
    """After a check: a segment for `new` (digest -> [kept, summary] of files that passed and no
    valid segment covers), the stale and tampered ones deleted (what they covered was read in full,
    so `new` holds what of it passed), and past MAX_SEGMENTS all but the largest merged. `distrusted`:
    a segment was caught lying, every file was read, and `new` is everything: all the old ones go."""
    try:
        gone = [*segments.stale, *(p.path for p in segments.tampered), *(list(segments.valid) if distrusted else [])]
        for path in gone:  # first: a new segment may take the name of a tampered one
            path.unlink(missing_ok=True)
            segments.valid.pop(path, None)
        if new:
            made = write(segments.folder, new)
            segments.valid[made] = made.stat().st_size
        if len(segments.valid) > MAX_SEGMENTS:
            _compact(segments)
        return True
    except (OSError, ValueError, KeyError, TypeError) as e:  # read-only, full: the next check reads those again
        log.debug("ledger: travelling index not written: %s", e)
        return False


def _compact(segments: Segments) -> None:
    largest = max(segments.valid, key=lambda p: (segments.valid[p], p.name))
    small = [p for p in segments.valid if p != largest]
    merged: dict[str, list] = {}
    for path in small:
        merged.update(recordfile.parse_json(path.read_bytes())["records"])
    made = write(segments.folder, merged)
    for path in small:
        if path != made:
            path.unlink(missing_ok=True)
            segments.valid.pop(path)
    segments.valid[made] = made.stat().st_size
