"""`repro compare ID ID... | --sweep ID | --experiment NAME`: the runs side by side (per model: the
table, its verdicts, its audit; the blocks a sweep closes with).

    repro compare A B                   these runs (ids or unique prefixes)
    repro compare --sweep 20261123T...  every run of one sweep (a unique prefix of its id is enough)
    repro compare --experiment NAME     every run of that experiment's newest sweep
    ... --wide                          every column (report.md and results.csv hold them all too)
"""

from __future__ import annotations

import sys

from repro.console import console
from repro.ledger import Ledger, LedgerError
from repro.ledger.record import view
from repro.usertext import shown


def _run_entries(ledger: Ledger) -> list:
    """The index entries of every run's current record that holds a config (no file read)."""
    return [e for e in ledger.head_entries(kind="run") if e.has_config]


def _load(ledger: Ledger, entries: list) -> list[dict]:
    return [r for e in entries if (r := ledger.load(e)) is not None and "config" in r]


def sweep_runs(ledger: Ledger, sweep_id: str) -> list[dict]:
    """The current records of every run of one sweep (an id prefix names it if unique), in job
    order: the index picks them, only their files are read. A resumed sweep's earlier runs come
    with them, as the sweep took them (`reused`), even when the sweep ran nothing itself."""
    runs = _run_entries(ledger)
    sweeps = [e for e in ledger.head_entries(kind="sweep") if e.sweep]
    ids = sorted({e.sweep for e in [*runs, *sweeps] if str(e.sweep).startswith(sweep_id)})
    if not ids:
        raise LedgerError(f"no sweep {sweep_id!r} in {ledger.root} (`repro ledger list` shows each run's sweep)")
    if len(ids) > 1:
        raise LedgerError(f"sweep id {sweep_id!r} is ambiguous in {ledger.root}: {', '.join(ids)}")
    return with_reused(ledger, ids[0], _load(ledger, [e for e in runs if e.sweep == ids[0]]))


def with_reused(ledger: Ledger, sweep_id: str, records: list[dict]) -> list[dict]:
    """`records` (one sweep's own runs) and the earlier runs it took as its own (`run.resume=true`),
    each as the sweep saw it (job/job.py `_resumed`): this sweep and its job there (`sweep`), its
    `repeat` in this sweep, `resumed_from` naming the sweep it ran in; in job order."""
    own = {view(r).id for r in records}
    for sweep in ledger.heads(kind="sweep", sweep=sweep_id):
        for taken in sweep.get("reused") or ():
            if taken["id"] in own:
                continue
            try:
                done = ledger.get(taken["id"])
            except LedgerError:  # a record gone from this ledger (a partial copy): the sweep's own runs stand
                continue
            own.add(taken["id"])
            records.append({**done, "resumed_from": taken["resumed_from"], "sweep": taken["sweep"],
                            **({"repeat": taken["repeat"]} if "repeat" in taken else {})})
    return sorted(records, key=lambda r: view(r).sweep.job)


def newest_sweep(ledger: Ledger, experiment: str) -> list[dict]:
    """Every run of the newest sweep recorded for `experiment`, in job order: the index picks
    the sweep, only its runs' files are read.

    A sweep of replays (`repro replay` records its runs under the original's experiment, each
    with `replay_of`) is passed over while the experiment has a sweep of its own: after
    replaying one run, `--experiment NAME` still means the comparison a person ran."""
    found = [e for e in _run_entries(ledger) if e.experiment == experiment]
    if not found:
        raise LedgerError(f"no recorded runs of experiment {experiment!r} in {ledger.root}")
    sweeps: dict[str, list] = {}
    for e in found:
        sweeps.setdefault(e.sweep or "", []).append(e)
    own = [runs for runs in sweeps.values() if not all(e.replay_of for e in runs)]
    for newest in sorted(own or sweeps.values(), key=lambda runs: max(e.created for e in runs), reverse=True):
        if records := _load(ledger, newest):  # (a file that cannot be read now is skipped, with a warning)
            return sorted(records, key=lambda r: view(r).sweep.job)
    raise LedgerError(f"no readable runs of experiment {experiment!r} in {ledger.root} (repro ledger verify)")


def changed_lines(ledger: Ledger, records: list[dict]) -> list[str]:
    """One line per record among `records` edited after it was written (Ledger.changed)."""
    changed = ledger.changed()
    return [f"record {view(r).id} ({changed[view(r).id]}) was changed after it was written: its figures cannot be "
            "trusted; restore it (git checkout -- FILE) or move it out of the ledger (repro ledger verify)"
            for r in records if view(r).id in changed]


def add_parser(sub, common) -> None:
    p = sub.add_parser("compare", help="runs side by side, with every difference besides what was varied",
                       parents=[common])
    p.add_argument("ids", nargs="*", help="ledger ids (or unique prefixes) of runs")
    p.add_argument("--sweep", help="every run of this sweep (its id, or a unique prefix)")
    p.add_argument("--experiment", help="every run of this experiment's newest sweep")
    p.add_argument("--wide", action="store_true",
                   help="every column (default: the columns a person decides on, fitted to the terminal)")
    p.set_defaults(func=run)


def run(args) -> int:
    if sum(map(bool, (args.ids, args.sweep, args.experiment))) != 1:
        print("repro compare: give run ids, --sweep ID or --experiment NAME (one of them)", file=sys.stderr)
        return 2
    ledger = Ledger(args.ledger)
    try:
        if args.sweep:
            records = sweep_runs(ledger, args.sweep)
        elif args.experiment:
            records = newest_sweep(ledger, args.experiment)
        else:
            records = [ledger.get(i) for i in args.ids]
    except LedgerError as e:
        print(f"repro compare: {e}", file=sys.stderr)
        return 2
    not_runs = [view(r).id for r in records if view(r).kind != "run" or "config" not in r]
    if not_runs:
        print(f"repro compare: {', '.join(not_runs)} are not run records", file=sys.stderr)
        return 2
    for line in changed_lines(ledger, records):  # by id, Ledger.get has warned already
        if not args.ids:
            print(f"repro compare: warning: {line}", file=sys.stderr)
    # imported here, not at the top: every `repro` verb's parser imports this module, and the
    # comparison's statistics import NumPy (0.2-0.3 s of `repro ledger list`, which compares nothing)
    from repro.report import comparison
    from repro.report.table import print_comparison

    built = comparison.build(records, ledger.root)
    wide = getattr(args, "wide", False)  # (a caller's Namespace may predate --wide)
    print_comparison(console(), built, wide=wide, hint="every column: add --wide")
    _time_goes(console(), built, wide)
    return 0


def _time_goes(out, built, wide: bool) -> None:
    """The report's "Where the time goes" (profiled runs) and "First step" sections: the markdown
    itself, in a pipe or a log, or in a terminal with --wide (their tables are as wide as their
    cells); a terminal's default view names where they are instead (a squeezed grid would cut them)."""
    from repro.report import where_time_goes

    lines = where_time_goes.markdown(built)
    if lines and out.is_terminal and not wide:
        out.print("[dim]first step split (and where the time goes, for profiled runs): report.md, or add --wide[/]")
    elif lines:
        out.print(shown("\n".join(lines)), markup=False, highlight=False, crop=False, soft_wrap=True)
