"""A sweep is one snapshot: the code and conf/ its jobs run are fixed at its start.

`take()` copies repro's source (`src/repro`, `src/hydra_plugins`) and `conf/` into a
content-addressed folder under the cache (`<cache>/repro/snapshots/<sha256[:16]>/`, made once
per content: a later sweep of the same code reuses it). `use(snap)` points this process and
every process it starts at it: `REPRO_SNAPSHOT` (read by `paths.src_dir()` and
`paths.conf_dir()`, so workers run from its src/ and Hydra composes from its conf/, in a
launcher's job processes too), `PYTHONPATH`, and the `__path__` of repro's packages already
imported (the parent's own later imports come from it). Editing the checkout while a sweep runs
then changes nothing the sweep runs; `changed(snap)` at the close names what moved meanwhile.
`running(snap)` does the same for one block and then restores the process (the Python API).

Why a copy and not a git stash-commit in a worktree: the snapshot must hold uncommitted and
untracked changes as they are (a dirty run ran exactly them), must work outside git (a wheel,
a copy), and copying ~1 MB of source takes milliseconds, where a worktree is a checkout that
leaves git state behind. Snapshots are small: those unused for a week are removed, beyond the
newest 20.

A snapshot is what its records name: before each job `ensure_active()` checks every file of the
running snapshot against its manifest (a cache clean, a full disk or another sweep's cleanup may
have taken it meanwhile; a file this process hashed is read again only where its stat moved since,
as git's index does: `_known_sha`, and a later process of the same snapshot starts from the
signatures kept in its folder: `CHECKED`) and puts back what is missing or changed, from the bytes
this process copied (`take` keeps them) or from the checkout where its file still hashes the same;
else the job fails naming the snapshot. A worker refuses to run code imported from anywhere but the
folder it was given (worker/worker.py), so the checkout's code never runs under a snapshot's name.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from repro import paths

ENV = "REPRO_SNAPSHOT"
MANIFEST = "manifest.json"
KEEP, KEEP_DAYS = 20, 7
HELD = 4  # snapshots whose bytes a process keeps (~1.5 MB each), to rebuild them
REPAIRS, REPAIR_PAUSE_S = 6, 0.05  # rebuilds of a snapshot a job tries, the pause before the second (doubling)
PARTS = (("src/repro", "src"), ("src/hydra_plugins", "src"), ("conf", ""))  # (in the snapshot, from the root of)


@dataclass(frozen=True)
class Snapshot:
    root: Path  # <cache>/repro/snapshots/<id>
    id: str  # sha256 over every file's path and content
    files: dict  # path in the snapshot -> its sha256

    @property
    def src(self) -> Path:
        return self.root / "src"


class SnapshotError(OSError):
    """The sweep's snapshot cannot be written, or is gone (or changed) and cannot be rebuilt."""


# The bytes `take` copied, by snapshot id: what a snapshot taken in this process is rebuilt from.
_HELD: dict[str, dict[str, bytes]] = {}


def _cache() -> Path:
    return paths.cache_root() / "snapshots"


def _sources(src: Path, conf: Path) -> dict[str, Path]:
    """Snapshot path -> checkout file, for repro's source, its Hydra plugin and conf/, in path order.
    Listed on every check (`take`, `ensure_active`, `changed`), so by os.scandir itself: its entries
    say what is a file or a folder without a stat of each, and the names are joined as strings (the
    os.walk with isfile and relpath it replaces took 8-10 ms for the checkout's 269 files on the
    2-core reference machine). __pycache__ is not walked into, nor a linked folder (as os.walk)."""
    out: dict[str, Path] = {}

    def walk(folder: str, name: str) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:  # gone, or not a folder: nothing of it is listed
            return
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    walk(entry.path, f"{name}{entry.name}/")
            elif not entry.name.endswith((".pyc", ".egg-info")) and entry.is_file():
                out[name + entry.name] = Path(entry.path)

    for top, name in ((src / "repro", "src/repro/"), (src / "hydra_plugins", "src/hydra_plugins/"),
                      (conf, f"{conf.name}/")):
        walk(str(top), name)
    return dict(sorted(out.items()))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# What this process last read of a file, by path: the file's stat signature then, and its sha256.
# `changed` (the checkout at the close) and `ensure_active` (the snapshot before each job) read
# again only the files whose signature moved since, as git's index does. A signature is kept only
# where the file's last change (its ctime, which no utime can set back) lies RACY_S or more before
# it was read: a write in the same clock tick as the read could leave the signature as it was (git's
# "racy" entries), so a file changed that recently is read again next time.
_READ: dict[str, tuple[tuple, str]] = {}
RACY_S = 2.0


