"""Whether one config's processes gave bit-identical results: the check every sweep with repeats makes.

K fresh workers of one config, same seed, same batches, same step count: in a mode that promises
determinism they must give one loss trajectory and one set of final parameters (`loss_sha256`,
`params_sha256`, worker/measure.py and worker/worker.py). Where they differ, the first step whose
loss differs names where they parted, and between which runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from repro.ledger.record import Results, view


@dataclass(frozen=True)
class Identity:
    processes: int
    identical: bool | None  # None: nothing to compare (one process, or different step counts)
    text: str  # the sentence every view prints ("" with one process)


def _results(r: dict) -> Results:
    return view(r).results


def _first_difference(a: list, b: list) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b)))


def _cache_suspect(record: dict) -> str:
    """Where the runs shared a compile cache (run.compile_cache=repeats or warm), a divergence names it: a later run
    loads what an earlier one compiled, and a damaged or foreign cache entry gives it another program."""
    cache = view(record).config.run.compile_cache
    if cache == "cold":
        return ""
    return (f"; suspect: the compile cache (run.compile_cache={cache}: later processes load what an earlier one "
            "compiled, and a damaged cache entry runs another program): rerun cold with run.compile_cache=cold")


def of(records: list[dict]) -> Identity:
    """The bit-identity of one config's ok runs (their records, in the order they ran)."""
    found = _of(records)
    if found.identical is False and (suspect := _cache_suspect(records[0])):
        return Identity(found.processes, False, found.text + suspect)
    return found


def _of(records: list[dict]) -> Identity:
    ok = [r for r in records if view(r).status == "ok" and _results(r).loss_sha256
          and not view(r).repeat.discarded]
    k = len(ok)
    if k < 2:
        return Identity(k, None, "")
    steps = {_results(r).raw.get("steps", _results(r).steady_steps) for r in ok}
    if len(steps) > 1:
        return Identity(k, None, f"not comparable: its {k} processes took different step counts "
                                 f"({', '.join(str(s) for s in sorted(steps, key=str))})")
    losses = {_results(r).loss_sha256 for r in ok}
    params = {_results(r).params_sha256 for r in ok}
    if len(losses) == 1 and len(params) == 1:
        return Identity(k, True, f"bit-identical across {k} processes (loss and parameters)")
    if len(losses) == 1:
        return Identity(k, False, f"losses identical across {k} processes, final parameters differ "
                                  f"({len(params)} distinct)")
    ref = ok[0]
    parts = [(i, r) for r in ok[1:] if (i := _first_difference(_results(ref).loss, _results(r).loss)) is not None]
    if not parts:  # the series were not recorded (an older record): the hashes alone
        return Identity(k, False, f"not bit-identical: {len(losses)} distinct loss hashes among {k} processes")
    step, other = min(parts, key=lambda p: p[0])  # counted from 1, as the progress line counts steps
    return Identity(k, False, f"not bit-identical: {len(losses)} distinct loss hashes among {k} processes; "
                              f"the losses first differ at step {step + 1} (between runs {ref['id'][:8]} and "
                              f"{other['id'][:8]})")


def table_line(rows) -> tuple[str, bool]:
    """One line for a table's configs with several processes (rows of report/comparison.py): each
    one's bit-identity, and whether any config that promised determinism (run.deterministic=true)
    diverged: then the line is a warning; without that promise a divergence is expected."""
    parts, broken = [], False
    for row in rows:
        found = of(list(row.records))
        if found.identical is None:
            continue
        promised = view(row.records[0]).config.run.deterministic
        parts.append(f"{row.name}: {found.text}" + ("" if found.identical or promised else " (expected: "
                                                    "run.deterministic=false)"))
        broken |= promised and not found.identical
    if not parts:
        return "", False
    head = "WARNING: a deterministic config diverged across processes: " if broken else "repeats: "
    return head + "; ".join(parts), broken


def by_config(records: list[dict]) -> dict[str, dict]:
    """Each config's bit-identity where it ran in several processes, by its repeat group (else its
    config hash): what the sweep record keeps (report/trajectory.py `store`) and MLflow's parent shows."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        if view(r).kind == "run":
            groups.setdefault(view(r).repeat.group or view(r).config_hash or view(r).id, []).append(r)
    out = {}
    for group, runs in groups.items():
        found = of(runs)
        if found.identical is not None or found.text:
            out[group] = {"processes": found.processes, "identical": found.identical, "text": found.text,
                          "deterministic": view(runs[0]).config.run.deterministic}
    return out
