"""A bisection's views, from its ledger record alone (the same record, the same bytes):
the terminal's table of probes and its result line, and a report folder with `bisect.md` (the
table) and `bisect.png` (each probe's ratio to GOOD with its interval, against the position; the
confirmation's gap as a band, the culprit marked). No pyplot: a bare Figure rendered with Agg, as
report/plots.py draws, with no creation date or software version in the PNG.
"""

from __future__ import annotations

from pathlib import Path

from repro.ledger.record import Call, view
from repro.report.plots import PNG_METADATA
from repro.usertext import shown

PAGE, PLOT = "bisect.md", "bisect.png"
OUTCOME_COLOURS = {"good": "#2ca02c", "bad": "#d62728", "unknown": "#7f7f7f", "reproduces": "#1f77b4",
                   "does not reproduce": "#7f7f7f"}


def _word(outcome: str) -> str:
    return {"good": "like-good", "bad": "like-bad"}.get(outcome, outcome)


def _duration(seconds: float) -> str:
    from repro.usertext import duration

    return duration(seconds)


def _level(call: Call) -> str:
    """An interval's confidence where it is not 95 % (an early look spends less alpha: a wider interval)."""
    return "" if abs(call.level - 0.95) < 5e-4 else f" ({100 * call.level:.3g} %)"


