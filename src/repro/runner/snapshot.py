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
PARTS = (("src/repro", "src"), ("src/hydra_plugins", "src"), ("conf", ""))  # (in the snapshot, from the root of)


@dataclass(frozen=True)
class Snapshot:
    root: Path  # <cache>/repro/snapshots/<id>
    id: str  # sha256 over every file's path and content
    files: dict  # path in the snapshot -> its sha256

    @property
    def src(self) -> Path:
        return self.root / "src"


def _cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repro" / "snapshots"


def _sources(src: Path, conf: Path) -> dict[str, Path]:
    """Snapshot path -> checkout file, for repro's source, its Hydra plugin and conf/."""
    out = {}
    for top, base in ((src / "repro", src), (src / "hydra_plugins", src), (conf, conf.parent)):
        for path in sorted(top.rglob("*")) if top.is_dir() else []:
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith((".pyc", ".egg-info")):
                out[("src/" if base == src else "") + str(path.relative_to(base))] = path
    return out


def manifest(src: Path | None = None, conf: Path | None = None) -> dict[str, str]:
    """Each file's sha256, by its path in a snapshot (of the checkout, by default)."""
    src, conf = src or paths.src_dir(checkout=True), conf or paths.conf_dir(checkout=True)
    return {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in _sources(src, conf).items()}


def _id(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def take() -> Snapshot:
    """The checkout's code and conf/ as they are now, copied once per content (atomically: a
    folder renamed into place, so a concurrent sweep of the same code finds it whole)."""
    src, conf = paths.src_dir(checkout=True), paths.conf_dir(checkout=True)
    files = manifest(src, conf)
    snap_id = _id(files)
    root = _cache() / snap_id[:16]
    if not (root / MANIFEST).exists():
        tmp = root.with_name(f".{root.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        for name, path in _sources(src, conf).items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, tmp / name)
        (tmp / MANIFEST).write_text(json.dumps({"id": snap_id, "files": files}))
        try:
            os.rename(tmp, root)
        except OSError:  # another sweep made the same snapshot first
            shutil.rmtree(tmp, ignore_errors=True)
    os.utime(root)  # its last use, for the clean-up
    _clean(keep=root)
    return Snapshot(root, snap_id, files)


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
