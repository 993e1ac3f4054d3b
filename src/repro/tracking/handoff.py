"""What a session hands to the MLflow projector, kept in the ledger: `<ledger>/.mlflow-pending/`.

MLflow is a view of the ledger, so its writes need not hold up the command: a session that runs
its jobs in this process (repro, repro.run, replay) never imports MLflow. Each finished run
leaves an entry here (the worker's log and IR files, which the ledger record does not hold,
plus any tags added after the run, e.g. a replay's verdict); at its close the session adds the
sweep's entry (its report folder, trajectory record and status) and starts the projector
(tracking/projector.py), a process that outlives the command and writes them into MLflow.
Entries are removed once MLflow has them, so whatever is left (the projector killed, a store
that failed) is what `repro sync` finishes, under the same lock, with the same content.

What is written here is redacted (repro.redaction): no credential reaches these files. What is
read here is read as git reads its tree: only regular files inside the entry, none larger than
its bound; a symbolic link, a FIFO, a device or a socket (or a file over its bound) sets the
entry aside with its reason, as malformed JSON does, and is never followed or opened.

No MLflow import here: this module is on the run path.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Iterator, Mapping
from urllib.parse import urlparse

FOLDER = ".mlflow-pending"
ENTRY = "entry.json"  # written last, by rename: an entry without it is incomplete and left alone
TAGS = "tags.json"
LOCK = ".lock"
LOG = "projector.log"
FAILED = "failed.json"  # the projector's last failure, shown by the next session and `repro sync`
SWEEP_PREFIX = "sweep-"
BISECT_PREFIX = "bisect-"
REJECTED = "rejected"  # malformed entries, set aside with their reason (never fatal to the others)
REASON = "reason.txt"
TOLD = ".told"  # in a rejected entry: a command has named it once
KINDS = ("run", "sweep", "bisect")
JSON_LIMIT = 1 << 20  # entry.json, tags.json, failed.json, a reason: small by construction
FILE_LIMIT = 512 << 20  # a worker's log or an IR dump handed over with its run


def folder(ledger_root: str | Path) -> Path:
    return Path(ledger_root) / FOLDER


from repro.worker.machine_locks import (  # noqa: E402 - re-exported: the projector and drain use them here
    _register, at_work, machine_lock, open_window, projectors_at_work, quiet_turn)


class OddFile(OSError):
    """A path in the hand-over that is not a regular file within its bound: the reason, one line."""


def _kind(mode: int) -> str:
    return ("a symbolic link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else
            "a folder" if stat.S_ISDIR(mode) else "not a regular file")


def read_bytes(path: Path, limit: int = JSON_LIMIT) -> bytes:
    """A regular file's bytes, never following a symbolic link or opening anything else (a FIFO
    would block the reader for ever); OddFile (with the reason) where it is not one, or is over
    `limit` bytes; FileNotFoundError where it is gone."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)  # ELOOP on a link
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OddFile(f"{path.name} is {_kind(st.st_mode)}")
        if st.st_size > limit:
            raise OddFile(f"{path.name} holds {st.st_size} bytes, over the hand-over's bound of {limit}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise OddFile(f"{path.name} grew over the hand-over's bound of {limit} bytes")
        return data
    finally:
        os.close(fd)


def read_text(path: Path, limit: int = JSON_LIMIT) -> str:
    try:
        return read_bytes(path, limit).decode("utf-8", errors="replace")
    except OSError as e:
        if e.errno == errno.ELOOP and not isinstance(e, OddFile):  # O_NOFOLLOW met a symbolic link
            raise OddFile(f"{path.name} is a symbolic link") from None
        raise


def odd_file(entry: Path) -> str | None:
    """Why `entry` (a pending entry's folder) holds something other than regular files and its
    `ir/` folder, each within its bound (None: it holds only those). Nothing is followed or opened."""
    try:
        if not stat.S_ISDIR(os.lstat(entry).st_mode):
            return f"the entry is {_kind(os.lstat(entry).st_mode)}, not a folder"
        for folder, limit in ((entry, JSON_LIMIT), (entry / "ir", FILE_LIMIT)):
            if not os.path.lexists(folder):
                continue
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return f"{folder.relative_to(entry)} is {_kind(os.lstat(folder).st_mode)}, not a folder"
            for item in folder.iterdir():
                mode = os.lstat(item).st_mode
                if folder == entry and item.name == "ir" and stat.S_ISDIR(mode):
                    continue
                if not stat.S_ISREG(mode):
                    return f"{item.relative_to(entry)} is {_kind(mode)} (the hand-over reads only regular files)"
                bound = FILE_LIMIT if item.name == "worker.log" or folder != entry else limit
                if (size := os.lstat(item).st_size) > bound:
                    return f"{item.relative_to(entry)} holds {size} bytes, over the hand-over's bound of {bound}"
    except FileNotFoundError:
        return None  # gone meanwhile (another drain finished it): the caller finds it missing
    return None


def _write_json(path: Path, data: dict) -> None:
    """Written by rename, redacted (a failure's line names the store's URI, as MLflow printed it)."""
    from repro.redaction import redact_data

    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(redact_data(data)), encoding="utf-8")
    os.replace(tmp, path)


