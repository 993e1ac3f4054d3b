"""The "where the time goes" plot: one stacked bar per framework, a panel per group, the
categories in repro.profile.categories' order and colours, the timed steady median marked."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from repro.profile.breakdown import groups
from repro.profile.categories import CATEGORIES

CATEGORY_COLOURS = dict(zip(CATEGORIES, ("#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd",
                                         "#8c8c8c", "#e0e0e0")))


def plot(cfgs) -> Figure | None:
    found = [g for g in groups(cfgs) if g.sides]
    if not found:
        return None
    from repro.report.plots import _figure

    fig, axes = _figure(len(found), "Where the time goes: one profiled step by category (ms)", height=3.6)
    for ax, g in zip(axes, found):
        for x, side in enumerate(g.sides):
            bottom = 0.0
            for cat in CATEGORIES:
                ms = side.profile["categories_ms"].get(cat, 0.0)
                ax.bar(x, ms, 0.6, bottom=bottom, color=CATEGORY_COLOURS[cat], edgecolor="white", linewidth=0.5)
                if ms >= 0.06 * side.profile["step_ms"]:
                    ax.text(x, bottom + ms / 2, f"{ms / side.profile['step_ms']:.0%}", ha="center", va="center",
                            fontsize=7)
                bottom += ms
            ax.plot([x - 0.35, x + 0.35], [side.timed_ms] * 2, color="black", linewidth=1.2, linestyle="--")
            ax.annotate(f"{side.profile['step_ms']:.3g}", (x, bottom), textcoords="offset points", xytext=(0, 3),
                        ha="center", fontsize=8)
        ax.set_xticks(range(len(g.sides)), [s.framework for s in g.sides])
        ax.set_title(g.name)
        ax.set_ylabel("ms per step")
        ax.margins(y=0.15)
    handles = [Patch(facecolor=CATEGORY_COLOURS[c], label=c) for c in CATEGORIES]
    handles.append(plt_line())
    fig.legend(handles=handles, loc="outside lower center", ncols=5, fontsize=8)
    return fig


def plt_line():
    from matplotlib.lines import Line2D

    return Line2D([0], [0], color="black", linestyle="--", label="timed steady median")
