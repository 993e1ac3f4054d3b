"""Every PNG of a report fits its figure: legends, captions and titles inside the image, and each
panel keeps its height, whatever the row names. Read off the real H100 records in
experiments/gpu/ledger (six rows with names up to "torch_compile · impl native", the sweep whose
first render cut the legend at both edges and squeezed the step-time panel to a sliver)."""

from __future__ import annotations

import pytest

from repro import paths
from repro.ledger import Ledger
from repro.report import compare, comparison, plots

GPU_LEDGER = paths.repo_root() / "experiments" / "gpu" / "ledger"


@pytest.fixture(scope="module")
def vit_l4_h100():
    return comparison.build(compare.newest_sweep(Ledger(GPU_LEDGER), "vit_l4"))


def _outside(fig) -> list[str]:
    """The artists drawn (partly) outside the figure, by what they say."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # what savefig renders PNGs with
    canvas.draw()
    renderer = canvas.get_renderer()
    box = fig.bbox
    drawn = [*fig.legends, *fig.texts, *(a for ax in fig.axes if ax.get_visible() for a in (*ax.texts, ax.title))]
    out = []
    for artist in drawn:
        if not artist.get_visible() or (hasattr(artist, "get_text") and not artist.get_text()):
            continue
        extent = artist.get_window_extent(renderer)
        if extent.x0 < box.x0 - 1 or extent.x1 > box.x1 + 1 or extent.y0 < box.y0 - 1 or extent.y1 > box.y1 + 1:
            out.append(getattr(artist, "get_text", lambda: "legend")())
    return out


@pytest.mark.parametrize("name", sorted(plots.PLOTS))
def test_each_plot_fits_its_figure_and_keeps_its_panels(vit_l4_h100, name, tmp_path):
    assert len(vit_l4_h100.tables[0].rows) == 6
    fig = plots.PLOTS[name](vit_l4_h100)
    fig.savefig(tmp_path / name, dpi=100)
    assert _outside(fig) == [], f"{name}: drawn outside the image"
    for ax in fig.axes:
        if ax.get_visible():
            height = ax.get_position().height  # a fraction of the figure's
            assert height > 0.3, f"{name}: a panel squeezed to {height:.0%} of the figure's height"
