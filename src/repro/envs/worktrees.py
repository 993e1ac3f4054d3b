"""The code of a recorded commit: a detached git worktree in the cache, made once and reused."""

from __future__ import annotations

import subprocess
from pathlib import Path

from repro.envs import cache
from repro.envs.venvs import EnvError


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def refuse_dirty(record: dict, today: dict) -> str | None:
    """Why the record's code cannot be restored (None: it can): a dirty tree's change is not stored,
    unless today's checkout is that same commit with that same change (the diff hashes agree)."""
    git = record.get("git") or {}
    if not git.get("commit"):
        return (f"record {record['id']} names no git commit (it ran outside a git checkout): its code cannot be "
                "restored; replay without --as-recorded to compare with today's code")
    if not git.get("dirty"):
        return None
    if today.get("commit") == git["commit"] and today.get("diff_sha256") == git.get("diff_sha256"):
        return None
    changed = ", ".join(git.get("changed", [])[:5]) or "?"
    return (f"record {record['id']} ran from a dirty tree (commit {git['commit'][:12]} plus uncommitted changes to "
            f"{changed}; diff sha256 {str(git.get('diff_sha256'))[:12]}): the record holds only the change's hash, "
            "so its code cannot be restored. To replay it exactly the record would need the change itself "
            "(`git diff HEAD --binary` and the untracked files, or a `git stash create` commit pushed somewhere); "
            "commit before running what you want to replay, or replay without --as-recorded")


def path_of(commit: str) -> Path:
    return cache.worktrees() / commit[:16]


def restore(repo: Path, commit: str) -> Path:
    """A worktree of `repo` at `commit` (made once under the cache folder)."""
    path = path_of(commit)
    cache.hold(path)  # in use by this process until it exits: `repro env prune` keeps it
    if path.is_dir() and _git(path, "rev-parse", "HEAD").stdout.strip() == commit:
        cache.touch(path)
        return path
    if _git(repo, "cat-file", "-e", f"{commit}^{{commit}}").returncode:
        raise EnvError(f"commit {commit[:12]} is not in the checkout at {repo}: `git fetch` the branch that has it, "
                       "then replay again")
    cache.remove(path)
    _git(repo, "worktree", "prune")
    path.parent.mkdir(parents=True, exist_ok=True)
    made = _git(repo, "worktree", "add", "--detach", str(path), commit)
    if made.returncode:
        raise EnvError(f"git could not make a worktree of {commit[:12]} at {path}: {made.stderr.strip()}")
    cache.touch(path)
    return path


def remove(path: Path) -> None:
    """A worktree and git's note of it (in whichever repository made it)."""
    common = _git(path, "rev-parse", "--git-common-dir").stdout.strip()
    cache.remove(path)
    if common:
        _git(Path(common), "worktree", "prune")