def _f(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def rows(record: dict) -> list[list[str]]:
    """The table: the confirmation, then each probe in the order run."""
    b = view(record).bisect
    out = []
    if c := b.confirmation:
        out.append(["confirm", str(b.n), f"BAD {b.bad[:8]} against GOOD {b.good[:8]}", c.outcome,
                    f"{c.ratio:.3f}", f"{c.lo:.3f}–{c.hi:.3f}{_level(c)}", str(c.rounds), str(len(c.runs))])
    for i, p in enumerate(b.probes):
        out.append([str(i + 1), str(p.position), p.label, _word(p.outcome), _f(p.ratio),
                    f"{_f(p.lo)}–{_f(p.hi)}{_level(p)}", str(p.rounds), str(len(p.runs))])
    return out


HEADER = ["probe", "position", "candidate", "call", "ratio to GOOD", "interval (95 % unless said)", "rounds", "runs"]


def result_line(record: dict) -> str:
    """"<culprit>: 1.08× slower (95 % CI 1.05–1.11); posterior 0.97; 5 probes, 41 runs, 12 min", or why none."""
    rec = view(record)
    b = rec.bisect
    probes, runs, took = len(b.probes), len(rec.runs), _duration(b.spent_s)
    tally = f"{probes} probe{'s' * (probes != 1)}, {runs} runs, {took}"
    r, status = b.result, record.get("status")
    if status == "decided" and (culprit := b.culprit):
        slower = "slower" if culprit.ratio >= 1 else "faster"
        size = culprit.ratio if culprit.ratio >= 1 else 1 / culprit.ratio
        return (f"{shown(culprit.label)}: {size:.2f}× {slower} ({100 * culprit.level:.3g} % CI "
                f"{culprit.lo:.2f}–{culprit.hi:.2f}, {r['from']}); "
                f"posterior {r['posterior']:.2f}; {tally}")
    if "nonmonotone" in r:
        (bad, good), (lb, lg) = r["nonmonotone"], r["labels"]
        return (f"non-monotone: position {bad} ({shown(lb)}) is like-bad and the later position {good} ({shown(lg)}) "
                f"like-good; no single culprit; {tally}")
    if status == "not reproduced":
        c = b.confirmation
        return (f"the gap does not reproduce here: BAD/GOOD {c.ratio:.2f} ({100 * c.level:.3g} % CI "
                f"{c.lo:.2f}–{c.hi:.2f}) over "
                f"{c.rounds} rounds; nothing to bisect")
    post = b.posterior
    best = max(range(len(post)), key=lambda i: post[i]) if post else None
    lead = f"; most likely position {best + 1} ({shown(b.positions[best + 1]['label'])}, posterior " \
           f"{post[best]:.2f})" if best is not None else ""
    return f"{status}: {shown(b.reason or 'no culprit named')}{lead}; {tally}"


def print_table(console, record: dict) -> None:
    from rich.table import Table

    from repro.usertext import plain

    table = Table(title=f"bisect {view(record).id}", title_justify="left")
    for h in HEADER:
        table.add_column(h, justify="right" if h in ("ratio to GOOD", "rounds", "runs", "position") else "left")
    for row in rows(record):
        table.add_row(*(plain(cell) for cell in row))
    console.print(table)


def markdown(record: dict) -> str:
    rec = view(record)
    b = rec.bisect
    lines = [f"# Bisection {rec.id}", "",
             f"GOOD `{b.good}`, BAD `{b.bad}`; {b.n + 1} positions (0: GOOD, {b.n}: BAD); "
             f"posterior threshold {b.threshold}, at most {b.cap} rounds a probe; status **{rec.status}**.",
             "", result_line(record), ""]
    for r in b.ranges:
        lines.append(f"- commits of {shown(r['what'])} ({shown(r['repo'])}) {r['span']}: {len(r['commits'])}")
    lines += ["", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(shown(c).replace("|", "\\|") for c in row) + " |" for row in rows(record)]
    lines += ["", f"![each probe's ratio to GOOD against its position]({PLOT})", "",
              "Runs: " + ", ".join(f"`{i}`" for i in rec.runs), ""]
    return "\n".join(lines)


def plot(record: dict, path: Path) -> None:
    from matplotlib.figure import Figure

    rec = view(record)
    b = rec.bisect
    fig = Figure(figsize=(7.5, 4.0), layout="constrained")
    ax = fig.subplots()
    c = b.confirmation
    if c:
        ax.axhspan(c.lo, c.hi, color=OUTCOME_COLOURS["reproduces"], alpha=0.12,
                   label=f"BAD/GOOD {c.ratio:.3f} ({c.lo:.3f}–{c.hi:.3f})")
        ax.errorbar([b.n], [c.ratio], yerr=[[c.ratio - c.lo], [c.hi - c.ratio]], fmt="D",
                    color=OUTCOME_COLOURS["reproduces"], capsize=4)
    ax.axhline(1.0, color="#444444", lw=0.8, ls=":")
    if c and c.outcome == "reproduces":  # decide.classify's threshold: the gap's midpoint on the log scale
        ax.axhline(c.ratio ** 0.5, color="#444444", lw=0.8, ls="--", label=f"like-good | like-bad {c.ratio ** 0.5:.3f}")
    seen, again = set(), {}
    for i, p in enumerate(b.probes):
        if p.ratio is None or p.lo is None or p.hi is None:
            continue
        colour = OUTCOME_COLOURS.get(p.outcome, "#7f7f7f")
        label = _word(p.outcome) if p.outcome not in seen else None
        seen.add(p.outcome)
        x = p.position + 0.18 * again.get(p.position, 0)  # a position probed again: beside the earlier call
        again[p.position] = again.get(p.position, 0) + 1
        ax.errorbar([x], [p.ratio], yerr=[[p.ratio - p.lo], [p.hi - p.ratio]], fmt="o",
                    color=colour, capsize=4, label=label)
        ax.annotate(str(i + 1), (x, p.hi), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
    if culprit := b.culprit:
        ax.axvline(culprit.position - 0.5, color=OUTCOME_COLOURS["bad"], lw=1, ls="--",
                   label=f"culprit: position {culprit.position} (posterior {b.result['posterior']:.2f})")
    ax.set_xlim(-0.5, b.n + 0.5)
    ax.set_xticks(range(0, b.n + 1, max(1, (b.n + 1) // 16)))
    ax.set_xlabel("position (0: GOOD, n: BAD)")
    ax.set_ylabel("step time / GOOD's (paired rounds)")
    ax.set_title(f"bisect {rec.id}: each probe's ratio to GOOD with its interval (numbers: probe order)",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    fig.savefig(path, dpi=110, metadata=PNG_METADATA)


def write(record: dict, folder: Path) -> Path:
    """The report folder: bisect.md and bisect.png; returns the page's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PAGE).write_text(markdown(record), encoding="utf-8")
    plot(record, folder / PLOT)
    return folder / PAGE


def default_dir(ledger_root: Path, key: str) -> Path:
    """`<ledger>/.reports/bisect-<key>`: one folder per bisection (its key: endpoints and overrides)."""
    from repro import paths

    return paths.default_reports_dir(ledger_root) / f"bisect-{key}"