def add_run(ledger_root: str | Path, record_id: str, files: list[str] = (), worker_log: Path | None = None,
            owner: dict | None = None) -> Path:
    """A finished run's entry: the files its MLflow run gets beside the record (copied, since the
    run's temp folder is removed when the job ends); `owner`: its sweep's process, which its
    sweep's parent run is tagged with (`repro sync` closes that parent once the process is gone)."""
    from repro.redaction import redact

    entry = folder(ledger_root) / record_id
    (entry / "ir").mkdir(parents=True, exist_ok=True)
    if worker_log and Path(worker_log).exists():
        (entry / "worker.log").write_text(redact(Path(worker_log).read_text(encoding="utf-8", errors="replace")),
                                          encoding="utf-8")
    names = []
    for f in files:
        if Path(f).is_file():
            shutil.copyfile(f, entry / "ir" / Path(f).name)
            names.append(Path(f).name)
    _write_json(entry / ENTRY, {"kind": "run", "id": record_id, "ir": names, **({"owner": owner} if owner else {})})
    return entry


def add_tags(ledger_root: str | Path, record_id: str, tags: dict[str, str]) -> None:
    """Tags for a run's MLflow run, added after it was recorded (a replay's verdict): kept with
    its entry, or, where that was projected already, in a new entry (the drain finds the run
    complete in MLflow and adds the tags alone)."""
    entry = folder(ledger_root) / record_id
    if not (entry / ENTRY).exists():
        entry = add_run(ledger_root, record_id)
    try:
        old = json.loads(read_text(entry / TAGS)) if os.path.lexists(entry / TAGS) else {}
    except (OSError, ValueError):
        old = {}  # an odd or damaged tags file: replaced by these tags
    _write_json(entry / TAGS, {**old, **tags})


def add_sweep(ledger_root: str | Path, sweep_id: str, info: dict) -> Path:
    """A closed sweep's entry: what its MLflow parent run gets (report folder, trajectory record,
    status, tracking stores)."""
    entry = folder(ledger_root) / f"{SWEEP_PREFIX}{sweep_id}"
    entry.mkdir(parents=True, exist_ok=True)
    _write_json(entry / ENTRY, {"kind": "sweep", "id": sweep_id, **info})
    return entry


def add_bisect(ledger_root: str | Path, record_id: str, info: dict) -> Path:
    """A bisection's entry (repro bisect): its ledger record's MLflow parent, a child per probe, its
    report folder (`report_dir`). The parent is found by the bisection's key (drain.py): a later
    record of the same bisection updates it."""
    entry = folder(ledger_root) / f"{BISECT_PREFIX}{record_id}"
    entry.mkdir(parents=True, exist_ok=True)
    _write_json(entry / ENTRY, {"kind": "bisect", "id": record_id, **info})
    return entry


def _malformed(data, tags) -> str | None:
    """Why an entry's content cannot be projected (None: it can)."""
    if not isinstance(data, dict):
        return f"{ENTRY} holds a JSON {type(data).__name__}, not an object"
    if data.get("kind") not in KINDS:
        return f"{ENTRY} has kind {data.get('kind')!r}, not one of {', '.join(KINDS)}"
    if not isinstance(data.get("id"), str) or not data["id"]:
        return f"{ENTRY} names no id (a {data['kind']} entry needs the ledger id it projects)"
    if data["kind"] == "run" and not all(isinstance(n, str) for n in data.get("ir") or []):
        return f"{ENTRY}'s ir is not a list of file names"
    if data["kind"] == "sweep" and not isinstance(data.get("status"), str):
        return f"{ENTRY} of a sweep has no status"
    if tags is not None and not (isinstance(tags, dict) and all(isinstance(v, str) for v in tags.values())):
        return f"{TAGS} is not an object of string tags"
    return None