def _signature(path: Path | str) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _read(path: Path | str) -> tuple[bytes, str]:
    """A file's bytes and their sha256, its signature kept for `_known_sha` (raises OSError)."""
    sig, read_at = _signature(path), time.time_ns()
    with open(path, "rb") as f:
        data = f.read()
    sha = _sha(data)
    if sig is not None and sig[3] <= read_at - RACY_S * 1e9:
        _READ[str(path)] = (sig, sha)
    else:
        _READ.pop(str(path), None)
    return data, sha


def _known_sha(path: Path | str) -> str | None:
    """A file's sha256 (None: it cannot be read), read again only where it moved since this process
    last read it."""
    known = _READ.get(str(path))
    if known is not None and known[0] == _signature(path):
        return known[1]
    try:
        return _read(path)[1]
    except OSError:
        _READ.pop(str(path), None)
        return None


# The signatures a check found matching the manifest, kept in the snapshot's folder for the next
# process of the same snapshot: its first check then stats each file where it would read and hash
# it (~12 ms for 269 files on every command's way to its first worker, against ~3 ms). As git's
# index: only what _READ holds is written (a file whose last change lay RACY_S before its read) and
# only where its sha was the manifest's; a file replaced, rewritten or touched moves its ctime, which
# no utime sets back, and is read again. An index that cannot be read is no index.
CHECKED = ".checked.json"
_CHECKED: dict[str, dict[str, list[int]]] = {}  # snapshot folder -> its index as this process last read or wrote it


def _trust_checked(root: Path, files: dict[str, str]) -> None:
    """The snapshot's index read into _READ, once per process (an entry this process read itself wins)."""
    if str(root) in _CHECKED:
        return
    try:
        kept = json.loads((root / CHECKED).read_text())
    except (OSError, ValueError):
        kept = None
    held = {}
    if isinstance(kept, dict):
        for name, sig in kept.items():
            if name in files and isinstance(sig, list) and len(sig) == 4 and all(isinstance(v, int) for v in sig):
                _READ.setdefault(f"{root}{os.sep}{name}", (tuple(sig), files[name]))
                held[name] = sig
    _CHECKED[str(root)] = held


def _keep_checked(root: Path, files: dict[str, str]) -> None:
    """The signatures that matched the manifest, written to the snapshot's index where they differ
    from what it holds (a file read again since, a racy one left out); a failure costs the next
    process its reads, nothing else."""
    sigs = {}
    base = f"{root}{os.sep}"
    for name, sha in files.items():
        known = _READ.get(base + name)
        if known is not None and known[1] == sha:
            sigs[name] = list(known[0])
    if not sigs or sigs == _CHECKED.get(str(root)):
        return
    try:
        _put(root / CHECKED, json.dumps(sigs).encode())
    except OSError:
        return
    _CHECKED[str(root)] = sigs


def manifest(src: Path | None = None, conf: Path | None = None) -> dict[str, str | None]:
    """Each file's sha256, by its path in a snapshot (of the checkout, by default); None: gone since it was listed."""
    src, conf = src or paths.src_dir(checkout=True), conf or paths.conf_dir(checkout=True)
    return {name: _known_sha(path) for name, path in _sources(src, conf).items()}


