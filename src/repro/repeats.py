"""`run.repeats=auto`: rounds of fresh workers until every pair of the sweep is decided.

Round k runs every config of the sweep once, the order reversed every other round (A B, B A,
A B, ...: a machine that drifts slowly during the sweep hits both sides alike, where A B, A B
would leave B always the later one). After each round from the second on, the comparison of
the records so far is built (report/comparison.py, the same code that renders the table) and
its verdicts read: the loop stops once every pair is "faster" or "equivalent" at that look.
The looks spend alpha (verdict.decide_family: Lan–DeMets spending, Pocock type), so stopping at
the first decided look keeps the false-"faster" rate at 5 %. It also stops at
`verdict.max_repeats` rounds, before a round that would start past `verdict.budget_s`, or after
a round with a run that did not end ok (its config cannot be decided).

Each job's record says it is an auto repeat (`repeat`: index, group, count = the most rounds,
`auto`: {max, band, budget_s}); the verdict sentence says at how many rounds it was decided;
a ledger record of kind "repeats" says how many rounds the sweep took and why it stopped.

    records = run_auto(plan, session)   # from api.run_jobs, for a plan whose run.repeats is auto
"""

from __future__ import annotations

import time

from repro.ledger import Ledger

KIND = "repeats"


def _order(configs: list, k: int) -> list:
    return configs if k % 2 == 0 else configs[::-1]


def _verdicts(records: list[dict]) -> list:
    from repro.report import comparison

    return [v for t in comparison.build(records).tables for v in t.verdicts]


def run_auto(plan, session) -> list[dict]:
    """Run the plan's configs (each listed once) round by round until decided; its records.
    Interrupted or failed: closed (what was recorded stays), then re-raised."""
    from repro.console import console
    from repro.runner.job import run_job

    configs = list(enumerate(zip(plan.jobs, plan.overrides)))
    v = plan.jobs[0].verdict
    auto = {"max": v.max_repeats, "band": v.band, "budget_s": v.budget_s}
    start, job, rounds, reason = time.monotonic(), 0, 0, ""
    session.display.jobs = len(configs) * v.max_repeats  # progress tags "[3/20]": at most that many jobs
    try:
        while True:
            sequence = _order(configs, rounds)
            round_start = time.monotonic()
            for i, (c, (config, overrides)) in enumerate(sequence):
                after = sequence[i + 1][1][0] if i + 1 < len(sequence) else _order(configs, rounds + 1)[0][1][0]
                session.warm.upcoming = after if rounds + 1 < v.max_repeats or i + 1 < len(sequence) else None
                extra = {"repeat": {"index": rounds, "count": v.max_repeats, "group": f"{session.sweep_id}/{c}",
                                    "auto": auto}}
                run_job(config, session, job, list(overrides), extra=extra, name=session.run_name(config, overrides))
                job += 1
            rounds += 1
            round_s, spent = time.monotonic() - round_start, time.monotonic() - start
            recent = session.records[-len(configs):]
            if any(r.get("status") != "ok" for r in recent):
                reason = "a run did not end ok, so its config cannot be decided"
            elif rounds >= 2 and all(x.decided for x in _verdicts(session.records)):
                reason = "every pair decided"
            elif rounds >= v.max_repeats:
                reason = f"verdict.max_repeats={v.max_repeats} reached, undecided"
            elif v.budget_s is not None and spent + round_s > v.budget_s:
                reason = f"verdict.budget_s={v.budget_s:g} would be passed by another round ({spent:.0f} s spent)"
            if reason:
                break
    except BaseException as e:  # what was recorded stays recorded; the MLflow parent run is ended
        _record(session, rounds, f"interrupted after {rounds} rounds" if isinstance(e, KeyboardInterrupt)
                else f"failed after {rounds} rounds: {type(e).__name__}", "interrupted")
        session.close(interrupted=isinstance(e, KeyboardInterrupt))
        raise
    line = f"run.repeats=auto: {rounds} rounds ({rounds} repeats per config, interleaved); stopped: {reason}"
    console().print(line, markup=False, highlight=False)
    _record(session, rounds, reason, "decided" if reason == "every pair decided" else "undecided")
    return session.close()


def _record(session, rounds: int, reason: str, status: str) -> None:
    """The sweep's stopping record: how many rounds, why it stopped, each config's ok repeats."""
    per_group: dict[str, int] = {}
    for r in session.records:
        group = (r.get("repeat") or {}).get("group")
        if group and r.get("status") == "ok":
            per_group[group] = per_group.get(group, 0) + 1
    try:
        Ledger(session.ledger_dir).append({
            "kind": KIND, "status": status, "sweep": {"id": session.sweep_id, "experiment": session.experiment},
            "rounds": rounds, "reason": reason, "repeats": per_group,
            "runs": [r["id"] for r in session.records]})
    except Exception as e:  # noqa: BLE001 - the runs are recorded; this record only summarises them
        session.failed(f"the stopping record of run.repeats=auto could not be written: {e}")
