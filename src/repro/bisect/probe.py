"""A bisection's runs as a policy of the one sweep loop (loop/sweep.py): `Probes`.

Every round runs two jobs, in a random order (AB/BA pairs, restarting with each probe as
calibrate's trials do): the GOOD endpoint (position 0) and the candidate being probed. The first
"probe" is the confirmation, GOOD against BAD (position n): `decide.confirm` at its planned looks
says whether the gap reproduces here, and its ratio sets the threshold of every later call.
Each later probe is a candidate chosen by `search.Search.next`, judged at the planned looks by
`decide.classify` (like-good, like-bad, unknown; unknown runs more rounds, up to the cap), and
fed to the posterior. The loop stops once one position holds the posterior's threshold, when the
history is non-monotone (a like-good position after a like-bad one: said, not forced), when no
position is left to probe, when a run does not end ok, or before a round that would pass the budget.

A job's place (where its worker runs) is set in `round`, so it travels with the job to whatever
launcher adapter runs the round: the model's code a worktree of the candidate's commit first on
the worker's path, repro's own code a worktree of its commit where repro moved.
"""

from __future__ import annotations

import os
import time

from repro.bisect.candidates import BisectError, Candidate, Walk
from repro.envs import workload_source
from repro.ledger.record import view
from repro.loop.sweep import Job, Policy, repeat_field

CONFIRM = -1  # the probe number of the confirmation (GOOD against BAD)


def steady(record: dict) -> float | None:
    """A run's steady median step time (what the rounds are paired on)."""
    value = view(record).results.steady_median_s
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


class Places:
    """Where a position's worker runs, and what its records say of its code: made once per position."""

    def __init__(self, walk: Walk, good: dict, wheelhouse: list[str] | None = None, log=print):
        from repro import paths

        self.walk, self.good, self.cache, self.wheelhouse, self.log = walk, good, {}, wheelhouse, log
        self.src = good.get(workload_source.KEY) or {}
        self.repro_src = paths.src_dir()
        ranges = {what for what, *_ in walk.ranges}
        self.repro_moved = "repro" in ranges

    def at(self, candidate: Candidate, environment: bool = True) -> tuple[dict | None, dict]:
        """(place for run_job, the fields its records carry) at this candidate; `environment`: build the venv
        of its lock (False: the code alone, as the checks before any run make it)."""
        key = candidate.position
        if not environment:
            return self._make(candidate, False)
        if key not in self.cache:
            self.cache[key] = self._make(candidate)
        return self.cache[key]

    def _make(self, candidate: Candidate, environment: bool = True) -> tuple[dict | None, dict]:
        from repro import gitinfo, paths
        from repro.envs import worktrees

        fields, src_parts = {}, []
        if self.repro_moved and (commit := candidate.commits.get("repro")):
            tree = worktrees.restore(paths.repo_root(), commit)
            src_parts.append(str(tree / "src"))
            fields["git"] = {"commit": commit, "dirty": False, "diff_sha256": None, "changed": [],
                             "restored_in": str(tree)}
            fields["code"] = {"src_sha256": gitinfo.source_sha256(tree / "src" / "repro")}
        else:
            src_parts.append(str(self.repro_src))
        git = self.src.get("git")
        if git and (commit := candidate.commits.get("model")):
            module_root, described = workload_source.at_commit(self.src, commit)
            src_parts.append(str(module_root))
            fields[workload_source.KEY] = described
        python = None
        if candidate.lock is not None and environment:  # a venv of the position's lock (bisect/packages.py), built once and cached
            from repro.bisect import packages

            python = packages.environment(candidate.lock, packages.source(self.wheelhouse or None), log=self.log)
        place = {"python": python, "src": os.pathsep.join(src_parts)} if len(src_parts) > 1 or fields or python else None
        return place, fields


