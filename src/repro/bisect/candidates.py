"""What differs between two recorded runs, as candidates in order: the endpoints checked, then the
positions a bisection walks from GOOD (position 0) to BAD (position n).

Two ledger records of one workload (the same config hash) on one hardware class (the config's
hardware profile and the machine its record names: CPU model, usable cores, GPUs) may differ in
- repro's own code (`git.commit`),
- a user model's own repository (`workload_source.git.commit`, envs/workload_source.py),
- the packages (`environment.env_hash`, the whole-environment lock).
Every refusal is one line (BisectError) raised before anything runs or is written.

Packages before commits: where the locks differ, the path first walks the package versions
(bisect/packages.py `flat_walk`: coupled groups one after another, each through its released versions
between, every lock checked to install here), at GOOD's code, each position in a venv of its lock.
Then the commits between, `git log --first-parent GOOD..BAD` of each repository, oldest first (at
BAD's lock): the model's commits (with repro at GOOD's), then repro's (with the model at BAD's).
Every step changes one thing, so the first bad position names one version or one commit. A candidate's code is a cached worktree of its commit (envs/worktrees.py),
the one `repro replay --as-recorded` restores.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from repro.envs import workload_source
from repro.ledger.record import view


PACKAGES = "the packages"


class BisectError(Exception):
    """Why a bisection cannot start: one line, exit 2, nothing written."""


@dataclass(frozen=True)
class Candidate:
    position: int
    label: str  # "3f2a1bc commit 11/16: <subject>"
    commits: dict  # repository -> commit at this candidate (repro's tree, the workload_source repo)
    lock: str | None  # lock text the worker's environment is built from; None: this environment as is


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str


@dataclass
class Walk:
    """The positions 0..n (0: GOOD, n: BAD) and what a person reads before the first probe."""

    candidates: list[Candidate]
    ranges: list[tuple[str, str, str, list[Commit]]] = field(default_factory=list)  # (what, repo, good..bad, commits)
    packages: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (name, good, bad)

    @property
    def n(self) -> int:
        return len(self.candidates) - 1

    def lines(self) -> list[str]:
        out = []
        for what, repo, span, commits in self.ranges:
            if what == PACKAGES:
                out.append(f"package steps ({span}, {repo}): {len(commits)} after GOOD's, one version at a time")
                out += [f"  {c.subject}" for c in commits]
                continue
            out.append(f"commits of {what} ({repo}) {span}: {len(commits)} after GOOD's")
            out += [f"  {c.sha[:10]} {c.subject}" for c in commits]
        if self.packages:
            out.append(f"packages that differ ({len(self.packages)}):")
            out += [f"  {name} {a or '(absent)'} → {b or '(absent)'}" for name, a, b in self.packages]
        return out


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def hardware_class(record: dict) -> tuple:
    """The config's hardware profile and the machine the record names (preflight/estimate.py's)."""
    from repro.preflight.estimate import hardware_of

    return ((record.get("config") or {}).get("hardware") or {}).get("name"), hardware_of(record)


def endpoints(ledger, good_id: str, bad_id: str) -> tuple[dict, dict]:
    """The two records (ids or prefixes, a `started` id finds its end), checked: runs, ok, one
    workload, one hardware class. BisectError otherwise."""
    from repro.ledger import LedgerError

    out = []
    for side, prefix in (("GOOD", good_id), ("BAD", bad_id)):
        try:
            record = ledger.current(ledger.get(prefix))
        except LedgerError as e:
            raise BisectError(f"{side}: {e}") from None
        if view(record).kind != "run":
            raise BisectError(f"{side} {record['id']} is a {record.get('kind')!r} record, not a run: give the ids of two "
                              "runs (repro ledger list)")
        if view(record).status != "ok":
            raise BisectError(f"{side} {record['id']} ended {record.get('status')!r}, not ok: a bisection needs two "
                              "runs that ended ok")
        out.append(record)
    good, bad = out
    if view(good).id == view(bad).id:
        raise BisectError(f"GOOD and BAD are the same record {good['id']}: nothing to bisect")
    if view(good).config_hash != view(bad).config_hash:
        raise BisectError(f"GOOD {good['id']} and BAD {bad['id']} are different workloads (config hash "
                          f"{str(good.get('config_hash'))[:12]} vs {str(bad.get('config_hash'))[:12]}: "
                          f"`repro ledger diff {good['id'][:8]} {bad['id'][:8]}` shows how): bisect two runs of one config")
    if (a := hardware_class(good)) != (b := hardware_class(bad)):
        raise BisectError(f"GOOD {good['id']} and BAD {bad['id']} ran on different hardware ({_hw(a)} vs {_hw(b)}): "
                          "bisect two runs of one hardware class")
    return good, bad


def _hw(h: tuple) -> str:
    name, machine = h
    if not machine:
        return f"{name}, machine not recorded"
    cpu, cores, gpus = machine
    return f"{name}, {cpu}, {cores} cores" + (f", {', '.join(gpus)}" if gpus else "")


def _commit_exists(repo: Path, sha: str) -> bool:
    return _git(repo, "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0


def commits_between(repo: Path, good: str, bad: str, what: str) -> list[Commit]:
    """The commits after `good` up to `bad` (first parents, oldest first); BisectError where either is
    missing from `repo` or `good` is not an ancestor of `bad`."""
    for side, sha in (("GOOD", good), ("BAD", bad)):
        if not _commit_exists(repo, sha):
            raise BisectError(f"{side}'s commit {sha[:12]} of {what} is not in the repository at {repo}: `git fetch` "
                              "the branch that has it, then bisect again")
    if _git(repo, "merge-base", "--is-ancestor", good, bad).returncode:
        raise BisectError(f"GOOD's commit {good[:12]} of {what} is not an ancestor of BAD's {bad[:12]} (in {repo}): "
                          "a bisection walks one line of history; give GOOD the older run")
    out = _git(repo, "log", "--first-parent", "--reverse", "--format=%H%x00%s", f"{good}..{bad}")
    if out.returncode:
        raise BisectError(f"git could not list {good[:12]}..{bad[:12]} in {repo}: {out.stderr.strip()}")
    return [Commit(*line.split("\0", 1)) for line in out.stdout.splitlines() if line]


def _workload_git(record: dict) -> dict | None:
    return (record.get(workload_source.KEY) or {}).get("git")


def _lock(ledger_root: Path, record: dict) -> str | None:
    from repro.envs import lock

    digest = view(record).environment.env_hash
    return lock.load(ledger_root, digest) if digest else None


def path(ledger_root: Path, good: dict, bad: dict, wheelhouse: list[str] | None = None, log=print) -> Walk:
    """The positions from GOOD to BAD (module docstring), or BisectError: no difference, a commit
    missing, a dirty tree whose change the record does not hold; bisect/packages.py's PackagesError (an
    EnvError): a version that cannot be had for this Python and platform. `wheelhouse`: folders of wheels
    or `repro env pack` folders the package versions come from, offline (none: the index)."""
    from repro import paths
    from repro.envs import lock

    ours_a, ours_b = view(good).git.commit, view(bad).git.commit
    wl_a, wl_b = _workload_git(good), _workload_git(bad)
    env_a, env_b = (view(r).environment.env_hash for r in (good, bad))
    repro_moved = bool(ours_a and ours_b and ours_a != ours_b)
    model_moved = bool(wl_a and wl_b and wl_a.get("commit") != wl_b.get("commit"))
    lock_moved = bool(env_a and env_b and env_a != env_b)
    good_lock, bad_lock = _lock(ledger_root, good), _lock(ledger_root, bad)
    if lock_moved:
        for side, record, text in (("GOOD", good, good_lock), ("BAD", bad, bad_lock)):
            if text is None:
                digest = view(record).environment.env_hash
                raise BisectError(f"{side} {record['id']}'s environment {digest[:12]} is not in {Path(ledger_root) / 'envs'}: "
                                  f"copy envs/{digest}.txt from the ledger it was recorded in")
        good_lock, bad_lock = workload_source.lock_without(good_lock, good), workload_source.lock_without(bad_lock, bad)
    packages = []
    if lock_moved and good_lock and bad_lock:
        a, b = lock.versions(good_lock), lock.versions(bad_lock)
        packages = [(name, a.get(name), b.get(name)) for name in sorted(a.keys() | b.keys())
                    if a.get(name) != b.get(name) and lock.normalise(name) != "repro"]
    if not (repro_moved or model_moved or packages):
        same = [f"repro's commit {str(ours_a)[:12]}"]
        if wl_a:
            same.append(f"the model's commit {str(wl_a.get('commit'))[:12]}")
        same.append(f"lock {str(env_a)[:12]}" if env_a == env_b else "the same package versions")
        raise BisectError(f"no difference between GOOD {good['id']} and BAD {bad['id']} ({', '.join(same)}): "
                          "nothing to bisect (a gap between them is noise or the machine: repro calibrate)")
    for side, record in (("GOOD", good), ("BAD", bad)):
        src = record.get(workload_source.KEY) or {}
        if model_moved and (src.get("git") or {}).get("dirty"):
            raise BisectError(f"{side} {record['id']} ran its model from uncommitted changes to "
                              f"{', '.join(src['git'].get('changed', [])[:3])}: its code cannot be rebuilt; commit "
                              "the model before the runs you bisect")
        if repro_moved and view(record).git.dirty:
            raise BisectError(f"{side} {record['id']} ran repro from a dirty tree (commit {record['git']['commit'][:12]} "
                              "plus uncommitted changes): its code cannot be rebuilt; commit before the runs you bisect")
    ranges, steps = [], []  # steps: {repo: commit} of positions 1..n
    base = {}
    if wl_a:
        base["model"] = wl_a["commit"]
    if ours_a:
        base["repro"] = ours_a
    labels, locks = [], []
    if packages:  # packages before commits: every group's version steps (bisect/packages.py flat_walk), at GOOD's code
        from repro.bisect import packages as pk

        walk = pk.flat_walk(good_lock, bad_lock, pk.source(wheelhouse or None), log=log)
        for i in range(1, walk.n + 1):
            steps.append(dict(base))
            labels.append(walk.labels[i])
            locks.append(walk.locks[i])
        ranges.append((PACKAGES, f"lock {str(env_a)[:12]} → {str(env_b)[:12]}", f"{len(walk.groups)} group(s)",
                       [Commit("", label) for label in walk.labels[1:]]))
    end_lock = locks[-1] if locks else None
    if model_moved:
        top = Path(wl_a["toplevel"])
        found = commits_between(top, wl_a["commit"], wl_b["commit"], f"the model {good[workload_source.KEY]['target']}")
        ranges.append((f"the model {good[workload_source.KEY]['target']}", str(top),
                       f"{wl_a['commit'][:10]}..{wl_b['commit'][:10]}", found))
        for i, c in enumerate(found):
            base = {**base, "model": c.sha}
            steps.append(dict(base))
            locks.append(end_lock)
            labels.append(f"{c.sha[:7]} commit {i + 2}/{len(found) + 1} of the model: {c.subject}")
    if repro_moved:
        found = commits_between(paths.repo_root(), ours_a, ours_b, "repro")
        ranges.append(("repro", str(paths.repo_root()), f"{ours_a[:10]}..{ours_b[:10]}", found))
        for i, c in enumerate(found):
            base = {**base, "repro": c.sha}
            steps.append(dict(base))
            locks.append(end_lock)
            labels.append(f"{c.sha[:7]} commit {i + 2}/{len(found) + 1} of repro: {c.subject}")
    first = {k: v for k, v in (("model", (wl_a or {}).get("commit")), ("repro", ours_a)) if v}
    # Where only the code moved, every position runs in this environment, the endpoints too (the confirmation
    # measures both here, so what differs between positions is the code alone). Where the packages moved,
    # each position runs in a venv of its lock (GOOD's, each version step, BAD's), built once and cached.
    start = good_lock if packages else None
    candidates = [Candidate(0, f"GOOD {good['id'][:8]}", first, start)]
    candidates += [Candidate(i + 1, label, step, lk)
                   for i, (label, step, lk) in enumerate(zip(labels, steps, locks))]
    return Walk(candidates, ranges, packages)
