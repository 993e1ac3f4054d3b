"""`run.repeats=auto`: rounds of fresh workers until every pair of the sweep is decided.

A policy of the sweep loop (loop/sweep.py): round k runs every config of the sweep once, in
that round's random order. After a round, the comparison of the records so far is built
(report/comparison.py, the same code that renders the table) and, at a planned look
(`report.verdict.looks`), its verdicts are read: the sweep stops once every pair is "faster" or
"equivalent" at that look. The looks (after rounds 3, 5, 7, 10 and the last: `verdict.looks`) spend alpha by the rule
report/verdict.py states (alpha·t², Lan & DeMets's power family), so
stopping at the first decided look keeps the false-"faster" rate at 5 %. It also stops at
`verdict.max_repeats` rounds, before a round that would start past `verdict.budget_s` (run time: a
round's wait in a scheduler's queue is counted apart, `host.queue_s`, and said), after a
round with a run that did not end ok (its config cannot be decided), and after the first round
when the sweep has no pair to compare ("nothing to decide").

Each job's record says it is an auto repeat (`repeat`: index, group, count = the most rounds,
position, order_seed, `auto`: {max, band, budget_s}); the verdict sentence says at how many rounds
it was decided; a ledger record of kind "repeats" says how many rounds the sweep took, why it
stopped, and which runs it counted (each once, by id: a resumed sweep's earlier runs included).

    records = sweep.run(session, Auto(plan, session), seed)   # from api.run_jobs
"""

from __future__ import annotations

import time

from repro.ledger import Ledger
from repro.ledger.record import view
from repro.loop.sweep import Policy, configs_round

KIND = "repeats"
DECIDED = "every pair decided"
NOTHING = ("nothing to decide: no two configs of this sweep differ only in a compared key (framework, env.packages, "
           "run.deterministic, run.fill_uninitialized_memory)")


def _verdicts(records: list[dict]) -> list:
    """The pairs a round can decide (an unfair pair is refused whatever the rounds)."""
    from repro.report import comparison, verdict

    return [v for t in comparison.build(records).tables for v in t.verdicts if v.outcome != verdict.UNFAIR]


def _nothing(records: list[dict]) -> str:
    """Why nothing can be decided: a pair there is, but refused whatever the rounds (joblib's n_jobs > 1
    runs it side by side, report/comparison.py `_unfair`), or no two configs differ in a compared key."""
    from repro.report import comparison, verdict

    refused = [v for t in comparison.build(records).tables for v in t.verdicts if v.outcome == verdict.UNFAIR]
    if refused:
        return f"nothing to decide: every pair is refused a verdict ({refused[0].a} vs {refused[0].b}: " \
               f"{refused[0].refused or refused[0].same})"
    return NOTHING


def _looks(max_repeats: int) -> tuple[int, ...]:
    from repro.report import verdict

    return verdict.looks(max_repeats)


class Auto(Policy):
    """Rounds until decided (module docstring)."""

    def __init__(self, plan, host):
        v = plan.jobs[0].verdict
        self.configs, self.verdict, self.max_rounds = plan.configs, v, v.max_repeats
        self.auto = {"max": v.max_repeats, "band": v.band, "budget_s": v.budget_s}
        self.sweep_id, self.name = host.sweep_id, host.run_name
        self.start = self.round_start = time.monotonic()
        self.queued, self.reason, self.seen = 0.0, "", 0

    def run_s(self, host) -> float:
        """The sweep's run time so far: its wall less its rounds' time in a scheduler's queue."""
        return time.monotonic() - self.start - host.queue_s

    def ahead(self, k: int) -> int:
        """The rounds up to the next planned look run whatever they show (no look between them)."""
        return min([look for look in _looks(self.max_rounds) if look > k] or [k + 1]) - k

    def round(self, k: int) -> list:
        return configs_round(self.configs, k, self.max_rounds, self.sweep_id, self.name, auto=self.auto)

    def more(self, k: int, host) -> bool:
        rounds, now, v = k + 1, time.monotonic(), self.verdict
        queued = host.queue_s - self.queued  # these rounds' wait in a scheduler's queue: not run time
        round_s, self.round_start, self.queued = now - self.round_start - queued, now, host.queue_s
        spent = self.run_s(host)
        recent, self.seen = host.records[self.seen:], len(host.records)  # the rounds since the last call (a wave: several)
        verdicts = _verdicts(host.records)
        if any(view(r).status != "ok" for r in recent):
            self.reason = "a run did not end ok, so its config cannot be decided"
        elif not verdicts:
            self.reason = _nothing(host.records)
        elif rounds in _looks(self.max_rounds) and all(x.decided for x in verdicts):
            self.reason = DECIDED
        elif rounds >= self.max_rounds:
            self.reason = f"verdict.max_repeats={self.max_rounds} reached, undecided"
        elif v.budget_s is not None and spent + round_s > v.budget_s:
            queue = f", besides {host.queue_s:.0f} s queued" if host.queue_s else ""
            self.reason = f"verdict.budget_s={v.budget_s:g} would be passed by another round ({spent:.0f} s run{queue})"
        return not self.reason

    def ended(self, host, rounds: int, error: BaseException | None) -> None:
        from repro.console import console

        if error is not None:
            _record(host, rounds, f"interrupted after {rounds} rounds" if isinstance(error, KeyboardInterrupt)
                    else f"failed after {rounds} rounds: {type(error).__name__}", "interrupted")
            return
        queue = f"; {self.run_s(host):.0f} s run, {host.queue_s:.0f} s queued" if host.queue_s else ""
        line = f"run.repeats=auto: {rounds} rounds ({rounds} repeats per config, each round in a random order); " \
               f"stopped: {self.reason}{queue}"
        console().print(line, markup=False, highlight=False)
        _record(host, rounds, self.reason, "decided" if self.reason == DECIDED else "undecided",
                {"run_s": round(self.run_s(host), 1), "queue_s": round(host.queue_s, 1)})


def _record(host, rounds: int, reason: str, status: str, times: dict | None = None) -> None:
    """The sweep's stopping record: how many rounds, why it stopped, each config's ok repeats, and
    the runs it counted, each once."""
    from repro.report.reruns import kept

    counted = list({view(r).id: r for r in kept(host.records)}.values())
    per_group: dict[str, int] = {}
    for r in counted:
        group = view(r).repeat.group
        if group and view(r).status == "ok":
            per_group[group] = per_group.get(group, 0) + 1
    try:
        Ledger(host.ledger_dir).append({
            "kind": KIND, "status": status, "sweep": {"id": host.sweep_id, "experiment": host.experiment},
            "rounds": rounds, "reason": reason, "repeats": per_group, "runs": [view(r).id for r in counted],
            **(times or {})})
    except Exception as e:  # noqa: BLE001 - the runs are recorded; this record only summarises them
        host.failed(f"the stopping record of run.repeats=auto could not be written: {e}")
