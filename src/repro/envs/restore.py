"""`repro replay --as-recorded`: a recorded run's code and packages, rebuilt here.

The code: a worktree of the recorded commit (or today's checkout, when it is that commit with
that same uncommitted change). The packages: the venv of the record's environment lock.
The parent stays today's repro; only the worker runs there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from repro import paths
from repro.envs import lock, pipconf, venvs, worktrees
from repro.envs.venvs import EnvError
from repro.ledger.record import view


@dataclass
class Restored:
    place: dict  # for run_job: {"python", "src"}
    git: dict  # the run record's `git`: the restored commit
    code: dict
    lock_text: str | None  # None: the record predates whole-environment locks, run in this environment
    info: dict = field(default_factory=dict)  # what the replay record keeps


def check(record: dict, ledger_root: Path, git_today: dict) -> str | None:
    """The record's lock, or EnvError saying why it cannot be replayed as recorded. None: a record
    from before whole-environment locks whose named package versions are all this environment's."""
    if why := worktrees.refuse_dirty(record, git_today):
        raise EnvError(why)
    digest = view(record).environment.env_hash
    if not digest:
        if (why := _named_versions_differ(record)) is None:
            return None  # the versions it names are today's: its code alone is restored
        raise EnvError(f"record {record['id']} names no whole environment (it predates environment.env_hash, "
                       f"ledger schema 2, or its worker never started) and {why}: nothing here can rebuild its "
                       "packages; replay it without --as-recorded")
    try:
        text = lock.load(ledger_root, digest, check=True)
    except lock.EditedLock as e:
        raise EnvError(f"record {record['id']}: {e}") from None
    if text is None:
        raise EnvError(f"record {record['id']}'s environment {digest[:12]} is not in {Path(ledger_root) / 'envs'}: "
                       f"copy envs/{digest}.txt from the ledger it was recorded in")
    return text


def _named_versions_differ(record: dict) -> str | None:
    """For a record from before whole-environment locks: None when every package version it names
    (`environment.packages`, a dozen) is the one this interpreter has, else what differs. repro's own
    is left out: its code is the restored commit's."""
    from importlib import metadata

    named = view(record).environment.packages
    if view(record).config.framework.python:
        return "its worker ran in another interpreter (framework.python), whose packages the parent cannot read"
    if not named:
        return "it names no package versions either"
    differ = []
    for name, version in sorted(named.items()):
        if lock.normalise(name) == "repro":
            continue
        try:
            here = metadata.version(name)
        except metadata.PackageNotFoundError:
            here = None
        if here != version:
            differ.append(f"{name} {version} (here {here or 'not installed'})")
    return f"the versions it names differ from this environment's: {', '.join(differ)}" if differ else None


def restore(record: dict, ledger_root: Path, git_today: dict, allow_substitutes: bool, log=print,
            wheelhouse: Path | None = None) -> Restored:
    from repro import gitinfo

    text = check(record, ledger_root, git_today)
    git = view(record).git
    if git.dirty:  # check() let it through: today's checkout holds that very change
        root, where = paths.repo_root(), "today's checkout (same commit, same uncommitted change)"
    else:
        root = worktrees.restore(paths.repo_root(), git.commit)
        where = f"worktree {root}"
    src = root / "src"
    restored_git = {k: record["git"].get(k) for k in ("commit", "dirty", "diff_sha256", "changed")}
    if text is None:  # from before whole-environment locks, and the versions it names are today's
        import sys

        named = len(view(record).environment.packages)
        log(f"  restored: code {git.commit[:12]} ({where}); packages: this environment's (the record predates "
            f"whole-environment locks; the {named} versions it names are all as here)")
        return Restored(
            place={"python": sys.executable, "src": src}, git={**restored_git, "restored_in": str(root)},
            code={"src_sha256": gitinfo.source_sha256(src / "repro")}, lock_text=None,
            info={"commit": git.commit, "env_hash": None, "worktree": str(root), "packages_from": "this environment",
                  "substitutes": {}})
    from repro.envs import workload_source  # a model of your package restored from git, as repro is

    venv, meta = venvs.ensure(workload_source.lock_without(text, record), bool(allow_substitutes), log=log,
                              wheelhouse=wheelhouse)
    log(f"  restored: code {git.commit[:12]} ({where}); packages {meta.env_hash[:12]} "
        + ("(cached venv)" if meta.reused else f"(venv built in {meta.build_s:.1f} s)")
        + (f", substitutes {meta.substitutes}" if meta.substitutes else ""))
    if (src_of := meta.sources or {}).get("wheelhouse"):  # pipconf.describe's words, or the wheelhouse's
        log(f"  package sources: the wheelhouse {src_of['wheelhouse']} only, offline (no index)")
    elif src_of:
        log("  package sources (pip's configuration, handed to uv): " + pipconf.one_line(src_of))
    now_text = lock.with_pins(text, list(meta.substitutes.values())) if meta.substitutes else text
    return Restored(
        place={"python": venvs.python_of(venv), "src": src},
        git={**restored_git, "restored_in": str(root)},
        code={"src_sha256": gitinfo.source_sha256(src / "repro")},
        lock_text=now_text,
        info={"commit": git.commit, "env_hash": meta.env_hash, "worktree": str(root), "venv": str(venv),
              "substitutes": meta.substitutes, "venv_reused": meta.reused, "build_s": meta.build_s,
              "content_checked": meta.content_checked, "sources": meta.sources},
    )
