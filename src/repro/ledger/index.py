"""A derived summary of every record file, so readers find ids, chains and heads without
parsing every record: `ledger list` draws its rows from it, `compare`/`report` pick one sweep's
runs by it and read only their files (SUMMARY: what those need).

Where: `<ledger>/.index/files.json`, in a dot-folder of the ledger (never a record) that holds
its own `.gitignore` (`*`). So it follows the ledger wherever `ledger.dir` points, two ledgers
never share one, git never sees it, and deleting it costs one rebuild. It is never the source
of truth: an entry is reused only while its file's size, mtime (ns) and inode are unchanged
(every file is stat'ed by every reader, ~0.4 s per 100,000 files); a file it
does not know (written by another process, merged from a branch) is parsed and added, a gone
one dropped; an index that does not parse or has another format is rebuilt. It is saved by temp
file and rename without fsync: concurrent readers each write a whole index, a torn one after a
crash reads as corrupt and is rebuilt. A ledger that cannot be written keeps it in memory.
The records themselves stay as they are: one small JSON file each, never rewritten, in git.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import logging
import operator
import os
import secrets
import time
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from repro.ledger import recordfile, schema

FOLDER = ".index"
FILE = "files.json"
FORMAT = 2
# A record is a few KiB to a few MiB (its loss series); a larger file is not one, and is never read.
MAX_RECORD_BYTES = 32 << 20
# What list, compare and report need of a record besides its file: they read no file they do not show.
SUMMARY = ("id", "prev", "created", "kind", "status", "sweep", "experiment", "job", "replay_of", "has_config",
           "framework", "model", "steady_s", "config_hash")
# A file changed this recently may change again within the same tick of the file system's clock,
# keeping its size and times: its summary is not kept for the next process, which parses it again.
RACY_NS = 2_000_000_000
log = logging.getLogger("repro.ledger")


@contextlib.contextmanager
def bulk():
    """Python's cyclic garbage collector off while a reader builds or walks its per-file objects.

    A check or a list of 100,000 records makes millions of small lists, dicts and tuples (parsed
    JSON, stats, entries), none in a reference cycle: reference counting frees every one. Yet each
    25 % the heap grows triggers a full collection that walks all of them: a quarter of a warm
    `ledger list`'s CPU time at 100,000 records (6.5 s against 4.9 s without). Nested uses are free;
    the collector is on again as it was once the outermost ends."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def newest(stats: list) -> int:
    """The latest mtime or ctime (ns) of `stats` (0 for none): by C loops, one each (100,000 files:
    ~0.02 s against ~0.1 s for a max() per file)."""
    return max(max(map(_MTIME, stats), default=0), max(map(_CTIME, stats), default=0))


_MTIME, _CTIME = operator.attrgetter("st_mtime_ns"), operator.attrgetter("st_ctime_ns")


