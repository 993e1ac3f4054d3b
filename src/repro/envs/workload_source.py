"""The source of a workload outside repro (`model._target_`): what the record keeps, what replay restores.

repro's own code is named by `git` and `code.src_sha256`; a model in your package is named here:
its module and file, the sha256 of its package's source files (every `*.py` under the top-level
package, or the one module), the installed distribution and version, and, where it lives in a
git checkout, that checkout's commit and dirty state (with the sha256 of the uncommitted change).
`repro replay` lists a changed source beside the code differences; `replay --as-recorded` puts a
worktree of the recorded commit first on the worker's path (or relies on the recorded version in
the rebuilt venv), or says why it cannot.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Mapping

from repro.blocks import typed

KEY = "workload_source"


@dataclass(frozen=True)
class Distribution:
    """The installed distribution a workload's package came from."""

    name: str | None = None
    version: str | None = None
    installed: str | None = None  # editable | local | index


@dataclass(frozen=True)
class GitState:
    """The git checkout a workload's source lives in: its commit, whether its files were changed, and
    where (`path` within `toplevel`); `worktree`: the cached worktree a bisection or replay ran it from."""

    toplevel: str | None = None
    commit: str | None = None
    dirty: bool | None = None
    diff_sha256: str | None = None
    changed: list = dataclasses.field(default_factory=list)
    path: str | None = None
    worktree: str | None = None
    raw: Mapping = dataclasses.field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Source:
    """A record's `workload_source` block, typed (the block itself, `raw`, is what records carry on)."""

    target: str | None = None
    module: str | None = None
    file: str | None = None
    root: str | None = None
    files: int | None = None
    sha256: str | None = None  # None: its source could not be read (`error`)
    distribution: Distribution | None = None
    git: GitState | None = None
    error: str | None = None
    restored_from: str | None = None
    raw: Mapping = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, node: Mapping | None) -> "Source":
        node = node or {}
        src = typed(cls, node)
        git = typed(GitState, src.git)
        return dataclasses.replace(src, distribution=typed(Distribution, src.distribution),
                                   git=git and dataclasses.replace(git, raw=src.git), raw=node)

    @property
    def dist(self) -> Distribution:
        return self.distribution or Distribution()


def block(model_cfg) -> dict:
    """{KEY: ...} for a run record (nothing for the zoo's models, whose source is repro's)."""
    target = getattr(model_cfg, "_target_", None)
    return {KEY: describe(target)} if target else {}


def _files(top: str) -> tuple[Path, list[Path]]:
    """The top-level package's folder and its `*.py` files (or a single module's file)."""
    spec = importlib.util.find_spec(top)
    if spec is None:
        raise ModuleNotFoundError(top)
    if spec.submodule_search_locations:
        root = Path(list(spec.submodule_search_locations)[0])
        return root, sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    return Path(spec.origin).parent, [Path(spec.origin)]


