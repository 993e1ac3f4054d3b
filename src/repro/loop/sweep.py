"""The one sweep loop: which job runs when, each through the one per-job function (`run_job`).

A sweep is rounds; a round runs each of the sweep's configs once. A policy says how many rounds
there are and what each job's records carry:
- `Fixed`: `run.repeats=N`, N rounds (N = 1: a plain sweep), one look at the end;
- `repro.repeats.Auto`: `run.repeats=auto`, rounds until every pair is decided at a planned look;
- `repro.calibrate.Trials`: `repro calibrate`'s A/A trials, one config under two labels;
- `Listed`: the jobs as given (a replay), with the policy's own work before and after each.

The loop owns the order. Each round of a repeated sweep runs its configs in a random order drawn
from a seed that every record carries (`repeat.order_seed`, `repeat.position`), rounds in AB/BA
pairs (`order`): a fixed order lines a periodic effect of the machine, or of repro, up with one
config, and one A/A calibration measured that as a 5 % bias between identical configs (RMIT,
Abedi & Brecht 2017, randomise within every trial for the same reason); the pairing cancels a
position effect within each pair of rounds. The loop also starts the next job's
worker while the current one ends (the warm start), runs a round again when telemetry flagged it
(`verdict.max_reruns`: decided from the machine's state alone, before any step time is read),
and closes the sweep once, whatever ends it.

Whatever the launcher, the loop decides: it hands each round (and each rerun of one) to a launcher
adapter (loop/rounds.py: in this process by default; submitit's SLURM or local executor, joblib),
which runs the round's jobs in the loop's order and hands back their records.

    records = sweep.run(session, sweep.Fixed(plan.configs, repeats, session.sweep_id, session.run_name), seed)
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field, replace
from typing import Sequence

from repro.job.host import JobHost
from repro.ledger.record import view
from repro.loop.step_counts import StepCounts


@dataclass(frozen=True)
class Job:
    """One job of a round: its config, its override list, the run's name, the fields its records
    carry (`repeat`, `calibration`, `replay_of`, ...) and, for a replay as recorded, where it runs."""

    config: object  # repro.config.schema.Config
    overrides: tuple[str, ...]
    name: str
    fields: dict = field(default_factory=dict)
    place: dict | None = None


class Policy:
    """What rounds a sweep runs. `round(k)` lists round k's jobs (in the order of the plan; the
    loop shuffles them when `shuffled`); `more(k, host)` says, after round k ran, whether another
    one runs; `ended` runs once, whatever ended the sweep (`error` is None when it ended well)."""

    shuffled = True
    crossover = True  # rounds in AB/BA pairs (`order`); False: each round drawn on its own
    max_rounds = 1
    reruns = True  # a round telemetry flags runs again (where a verdict reads the rounds)
    places_known = True  # each job's place (interpreter, code) is in its Job as listed; False: `before` decides it

    def round(self, k: int) -> Sequence[Job]:
        raise NotImplementedError

    def second_of_pair(self, k: int) -> bool:
        """Whether round k runs the order of round k - 1 reversed (`order`'s AB/BA pairs)."""
        return k % 2 == 1

    def more(self, k: int, host: JobHost) -> bool:
        return k + 1 < self.max_rounds

    def ahead(self, k: int) -> int:
        """How many rounds from round k on run whatever their records say (the loop may hand them to a
        launcher at once, `at_once`): 1 where each round's records decide whether another runs."""
        return 1

    def before(self, job: Job, host: JobHost) -> Job:
        """A job about to run (a replay restores its recorded code here)."""
        return job

    def after(self, job: Job, record: dict, host: JobHost) -> None:
        """A job that ended (a replay judges it here)."""

    def ended(self, host: JobHost, rounds: int, error: BaseException | None) -> None:
        """The sweep ended: after `rounds` complete rounds, by `error` or by the policy's choice."""


def order_seed(sweep_id: str) -> int:
    """The seed of a sweep's round orders: from its id, which every record carries."""
    return int(hashlib.sha256(sweep_id.encode()).hexdigest()[:8], 16)


def order(n: int, seed: int | None, k: int, crossover: bool = True, second: bool | None = None) -> list[int]:
    """Round k's order of n configs, drawn from (seed, k) alone. Rounds come in pairs: an even
    round is a random permutation, the odd round after it the same order reversed (`crossover`):
    an AB/BA crossover, the design clinical trials use against period effects, so a position
    effect (one calibration measured position 1 1.4 % faster than position 0) cancels within every
    pair of rounds instead of only on average over many, where at two rounds an order drawn twice
    alike (A B, A B) turned it into a false "faster". `crossover=False`: every round drawn on its
    own (`repro calibrate --order random`, to measure what the pairing buys). Seed None: the fixed
    serpentine (0 1 …, … 1 0, …) of earlier versions (`--order fixed`). `second`: whether round k
    is the second of its pair (default: k odd; a policy whose own rounds restart, as calibrate's
    trials do, says so from its count, `Policy.second_of_pair`)."""
    positions = list(range(n))
    second = k % 2 == 1 if second is None else second
    if seed is None:
        return positions if not second else positions[::-1]
    if crossover and second:
        return order(n, seed, k - 1, second=False)[::-1]
    random.Random(seed * 1_000_003 + k).shuffle(positions)
    return positions


def repeat_field(k: int, count: int, group: str, **more) -> dict:
    """A repeated job's `repeat` field, built here alone: its round, the rounds planned, its config's
    group, and what its policy adds (auto's plan). The loop adds its position in the round and the
    seed the round's order came from (`_positioned`), and a rerun's attempt and the runs it replaces."""
    return {"index": k, "count": count, "group": group, **more}


def configs_round(configs: Sequence[tuple[object, Sequence[str]]], k: int, count: int, sweep_id: str, name,
                  repeated: bool = True, **more) -> list[Job]:
    """Round k of a sweep's configs (`Fixed`, repro/repeats.py `Auto`): a job each, in the plan's
    order, with its `repeat` field (`repeat_field`; config c's group is sweep_id/c) where `repeated`."""
    return [Job(config, tuple(overrides), name(config, overrides),
                {"repeat": repeat_field(k, count, f"{sweep_id}/{c}", **more)} if repeated else {})
            for c, (config, overrides) in enumerate(configs)]


class Fixed(Policy):
    """`run.repeats=N`: N rounds of the plan's configs (N = 1: each once, in the plan's order)."""

    def __init__(self, configs: Sequence[tuple[object, Sequence[str]]], repeats: int, sweep_id: str, name):
        self.configs, self.max_rounds, self.sweep_id, self.name = list(configs), repeats, sweep_id, name
        self.shuffled = repeats > 1
        self.reruns = repeats > 1 and len(self.configs) > 1  # rounds a verdict reads: a pair in each

    def ahead(self, k: int) -> int:
        return self.max_rounds - k

    def round(self, k: int) -> list[Job]:
        return configs_round(self.configs, k, self.max_rounds, self.sweep_id, self.name, repeated=self.max_rounds > 1)


class Listed(Policy):
    """The jobs as given, once each, in that order."""

    shuffled = reruns = False

    def __init__(self, jobs: Sequence[Job]):
        self.jobs = list(jobs)

    def round(self, k: int) -> list[Job]:
        return self.jobs


def _positioned(job: Job, position: int, seed: int | None, attempt: int, replaces: list[str]) -> Job:
    """The job with its place in the round in its `repeat` field (shuffled rounds) and, for a rerun,
    the attempt number and the runs it replaces."""
    rep = job.fields.get("repeat")
    if rep is None:
        return job
    rep = {**rep, "position": position, **({"order_seed": seed} if seed is not None else {})}
    if attempt:
        rep.update(rerun=attempt, replaces=list(replaces))
    return replace(job, fields={**job.fields, "repeat": rep})


def _ordered(policy: Policy, k: int, seed: int | None) -> list[Job]:
    jobs = list(policy.round(k))
    return [jobs[i] for i in order(len(jobs), seed, k, policy.crossover, policy.second_of_pair(k))] \
        if policy.shuffled else jobs


def run(host: JobHost, policy: Policy, seed: int | None, max_reruns: int = 0, launcher=None) -> list[dict]:
    """Run the policy's rounds in `host`, each round handed to `launcher` (loop/rounds.py; None: in
    this process, one job at a time); the sweep's records. A launcher that runs rounds at the same
    time (`at_once` > 1: rounds on several SLURM nodes) gets as many at once as the policy runs
    whatever their records say (`Policy.ahead`), once every config's step count is resolved; their
    reruns follow, round by round. Interrupted or failed: `policy.ended` and the host's close run
    (what was recorded stays), then it is re-raised."""
    from repro.loop import rounds as adapters

    launcher = launcher or adapters.InProcess()
    at_once = max(1, launcher.at_once)
    state = _Loop(host, policy, seed, launcher, max_reruns)
    rounds = 0
    try:
        first = _ordered(policy, 0, seed)  # its worker starts now, while the sweep's display and first record are made
        if launcher.in_process:
            host.warm.upcoming = _upcoming(policy, first, -1, 0, seed)
            host.warm.start_next()
        host.expect(state.planned)
        while True:
            jobs = _ordered(policy, rounds, seed)
            width = 1 if state.counts.pending(jobs) else max(1, min(at_once, policy.ahead(rounds)))
            state.wave(range(rounds, rounds + width))
            rounds += width
            if not policy.more(rounds - 1, host):
                break
    except BaseException as e:  # what was recorded stays recorded; the sweep is closed once
        host.warm.upcoming = []
        policy.ended(host, rounds, e)
        launcher.close()
        host.close(interrupted=isinstance(e, KeyboardInterrupt))
        raise
    launcher.close()
    policy.ended(host, rounds, None)
    return host.close()


class _Loop:
    """The loop's bookkeeping across rounds: job numbers, the runs planned, reruns spent, step counts."""

    def __init__(self, host: JobHost, policy: Policy, seed: int | None, launcher, max_reruns: int):
        self.host, self.policy, self.seed, self.launcher, self.max_reruns = host, policy, seed, launcher, max_reruns
        self.job_no, self.reruns, self.counts = 0, 0, StepCounts()
        self.planned = sum(len(policy.round(k)) for k in range(policy.max_rounds))

    def hooks(self, jobs: list[Job], k: int):
        from repro.loop import rounds as adapters

        def before(job: Job) -> Job:
            return self.counts.take(self.policy.before(job, self.host))

        def after(job: Job, record: dict) -> None:
            self.counts.resolve(job, record)
            self.policy.after(job, record, self.host)

        return adapters.Hooks(before, after, lambda i: _upcoming(self.policy, jobs, i, k, self.seed))

    def placed(self, jobs: list[Job], attempt: int, replaces: list[str]) -> list[Job]:
        return [_positioned(job, i, self.seed if self.policy.shuffled else None, attempt, replaces)
                for i, job in enumerate(jobs)]

    def wave(self, ks: range) -> None:
        """Rounds `ks` handed to the launcher at once (one: as it always was), then each one's reruns."""
        from repro.loop import rounds as adapters

        batches = []
        for k in ks:
            jobs = _ordered(self.policy, k, self.seed)
            batches.append((k, jobs, self.placed(jobs, 0, []), self.job_no))
            self.job_no += len(jobs)
        if len(batches) == 1:
            results = [self.launcher.run_round(self.host, placed, no, self.hooks(jobs, k))
                       for k, jobs, placed, no in batches]
        else:
            self.host.say(f"rounds {ks[0] + 1}–{ks[-1] + 1} at the same time ({self.launcher.name}: "
                          f"{len(batches)} allocations, each round on one node)")
            results = self.launcher.run_rounds(self.host, [(placed, no, self.hooks(jobs, k))
                                                           for k, jobs, placed, no in batches])
        for (k, jobs, placed, no), result in zip(batches, results):
            self.settled(k, jobs, adapters.settle(self.host, placed, no, result))

    def settled(self, k: int, jobs: list[Job], records: list[dict]) -> None:
        """Round k's records: run again while telemetry flags it (`verdict.max_reruns`)."""
        from repro.loop import rounds as adapters
        from repro.loop.rerun import flag

        attempt, replaces = 0, []
        while True:
            # a run resumed from an earlier sweep (run.resume=true) is kept as it was: its flag reruns nothing
            why = [f"{job.name}: {w}" for job, r in zip(jobs, records) if "resumed_from" not in r and (w := flag(r))]
            if not why or not self.policy.reruns or self.reruns >= self.max_reruns or \
                    any(view(r).status != "ok" for r in records) or any(view(r).repeat.side_by_side for r in records):
                return  # side by side (joblib n_jobs > 1): they flag each other, and no verdict reads them
            self.reruns, attempt = self.reruns + 1, attempt + 1
            replaces += [view(r).id for r in records]
            self.host.say(f"round {k + 1} runs again ({self.reruns} of verdict.max_reruns={self.max_reruns}): "
                          f"telemetry flagged it before its step times were read ({'; '.join(why)})")
            self.planned += len(jobs)
            self.host.expect(self.planned)
            placed, no = self.placed(jobs, attempt, replaces), self.job_no
            self.job_no += len(jobs)
            records = adapters.settle(self.host, placed, no,
                                      self.launcher.run_round(self.host, placed, no, self.hooks(jobs, k)))


def _upcoming(policy: Policy, jobs: list[Job], i: int, k: int, seed: int | None) -> list:
    """The jobs after job i of round k that may run, next first, as many as the warm start starts
    at once (job/warm.py AHEAD): their workers start early, each in its job's place. One job at most
    from a round that runs only if the records say so (past `policy.ahead(k)`: an auto sweep's next
    round after a look): a sweep that stops there leaves one worker unused, not AHEAD (each a
    framework's import: ~2 s of CPU for torch, ~5 s for JAX on the 2-core reference machine)."""
    from repro.job.warm import AHEAD

    if not policy.places_known:  # a worker started ahead would run other code than its job: none starts
        return []
    certain = k + max(1, policy.ahead(k))  # rounds before it run whatever their records say
    upcoming, rest = [], list(jobs[i + 1:])
    while len(upcoming) < AHEAD:
        if not rest:
            k += 1
            rest = list(_ordered(policy, k, seed)) if k < policy.max_rounds else []
            if not rest:
                break
        upcoming.append(rest.pop(0))
        if k >= certain:
            break
    return upcoming