@dataclass(frozen=True)
class Pending:
    """One pending entry, read (`entries`): its `entry.json` as `add_run`, `add_sweep` or `add_bisect`
    wrote it, its `tags.json` merged in as `tags`; each default written once, here. `raw` is the JSON
    as stored (with `tags`): a sweep entry is written back from it (drain.write_reports), so keys this
    view does not know, and entries written before a key existed, keep their form."""

    kind: str  # one of KINDS (checked by `_malformed` before this is made)
    id: str  # the ledger id it projects (a sweep's: its sweep id)
    ir: tuple[str, ...] = ()  # a run's IR files under ir/
    owner: Mapping | None = None  # the sweep's process (lifeline.identity())
    tags: Mapping = field(default_factory=dict)  # tags added after the run (tags.json)
    status: str = ""  # a sweep's end (ok, failed, interrupted)
    trajectory: str | None = None  # a sweep's trajectory record
    report_dir: str | None = None  # the report folder of a sweep or a bisection
    write_report: bool = False  # a sweep's report announced, not yet written
    raw: Mapping = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, data: Mapping) -> "Pending":
        """The typed entry: each field the JSON holds (not null), the rest at their defaults."""
        names = {f.name for f in fields(cls)} - {"raw"}
        read = cls(**{k: v for k, v in data.items() if k in names and v is not None}, raw=data)
        return replace(read, ir=tuple(read.ir), write_report=bool(read.write_report))


def reject(entry: Path, why: str) -> Path:
    """Set a malformed entry aside, with its reason, under `rejected/` (kept, never projected)."""
    to = entry.parent / REJECTED / f"{entry.name}-{int(time.time())}"
    to.parent.mkdir(parents=True, exist_ok=True)
    os.replace(entry, to)
    if stat.S_ISDIR(os.lstat(to).st_mode):  # an entry that is a link is moved as the link, nothing written through it
        (to / REASON).unlink(missing_ok=True)
        (to / REASON).write_text(why + "\n", encoding="utf-8")
    return to


def entries(ledger_root: str | Path) -> list[tuple[Path, Pending]]:
    """The complete entries: runs first (a sweep's parent closes after its children), oldest first.
    An entry still being written (no entry.json yet) is left alone; a malformed one is set aside
    (`reject`), so that it stops no other."""
    base = folder(ledger_root)
    found = []
    for entry in base.iterdir() if base.is_dir() else []:
        if entry.name == REJECTED or entry.name.startswith(".") or not os.path.lexists(entry / ENTRY):
            continue
        try:
            why = odd_file(entry)
            if not why:
                data = json.loads(read_text(entry / ENTRY))
                tags = json.loads(read_text(entry / TAGS)) if os.path.lexists(entry / TAGS) else None
                why = _malformed(data, tags)
        except OddFile as e:
            data, tags, why = None, None, str(e)
        except ValueError as e:  # written by rename, so never half-written: damaged
            data, tags, why = None, None, f"not JSON: {e}"
        except OSError:
            continue  # gone meanwhile (another drain finished it)
        if why:
            try:
                reject(entry, why)
            except OSError:
                pass  # another drain set it aside first
            continue
        if tags is not None:
            data["tags"] = tags
        found.append((entry.stat().st_mtime, data["kind"] != "run", entry, data))
    return [(entry, Pending.of(data)) for _, _, entry, data in sorted(found, key=lambda t: (t[1], t[0]))]


def rejected(ledger_root: str | Path, untold: bool = False) -> list[tuple[Path, str]]:
    """The entries set aside, with their reasons (`untold`: only those no command has named yet)."""
    base = folder(ledger_root) / REJECTED
    found = []
    for entry in sorted(base.iterdir()) if base.is_dir() else []:
        if untold and (entry / TOLD).exists():
            continue
        try:
            found.append((entry, read_text(entry / REASON).strip()))
        except OSError:
            found.append((entry, "(no reason kept)"))
    return found


def rejected_line(ledger_root: str | Path, untold: bool = False) -> str | None:
    """One line naming the entries set aside (marking them told), or None where there are none."""
    found = rejected(ledger_root, untold)
    if not found:
        return None
    for entry, _ in found:
        if stat.S_ISDIR(os.lstat(entry).st_mode):  # never written through a link
            (entry / TOLD).touch()
    first, why = found[0]
    return (f"{len(found)} malformed MLflow hand-over entr{'y was' if len(found) == 1 else 'ies were'} set aside in "
            f"{first.parent} ({first.name}: {why}); the runs are in the ledger and `repro sync` puts them into MLflow")


def done(entry: Path) -> None:
    shutil.rmtree(entry, ignore_errors=True)


