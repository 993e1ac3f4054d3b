"""A sweep's PNG plots (matplotlib, Agg): one function per plot, each from the comparison's rows.

One panel per table of the comparison (a model at a preset: each has its own scale), a bar or
line per row named by its run name, one colour per framework in every plot, milliseconds and
MiB on the axes (plain numbers, also on log axes). No pyplot: bare
`Figure`s render with Agg and leave the caller's matplotlib state alone. The PNGs carry no
creation date or software version, so the same records give the same bytes.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Callable

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from repro.ledger.record import view
from repro.profile.categories import CATEGORIES
from repro.report.comparison import Comparison, Row

# Fixed colours, so a framework looks the same in every plot and every report.
FRAMEWORK_COLOURS = {
    "jax": "#1f77b4", "torch": "#ff7f0e", "torch_compile": "#2ca02c",
    "torch_xla": "#d62728", "torch_xla_compile": "#9467bd",
}
OTHER_COLOURS = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
LINE_STYLES, MARKERS = ("-", "--", ":", "-."), ("o", "s", "^", "d")
PNG_METADATA = {"Software": None}  # no matplotlib version in the file: same records, same bytes
NOTE_CHARS = 88  # a line of 7.5-pt text across one panel (6.2 inches, less its axis labels)
PHASES = (("first step", "first_s", "//"), ("second step", "second_s", ".."), ("steady median", "median_s", ""))


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 1000 else f"{v:.3g}"


def colour(framework: str) -> str:
    if framework in FRAMEWORK_COLOURS:
        return FRAMEWORK_COLOURS[framework]
    return OTHER_COLOURS[sum(map(ord, framework)) % len(OTHER_COLOURS)]


def _figure(panels: int, title: str, height: float = 3.2) -> tuple[Figure, list]:
    cols = min(panels, 2)
    rows = math.ceil(panels / cols)
    fig = Figure(figsize=(6.2 * cols, height * rows + 0.7), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for ax in axes[panels:]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=12, fontweight="bold")
    return fig, axes


def _plain_log_ticks(ax) -> None:
    """Log-axis ticks as plain numbers (0.3, not 3×10⁻¹): every decade, and 2, 3 and 5 between
    where the axis spans under two decades (else they crowd)."""

    def minor(v: float, _) -> str:
        low, high = ax.get_ylim()
        narrow = low > 0 and math.log10(high / low) < 2
        return _fmt(v) if narrow and v > 0 and round(v / 10 ** math.floor(math.log10(v) + 1e-9), 6) in (2, 3, 5) else ""

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _fmt(v)))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))
    ax.tick_params(axis="y", which="minor", labelsize=7)


def _panels(comparison: Comparison, title: str) -> tuple[Figure, list]:
    fig, axes = _figure(len(comparison.tables), title)
    return fig, list(zip(axes, comparison.tables))


def _names(ax, rows: list[Row]) -> None:
    ax.set_xticks(range(len(rows)), [r.name for r in rows], rotation=20 if len(rows) > 3 else 0, fontsize=8)


def _not_ok(ax, cfg: Row, x: float) -> None:
    status = ", ".join(sorted({r["status"] for r in cfg.records}))
    ax.text(x, 0.03, status, transform=ax.get_xaxis_transform(), rotation=90, va="bottom", ha="center",
            fontsize=9, color="#b00000", fontweight="bold")  # x in data, y in axes fraction: any scale


def steady(comparison: Comparison) -> Figure:
    """Steady-state step time per configuration, with its spread (CI where there are repeats)."""
    fig, panels = _panels(comparison, "Steady-state step time (median; bars: spread)")
    kinds = set()
    for ax, table in panels:
        for x, c in enumerate(table.rows):
            if c.spread is None:
                _not_ok(ax, c, x)
                continue
            low, high, kind = c.spread
            kinds.add(kind)
            # a median outside its own spread (p10-p90 of other numbers) draws no bar below or above it
            ax.bar(x, c.median_s * 1e3, color=colour(c.framework), width=0.6,
                   yerr=[[max(c.median_s - low, 0) * 1e3], [max(high - c.median_s, 0) * 1e3]], capsize=4)
            ax.annotate(_fmt(c.median_s * 1e3), (x, high * 1e3), textcoords="offset points",
                        xytext=(0, 3), ha="center", fontsize=8)
        _names(ax, table.rows)
        ax.set_title(table.model)
        ax.set_ylabel("step time (ms)")
        ax.margins(y=0.15)
    if kinds:
        fig.supxlabel("error bars: " + "; ".join(sorted(kinds)), fontsize=8)
    return fig


def breakdown(comparison: Comparison) -> Figure:
    """First step (tracing + compilation), second step and steady median, log scale."""
    fig, panels = _panels(comparison, "Compile cost: first, second and steady-state step (log scale)")
    width = 0.26
    for ax, table in panels:
        for x, c in enumerate(table.rows):
            if not c.ok:
                _not_ok(ax, c, x)
                continue
            for i, (name, key, hatch) in enumerate(PHASES):
                value = getattr(c, key) * 1e3
                ax.bar(x + (i - 1) * width, value, width, color=colour(c.framework), hatch=hatch,
                       edgecolor="white", linewidth=0)
                ax.annotate(_fmt(value), (x + (i - 1) * width, value), textcoords="offset points",
                            xytext=(0, 2), ha="center", fontsize=6.5)
        ax.set_yscale("log")
        _plain_log_ticks(ax)
        _names(ax, table.rows)
        ax.set_title(table.model)
        ax.set_ylabel("time (ms, log)")
        ax.margins(y=0.2)
    handles = [Patch(facecolor="#bbbbbb", hatch=h, label=n, edgecolor="white") for n, _, h in PHASES]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    return fig


def _per_step(comparison: Comparison, title: str, key: str, ylabel: str, scale: float, skip_first: bool,
              unit: str = "", log: bool = False) -> Figure:
    """One line per row (its first ok run's series); with `skip_first` (step times) the compile
    step is written under the panel's title and a dotted line marks where the steady state starts."""
    fig, panels = _panels(comparison, title)
    for ax, table in panels:
        notes = []
        for i, c in enumerate(table.rows):
            values = ((c.ok or list(c.records))[0].get("results") or {}).get(key) or []
            if skip_first and values:
                notes.append(f"{c.name} {_fmt(values[0] * scale)}")
            steps = list(range(1 if skip_first else 0, len(values)))
            if steps:
                # a line style per row too: equal series (torch eager and compiled) stay visible
                ax.plot(steps, [values[j] * scale for j in steps], color=colour(c.framework), label=c.name,
                        linestyle=LINE_STYLES[i % len(LINE_STYLES)], marker=MARKERS[i % len(MARKERS)],
                        markersize=max(2.0, 6 - 1.5 * i), linewidth=max(1.0, 2.4 - 0.6 * i))
        if not ax.lines:
            ax.text(0.5, 0.5, f"these records hold no per-step `{key}`\n(recorded before repro kept it)",
                    ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
        else:
            if log:
                ax.set_yscale("log")
                _plain_log_ticks(ax)
            if skip_first:  # where the timed steady state begins (a loss curve has no such point)
                warmup = view(table.rows[0].records[0]).config.run.warmup
                ax.axvline(warmup - 0.5, color="#888888", linestyle=":", linewidth=1)
                ax.annotate(f"steady state (from step {warmup})", (warmup - 0.5, 0.02),
                            xycoords=("data", "axes fraction"), xytext=(3, 0), textcoords="offset points",
                            fontsize=7, color="#555555")
        ax.set_title(table.model, pad=6)
        if notes:  # the compile step's time, under the panel's title (drawn, it would flatten the rest),
            # wrapped to the panel's width: one long line widened the figure and squeezed the panel
            note = textwrap.wrap(f"step 0 (compile, not drawn): {', '.join(notes)} {unit}", NOTE_CHARS)
            ax.annotate("\n".join(note), (0, 1), xycoords="axes fraction", xytext=(0, 3), textcoords="offset points",
                        fontsize=7.5, va="bottom", color="#333333")
            ax.set_title(table.model, pad=6 + 9.5 * len(note))
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
    lines = {ln.get_label(): ln for ax, _ in panels for ln in ax.lines if not ln.get_label().startswith("_")}
    if lines:
        fig.legend(handles=list(lines.values()), loc="outside lower center", ncols=_legend_columns(fig, lines))
    return fig


def _legend_columns(fig: Figure, labels) -> int:
    """As many legend columns as the figure's width holds for its longest label (at the legend's
    10 pt: about 0.08 inch a character, 0.9 inch for the line sample and the gaps); four at most."""
    widest = max(len(label) for label in labels)
    fits = int(fig.get_figwidth() // (0.9 + 0.08 * widest))
    return max(1, min(len(labels), 4, fits))


def loss(comparison: Comparison) -> Figure:
    """Training loss per step, frameworks overlaid."""
    return _per_step(comparison, "Loss per step", "loss", "loss", 1.0, skip_first=False)


def step_times(comparison: Comparison) -> Figure:
    """Each step's time from step 1 on; the first (compile) step is written, not drawn."""
    return _per_step(comparison, "Step time per step (after the compile step; log scale)", "step_time_s",
                     "step time (ms, log)", 1e3, skip_first=True, unit="ms", log=True)


def memory(comparison: Comparison) -> Figure:
    """Peak memory per configuration (host RSS on CPU, device memory on accelerators)."""
    fig, panels = _panels(comparison, "Peak memory")
    for ax, table in panels:
        kinds = set()
        for x, c in enumerate(table.rows):
            if not c.peak_bytes:
                _not_ok(ax, c, x)
                continue
            kinds.add((c.ok[0]["results"].get("peak_memory") or {}).get("kind", "?"))
            ax.bar(x, c.peak_bytes / 2**20, color=colour(c.framework), width=0.6)
            ax.annotate(_fmt(c.peak_bytes / 2**20), (x, c.peak_bytes / 2**20), textcoords="offset points",
                        xytext=(0, 3), ha="center", fontsize=8)
        _names(ax, table.rows)
        ax.set_title(f"{table.model} ({', '.join(sorted(kinds))})" if kinds else table.model)
        ax.set_ylabel("peak memory (MiB)")
        ax.margins(y=0.15)
    return fig


CATEGORY_COLOURS = dict(zip(CATEGORIES, ("#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd",
                                         "#8c8c8c", "#e0e0e0")))


def _bars(ax, g, share: bool) -> None:
    top = max(s.profile.step_ms for s in g.sides) if not share else 1.0
    for x, side in enumerate(g.sides):
        step, bottom = side.profile.step_ms, 0.0
        for cat in CATEGORIES:
            value = side.profile.categories_ms.get(cat, 0.0) / (step if share else 1.0)
            ax.bar(x, value, 0.6, bottom=bottom, color=CATEGORY_COLOURS[cat], edgecolor="white", linewidth=0.5)
            if value >= 0.06 * top:  # label only segments tall enough to hold it
                ax.text(x, bottom + value / 2, f"{value * (100 if share else 1 / step * 100):.0f}%", ha="center",
                        va="center", fontsize=7)
            bottom += value
        if not share:
            ax.plot([x - 0.38, x + 0.38], [side.timed_ms] * 2, color="black", linewidth=1.2, linestyle="--")
            ax.annotate(f"{_fmt(step)} ms", (x, bottom), textcoords="offset points",
                        xytext=(0, 3), ha="center", fontsize=8)
    ax.set_xticks(range(len(g.sides)), [s.framework for s in g.sides])
    ax.set_title(f"{g.name}: {'share of the step' if share else 'ms per step'}")
    ax.set_ylabel("share of the profiled step" if share else "ms per step")
    if share:
        ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    else:
        ax.margins(y=0.15)


def where_time_goes(comparison: Comparison) -> Figure | None:
    """Per group, one stacked bar per framework in ms per step (the timed steady median marked)
    and the same bars as shares of the step, in repro.profile.categories' order and colours."""
    from repro.report.where_time_goes import groups

    found = [g for g in groups(comparison) if g.sides]
    if not found:
        return None
    fig, axes = _figure(2 * len(found), "Where the time goes: one profiled step by category", height=3.8)
    for i, g in enumerate(found):
        _bars(axes[2 * i], g, share=False)
        _bars(axes[2 * i + 1], g, share=True)
    handles = [Patch(facecolor=CATEGORY_COLOURS[c], label=c) for c in CATEGORIES]
    handles.append(Line2D([0], [0], color="black", linestyle="--", label="timed steady median"))
    fig.legend(handles=handles, loc="outside lower center", ncols=5, fontsize=8)
    return fig


PLOTS: dict[str, Callable[[Comparison], Figure]] = {
    "steady_time.png": steady, "compile_breakdown.png": breakdown, "loss.png": loss,
    "step_time.png": step_times, "peak_memory.png": memory,
}


def write(comparison: Comparison, out: Path) -> list[Path]:
    written = []
    for name, plot in {**PLOTS, "where_time_goes.png": where_time_goes}.items():  # the last: profiled runs only
        fig = plot(comparison)
        if fig is None:
            continue
        path = out / name
        fig.savefig(path, dpi=100, metadata=PNG_METADATA)
        written.append(path)
    return written
