"""`ledger verify`: check every record file (JSON, schema, content hash, file name), then the
ledger as a whole (duplicates, links, lost runs). A file unchanged since it last passed is not
read again (verified.py says how that is known); `--full` reads every one.

Over many files the reading and hashing (JSON parse, canonical dump, sha256: ~0.1 ms a record)
is split over forked processes, one per usable core: 10,000 records must verify within 2 s on a
2-core machine. Forking is skipped where the caller runs threads (a fork would copy their locks).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from hashlib import sha256

from repro.ledger import recordfile, schema, verified
from repro.ledger.verified import DIGEST_LEN
from repro.ledger.index import MAX_RECORD_BYTES, SUMMARY, summary_of, too_large
from repro.ledger.state import state_of

PARALLEL_FROM = 2000  # files; below that a fork costs more than it saves
KEPT = ("id", "prev", "status", "parent", "replay_of", "superseded_by")  # what the whole-ledger checks need of a record


CHANGED = "it was changed after it was written"  # a record whose figures cannot be trusted (Ledger.changed)


@dataclass(frozen=True)
class Problem:
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class Verification:
    files: int
    problems: list[Problem] = field(default_factory=list)  # verify fails on these
    warnings: list[Problem] = field(default_factory=list)  # lost runs: worth a look, not a failure
    # what this check read: not part of what it found (two checks of the same ledger are equal)
    read: int = field(default=0, compare=False)  # files read now (the rest were unchanged since they passed)
    passed: dict[str, tuple[str, dict]] = field(default_factory=dict, compare=False)  # name read now -> (digest, kept)
    summaries: dict[str, list] = field(default_factory=dict, compare=False)  # name read now -> index.SUMMARY values
    vouched: int = field(default=0, compare=False)  # files read and hashed only: a travelling index had their bytes
    disputed: list[Problem] = field(default_factory=list, compare=False)  # audited files a travelling claim misstates


# (the record's KEPT keys or None, what is wrong, digest of the bytes, its index.SUMMARY values or None)
Checked = tuple[dict | None, list[str], str, list | None]
Seen = dict[str, tuple | list]  # digest -> (kept, summary or None) of bytes that passed before
StatKey = tuple[int, int, int, int]  # a file's (size, mtime_ns, ctime_ns, inode) as it was read


def usable(known) -> bool:
    """Whether a `Seen` value is (kept, summary) as a check makes them (a travelling index's are
    read from a file: a malformed one vouches for nothing)."""
    try:
        kept, summary = known
    except (TypeError, ValueError):
        return False
    return isinstance(kept, dict) and isinstance(kept.get("id"), str) and (
        summary is None or isinstance(summary, list) and len(summary) == len(SUMMARY) and summary[0] == kept["id"])


def check_file(path: Path | str, seen: Seen | None = None) -> Checked:
    """Read and check one file. `seen`: digest -> (kept, summary) of bytes that passed before: such
    bytes are the same content, and only the file name is checked. A `str` path spares the Path
    objects (100,000 cost 0.3 s)."""
    return _check_path(str(path), seen)[0]


def _check_path(path: str, seen: Seen | None) -> tuple[Checked, StatKey | None]:
    """check_file, and the file's stat as it was read (None: it could not be opened)."""
    try:
        data, digest, key = _read(path)
    except OSError as e:
        return (None, [f"unreadable ({e.strerror})"], "", None), None
    if data is None:
        return (None, [too_large(key[0])], "", None), key
    return _check_bytes(path, data, digest, seen), key


