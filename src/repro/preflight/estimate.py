"""What a sweep will cost, from the ledger, before it starts: `--dry-run`, the sweep's first line
and the `verdict.budget_s` check all read this one estimate.

A config's history is its `ok` runs in its ledger with the same config hash (which leaves out
`run.repeats`, `verdict.*` and where a run is written: config/spec.py) on this hardware (the same
CPU model, usable cores and GPUs, as each record's `environment` says). One run of it is
estimated part by part: each part of the worker's wall (job/wall_split.py: start, build, first
step, steady, ...; `worker` for records from before the split), the wall those parts leave
(`rest`) and the parent's own share (from the run's `started` record to its end record): the
median of each part over its newest HISTORY runs, summed. Every job but a sweep's first finds its
worker started ahead (job/warm.py); the first one's start is added once (`first_start_s`: the
median start of past first jobs above the config's). A config without history has no figure,
and the sweep's estimate says for how many jobs it has none: it is never guessed. The ledger's
index (ledger/index.py) names the runs; only theirs are read. The jobs run one after another
(the sweep loop), so a sweep's estimate is the sum of its jobs'; rounds run again because
telemetry flagged them (`verdict.max_reruns`) and the sweep's close are not in it.

    est = estimate.of(plan)      # per config: its runs and the median seconds of each part of one
    est.summary()                # "estimate 52 s for 12 jobs (4 configs × 3), medians of 9 past runs ..."
    estimate.admit(plan)         # the same, or ConfigError where verdict.budget_s cannot hold the sweep
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from repro.config import ConfigError, config_hash
from repro.config.schema import as_dict
from repro.ledger.record import RecordError, view
from repro.preflight.verdict import auto_rounds
from repro.usertext import duration

# The parts in the order a run goes through them (job/wall_split.py's, then what is not the worker's).
ORDER = ("worker", "start", "data", "build", "setup", "first_step", "steady", "results", "profile", "handover",
         "rest", "parent")
HISTORY = 9  # the newest ok runs of a config on this hardware that make its estimate
READ_AT_MOST = 40  # ok runs of a config read, newest first, to find those (others may be other hardware's)
SOURCE = "medians of past runs on this hardware"


@dataclass(frozen=True)
class ConfigCost:
    """One config of the sweep: its hash, its runs in this sweep, the past runs its estimate comes
    from, the median seconds of each part of one run ({}: no history) and the median start of
    those that were the first job of their sweep (None: none was)."""

    config_hash: str
    runs: int
    past: int = 0
    parts: dict = field(default_factory=dict)
    first_start_s: float | None = None

    @property
    def per_run_s(self) -> float | None:
        return sum(self.parts.values()) if self.parts else None


@dataclass(frozen=True)
class Estimate:
    """The sweep's configs in the plan's order. `rounds`: each config's runs (run.repeats=N: N;
    auto: at most verdict.max_repeats); `budget_s`: verdict.budget_s (None: no budget); `checks`:
    whether the jobs run one after another in this process, so that a budget can be held to it;
    `reruns`: the rounds that may run again (verdict.max_reruns, where the sweep reruns)."""

    configs: tuple[ConfigCost, ...]
    rounds: int
    auto: bool = False
    budget_s: float | None = None
    checks: bool = True
    reruns: int = 0

    @property
    def jobs(self) -> int:
        return sum(c.runs for c in self.configs)

    @property
    def known(self) -> tuple[ConfigCost, ...]:
        return tuple(c for c in self.configs if c.parts)

    @property
    def unknown_jobs(self) -> int:
        return sum(c.runs for c in self.configs if not c.parts)

    @property
    def past(self) -> int:
        return sum(c.past for c in self.configs)

    @property
    def first_extra_s(self) -> float:
        """The sweep's first worker starts cold: its start beyond a run's usual one, once."""
        extra = [c.first_start_s - c.parts.get("start", 0.0) for c in self.known if c.first_start_s is not None]
        return max(0.0, statistics.median(extra)) if extra else 0.0

    @property
    def round_s(self) -> float:
        """A round of the configs with history, after the first."""
        return sum(c.per_run_s for c in self.known)

    @property
    def first_round_s(self) -> float:
        return self.round_s + self.first_extra_s

    @property
    def total_s(self) -> float:
        """Every planned run of the configs with history (auto: at most verdict.max_repeats rounds)."""
        return sum(c.per_run_s * c.runs for c in self.known) + self.first_extra_s

    def parts_s(self) -> dict[str, float]:
        """Where the estimated seconds go, part by part, over every planned run with history."""
        out: dict[str, float] = {}
        for c in self.known:
            for part, s in c.parts.items():
                out[part] = out.get(part, 0.0) + s * c.runs
        if self.first_extra_s:
            out["start"] = out.get("start", 0.0) + self.first_extra_s
        return out

    def summary(self) -> str:
        """One line: the estimate (or that there is none), what it covers, and the budget."""
        n, missing, k = self.jobs, self.unknown_jobs, len(self.configs)
        source = f"medians of {self.past} past run{'s' * (self.past != 1)} on this hardware"
        if not self.known:
            text = f"no history for {n} of {n} job{'s' * (n != 1)} on this hardware: no estimate"
        elif self.auto:
            text = (f"estimate {duration(self.first_round_s)} a round, {duration(self.total_s)} at auto's "
                    f"{self.rounds} rounds, {source}")
            if missing:
                text += f"; no history for {k - len(self.known)} of {k} configs"
        elif missing:
            text = (f"estimate {duration(self.total_s)} for the {n - missing} jobs with history, no history "
                    f"for {missing} of {n} jobs; {source}")
        else:
            text = f"estimate {duration(self.total_s)} for {n} job{'s' * (n != 1)}, {source}"
        return text + self._budget_note()

    def rerun_note(self) -> str | None:
        """What a round run again costs (telemetry flagged it: loop/sweep.py; its first worker
        starts cold, as a sweep's first does); never in the estimate."""
        if not self.reruns or not self.known:
            return None
        return (f"a round telemetry flags runs again: {'at least ' * bool(self.unknown_jobs)}"
                f"+{duration(self.first_round_s)} each, at most verdict.max_reruns={self.reruns}")

    def _budget_note(self) -> str:
        if self.budget_s is None:
            return ""
        budget = f"verdict.budget_s={self.budget_s:g}"
        if not self.checks:
            return f"; {budget} not checked: these jobs do not run one after another here"
        if self.refusal() is not None:
            return ""  # said by the refusal
        if not self.known or self.unknown_jobs:
            return f"; {budget} cannot be checked"
        if self.total_s <= self.budget_s:
            return f"; within {budget}"
        if self.auto:  # no new round once the budget is spent (repro/repeats.py)
            return f"; {budget} allows about {self.fitting_rounds()} rounds"
        return ""

    def fitting_rounds(self) -> int:
        """How many rounds verdict.budget_s holds (0: not even one)."""
        if self.budget_s is None or self.first_round_s > self.budget_s:
            return 0
        return 1 + int((self.budget_s - self.first_round_s) // self.round_s) if self.round_s > 0 else self.rounds

    def refusal(self) -> str | None:
        """Why verdict.budget_s cannot hold this sweep: the estimate and the rounds that would fit
        (fewer rounds, never fewer steps). None where it can, or where that cannot be told (no
        history; the configs with history alone, a lower bound, within it)."""
        if self.budget_s is None or not self.checks or not self.known:
            return None
        budget, first, then = self.budget_s, self.first_round_s, self.round_s
        partial = bool(self.unknown_jobs)
        about = "at least" if partial else "about"
        whose = (f"the {len(self.known)} of {len(self.configs)} configs with history" if partial
                 else f"its {len(self.configs)} config{'s' * (len(self.configs) != 1)}")
        if first > budget:
            return (f"verdict.budget_s={budget:g} is less than one round of this sweep: {about} "
                    f"{duration(first)} ({whose} once each, {SOURCE}); raise verdict.budget_s to "
                    f"{math.ceil(first)} or more, or sweep fewer configs")
        if self.auto or self.total_s <= budget:
            return None  # auto: no new round once the budget is spent (repro/repeats.py)
        fit = self.fitting_rounds()
        no_verdict = " (one run per config: no verdict)" if fit == 1 else ""
        return (f"verdict.budget_s={budget:g} cannot hold this sweep: {self.rounds} rounds take {about} "
                f"{duration(self.total_s)} ({duration(then)} a round of {whose}, {SOURCE}); "
                f"{'at most ' if partial else ''}run.repeats={fit} fits{no_verdict}, or raise verdict.budget_s "
                f"to {math.ceil(self.total_s)}")


def ordered(parts: dict[str, float]) -> list[tuple[str, float]]:
    """(part, seconds) in the order a run goes through them."""
    return sorted(parts.items(), key=lambda kv: (ORDER.index(kv[0]) if kv[0] in ORDER else len(ORDER), kv[0]))


# ---- reading the ledger ----------------------------------------------------------------------

def hardware_here() -> tuple:
    """This machine as a record's `environment` describes one: CPU model, usable cores, GPUs."""
    from repro import hardware

    return hardware.cpu_model(), len(os.sched_getaffinity(0)), tuple(sorted(g["name"] for g in hardware.accelerators()))


def hardware_of(record: dict) -> tuple | None:
    """(CPU model, usable cores, GPUs) of the machine a record ran on; None where it does not say."""
    try:
        env = view(record).environment
    except RecordError:  # an `environment` that is not an object: says nothing
        return None
    cpu = env.cpu
    if not isinstance(cpu, dict) or not cpu:
        return None
    return cpu.get("model"), cpu.get("affinity", cpu.get("cores")), \
        tuple(sorted(g.get("name") for g in env.gpus or [] if isinstance(g, dict)))


def _at(created: str | None) -> float | None:
    try:
        return datetime.fromisoformat(created).timestamp() if created else None
    except (TypeError, ValueError):
        return None


def parts_of(record: dict, started: str | None) -> dict[str, float] | None:
    """The seconds of each part of one recorded run (None: a record that says nothing of its
    wall). `started`: the time of its `started` record, for the parent's share."""
    rec = view(record)
    wall = rec.wall_s
    if not isinstance(wall, (int, float)) or wall <= 0:
        return None
    try:
        split = rec.wall_split
    except RecordError:  # a `wall_split` that is not an object: as if none
        split = None
    if split is not None and isinstance(split.parts, dict) and split.parts:
        parts = {k: float(v) for k, v in split.parts.items()}
        parts["rest"] = max(0.0, float(split.rest_s or 0.0))
    else:  # recorded before the wall was split
        parts = {"worker": float(wall)}
    begin, end = _at(started), _at(rec.created)
    if begin is not None and end is not None:
        parts["parent"] = max(0.0, end - begin - wall)
    return parts


def _first_job(record: dict) -> bool:
    """The first job of a sweep (a run outside any sweep is none)."""
    return bool(record.get("sweep")) and view(record).sweep.job == 0


def cost(chash: str, runs: int, past: list[tuple[dict, bool]]) -> ConfigCost:
    """A config's cost from its past runs' parts (each with whether it was its sweep's first job)."""
    split = [(p, first) for p, first in past if "worker" not in p]
    past = split or past  # where some runs have the split, those: parts of one kind
    if not past:
        return ConfigCost(chash, runs)
    keys = {k for p, _ in past for k in p}
    parts = {k: statistics.median(p.get(k, 0.0) for p, _ in past) for k in sorted(keys)}
    firsts = [p["start"] for p, first in past if first and "start" in p]
    return ConfigCost(chash, runs, len(past), parts, statistics.median(firsts) if firsts else None)


def history(ledger_dir: str | Path, hashes: set[str], here: tuple) -> dict[str, list[tuple[dict, bool]]]:
    """{config hash: (parts, first job of its sweep) of each of its newest ok runs on this
    hardware, at most HISTORY}, from `ledger_dir`."""
    from repro.ledger import recordfile
    from repro.ledger.index import Index

    root = Path(ledger_dir)
    if not hashes or not root.is_dir():
        return {}
    # The index alone (ledger.store would cost 20-30 ms more to import before the first worker
    # starts), as saved where no record came since (no stat of every file); a file that is not a
    # record is skipped here, and named by the sweep's own reads.
    index = Index(root)
    saved = index.saved_entries()
    entries = [e for e in (index.entries() if saved is None else saved) if not e.problem]
    entries = list({e.id: e for e in entries}.values())  # the same record in two folders: once
    created = {e.id: e.created for e in entries}
    ok = sorted((e for e in entries if e.kind == "run" and e.status == "ok" and e.config_hash in hashes),
                key=lambda e: e.created, reverse=True)
    out: dict[str, list[tuple[dict, bool]]] = {}
    read: dict[str, int] = {}
    for e in ok:
        runs = out.setdefault(e.config_hash, [])
        if len(runs) >= HISTORY or read.get(e.config_hash, 0) >= READ_AT_MOST:
            continue
        read[e.config_hash] = read.get(e.config_hash, 0) + 1
        try:
            record = recordfile.load(e.path)
        except recordfile.NotARecord:
            continue
        if hardware_of(record) == here and (parts := parts_of(record, created.get(e.prev))) is not None:
            runs.append((parts, _first_job(record)))
    return out


def of(plan, here: tuple | None = None) -> Estimate:
    """The estimate of a checked plan (preflight.plan) from its ledger(s); `here`: this machine
    (hardware_here(), read where a ledger exists)."""
    first = plan.jobs[0]
    auto = auto_rounds(plan.jobs)
    rounds = first.verdict.max_repeats if auto else plan.repeats
    hashes = [config_hash(as_dict(c)) for c, _ in plan.configs]
    by_dir: dict[str, set[str]] = {}
    for (config, _), h in zip(plan.configs, hashes):
        by_dir.setdefault(str(config.ledger.dir), set()).add(h)
    found: dict[str, list] = {}
    for ledger_dir, wanted in by_dir.items():
        if Path(ledger_dir).is_dir():
            here = hardware_here() if here is None else here
            for h, runs in history(ledger_dir, wanted, here).items():
                found.setdefault(h, []).extend(runs)
    configs = tuple(cost(h, rounds, found.get(h, [])) for h in hashes)
    reruns = first.verdict.max_reruns if len(configs) > 1 and (auto or rounds > 1) else 0  # loop/sweep.py
    return Estimate(configs, rounds, auto, first.verdict.budget_s, True, reruns)  # the loop runs every launcher's rounds


def admit(plan, here: tuple | None = None) -> Estimate:
    """The plan's estimate; ConfigError (exit 2, before the first job) where verdict.budget_s
    cannot hold the sweep, naming the estimate and how many rounds would fit."""
    est = of(plan, here)
    if (why := est.refusal()) is not None:
        raise ConfigError(why)
    return est