def _id(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def take() -> Snapshot:
    """The checkout's code and conf/ as they are now, copied once per content (atomically: a
    folder renamed into place, so a concurrent sweep of the same code finds it whole)."""
    src, conf = paths.src_dir(checkout=True), paths.conf_dir(checkout=True)
    blobs, files = {}, {}
    for name, path in _sources(src, conf).items():
        try:
            blobs[name], files[name] = _read(path)
        except OSError as e:  # gone since the listing (an editor's save), or unreadable
            raise SnapshotError(f"cannot read the checkout's {path}: {e.strerror or e}") from None
    snap_id = _id(files)
    root = _cache() / snap_id[:16]
    _HELD[snap_id] = blobs
    for old in list(_HELD)[:-HELD]:  # the newest few: a Python session takes one per sweep
        del _HELD[old]
    try:
        if not (root / MANIFEST).exists():
            _write_whole(root, snap_id, blobs, files)
        os.utime(root)  # its last use, for the clean-up
    except OSError as e:
        raise SnapshotError(_unwritable(root, e)) from None
    _clean(keep=root)
    return Snapshot(root, snap_id, files)


def _unwritable(root: Path, e: OSError) -> str:
    return (f"cannot write the sweep's code snapshot at {root}: {e.strerror or e}. Make its cache folder "
            f"writable, or point XDG_CACHE_HOME at one that is (snapshots go to $XDG_CACHE_HOME/repro/snapshots)")


def _write_whole(root: Path, snap_id: str, blobs: dict[str, bytes], files: dict[str, str]) -> None:
    """The snapshot's folder written beside its place and renamed into it (a concurrent sweep of the
    same code finds it whole, or makes it first)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = root.with_name(f".{root.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for name, data in blobs.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(data)
    _compile(tmp / "src")
    (tmp / MANIFEST).write_text(json.dumps({"id": snap_id, "files": files}))
    try:
        os.rename(tmp, root)
    except OSError:  # another sweep made the same snapshot first
        shutil.rmtree(tmp, ignore_errors=True)


def _compile(src: Path) -> None:
    """Bytecode for the snapshot's modules, written once with it (0.2 s for ~190 files on the 2-core
    reference machine): every process of its sweeps imports them, and where PYTHONDONTWRITEBYTECODE
    is set (container images often set it) each process would otherwise compile repro's source as
    it imports it: 0.1 s of the parent's start and of every worker's. py_compile writes whatever
    that variable says; it only stops the import system writing. An optimisation: where it fails,
    Python compiles on import as before."""
    import compileall

    try:
        compileall.compile_dir(str(src), quiet=2)
    except Exception:  # noqa: BLE001
        pass


def ensure_active() -> bool:
    """The running sweep's snapshot (REPRO_SNAPSHOT) whole, as its manifest names it, before a job
    runs from it; True if it had to be rebuilt (a worker started ahead of this moment may have run
    without it). Raises SnapshotError naming it when it cannot be rebuilt.

    A rebuild is checked again, as the first check was: a cache clean (`rm -rf`) still walking the
    folder removes what the rebuild wrote, or the folder a file was being written into (ENOENT), so
    the snapshot is rebuilt again, after a pause that lets the clean end, until a check finds it
    whole (REPAIRS times at most; then the last failure is named)."""
    root = os.environ.get(ENV)
    if not root:
        return False
    root = Path(root)
    snap_id, files = _recorded(root)
    if snap_id is None:
        raise SnapshotError(f"the sweep's code snapshot {root} is gone, and this process does not know its "
                            "content: its jobs cannot run the code their records name; run the sweep again")
    failed: OSError | None = None
    for attempt in range(REPAIRS + 1):
        whole, bad = _damage(root, files)
        if not bad:
            _keep_checked(root, files)
            _touch(root)
            return attempt > 0
        if attempt == REPAIRS:
            break
        if attempt:
            time.sleep(REPAIR_PAUSE_S * 2 ** (attempt - 1))
        blobs = {name: data for name in bad if (data := _recorded_bytes(snap_id, name, files[name])) is not None}
        lost = sorted(set(bad) - set(blobs))
        if lost:
            raise SnapshotError(
                f"the sweep's code snapshot {snap_id[:12]} ({root}) lost {', '.join(lost[:5])}"
                f"{f' and {len(lost) - 5} more' if len(lost) > 5 else ''} while the sweep ran, and neither this "
                "process nor the checkout holds that content any more: the job does not run other code under "
                "its name; run the sweep again")
        try:
            _repair(root, snap_id, blobs, files, whole)
            failed = None
        except OSError as e:
            failed = e
    if failed is not None:
        raise SnapshotError(_unwritable(root, failed))
    raise SnapshotError(
        f"the sweep's code snapshot {snap_id[:12]} ({root}) was changed again each of the {REPAIRS} times it was "
        f"rebuilt ({', '.join(bad[:3])}{' …' if len(bad) > 3 else ''} last): another process keeps removing or "
        "writing it; stop what cleans $XDG_CACHE_HOME/repro/snapshots while sweeps run, then run the sweep again")


def _damage(root: Path, files: dict[str, str]) -> tuple[bool, list[str]]:
    """Whether the snapshot's manifest is gone (it is rebuilt whole), and the files that are not as
    the manifest names them."""
    whole = not (root / MANIFEST).exists()
    if whole:
        return True, sorted(files)
    _trust_checked(root, files)
    base = f"{root}{os.sep}"  # names joined as strings: a Path per file was a third of a check's time
    return False, sorted(name for name, sha in files.items() if _known_sha(base + name) != sha)


def _repair(root: Path, snap_id: str, blobs: dict[str, bytes], files: dict[str, str], whole: bool) -> None:
    """What `_damage` named written back: the folder whole (renamed into place), or file by file."""
    _CHECKED.pop(str(root), None)  # its index goes with the folder or names what was replaced
    if whole:
        shutil.rmtree(root, ignore_errors=True)
        _write_whole(root, snap_id, blobs, files)
        return
    for name, data in blobs.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        _put(root / name, data)


def _put(path: Path, data: bytes) -> None:
    """One file replaced atomically (written beside it, then renamed over it); a write that fails
    leaves no partial file behind, and raises."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise


