"""`repro history`: when a workload got slower (or faster), from the ledger alone.

    repro history 54f9430b                    every ok run of one config (a config hash prefix)
    repro history --experiment quickstart     one series per config of that experiment's runs
    repro history --sweep 20261122T18 [--label jax]   the configs of one sweep (its row labels), over the ledger
    ... --json                                the series and their changes as JSON
    ... --fail-on-regression 5                exit 1 when a series' newest change is a slowdown over 5 %

Prints, per series (a workload on one hardware class in one determinism mode: series.py), its
runs (when each finished, its median, commit and environment), the changes found (E-Divisive
means, changepoints.py: where, the step after/before with its 95 % interval, p) and for each the
`repro bisect` command between the runs on either side of it; writes a PNG (plot.py) and prints
its path. Exit 0; 1 where `--fail-on-regression` found its slowdown; 2 for bad input (one line,
nothing written).
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

from rich.table import Table

from repro import paths
from repro.console import console
from repro.history import analysis, changepoints, series
from repro.ledger import Ledger, LedgerError
from repro.report import compare
from repro.report.table import RULED
from repro.usertext import markup, plain, shown

EPILOG = """examples:
  repro history 54f9430b                 every ok run of one config (a config hash prefix): its changes
  repro history --experiment quickstart  one series per config of the experiment
  repro history --sweep 20261122T1844 --label jax   one row of a sweep, over the whole ledger
  repro history 54f9430b --fail-on-regression 5     exit 1 when the newest change is > 5 % slower (CI)
  repro history 54f9430b --json --out /tmp/h.png"""
UP, DOWN = "▲", "▼"


def add_parser(sub, common) -> None:
    p = sub.add_parser("history", help="a workload's run medians over time, the changes in them, and the "
                       "`repro bisect` command for each", parents=[common], epilog=EPILOG)
    p.add_argument("config_hash", nargs="?", help="a config hash (or a unique prefix of one): every ok run of it")
    p.add_argument("--experiment", help="the ok runs of this experiment, one series per config")
    p.add_argument("--sweep", help="the configs of this sweep (its id or a unique prefix), each over the ledger")
    p.add_argument("--label", help="with --experiment or --sweep: only the config of this run name (its row label)")
    p.add_argument("--alpha", default=str(changepoints.ALPHA),
                   help=f"a change's permutation p at most this (default {changepoints.ALPHA}, as Otava)")
    p.add_argument("--min-segment", default=str(changepoints.MIN_SEGMENT),
                   help=f"runs on each side of a change, at least (default {changepoints.MIN_SEGMENT})")
    p.add_argument("--out", help="the PNG to write (default: <ledger>/.reports/history/<what>.png)")
    p.add_argument("--json", action="store_true", help="the series and their changes as one JSON object")
    p.add_argument("--fail-on-regression", metavar="PCT",
                   help="exit 1 when a series' newest change is a slowdown larger than PCT %% (a CI gate)")
    p.set_defaults(func=run)


class BadInput(ValueError):
    pass


def _number(text: str, flag: str, low: float, high: float, what: str, integer: bool = False) -> float:
    try:
        value = int(text) if integer else float(text)
    except (TypeError, ValueError):
        raise BadInput(f"{flag} {text!r} is not a number: give {what}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise BadInput(f"{flag} {text!r} is out of range: give {what}")
    return value


def _checked(args) -> tuple[float, int, float | None]:
    given = [n for n, v in (("a config hash", args.config_hash), ("--experiment", args.experiment),
                            ("--sweep", args.sweep)) if v is not None]
    if len(given) != 1:
        raise BadInput("give one of a config hash, --experiment NAME or --sweep ID"
                       + (f" (not {' and '.join(given)} together)" if given else ""))
    if args.label is not None and args.config_hash is not None:
        raise BadInput("--label picks a config of an --experiment or a --sweep; a config hash already names one")
    alpha = _number(args.alpha, "--alpha", 1e-6, 0.5, "a p threshold between 0.000001 and 0.5 (default 0.001)")
    segment = int(_number(args.min_segment, "--min-segment", 2, 10_000, "a whole number of runs, 2 or more",
                          integer=True))
    pct = None if args.fail_on_regression is None else _number(
        args.fail_on_regression, "--fail-on-regression", 0, 1e6, "a percentage, e.g. 5 for 5 % slower")
    return alpha, segment, pct


def _default_png(args) -> Path:
    what = args.config_hash or args.experiment or args.sweep
    name = re.sub(r"[^\w.-]+", "_", f"{what}{'-' + args.label if args.label else ''}")[:80] or "history"
    return paths.default_reports_dir(args.ledger) / "history" / f"{name}.png"


def _ledger_flag(args) -> str | None:
    """The --ledger a printed command needs: none where the history read the default ledger."""
    return None if Path(args.ledger).resolve() == Path(paths.default_ledger_dir()).resolve() else str(args.ledger)


def run(args) -> int:
    try:
        alpha, segment, pct = _checked(args)
    except BadInput as e:
        print(f"repro history: {shown(e)}", file=sys.stderr)
        return 2
    ledger = Ledger(args.ledger)
    try:
        selection = series.select(ledger, args.config_hash, args.experiment, args.sweep, args.label)
    except LedgerError as e:
        print(f"repro history: {shown(e)}", file=sys.stderr)
        return 2
    records = [r for _, rs in selection.workloads.values() for r in rs]
    if not records:
        why = ", ".join(f"{n} {w}" for w, n in selection.left_out.items())
        print(f"repro history: no runs left to draw ({why} left out)", file=sys.stderr)
        return 2
    if changed := compare.changed_lines(ledger, records):  # a history publishes: never an edited figure
        print(f"repro history: not drawn: {shown(changed[0])}"
              + (f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""), file=sys.stderr)
        return 2
    found = analysis.analyse(series.split(selection), alpha, segment)
    out = Path(args.out) if args.out else _default_png(args)
    title = f"repro history: {args.config_hash or args.experiment or args.sweep}" + \
        (f" · {args.label}" if args.label else "")
    from repro.history import plot  # matplotlib: imported when a history is drawn, not by every command

    try:
        plot.write(found, out, title)
    except OSError as e:
        print(f"repro history: cannot write {out} ({e.strerror or e}); name another file with --out FILE.png",
              file=sys.stderr)
        return 2
    gate = analysis.newest_slowdown(found, pct) if pct is not None else []
    ledger_flag = _ledger_flag(args)
    if args.json:
        print(json.dumps(_json(found, selection, ledger, alpha, segment, out, ledger_flag, pct, gate), indent=1))
    else:
        _print(found, selection, alpha, segment, out, ledger_flag)
    if pct is not None:
        _print_gate(found, gate, pct, to=sys.stderr if args.json else sys.stdout)
    return 1 if gate else 0


def _json(found, selection, ledger, alpha, segment, out, ledger_flag, pct, gate) -> dict:
    data = {"ledger": str(ledger.root), "method": "E-Divisive means (permutation test)", "alpha": alpha,
            "min_segment": segment, "png": str(out), "left_out": selection.left_out,
            "series": [f.to_dict(ledger_flag) for f in found]}
    if pct is not None:
        data["fail_on_regression"] = {"pct": pct, "failed": [
            {"config_hash": f.series.config_hash, "hardware": f.series.hardware, "mode": f.series.mode,
             "ratio": c.ratio, "lo": c.lo, "hi": c.hi} for f, c in gate]}
    return data


def _cell(p: series.Point, change: changepoints.Change | None) -> list[str]:
    commit = (p.commit or "—")[:8] + ("*" if p.dirty else "")
    mark = "" if change is None else f"{UP if change.slower else DOWN} {(change.ratio - 1) * 100:+.1f} %"
    return [p.finished[:16].replace("T", " "), p.id[:analysis.ID_CHARS], f"{p.median_s * 1e3:.5g}", commit,
            (p.env or "—")[:8], mark]


def _table(f: analysis.Found) -> Table:
    t = Table(box=RULED, show_edge=False, pad_edge=False, collapse_padding=True)
    for header, justify in (("#", "right"), ("finished (UTC)", "left"), ("record", "left"), ("median ms", "right"),
                            ("commit", "left"), ("env", "left"), ("change", "left")):
        t.add_column(header, justify=justify, no_wrap=True)
    at = {c.index: c for c in f.changes}
    for i, p in enumerate(f.series.points):
        t.add_row(str(i), *(plain(c) for c in _cell(p, at.get(i))))
    return t


def _print(found: list[analysis.Found], selection: series.Selection, alpha: float, segment: int, out: Path,
           ledger_flag: str | None) -> None:
    c = console()
    c.print(f"{len(found)} series (a workload on one hardware class in one determinism mode: never mixed); "
            f"changes by E-Divisive means, permutation p ≤ {alpha:g}, at least {segment} runs a side",
            highlight=False)
    if selection.left_out:
        c.print("left out: " + ", ".join(f"{n} {markup(w)}" for w, n in selection.left_out.items()), highlight=False)
    for line in _apart(found):
        c.print(plain(line), highlight=False)
    for f in found:
        c.print()
        c.print(plain(f.series.title, style="bold"))
        c.print(_table(f))
        if any(p.dirty for p in f.series.points):
            c.print("  * the run's tree was dirty: its code is not exactly its commit", highlight=False)
        if len(f.series.points) < 2 * segment:
            c.print(f"  too few runs to find a change: {len(f.series.points)}, at least {2 * segment} "
                    f"(--min-segment {segment} on each side)", highlight=False)
        elif not f.changes:
            c.print(f"  no change: no split of these {len(f.series.points)} runs has p ≤ {alpha:g}", highlight=False)
        for ch in f.changes:
            good, bad = f.around(ch)
            c.print(plain(f"  change at run {ch.index} ({bad.finished[:16].replace('T', ' ')}, commit "
                          f"{(good.commit or '—')[:8]} → {(bad.commit or '—')[:8]}): ×{ch.ratio:.3f} "
                          f"({analysis.percent(ch.ratio)}; 95 % CI {ch.lo:.3f}–{ch.hi:.3f}), median "
                          f"{ch.before_median * 1e3:.5g} → {ch.after_median * 1e3:.5g} ms over {ch.before_n} and "
                          f"{ch.after_n} runs, p {ch.p:.2g}", style="bold"))
            c.print(plain(f"    {f.bisect(ch, ledger_flag)}"), soft_wrap=True)
    c.print(f"plot: {markup(out)}", highlight=False, soft_wrap=True)


def _apart(found: list[analysis.Found]) -> list[str]:
    """One line per workload whose runs were measured on several hardware classes or in both modes."""
    by: dict[str, list[series.Series]] = {}
    for f in found:
        by.setdefault(f.series.config_hash, []).append(f.series)
    return [f"kept apart: {ss[0].model} · {ss[0].label} (config {h[:12]}) ran as {len(ss)} series: "
            + "; ".join(f"{s.hardware} · {s.mode}: {len(s.points)} runs" for s in ss)
            for h, ss in by.items() if len(ss) > 1]


def _print_gate(found: list[analysis.Found], gate: list, pct: float, to) -> None:
    if gate:
        for f, ch in gate:
            print(f"regression: the newest change of {shown(f.series.title)} is {analysis.percent(ch.ratio)} "
                  f"(×{ch.ratio:.3f}, 95 % CI {ch.lo:.3f}–{ch.hi:.3f}), over {pct:g} %: exit 1", file=to)
    else:
        newest = [f.changes[-1] for f in found if f.changes]
        said = ", ".join(analysis.percent(c.ratio) for c in newest) or "no change in any series"
        print(f"no regression over {pct:g} %: newest change(s): {said}", file=to)