def _read(path: str) -> tuple[bytes | None, str, StatKey]:
    """The file's bytes, their digest (verified.digest, inline: it runs once a file) and its stat
    as read, (size, mtime_ns, ctime_ns, inode) from fstat on the opened file: a command that lists
    a clone's files without a stat each (Ledger._files) has them from here, and the bytes hashed are
    those of that stat. os.open, fstat, os.read, close: four system calls a file, where
    open().readall() makes more. A read of the size and one byte more that returns the size is the
    whole file; one that does not (the file grew or shrank meanwhile) is read on until a read returns
    nothing. A file larger than any record (MAX_RECORD_BYTES) is not read: None."""
    fd = os.open(path, _RDONLY)
    try:
        st = os.fstat(fd)
        size = st.st_size
        key = (size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if size > MAX_RECORD_BYTES:
            return None, "", key
        data = os.read(fd, size + 1)
        if len(data) != size:
            data += b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
    finally:
        os.close(fd)
    return data, sha256(data).hexdigest()[:DIGEST_LEN], key


_RDONLY = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def _check_bytes(path: str, data: bytes, digest: str, seen: Seen | None) -> Checked:
    stem = path[path.rfind(os.sep) + 1:-5]  # record_files: `<id>.json` (os.path.basename, inline)
    if seen and (known := seen.get(digest)) is not None and usable(known):
        kept, summary = known
        return kept, [] if stem == kept["id"] else [f"file name does not match the record id {kept['id']}"], \
            digest, summary
    try:
        record = recordfile.parse(data)
    except recordfile.NotARecord as e:
        return None, [str(e)], digest, None
    problems = [f"does not match the record schema: {err}" for err in schema.errors(record)]
    summary = None if problems else summary_of(record)
    expected = recordfile.content_id(record, data)
    if record["id"] != expected:
        problems.append(f"content hash is {expected}, record says {record['id']}: {CHANGED}")
    elif stem != expected:
        problems.append(f"file name does not match the record id {expected}")
    kept = {k: record[k] for k in KEPT if k in record}
    if env_hash := (record.get("environment") or {}).get("env_hash"):
        kept["env_hash"] = env_hash
    return kept, problems, digest, summary


_seen: Seen | None = None  # check_files' `seen`, inherited by its forked workers


def _check_files(paths: list[str], keys: list | None = None) -> list[Checked]:
    """check_file of each path; `keys`: each file's stat as read is appended to it (see _read)."""
    if keys is None:
        return [check_file(p, _seen) for p in paths]
    out = []
    for p in paths:
        checked, key = _check_path(p, _seen)
        out.append(checked)
        keys.append(key)
    return out


def _check_files_forked(paths: list[str], keys: bool = False) -> tuple[list[Checked | str], list | None]:
    """_check_files in a forked worker, where bytes `seen` knows are answered by their bare digest:
    the parent checks the entry and the name. The worker tests `digest in seen` and never takes
    `seen`'s entries: a reference taken writes to the entry's memory, which the fork shares with the
    parent until then, and each page so written is copied (100,000 entries: 2 s of system time on
    the 2-core machine); nor are 100,000 entries sent back through a pipe. `keys`: each file's
    stat as read, sent back too (plain tuples: 100,000 cost ~0.05 s to unpickle)."""
    seen = _seen or {}
    out, stats = [], [] if keys else None
    for path in paths:
        try:
            data, digest, key = _read(path)
        except OSError:
            checked, key = _check_path(path, None)  # says why
            out.append(checked)
        else:
            out.append(digest if data is not None and digest in seen else
                       (None, [too_large(key[0])], "", None) if data is None else _check_bytes(path, data, digest, None))
        if keys:
            stats.append(key)
    return out, stats


def workers_for(files: int) -> int:
    if files < PARALLEL_FROM or threading.active_count() > 1:
        return 1
    return min(len(os.sched_getaffinity(0)), 8)


def check_files(paths: list[str], seen: Seen | None = None) -> list[Checked]:
    """check_file of each path, over every usable core where there are many."""
    return [answer if type(answer) is not str else _vouched(path, answer, seen)
            for path, answer in zip(paths, _answers(paths, seen))]


def _vouched(path: str, digest: str, seen: Seen) -> Checked:
    """The check of a file whose bytes (`digest`) `seen` knows: its entry, if usable, and the file name."""
    known = seen.get(digest)
    if not usable(known):
        return check_file(path)  # a malformed entry vouches for nothing: read in full
    kept, summary = known
    return kept, [] if path[path.rfind(os.sep) + 1:-5] == kept["id"] else \
        [f"file name does not match the record id {kept['id']}"], digest, summary


def _answers(paths: list[str], seen: Seen | None, keys: list | None = None) -> list[Checked | str]:
    """check_file of each path, or, from a forked worker, the bare digest of bytes `seen` knows
    (see _check_files_forked; _vouched makes its Checked). `keys`: each file's stat as read (see
    _read; None where it could not be opened) is appended to it, in the order of `paths`."""
    global _seen
    if not paths:
        return []
    _seen = seen
    try:
        workers = workers_for(len(paths))
        if workers < 2:
            return _check_files(paths, keys)
        size = -(-len(paths) // workers)
        chunks = [paths[i:i + size] for i in range(0, len(paths), size)]
        out: list = []
        with ProcessPoolExecutor(len(chunks), mp_context=multiprocessing.get_context("fork")) as pool:
            for answers, stats in pool.map(_check_files_forked, chunks, [keys is not None] * len(chunks)):
                out += answers
                if keys is not None:
                    keys += stats
        return out
    finally:
        _seen = None


def verify(root: Path, names: list[str], trusted: dict[str, dict] | None = None,
           seen: Seen | None = None, audit: set[str] | frozenset = frozenset(),
           claims: Seen | None = None, stats: dict[str, StatKey | None] | None = None) -> Verification:
    """Check the files `names` (`<folder>/<file>` under `root`, in order); `trusted`: name -> kept
    of files unchanged since they passed (not read); `seen`: digest -> (kept, summary) of bytes that
    passed before (see check_file); `audit`: names read and checked in full whatever `seen` says,
    and held to `claims` (a travelling index's digest -> (kept, summary)): one it misstates is `disputed`.
    Paths are made only where a file is read or named: 100,000 cost 0.3 s. `stats`: filled with
    the name -> stat as read (see _read; None: it could not be opened) of every file read."""
    trusted = trusted or {}
    out = Verification(len(names))
    unread = [n for n in names if n not in trusted] if trusted else names
    audited = [n for n in unread if n in audit] if audit else []
    rest = [n for n in unread if n not in audit] if audited else unread
    base = f"{root}{os.sep}"
    keys: list | None = [] if stats is not None else None
    audit_paths = [base + n for n in audited]
    audit_checked = dict(zip(audited, _answers(audit_paths, None, keys)))  # (no `seen`: no bare digest)
    if keys:
        stats.update(zip(audited, keys))
        keys.clear()
    out.read = len(unread)
    if claims:
        for n, (kept, problems, digest, summary) in audit_checked.items():
            if (claim := claims.get(digest)) is not None and (problems or [kept, summary] != list(claim)):
                why = "; ".join(problems) or f"it reads {kept} {summary}, the index says {claim[0]} {claim[1]}"
                out.disputed.append(Problem(root / n, f"the travelling index vouches for these bytes, but checked in "
                                                      f"full: {why}"))
    # One pass over every file, its steps inline (100,000 files: each call, dict or Path saved is
    # ~0.05 s): the answers of `rest` are taken in order, a forked worker's bare digest checked here
    answers = iter(_answers([base + n for n in rest], seen, keys))
    if keys:
        stats.update(zip(rest, keys))
    vouched = 0
    claimed = claims.__contains__ if claims else None
    first: dict[str, str] = {}
    records: list[dict] = []
    passed, summaries = out.passed, out.summaries
    trusted_get = trusted.get
    for name in names:
        record = trusted_get(name) if trusted else None
        if record is None:
            if audited and name in audit:
                record, problems, digest, summary = audit_checked[name]
            else:
                answer = next(answers)
                if type(answer) is str:  # bytes `seen` knows, as a forked worker answers them (_vouched, inline)
                    digest = answer
                    if usable(known := seen.get(digest)):
                        record, summary = known
                        problems = () if name[name.rfind("/") + 1:-5] == record["id"] else \
                            (f"file name does not match the record id {record['id']}",)
                    else:  # a malformed entry vouches for nothing: read in full
                        record, problems, digest, summary = check_file(base + name)
                else:
                    record, problems, digest, summary = answer
                if claimed is not None and claimed(digest):
                    vouched += 1
            if problems:
                out.problems += [Problem(root / name, p) for p in problems]
            elif record is not None:
                passed[name] = (digest, record)
                if summary is not None:
                    summaries[name] = summary
            if record is None:
                continue
        rid = record["id"]
        if rid in first:
            out.problems.append(Problem(root / name, f"duplicate: record {rid} is also "
                                                     f"{root / first[rid]}; delete one of the two files"))
            continue
        first[rid] = name
        records.append(record)
    out.vouched = vouched
    out.problems += check_locks(records, {}, root)
    get = dict.get
    superseded = {get(r, "prev") for r in records}
    named = superseded.union({get(r, "replay_of") for r in records}, {get(r, "superseded_by") for r in records})
    # by set comprehensions (C loops): the records below concern only where one names a record not
    # here (then each is looked at), or a started run's newest (100,000 records: ~0.05 s less)
    concern = records if any(x and x not in first for x in named) else \
        [r for r in records if get(r, "status") == "started" and r["id"] not in superseded]
    for record in concern:
        prev, replay_of, by = get(record, "prev"), get(record, "replay_of"), get(record, "superseded_by")
        if not (prev and prev not in first or replay_of and replay_of not in first or by and by not in first
                or get(record, "status") == "started" and record["id"] not in superseded):
            continue  # every record it names is here, and it is not a started run's newest: nothing below concerns it
        path = root / first[record["id"]]
        if record.get("prev") and record["prev"] not in first:
            out.problems.append(Problem(path, f"names an earlier record {record['prev']} that is not in the ledger"))
        if record.get("replay_of") and record["replay_of"] not in first:
            out.problems.append(Problem(path, f"record {record['id']} is a replay of {record['replay_of']}, which is "
                                              "not in the ledger (restore that record's file, e.g. from git)"))
        if record.get("superseded_by") and record["superseded_by"] not in first:
            out.problems.append(Problem(path, f"record {record['id']} says run {record['superseded_by']} superseded "
                                              "it, which is not in the ledger"))
        if record["id"] not in superseded and (state := state_of(record)).name == "lost":
            out.warnings.append(Problem(path, f"{state}: its parent process is gone and the run never ended; "
                                              "`repro ledger recover` appends its results if they were spooled, "
                                              "else run it again (run.resume=true skips the runs recorded ok)"))
    return out


def check_locks(records: list[dict], where: dict[str, Path], root: Path | None = None) -> list[Problem]:
    """Each environment lock a record names (`<ledger>/envs/<sha256>.txt`) hashed: a lock whose content
    is not the hash in its name was edited, and every record naming it would replay something else.
    A lock that is missing is not a problem here (a replay says what to copy). `root`: the ledger
    (else each record's path in `where` names it)."""
    users: dict[Path, list[str]] = {}
    by_digest: dict[tuple, list[str]] = {}  # (ledger, digest) -> ids: a Path per lock, not per record
    for record in records:
        if digest := record.get("env_hash"):
            by_digest.setdefault((root if root is not None else where[record["id"]].parent.parent, digest),
                                 []).append(record["id"])
    for (ledger, digest), ids in by_digest.items():
        users.setdefault(ledger / "envs" / f"{digest}.txt", []).extend(ids)
    out = []
    for lock, ids in sorted(users.items()):
        try:
            actual = hashlib.sha256(lock.read_bytes()).hexdigest()
        except OSError:
            continue
        if actual != lock.stem:
            out.append(Problem(lock, f"environment lock changed after it was written: its content hashes to "
                                     f"{actual[:12]}, its name says {lock.stem[:12]}; used by record(s) "
                                     f"{', '.join(sorted(ids))}. Restore it from git (`git checkout -- envs/{lock.name}` "
                                     "in the ledger) or from the ledger it was recorded in"))
    return out