def _recorded(root: Path) -> tuple[str | None, dict[str, str]]:
    """The snapshot's id and manifest: from its folder, else from what this process took."""
    try:
        data = json.loads((root / MANIFEST).read_text())
        return data["id"], data["files"]
    except (OSError, ValueError, KeyError):
        for snap_id, blobs in _HELD.items():
            if snap_id.startswith(root.name):
                return snap_id, {name: _sha(data) for name, data in blobs.items()}
        return None, {}


def _recorded_bytes(snap_id: str, name: str, sha: str) -> bytes | None:
    """A file's content as the snapshot recorded it: the bytes this process copied, else the
    checkout's file if it still hashes the same."""
    if (data := _HELD.get(snap_id, {}).get(name)) is not None and _sha(data) == sha:
        return data
    base = paths.conf_dir(checkout=True).parent if name.startswith("conf/") else paths.src_dir(checkout=True)
    path = base / (name.removeprefix("src/") if not name.startswith("conf/") else name)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if _sha(data) == sha else None


def _touch(root: Path) -> None:
    try:
        os.utime(root)  # in use: the clean-up of another sweep passes it over
    except OSError:
        pass


def use(snap: Snapshot) -> None:
    """This process, and every process it starts, imports repro and composes conf/ from `snap`
    (in place of the checkout, or of the snapshot an earlier sweep of this process used)."""
    new = str(snap.src)
    olds = [str(paths.src_dir(checkout=True)), *([str(p.src)] if (p := active()) else [])]
    os.environ[ENV] = str(snap.root)
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in olds[1:]]
    os.environ["PYTHONPATH"] = os.pathsep.join([new, *path])
    sys.path[:] = [new, *(p for p in sys.path if p not in olds[1:])]
    for name, module in list(sys.modules.items()):
        if (name == "repro" or name.startswith("repro.")) and hasattr(module, "__path__"):
            module.__path__[:] = [_moved(p, olds, new) for p in module.__path__]


@contextmanager
def running(snap: Snapshot) -> Iterator[Snapshot]:
    """`use(snap)` for the duration of a block, then this process as it was: a sweep started from
    Python (`repro.run`, `repro.sweep`) leaves no snapshot behind for the caller's later work."""
    packages = {name: list(m.__path__) for name, m in sys.modules.items()
                if (name == "repro" or name.startswith("repro.")) and hasattr(m, "__path__")}
    saved_env = {k: os.environ.get(k) for k in (ENV, "PYTHONPATH")}
    saved_path = list(sys.path)
    use(snap)
    try:
        yield snap
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        sys.path[:] = saved_path
        for name, path in packages.items():
            if name in sys.modules:
                sys.modules[name].__path__[:] = path


def _moved(path: str, olds: list[str], new: str) -> str:
    for old in olds:
        if path == old or path.startswith(old + os.sep):
            return new + path[len(old):]
    return path


def active() -> Snapshot | None:
    """The snapshot this process runs (`use`), read back from the environment."""
    root = os.environ.get(ENV)
    if not root or not (Path(root) / MANIFEST).exists():
        return None
    data = json.loads((Path(root) / MANIFEST).read_text())
    return Snapshot(Path(root), data["id"], data["files"])


def changed(snap: Snapshot) -> list[str]:
    """The files of the checkout that differ from the snapshot now (edited, added or removed)."""
    now = manifest()
    return sorted(name for name in set(now) | set(snap.files) if now.get(name) != snap.files.get(name))


def _clean(keep: Path) -> None:
    """Snapshots unused for KEEP_DAYS, beyond the newest KEEP, are removed (never `keep`)."""
    try:
        found = sorted((p for p in _cache().iterdir() if p.is_dir() and not p.name.startswith(".")),
                       key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in found[KEEP:]:
        if old != keep and time.time() - old.stat().st_mtime > KEEP_DAYS * 86400:
            shutil.rmtree(old, ignore_errors=True)