@contextmanager
def lock(ledger_root: str | Path, wait: bool = True) -> Iterator[bool]:
    """One projector (or `repro sync`) at a time per ledger; yields whether it holds the lock
    (always True with `wait`). The kernel drops it when the holder dies, however it dies."""
    base = folder(ledger_root)
    base.mkdir(parents=True, exist_ok=True)
    with open(base / LOCK, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def busy(ledger_root: str | Path) -> bool:
    """Whether a projector (or sync) holds this ledger's lock now."""
    if not (folder(ledger_root) / LOCK).exists():
        return False
    with lock(ledger_root, wait=False) as held:
        return not held


def wait_for_projectors(limit_s: float, say, tell_after_s: float = 2.0, poll_s: float = 0.1) -> dict | None:
    """Wait, at most `limit_s`, until no projector on this machine is at work (each holds
    `machine_lock` shared while it works); after `tell_after_s`, `say` which one and since when.
    Returns None once none is at work, else the one still at work when the wait gave up (the
    measured steps then run beside it, and the record says so). Polls a non-blocking lock: a
    blocking flock cannot be given a time limit."""
    start = time.monotonic()
    told = False
    with open(machine_lock(), "a") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f, fcntl.LOCK_UN)
                return None
            except BlockingIOError:
                pass
            waited = time.monotonic() - start
            if waited >= tell_after_s and not told:
                told = True
                who = (projectors_at_work() or [{}])[0]
                say(f"waiting for the MLflow projector {_who(who)} to finish before the measured steps "
                    f"(at most {limit_s:g} s: tracking.projector_wait_s)")
            if waited >= limit_s:
                who = (projectors_at_work() or [{}])[0]
                say(f"the MLflow projector {_who(who)} is still at work after {limit_s:g} s: the measured steps "
                    "run beside it (the record says so)")
                return {**who, "waited_s": round(waited, 1)}
            time.sleep(poll_s)


def _who(info: dict) -> str:
    if not info:
        return "(its pid is not known)"
    return (f"pid {info['pid']} (ledger {info['ledger']}, at work since "
            f"{time.strftime('%H:%M:%S', time.localtime(info['since']))})")


def _projector_env() -> dict:
    """This process's environment plus the real URIs it redacted (REAL_URIS_VAR): the records
    the projector reads name their stores redacted, and it must connect with the real ones.
    (Passed as the MLflow client's own MLFLOW_TRACKING_URI is: in the environment of our own child.)"""
    from repro import redaction

    try:
        handed = json.loads(os.environ.get(redaction.REAL_URIS_VAR) or "[]")
    except ValueError:
        handed = []
    real = sorted({*redaction.known_real(), *(u for u in handed if isinstance(u, str))})
    return {**os.environ, "PYTHONIOENCODING": "utf-8",  # its output is a log file: UTF-8 whatever the terminal's
            **({redaction.REAL_URIS_VAR: json.dumps(real)} if real else {})}


def start_projector(ledger_root: str | Path, *, writer_idle_s: float) -> int:
    """The ledger's pending entries handed to this machine's MLflow writer (tracking/writer.py,
    started where none is up; `writer_idle_s`: tracking.writer_idle_s, 0 for none), else to a
    projector of its own, detached (its own session: a Ctrl-C or the terminal closing does not
    reach it), its output appended to the pending folder's log; the pid of the one that took them.
    Either holds the ledger's lock from the moment this returns where it is free (a next command
    sees it busy), else waits for the one at work. A new sqlite store is made aside and put in place
    whole (tracking/mlflow_tracker.py), so no command waits for its creation."""
    base = folder(ledger_root)
    base.mkdir(parents=True, exist_ok=True)
    if writer_idle_s > 0:
        from repro.tracking import writer_socket

        pid = writer_socket.hand_over(ledger_root, writer_idle_s, _projector_env(), base / LOG)
        if pid is not None:
            return pid
    with open(base / LOCK, "a") as held, open(machine_lock(), "a") as shared, open(base / LOG, "ab") as log:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # the one at work holds it: the new one waits for it (projector.main)
        fcntl.flock(shared, fcntl.LOCK_SH)
        proc = subprocess.Popen([sys.executable, "-m", "repro.tracking.projector", str(Path(ledger_root)),
                                 str(held.fileno())],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, pass_fds=(held.fileno(), shared.fileno()),
                                env=_projector_env())
    try:  # named from now on, for a command that waits for it (the projector itself says so again)
        _register(proc.pid, ledger_root)
    except OSError:
        pass
    return proc.pid  # our copies of the lock files are closed: the locks are the projector's alone


