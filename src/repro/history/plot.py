"""The history's PNG (matplotlib, Agg, a bare Figure as report/plots.py draws): one panel per
series, its run medians in the order they finished, each segment's median as a line, each
change a dashed line between the two runs on either side with its step written beside it
(after/before ×, its 95 % interval). A run on a dirty tree is a hollow marker. The figure's
size is fixed (WIDTH_IN × PANEL_IN a panel, at DPI): the same series give the same pixels."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from repro.history.analysis import Found, percent
from repro.report.plots import PNG_METADATA

WIDTH_IN, PANEL_IN, TITLE_IN, DPI = 10.0, 3.6, 0.8, 100
POINT, SEGMENT, CHANGE = "#1f77b4", "#2ca02c", "#d62728"
TITLE_CHARS = 110  # a panel title's line at 9 pt across 10 inches


def size_px(panels: int) -> tuple[int, int]:
    """The PNG's (width, height) in pixels for `panels` series."""
    return round(WIDTH_IN * DPI), round((PANEL_IN * panels + TITLE_IN) * DPI)


def _ticks(ax, found: Found) -> None:
    """Ticks at about eight runs: the run's number, and the day it finished under it."""
    points = found.series.points
    every = max(1, int(np.ceil(len(points) / 8)))
    at = sorted({*range(0, len(points), every), *(c.index for c in found.changes)})
    ax.set_xticks(at, [f"{i}\n{points[i].finished[5:10]}" for i in at], fontsize=7)


def _panel(ax, found: Found) -> None:
    points = found.series.points
    ms = np.array([p.median_s * 1e3 for p in points])
    x = np.arange(len(points))
    clean = np.array([not p.dirty for p in points])
    ax.plot(x[clean], ms[clean], "o", color=POINT, markersize=4)
    ax.plot(x[~clean], ms[~clean], "o", markerfacecolor="none", markeredgecolor=POINT, markersize=4)
    cuts = [0, *(c.index for c in found.changes), len(points)]
    for a, b in zip(cuts, cuts[1:]):
        ax.hlines(np.median(ms[a:b]), a - 0.4, b - 0.6, color=SEGMENT, linewidth=2)
    for k, c in enumerate(found.changes):
        ax.axvline(c.index - 0.5, color=CHANGE, linestyle="--", linewidth=1.2)
        ax.annotate(f"×{c.ratio:.3f} ({c.lo:.3f}–{c.hi:.3f})\n{percent(c.ratio)}", (c.index - 0.5, 0.97),
                    xycoords=("data", "axes fraction"), xytext=(4, -4 - 26 * (k % 2)), textcoords="offset points",
                    va="top", fontsize=8, color=CHANGE, fontweight="bold",
                    bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
    ax.set_xlim(-1, len(points))
    ax.margins(y=0.25)
    _ticks(ax, found)
    ax.set_ylabel("steady median (ms)")
    ax.set_xlabel("run, in the order they finished (under it: the day, MM-DD)", fontsize=8)
    ax.set_title("\n".join(textwrap.wrap(found.series.title, TITLE_CHARS)), fontsize=9, loc="left")
    ax.grid(axis="y", color="#dddddd", linewidth=0.6)


def figure(found: list[Found], title: str) -> Figure:
    fig = Figure(figsize=(WIDTH_IN, PANEL_IN * len(found) + TITLE_IN), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(found), 1, squeeze=False).ravel()
    for ax, f in zip(axes, found):
        _panel(ax, f)
    fig.suptitle(title, fontsize=11, fontweight="bold")
    dirty = any(p.dirty for f in found for p in f.series.points)
    handles = [Line2D([], [], marker="o", linestyle="", color=POINT, label="run (its steady median)"),
               *([Line2D([], [], marker="o", linestyle="", markerfacecolor="none", markeredgecolor=POINT,
                         label="run on a dirty tree")] if dirty else []),
               Line2D([], [], color=SEGMENT, linewidth=2, label="median between changes"),
               *([Line2D([], [], color=CHANGE, linestyle="--", label="change: after/before × (95 % CI)")]
                 if any(f.changes for f in found) else [])]
    fig.legend(handles=handles, loc="outside lower center", fontsize=8, ncols=len(handles), frameon=False)
    return fig


def write(found: list[Found], path: Path, title: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure(found, title).savefig(path, dpi=DPI, metadata=PNG_METADATA)
    return path
