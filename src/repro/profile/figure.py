"""The "where the time goes" plot: per group, one stacked bar per framework in ms per step
(the timed steady median marked) and the same bars as shares of the step, the categories in
repro.profile.categories' order and colours."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from repro.profile.breakdown import groups
from repro.profile.categories import CATEGORIES
from repro.report.plots import _figure, _fmt

CATEGORY_COLOURS = dict(zip(CATEGORIES, ("#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd",
                                         "#8c8c8c", "#e0e0e0")))


def _bars(ax, g, share: bool) -> None:
    top = max(s.profile["step_ms"] for s in g.sides) if not share else 1.0
    for x, side in enumerate(g.sides):
        step, bottom = side.profile["step_ms"], 0.0
        for cat in CATEGORIES:
            value = side.profile["categories_ms"].get(cat, 0.0) / (step if share else 1.0)
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


def plot(comparison) -> Figure | None:
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