def drain_inline(ledger_root: str | Path, timeout_s: float, say) -> bool:
    """The projector run here, to its end or at most `timeout_s` (then killed: what it did not
    write waits for the next drain or `repro sync`), for a round whose process a launcher started
    (submitit, SLURM), where no command outlives it to start one detached. True where it ended
    with nothing left; never raises."""
    base = folder(ledger_root)
    try:
        base.mkdir(parents=True, exist_ok=True)
        with open(base / LOG, "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "repro.tracking.projector", str(Path(ledger_root))],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=_projector_env())
        try:
            return proc.wait(timeout=timeout_s) == 0
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            say(f"MLflow: the projection of this round's runs took over {timeout_s:g} s and was stopped; "
                "`repro sync` finishes it (log: " + str(base / LOG) + ")")
            return False
    except OSError as e:
        say(f"MLflow: this round's runs could not be projected ({e}); `repro sync` puts them into MLflow")
        return False


def leftovers(ledger_root: str | Path) -> int:
    """Entries an earlier command handed over that no projector is at work on (one was killed,
    or its machine went down): the next projector, or `repro sync`, writes them."""
    return 0 if busy(ledger_root) else len(entries(ledger_root))


def new_sqlite_store(uri: str) -> bool:
    """Whether `uri` is a sqlite store whose database does not exist yet."""
    return uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).exists()


def unreachable(uri: str, timeout_s: float = 2.0) -> str | None:
    """Why the tracking store at `uri` cannot be reached, found without MLflow (a TCP connect to a
    server, the folder of a sqlite file); None where it looks reachable."""
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite" or parsed.scheme == "file" or not parsed.scheme:
        path = Path(parsed.path if parsed.scheme else uri)
        where = path.parent if parsed.scheme == "sqlite" else path
        while not where.exists() and where != where.parent:
            where = where.parent  # MLflow creates missing folders below an existing one
        return None if os.access(where, os.W_OK) else f"{where} is not writable"
    if parsed.hostname:
        port = parsed.port or {"https": 443, "http": 80}.get(parsed.scheme.split("+")[0])
        if port is None:
            return None
        try:
            with socket.create_connection((parsed.hostname, port), timeout=timeout_s):
                return None
        except OSError as e:
            return f"ConnectionError: {parsed.hostname}:{port}: {e.strerror or e}"
    return None


def record_failure(ledger_root: str | Path, uri: str, experiment: str, line: str, runs: int) -> None:
    _write_json(folder(ledger_root) / FAILED, {"uri": uri, "experiment": experiment, "error": line, "runs": runs})


def clear_failure(ledger_root: str | Path) -> None:
    (folder(ledger_root) / FAILED).unlink(missing_ok=True)


def recorded_failure(ledger_root: str | Path) -> dict | None:
    """The last projection's failure as recorded (None: the last one succeeded)."""
    try:
        failed = json.loads(read_text(folder(ledger_root) / FAILED))
    except (OSError, ValueError):
        return None
    return failed if isinstance(failed, dict) and {"uri", "experiment", "error", "runs"} <= set(failed) else None


def last_failure(ledger_root: str | Path) -> dict | None:
    """The background projection's last failure, while entries wait and no projector is at work."""
    failed = recorded_failure(ledger_root)
    return failed if failed and entries(ledger_root) and not busy(ledger_root) else None


def news(ledger_root: str | Path) -> list[str]:
    """What a new command says of the MLflow hand-over an earlier one left on this ledger: a
    projection that failed, entries a projector that ended early (killed, its machine down) left
    waiting, entries set aside as malformed (named once)."""
    from repro.redaction import redact

    lines = []
    waiting = 0 if busy(ledger_root) else len(entries(ledger_root))
    if waiting and (failed := recorded_failure(ledger_root)):
        lines.append(f"MLflow at {redact(failed['uri'])} (experiment {failed['experiment']!r}) failed while the last "
                     f"projection wrote to it: {failed['error']}. {failed['runs']} entries are only in the ledger; "
                     "once the store works, `repro sync` puts them into MLflow")
    elif waiting:
        lines.append(f"{waiting} entr{'y' if waiting == 1 else 'ies'} an earlier command handed to MLflow "
                     f"{'is' if waiting == 1 else 'are'} not there yet (its projector ended before writing them): "
                     "this command's projector writes them, or `repro sync` now")
    if line := rejected_line(ledger_root, untold=True):
        lines.append(line)
    return lines
