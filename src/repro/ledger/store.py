"""The append-only ledger: one small JSON file per record, named by its content hash.

- A record's id is the first 16 hex digits of sha256 over its canonical JSON (without `id`).
- Files are written to a temp file, fsynced and hard-linked into place: linking never
  replaces an existing file, so a record is never rewritten, and concurrent writers (or two
  git branches) never touch the same file. They follow the umask (0644 under 022).
- A status change is a new record whose `prev` names the earlier one; the newest record of
  a chain is the run's current state.
- Readers go through a derived index (index.py) and skip, with one warning each, files that
  are not records; the same record in two folders is one record. `verify` stats every file and reads those changed since they last passed.
- Dot-files and dot-folders (`.index/`, `.spool/`, temp files) are never records.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import os
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from repro import redaction
from repro.ledger import place, recordfile, schema, travel, verified
from repro.ledger.place import write_error
from repro.ledger.index import (FOLDER, MAX_RECORD_BYTES, Entry, FileStat, Index, Listing, bulk, newest,
                                record_files, stat_or_why)
from repro.ledger.record import view
from repro.ledger.recordfile import record_id
from repro.ledger.state import state_of
from repro.ledger.verify import CHANGED, KEPT, Problem, Verification, usable, verify

RESOLVE_FROM = 1000  # files the index does not know: from here a check of all (in parallel) summarizes them
SPOOL = ".spool"  # <ledger>/.spool/<started id>.json: a finished record body not yet appended
log = logging.getLogger("repro.ledger")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _stat_keys(scan: list) -> list[tuple]:
    """What a check's reuse compares of two listings: each file's name and stat (size, times, inode)."""
    return [(n, st) if type(st) is str else (n, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) for n, st in scan]


_NAME = operator.itemgetter(0)
_CREATED_ID = operator.attrgetter("created", "id")  # an entry's (created, id): a C key (100,000 heads: ~0.03 s less)


class LedgerError(RuntimeError):
    pass


@dataclass
class Recovery:
    recovered: list[tuple[Path, dict]] = field(default_factory=list)  # spool file, the record appended
    failed: list[Problem] = field(default_factory=list)  # spool files kept
    running: list[Path] = field(default_factory=list)  # spools of runs whose parent still runs: left to it
    released: list[Path] = field(default_factory=list)  # empty reservations of runs that are over: deleted
    superseded: list[dict] = field(default_factory=list)  # lost runs marked superseded by a later ok run


class Ledger:
    def __init__(self, root: str | os.PathLike | None = None):
        """`root`: the ledger's folder; None: the repo's `ledger/`, the CLI's default (`--ledger`)."""
        if root is None:
            from repro import paths

            root = paths.default_ledger_dir()
        self.root = Path(root)
        self.spool_dir = self.root / SPOOL
        self._index = Index(self.root)
        self._warned: set[Path] = set()
        self._damaged: list[Path] = []  # files of the last scan that are not records
        self._checked_stats: dict[str, os.stat_result] = {}  # the files the last check() saw
        self._last_check: tuple | None = None  # (the scan it saw, with summaries, what it found)
        self._holding = 0  # one_scan() blocks open
        self._held: list | None = None  # their scan (record_files' answer), made on first use

    # -- writing -------------------------------------------------------------------------------

    def append(self, record: dict) -> dict:
        """Write a new record (adds `id`, `created`, `schema_version`); returns the record as written.

        A write that fails (full disk, read-only, no permission) raises LedgerError naming the
        path and the fix, and leaves no temp file behind. Credentials in any of its strings (a
        tracking URI's password, an index's token) are masked first: the ledger is published."""
        self._check_root()
        body = redaction.redact_data({k: v for k, v in record.items() if k != "id"})
        body.setdefault("schema_version", schema.SCHEMA_VERSION)
        body.setdefault("created", now_iso())
        body["id"] = rid = record_id(body)
        folder = self.root / body["created"][:10]
        final = folder / f"{rid}.json"
        tmp = folder / f".tmp-{os.getpid()}-{secrets.token_hex(4)}.json"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            # Not mkstemp: its files are 0600 whatever the umask; 0o666 & ~umask lets others read.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(recordfile.dumps(body))
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
                tmp.unlink(missing_ok=True)
        except OSError as e:
            raise LedgerError(write_error(final, e)) from None
        self._held = None  # a one_scan() block sees what it appended: listed again on its next read
        return body

    def check_writable(self) -> None:
        """Raise LedgerError unless a record could be appended here (for preflight: writes nothing)."""
        if (why := place.unusable(self.root)) is not None:
            raise LedgerError(f"ledger dir {self.root} {why}")

    def recover(self) -> Recovery:
        """Append every spooled `finished` record (`<ledger>/.spool/*.json`); a spool file is
        deleted only once its record is in the ledger, and kept (named) when that fails."""
        out = Recovery()
        spooled = sorted(self.spool_dir.glob("*.json")) if self.spool_dir.is_dir() else []
        for path in (p for p in spooled if not p.name.startswith(".")):
            try:
                body = recordfile.parse_json(path.read_bytes())
            except (OSError, ValueError) as e:
                out.failed.append(Problem(path, f"unreadable spool file ({e}); kept"))
                continue
            if not isinstance(body, dict):
                out.failed.append(Problem(path, "not a record body (not a JSON object); kept"))
                continue
            body.setdefault("prev", path.stem)
            if self._still_running(body["prev"]):
                out.running.append(path)
                continue
            try:
                record = self._already_recorded(body) or self.append(body)
            except LedgerError as e:
                out.failed.append(Problem(path, f"{e}; the spool file is kept: run `repro ledger recover` again"))
                continue
            path.unlink(missing_ok=True)
            out.recovered.append((path, record))
        # A reservation holds no results (spool.write renames it to .json before the ledger write):
        # one left behind by a killed parent is only disk space, given back once its run is over.
        for path in sorted(self.spool_dir.glob("*.reserved")) if self.spool_dir.is_dir() else []:
            if self._running(path.stem) is None:
                path.unlink(missing_ok=True)
                out.released.append(path)
        try:
            out.superseded = self.supersede_lost()
        except LedgerError as e:
            out.failed.append(Problem(self.root, f"could not mark lost runs superseded: {e}"))
        return out

    def supersede_lost(self, by: dict | None = None) -> list[dict]:
        """Mark lost runs that were run again since: for each `lost` started head whose config
        hash has a later `ok` run (`by`, or the newest such run in the ledger), append a
        `supersession` record (prev: the lost one, superseded_by: the ok one). The ledger is
        append-only: the lost record stays, its chain ends. Returns the records appended."""
        entries = self.head_entries(kind="run")
        lost = [r for e in entries if e.status == "started" and (r := self.load(e)) and state_of(r).name == "lost"]
        if not lost:
            return []
        oks = [by] if by is not None else [r for e in entries if e.status == "ok" and (r := self.load(e))]
        out = []
        for record in map(view, lost):
            later = [ok for ok in map(view, oks) if ok.config_hash and ok.config_hash == record.config_hash
                     and ok.created > record.created]
            if later:
                out.append(self.append({"kind": "supersession", "status": "superseded", "prev": record.id,
                                        "superseded_by": later[-1].id, "config_hash": record.config_hash}))
        return out

    def spool_path(self, started_id: str) -> Path:
        """Where a run spools its `finished` record body before appending it (see recover)."""
        return self.spool_dir / f"{started_id}.json"

    def _running(self, started_id: str) -> dict | None:
        """The `started` record of that run while a live process (this one too) still owns it."""
        started = next((self.load(e) for e in self.entries() if e.id == started_id), None)
        return started if started is not None and state_of(started).name == "running" else None

    def _still_running(self, started_id: str) -> bool:
        """Whether another live process still owns that run (and will append its record itself)."""
        started = self._running(started_id)
        return started is not None and started["parent"]["pid"] != os.getpid()  # this process's own spool: recover it

    def _already_recorded(self, body: dict) -> dict | None:
        """The record a spool file already became (same content, any id/created), if any."""
        def content(r: dict) -> dict:
            return {k: v for k, v in r.items() if k not in ("id", "created", "schema_version")}
        for e in self.entries():
            if e.prev == body["prev"] and (r := self.load(e)) and content(r) == content(body):
                return r
        return None

    # -- reading -------------------------------------------------------------------------------

    def paths(self) -> list[Path]:
        """Every record file (damaged ones included; dot-files and dot-folders never)."""
        return [path for path, why in self._scan() if why is None]

    def _scan(self) -> list[tuple[Path, str | None]]:
        """Every path that is or looks like a record file, with why it cannot be one (None: it may be)."""
        self._check_root()
        if not self.root.is_dir():
            return []
        return sorted((self.root / name, st if isinstance(st, str) else None) for name, st in record_files(self.root))

    @contextlib.contextmanager
    def one_scan(self):
        """Within it, every read of this ledger (entries, check, changed, heads...) sees the files as
        one listing found them: a command that lists, then marks the changed records, stats 100,000
        files once, not three times (0.5-0.8 s each on the 2-core machine), and its second check is
        its first. A record appended through this Ledger within is seen (the files are listed again)."""
        self._holding += 1
        try:
            yield self
        finally:
            self._holding -= 1
            if not self._holding:
                self._held = None

    def _files(self) -> Listing:
        """record_files' answer: listed now, or as this one_scan() block listed it. Where nothing
        derived is there to compare the files' stats with (no index, no verify cache: a clone), they
        are listed without a stat each (Listing.stated False): the check that reads every file fills
        them in from fstat on the opened files (in the forked workers), or `_fill` stats them."""
        if not self._holding:
            return self._list()
        if self._held is None:
            self._held = self._list()
        return self._held

    def _list(self) -> Listing:
        """In name order: the check's and the index's sorts of it then take one pass each."""
        stated = self._index.known() or (self.root / FOLDER / verified.FILE).exists()
        out = Listing(sorted(record_files(self.root, stat=stated), key=_NAME))
        out.stated = stated
        return out

    def _fill(self, scan: Listing, read: dict[str, tuple | None] | None = None) -> None:
        """The stats of a listing made without them, put in place (the same list: one_scan's): each
        file's as a check read it (`read`: name -> verify's stat key), else a stat now."""
        if scan.stated:
            return
        make, root, read = tuple.__new__, self.root, read or {}
        scan[:] = [(n, st) if st is not None else (n, make(FileStat, key) if (key := read.get(n)) is not None
                                                    and key[0] <= MAX_RECORD_BYTES else stat_or_why(root / n))
                   for n, st in scan]
        scan.stated = True

    def entries(self) -> list[Entry]:
        """The index entry of every readable record, once per id, in file-name order."""
        self._check_root()
        self._damaged = []
        if not self.root.is_dir():
            return []
        out, seen = [], set()
        with self.one_scan(), bulk():  # the index and the check that may resolve it: one listing
            files = self._files()
            if not files.stated:  # no index: the check that would resolve it, first (it fills in the stats)
                if len(files) >= RESOLVE_FROM:
                    self.check(summaries=True)
                self._fill(files)
            for e in self._index.entries(self._resolve, files):
                if e.problem:
                    self._damaged.append(e.path)
                    self._warn(e.path, e.problem)
                elif e.id not in seen:  # the same record file in two date folders is one record
                    seen.add(e.id)
                    out.append(e)
        return out

    def _resolve(self, unknown: dict[str, os.stat_result]) -> dict[str, list]:
        """The summaries of files the index does not know, from a check of every file (over every
        core; a travelling index spares it the parse): for an index built from scratch (a clone, a
        deleted `.index/`), what a parse of each file in this process would cost several times over."""
        if len(unknown) < RESOLVE_FROM:
            return {}
        found = self.check(summaries=True)
        if self._last_check is not None and self._last_check[0] is self._held and found is self._last_check[2]:
            # this one_scan()'s listing, checked as it was: every stat `unknown` holds is the one checked
            summaries = found.summaries
            return summaries if len(unknown) == len(self._checked_stats) else \
                {n: s for n, s in summaries.items() if n in unknown}
        stats = self._checked_stats
        out = {}
        for n, s in found.summaries.items():
            if (was := unknown.get(n)) is not None and (st := stats.get(n)) is not None and (
                    st is was or (st.st_size, st.st_mtime_ns, st.st_ino) == (was.st_size, was.st_mtime_ns, was.st_ino)):
                out[n] = s  # (`is`: the same listing, in one_scan)
        return out

    def read(self, entry: Entry, then=lambda data: data):
        """The file of an index entry as it is (or `then` of it); None (with a warning) when it
        cannot be read now."""
        try:
            return then(recordfile.read(entry.path))
        except recordfile.NotARecord as e:
            self._warn(entry.path, str(e))
            return None

    def load(self, entry: Entry) -> dict | None:
        """The record of an index entry; None (with a warning) when its file cannot be read now."""
        return self.read(entry, recordfile.parse)

    def records(self) -> Iterator[dict]:
        for entry in self.entries():
            if (record := self.load(entry)) is not None:
                yield record

    def get(self, prefix: str) -> dict:
        """The record whose id is or starts with `prefix`; one whose content no longer hashes to its
        id (changed after it was written) is returned with a warning naming it."""
        if not prefix.strip():
            raise LedgerError("give a record id, or the first characters of one (`repro ledger list` shows them)")
        entries = self.entries()
        matches = sorted({e.id for e in entries if e.id.startswith(prefix)})
        if not matches:
            damaged = [p for p in self._damaged if p.stem.startswith(prefix)]
            hint = f"; {damaged[0]} is not a readable record (repro ledger verify)" if damaged else ""
            raise LedgerError(f"no record with id {prefix!r} in {self.root} (repro ledger list shows them){hint}")
        if len(matches) > 1:
            raise LedgerError(f"id {prefix!r} is ambiguous in {self.root}: {', '.join(matches)}")
        entry = next(e for e in entries if e.id == matches[0])
        data = self.read(entry)
        try:
            record = recordfile.parse(data) if data is not None else None
        except recordfile.NotARecord as e:  # changed since the index read it
            self._warn(entry.path, str(e))
            record = None
        if record is None:
            raise LedgerError(f"record {matches[0]} in {self.root} cannot be read (repro ledger verify)")
        if (actual := recordfile.content_id(record, data)) != record["id"]:
            log.warning("ledger: record %s (%s) was changed after it was written: its content hashes to %s; "
                        "its figures cannot be trusted (repro ledger verify)", record["id"], entry.path, actual)
        return record

    def head_entries(self, kind: str | None = None, sweep: str | None = None,
                     status: str | None = None) -> list[Entry]:
        """The newest entry of each chain (a run's current state), oldest first; optionally only
        those of one kind, sweep id and/or status (from the index: only those are read)."""
        entries = self.entries()
        superseded = {e.prev for e in entries}
        heads = [e for e in entries if e.id not in superseded and (kind is None or e.kind == kind)
                 and (sweep is None or e.sweep == sweep) and (status is None or e.status == status)]
        return sorted(heads, key=_CREATED_ID)

    def heads(self, kind: str | None = None, sweep: str | None = None, status: str | None = None) -> list[dict]:
        """The newest record of each chain (a run's current state), oldest first. Lost runs:
        `[r for r in ledger.heads(status="started") if state_of(r).name == "lost"]`."""
        return [r for e in self.head_entries(kind, sweep, status) if (r := self.load(e)) is not None]

    def chain(self, record: dict) -> list[dict]:
        """The record and every earlier one it names, newest first."""
        out = [record]
        while prev := view(out[-1]).prev:
            out.append(self.get(prev))
        return out

    def current(self, record: dict) -> dict:
        """The newest record of the chain `record` belongs to (a `started` id finds its end)."""
        later = {e.prev: e for e in sorted(self.entries(), key=lambda e: (e.created, e.id)) if e.prev}
        seen = set()
        while (rid := view(record).id) in later and rid not in seen:
            seen.add(rid)
            record = self.load(later[rid]) or record
        return record

    # -- checking ------------------------------------------------------------------------------

    def check(self, full: bool = False, summaries: bool = False) -> Verification:
        """Check every file: JSON, schema, content hash, file name, duplicates, links; lost runs.
        A file unchanged since it last passed is not read again (verified.py), one whose bytes the
        travelling index vouches for is read and hashed, not parsed (travel.py); `full`: read all.
        `summaries`: the index summary of every file, those unchanged too, where the travelling
        index has it (Ledger.entries, for an index rebuilt from nothing)."""
        self._check_root()
        if not self.root.is_dir():
            return Verification(0)
        with self.one_scan(), bulk():
            return self._check(full, summaries)

    def _check(self, full: bool, summaries: bool) -> Verification:
        now = time.time_ns()
        scan = self._files()
        if (last := self._last_check) is not None and last[0] is not scan:
            self._fill(scan)  # compared with the last check's
        if not full and last is not None and (last[1] or not summaries) and (
                last[0] is scan or not last[3] and _stat_keys(last[0]) == _stat_keys(scan)):
            return last[2]  # nothing changed since this ledger's last check (list: its index, then its rows)
        read = None if scan.stated else {}  # no stats yet: every file is read, its stat as read kept here
        stats, damaged = {}, []
        for name, st in scan:
            if type(st) is str:
                damaged.append(Problem(self.root / name, st))
            else:
                stats[name] = st
        names = sorted(stats)
        cache = verified.Cache(self.root, KEPT)
        trusted = {} if full or read is not None else cache.trusted(stats)
        keep = travel.active(self.root, len(names)) and travel.writable(self.root)
        on_disk = travel.Segments.names(self.root)
        if not (full or summaries) and on_disk and on_disk == cache.segments:
            # as the last check left them, covering every file it kept: not read (10 MB a 30,000-record ledger)
            segments = travel.Segments.named(self.root, on_disk)
        else:
            segments = travel.Segments.load(self.root)
            if keep and trusted:  # files no segment covers yet are read once more, so that one will
                trusted = {n: kept for n, kept in trusted.items() if cache.files[n][4] in segments.seen}
        if full or len(trusted) == len(names):
            seen = None
        else:  # (no copy of 100,000 entries where the verify cache has none: a clone's first check)
            seen = {**cache.by_digest(), **segments.seen} if cache.files else segments.seen
        unread = [n for n in names if n not in trusted] if trusted else names
        audit = travel.audit_sample(unread, len(unread) if full else None) if segments.seen else set()
        found = verify(self.root, names, trusted, seen, audit, segments.seen, read)
        if read is not None:
            self._fill(scan, read)
            if any(key is None or key[0] > MAX_RECORD_BYTES for key in read.values()):
                return self._check(full, summaries)  # gone, unopened or too large: checked as listed, stat'ed
            stats = {name: st for name, st in scan if type(st) is not str}
        self._checked_stats = stats
        disputed = found.disputed
        distrusted = bool(disputed)
        if distrusted:  # a segment lied: nothing it says is used; every file read in full
            found = verify(self.root, names)
        covered = None
        if keep:
            claimed = {} if distrusted else segments.seen
            new = {d: [kept, found.summaries[n]] for n, (d, kept) in found.passed.items()
                   if d not in claimed and n in found.summaries}
            if travel.update(segments, new, distrusted) and all(
                    d in claimed or d in new for d, _ in found.passed.values()):
                covered = travel.Segments.names(self.root)
        cache.save(stats, trusted, found.passed, now, covered)
        if segments.seen:  # the summaries of trusted files, for an index that lost them (Ledger.entries)
            files, claims, have = cache.files, segments.seen, found.summaries
            for n in trusted:
                if (known := claims.get(files[n][4])) is not None and usable(known):
                    have.setdefault(n, known[1])
        found.warnings += [*segments.tampered, *(Problem(p.path, f"{p.reason}: the travelling index was set aside, "
                                                 "every file read in full, and it was replaced")
                                                 for p in disputed[:1])]
        found.problems += damaged
        # a file within its clock tick may change unseen: such a check is reused only within its one_scan()
        racy = now - newest(list(stats.values())) < verified.RACY_NS
        self._last_check = (scan, summaries or full, found, racy)
        return found

    def verify(self) -> list[Problem]:
        return self.check().problems

    def changed(self) -> dict[str, Path]:
        """{id: file} of the records whose content no longer hashes to their id (edited after they
        were written): what `report` refuses to publish, `compare` warns of and `ledger list` marks.
        An incremental check (files unchanged since they last passed are not read again)."""
        return {p.path.stem: p.path for p in self.check().problems if CHANGED in p.reason}

    # -- internals -----------------------------------------------------------------------------

    def _check_root(self) -> None:
        if (why := place.unusable(self.root, write=False)) is not None:
            raise LedgerError(f"ledger dir {self.root} {why}")

    def _warn(self, path: Path, reason: str) -> None:
        if path not in self._warned:
            self._warned.add(path)
            log.warning("ledger: skipping %s: %s (repro ledger verify lists every damaged file)", path, reason)