def files_sha256(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for path in files:
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _distribution(top: str) -> dict | None:
    try:
        dist = metadata.distribution(top)
    except metadata.PackageNotFoundError:
        names = metadata.packages_distributions().get(top) or []
        if not names:
            return None
        dist = metadata.distribution(names[0])
    direct = dist.read_text("direct_url.json") or ""
    kind = "editable" if '"editable": true' in direct else "local" if '"dir_info"' in direct else "index"
    return dataclasses.asdict(Distribution(dist.metadata["Name"], dist.version, kind))  # Name: the metadata's own key


def describe(target: str) -> dict:
    module = target.replace(":", ".").rpartition(".")[0]
    top = module.split(".")[0]
    try:
        root, files = _files(top)
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as e:
        return {"target": target, "error": f"{type(e).__name__}: {e}"}
    git = _git_state(root, files)
    return {"target": target, "module": module, "file": str(spec.origin if spec else root),
            "root": str(root), "files": len(files), "sha256": files_sha256(root, files),
            "distribution": _distribution(top), **({"git": git} if git else {})}


def _git_state(root: Path, files: list[Path]) -> dict | None:
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout

    try:
        top = Path(git("rev-parse", "--show-toplevel").strip())
        commit = git("rev-parse", "HEAD").strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    rel = [str(p.resolve().relative_to(top.resolve())) for p in files]
    status = git("status", "--porcelain", "--untracked-files=all", "--", *rel)
    diff = git("diff", "HEAD", "--binary", "--", *rel)
    changed = [line[3:] for line in status.splitlines() if line]
    return {"toplevel": str(top), "commit": commit, "dirty": bool(changed),
            "diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if changed else None,
            "changed": changed[:20], "path": str(root.resolve().relative_to(top.resolve()))}


# ---- replay ----------------------------------------------------------------------------------

def differences(record: dict) -> dict[str, list]:
    """{"workload": [(key, then, now)]} where the recorded workload's source differs from today's."""
    then = Source.of(record.get(KEY))
    if then.target is None:
        return {}
    now = Source.of(describe(then.target))
    rows = [(k, a, b) for k, a, b in (("sha256", then.sha256, now.sha256), ("file", then.file, now.file)) if a != b]
    for k, a, b in (("name", then.dist.name, now.dist.name), ("version", then.dist.version, now.dist.version)):
        if a != b:
            rows.append((f"distribution.{k}", a, b))
    git_then, git_now = then.git or GitState(), now.git or GitState()
    for k, a, b in (("commit", git_then.commit, git_now.commit), ("dirty", git_then.dirty, git_now.dirty)):
        if a != b:
            rows.append((f"git.{k}", a, b))
    return {"workload": rows} if rows else {}


def refusal(record: dict) -> str | None:
    """Why the recorded workload source cannot be restored (None: it can, or there is none)."""
    from repro.ledger.record import view

    if not record.get(KEY):
        return None
    src, rid = Source.of(record.get(KEY)), view(record).id
    if src.sha256 is None:
        return f"record {rid}'s workload {src.target} could not be read when it ran ({src.error})"
    if Source.of(describe(src.target)).sha256 == src.sha256:
        return None  # today's source is the recorded one
    git, dist = src.git, src.dist
    if git and not git.dirty:
        return None
    if dist.installed == "index":
        return None  # the rebuilt venv installs the recorded version
    why = ("ran from uncommitted changes to " + ", ".join(git.changed[:5])) if git else \
        f"was installed from a folder ({dist.installed}) outside any git checkout"
    return (f"record {rid}'s workload {src.target} {why}: the record holds only its sha256 "
            f"({src.sha256[:12]}), and today's source differs. Commit the workload (or install it from an "
            "index) before the runs you want to replay, or replay without --as-recorded")


def restore(record: dict, place: dict, log=print) -> tuple[dict, dict]:
    """`place` (run_job's: python, src) with the recorded workload source first on the worker's path,
    and the replay record's `workload_source` (what it ran: the recorded source, and where from)."""
    if not record.get(KEY):
        return place, {}
    src = Source.of(record.get(KEY))
    today = describe(src.target)
    if Source.of(today).sha256 == src.sha256:
        log(f"  workload {src.target}: today's source is the recorded one ({src.sha256[:12]})")
        return place, {KEY: today}
    git = src.git
    if not git:  # an index install: the rebuilt venv holds the recorded version
        log(f"  workload {src.target}: {src.dist.name}=={src.dist.version} from the recorded environment")
        return place, {KEY: {**src.raw, "restored_from": "venv"}}
    module_root, described = at_commit(src.raw, git.commit)
    there = Source.of(described)
    got, tree = there.sha256, there.git.worktree
    if got != src.sha256:
        from repro.envs.venvs import EnvError

        raise EnvError(f"the worktree of {git.commit[:12]} holds workload source {got[:12]}, not the recorded "
                       f"{src.sha256[:12]}: the record's git state does not name its source")
    log(f"  restored: workload {src.target} {git.commit[:12]} (worktree {tree}, source {got[:12]})")
    # run_job puts `src` first on the worker's PYTHONPATH: the worktree's module comes before the install
    return ({**place, "src": os.pathsep.join([str(place.get("src") or ""), str(module_root)])},
            {KEY: {**src.raw, "restored_from": str(module_root)}})


def at_commit(src: dict, commit: str) -> tuple[Path, dict]:
    """The recorded workload `src` (a record's KEY block, from a git checkout) at another commit of its
    repository: the folder to put first on the worker's path (a cached worktree of that commit,
    envs/worktrees.py), and the KEY block a run made there records (its source's sha256 there, the commit).
    EnvError where the commit is not in the repository."""
    from repro.envs import worktrees

    recorded = Source.of(src)
    git = recorded.git
    tree = worktrees.restore(Path(git.toplevel), commit)
    folder = tree / git.path
    package = (folder / "__init__.py").exists()
    module_root = folder.parent if package else folder
    files = sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts) if package \
        else [folder / Path(recorded.file).name]
    return module_root, {**src, "sha256": files_sha256(folder, files),
                         "git": {**git.raw, "commit": commit, "dirty": False, "diff_sha256": None, "changed": [],
                                 "worktree": str(tree)}}


def lock_without(text: str, record: dict) -> str:
    """The recorded lock without the workload's own distribution where its code comes from git
    (as repro's own does): an editable install is then no reason to refuse the environment."""
    src = Source.of(record.get(KEY))
    if not src.git or not src.dist.name:
        return text
    from repro.envs import lock

    name = lock.normalise(src.dist.name)
    return "".join(line for line in text.splitlines(keepends=True)
                   if not (line.startswith(("# editable: ", "# local: "))
                           and lock.normalise(line.split(": ", 1)[1].split("==")[0]) == name)
                   and lock.normalise(line.split("==")[0].split(" @ ")[0]) != name)