class Probes(Policy):
    """The bisection's rounds (module docstring). `state` (record.Bisection) holds what is known:
    the confirmation, the probes done, the posterior; `say` prints a line."""

    shuffled = True
    crossover = True
    reruns = True

    def __init__(self, state, config, overrides, host, cap: int, budget_s: float | None, say,
                 round_s: float | None = None, wheelhouse: list[str] | None = None):
        from repro.bisect import decide

        self.state, self.config, self.overrides = state, config, tuple(overrides)
        self.sweep_id, self.cap, self.budget_s, self.say = host.sweep_id, cap, budget_s, say
        self.looks = tuple(decide.looks(cap))
        self.places = Places(state.walk, state.good, wheelhouse, say)
        self.max_rounds = cap * (2 + state.max_probes)  # a bound for the progress; `more` decides
        self.start, self.round_start, self.round_s = time.monotonic(), time.monotonic(), round_s
        self.stop: str | None = None
        self.failure: str | None = None
        self._begin(state.next_probe())

    # -- the probe under way ---------------------------------------------------------------------
    def _begin(self, position: int | None) -> None:
        self.position = position
        self.index = 0
        self.ref: dict[int, dict] = {}
        self.cand: dict[int, dict] = {}
        if position is None:
            self.stop = self.state.why_stopped()

    @property
    def confirming(self) -> bool:
        return self.state.confirmation is None

    def _candidate(self) -> Candidate:
        return self.state.walk.candidates[self.position]

    def _job(self, candidate: Candidate, side: str) -> Job:
        place, fields = self.places.at(candidate)
        probe = CONFIRM if self.confirming else len(self.state.probes)
        name = f"GOOD {self.state.good['id'][:8]}" if side == "reference" else \
            (f"BAD {self.state.bad['id'][:8]}" if self.confirming else f"position {candidate.position}")
        group = f"{self.sweep_id}/{'confirm' if probe == CONFIRM else f'probe{probe}'}/{side}"
        return Job(self.config, self.overrides, name, {
            **fields,
            "bisect_probe": {"key": self.state.key, "probe": probe, "position": candidate.position, "side": side,
                       "label": candidate.label},
            "repeat": repeat_field(self.index, self.cap, group)}, place)

    def round(self, k: int) -> list[Job]:
        if self.position is None:
            return []
        walk = self.state.walk
        return [self._job(walk.candidates[0], "reference"), self._job(walk.candidates[self.position], "candidate")]

    def second_of_pair(self, k: int) -> bool:
        return self.index % 2 == 1  # pairs restart with each probe

    def ahead(self, k: int) -> int:
        return min([look for look in self.looks if look > self.index] or [self.index + 1]) - self.index

    def after(self, job: Job, record: dict, host) -> None:
        b, rep = job.fields["bisect_probe"], job.fields["repeat"]
        (self.ref if b["side"] == "reference" else self.cand)[rep["index"]] = record  # a rerun replaces its round

    def more(self, k: int, host) -> bool:
        now = time.monotonic()
        self.round_s, self.round_start = now - self.round_start, now
        if self.stop is not None:
            return False
        mine = [r for r in (self.ref.get(self.index), self.cand.get(self.index)) if r is not None]
        if len(mine) < 2 or any(view(r).status != "ok" or steady(r) is None for r in mine):
            bad = next((r for r in mine if view(r).status != "ok"), None)
            why = f"{bad.get('status')}: {(bad.get('error') or {}).get('reason', 'no reason recorded')}" if bad else \
                "a run recorded no steady step time"
            self.failure = self.stop = f"a run of position {self.position} did not end ok ({why})"
            self.state.stopped(self.stop, host)
            return False
        self.index += 1
        if (self.index in self.looks or self.index >= self.cap) and self._judge(host) and self.stop is not None:
            return False  # decided, nothing left to probe, or not reproduced
        if self.budget_s is not None and self.spent() + (self.round_s or 0) > self.budget_s:
            self.stop = f"the budget ({self.budget_s:g} s) would be passed by another round ({self.spent():.0f} s spent)"
            self.state.stopped(self.stop, host)
            return False
        return True

    def spent(self) -> float:
        return self.state.spent_before + time.monotonic() - self.start

    def _medians(self) -> tuple[list[float], list[float], list[str]]:
        rounds = sorted(i for i in self.ref if i in self.cand)
        ids = [view(r).id for i in rounds for r in (self.ref[i], self.cand[i])]
        return [steady(self.ref[i]) for i in rounds], [steady(self.cand[i]) for i in rounds], ids

    def _judge(self, host) -> bool:
        """At a look: the call; True when this probe ended (and the next one, if any, is chosen)."""
        from repro.bisect import decide

        good, cand, ids = self._medians()
        if self.confirming:
            call = decide.confirm(good, cand, max_rounds=self.cap)
            if call.more and self.index < self.cap:
                return False
            self.state.confirmed(call, ids, self.spent(), host)
            if call.outcome != "reproduces":
                self.stop = self.state.why_stopped()
                return True
            self._begin(self.state.next_probe())
            return True
        call = decide.classify(good, cand, self.state.gap, max_rounds=self.cap)
        if call.more and self.index < self.cap:
            return False
        self.state.probed(self.position, call, ids, self.spent(), host)
        self._begin(self.state.next_probe())
        return True

    def ended(self, host, rounds: int, error: BaseException | None) -> None:
        self.state.ended(host, error, self.spent())


def check_places(walk: Walk, good: dict, wheelhouse: list[str] | None = None, log=print) -> None:
    """Every position's code can be made (worktrees, the model's source at each commit), before any run:
    BisectError naming the first that cannot."""
    from repro.envs.venvs import EnvError

    places = Places(walk, good, wheelhouse, log)
    for candidate in walk.candidates:
        try:
            places.at(candidate, environment=False)
        except (EnvError, OSError) as e:
            raise BisectError(f"position {candidate.position} ({candidate.label}): {e}") from None