def save_derived(path: Path, payload: dict) -> bool:
    """Write a derived file of the ledger's `.index/` (git-ignored, rebuilt from the records)
    atomically; False where the ledger cannot take it (read-only, full): then it is rebuilt."""
    folder = path.parent
    tmp = folder / f".{path.name}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        folder.mkdir(exist_ok=True)
        ignore = folder / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# repro's derived ledger index: rebuilt from the records, never committed\n*\n")
        tmp.write_bytes(recordfile.dump_compact(payload))
        os.replace(tmp, path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False


class Entry(NamedTuple):
    """One record file as the index knows it (a tuple: 100,000 of them are built per command)."""
    root: Path
    name: str  # `<folder>/<id>.json`
    id: str = ""
    prev: str | None = None
    created: str = ""
    kind: str | None = None
    status: str | None = None
    sweep: str | None = None  # the sweep's id
    experiment: str | None = None  # the sweep's experiment
    job: int | None = None  # the job's number in its sweep
    replay_of: str | None = None
    has_config: bool = False
    framework: str | None = None  # config.framework.name
    model: str | None = None  # "<config.model.name>/<config.model.preset>"
    steady_s: float | None = None  # results.steady_median_s
    config_hash: str | None = None
    problem: str | None = None  # why the file is not a record; then the rest is empty

    @property
    def path(self) -> Path:
        return self.root / self.name


class Listing(list):
    """record_files' answer, as a list. `stated` False: listed without a stat per file (None in its
    place), for a check to fill in from the files as it reads them (Ledger._files)."""
    stated = True


class FileStat(NamedTuple):
    """The stat of a file as verify read it (fstat on the opened file): what readers compare."""
    st_size: int
    st_mtime_ns: int
    st_ctime_ns: int
    st_ino: int


def record_files(root: Path, stat: bool = True) -> Iterator[tuple[str, os.stat_result | str | None]]:
    """(`<folder>/<name>.json`, its stat) for every record file; dot-files and dot-folders are never
    records. A path that cannot be a record file (a symlink loop in the root or a date folder, a
    file too large for a record) comes as (its name, why) instead, without being read. `stat`
    False: (name, None) for each file, none stat'ed (the listing alone: 0.07 s for 100,000 files,
    against 0.45 s with a stat each); see `stat_or_why`."""
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
                if not f.is_file():
                    continue
            except OSError as e:
                yield f"{folder.name}/{f.name}", _unreadable(Path(f.path), e)
                continue
            yield f"{folder.name}/{f.name}", stat_or_why(f) if stat else None


def stat_or_why(f: os.DirEntry | Path) -> os.stat_result | str:
    """A record file's stat, or why it cannot be one (unreadable, larger than any record)."""
    try:
        st = f.stat()
    except OSError as e:
        return _unreadable(Path(f), e)
    return st if st.st_size <= MAX_RECORD_BYTES else too_large(st.st_size)


def too_large(size: int) -> str:
    return f"{size >> 20} MiB, larger than any record ({MAX_RECORD_BYTES >> 20} MiB at most): not read"


def _unreadable(path: Path, e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return "a symlink loop (it never reaches a file or folder): remove the link"
    return f"unreadable ({e.strerror or e})"


def summarize(path: Path) -> list | str:
    """The SUMMARY values of the record in `path`, or why it is not a record."""
    try:
        record = recordfile.load(path)
    except recordfile.NotARecord as e:
        return str(e)
    if errors := schema.errors(record):  # a foreign JSON file that happens to hold an `id`
        return f"not a record: it does not match the record schema ({errors[0]})"
    return summary_of(record)


def summary_of(record: dict) -> list:
    """The SUMMARY values of a record that matches the schema."""
    sweep = record.get("sweep") if isinstance(record.get("sweep"), dict) else {}
    config = record.get("config") if isinstance(record.get("config"), dict) else None
    model = framework = None
    if config is not None:
        framework = _get(config, "framework", "name")
        model = f"{_get(config, 'model', 'name') or ''}/{_get(config, 'model', 'preset') or ''}"
    steady = _get(record, "results", "steady_median_s")
    job = sweep.get("job")
    return [record["id"], record.get("prev"), str(record.get("created", "")), record.get("kind"),
            record.get("status"), _text(sweep.get("id")), _text(sweep.get("experiment")),
            job if isinstance(job, int) and not isinstance(job, bool) else None, record.get("replay_of"),
            config is not None, _text(framework), model,
            steady if isinstance(steady, (int, float)) and not isinstance(steady, bool) else None,
            _text(record.get("config_hash"))]


def _get(d: dict, *keys):
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def _text(value) -> str | None:
    return None if value is None else str(value)


def _valid(v) -> bool:
    return (isinstance(v, list) and len(v) == 4 and isinstance(v[0], int) and isinstance(v[1], int)
            and (isinstance(v[3], str) or isinstance(v[3], list) and len(v[3]) == len(SUMMARY)
                 and isinstance(v[3][0], str)))


class Index:
    def __init__(self, root: Path):
        self.root = root
        self.path = root / FOLDER / FILE
        self._files: dict[str, list] | None = None  # name -> [size, mtime_ns, ino, summary list | problem]

    def known(self) -> bool:
        """Whether there is an index to compare the files' stats with (in memory, or saved)."""
        return self._files is not None or self.path.exists()

    def entries(self, resolve: Callable[[dict[str, os.stat_result]], dict[str, list]] | None = None,
                files: list[tuple[str, os.stat_result | str]] | None = None) -> list[Entry]:
        """Every record file in name order, its summary reused while the file is unchanged (size,
        mtime and inode): every file is stat'ed on every call, so a record another process or a
        git merge added is seen, and one that changed is parsed again. `resolve`: given the files
        the index does not know (name -> stat), the summaries of those it can tell without this
        parse (Ledger: from a check of every file, over every core and the travelling index);
        a file's summary is taken only while its stat is the one `resolve` was given. `files`:
        record_files' answer where the caller has just listed them (one scan for a whole command)."""
        with bulk():
            return self._entries(resolve, record_files(self.root) if files is None else files)

    def _entries(self, resolve, scan) -> list[Entry]:
        known = self._load() if self._files is None else self._files
        files = {}
        skipped = []
        root = self.root
        now = time.time_ns()
        racy: set[str] = set()
        unknown = {}
        get = known.get
        if not known:  # (a clone: every file is unknown)
            scan = scan if isinstance(scan, list) else list(scan)
            unknown = {name: st for name, st in scan if type(st) is not str}
            files = dict.fromkeys(unknown)
            skipped = [Entry(root, name, problem=st) for name, st in scan if type(st) is str] \
                if len(unknown) < len(scan) else []
        for name, st in scan if known else ():
            if type(st) is str:
                skipped.append(Entry(root, name, problem=st))
                continue
            old = get(name)
            if old is not None and old[0] == st.st_size and old[1] == st.st_mtime_ns and old[2] == st.st_ino:
                files[name] = old
            else:
                files[name] = None
                unknown[name] = st
        resolved = resolve(unknown) if resolve is not None and unknown else {}
        if resolved and len(resolved) == len(unknown):  # (a clone's index, every summary from the check)
            get = resolved.get  # (a summary is a non-empty list: `or` parses only a file that has none)
            files.update({name: [st.st_size, st.st_mtime_ns, st.st_ino, get(name) or summarize(root / name)]
                          for name, st in unknown.items()})
        else:
            for name, st in unknown.items():
                summary = resolved.get(name)
                files[name] = [st.st_size, st.st_mtime_ns, st.st_ino,
                               summary if summary is not None else summarize(root / name)]
        if unknown and now - newest(list(unknown.values())) < RACY_NS:  # (by C loops where none is racy)
            racy = {name for name, st in unknown.items() if now - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS}
        self._files = files
        if unknown or len(files) != len(known):  # else every file is one the index knew, as it knew it
            self._save(racy)
        # tuple.__new__: the namedtuple's own __new__ is a Python function (0.1 s per 100,000 entries)
        make = tuple.__new__
        problem = Entry._field_defaults["problem"]
        out = [make(Entry, (root, name, *summary, problem)) if type(summary) is list else Entry(root, name, problem=summary)
               for name, (_, _, _, summary) in sorted(files.items())]
        if skipped:
            out += skipped
            out.sort(key=lambda e: e.name)
        return out

    def saved_entries(self) -> list[Entry] | None:
        """The entries as the index last saved them, where no record can have come since: every
        record folder is one the index knows and was last changed more than RACY_NS before the
        save (records are never rewritten, so a new one always changes its folder). One stat per
        folder instead of one per file (10,000 records on the 2-core machine at a load of 5:
        0.07-0.13 s instead of 0.17-0.24 s). None where that cannot be told (no index saved, a
        folder new or changed since): then `entries()`. Files that are not records are left out."""
        files = None
        try:
            saved_ns = self.path.stat().st_mtime_ns
            folders = [f for f in os.scandir(self.root) if not f.name.startswith(".") and f.is_dir()]
            if any(f.stat().st_mtime_ns + RACY_NS >= saved_ns for f in folders):
                return None
            files = self._load()
        except OSError:
            return None
        known = {name.split("/", 1)[0] for name in files}
        if not files or any(f.name not in known for f in folders):
            return None
        return sorted((Entry(self.root, name, *summary) for name, (_, _, _, summary) in files.items()
                       if isinstance(summary, list)), key=lambda e: e.name)

    def _load(self) -> dict[str, list]:
        try:
            saved = recordfile.parse_json(self.path.read_bytes())
            files = saved["files"] if saved.get("format") == FORMAT else {}
            if all(map(_valid, files.values())):
                return files
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            pass  # missing, corrupt or another format: rebuilt from the records
        return {}

    def _save(self, racy: set[str]) -> None:
        """Write the index; the `racy` files (changed within RACY_NS) with size -1, so the next
        process parses them again."""
        files = {name: [-1, *v[1:]] if name in racy else v for name, v in self._files.items()} if racy else self._files
        save_derived(self.path, {"format": FORMAT, "files": files})  # a read-only ledger: kept in memory

