"""Tables as a person sees them: in a real terminal (a pty, `script`) of 80, 120 and 200 columns,
a 3-framework sweep's close and `repro compare` of it and of the shipped ledger: no line wider
than the terminal, every number of the default columns whole on one line; off a terminal the
same table at 120 columns."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shipped_ledger
from repro.ledger import Ledger
from repro.report import comparison, compare
from repro.report.table import DEFAULT, FILE_WIDTH

pytestmark = pytest.mark.slow  # every test here starts a process

SHIPPED = shipped_ledger()  # the git-tracked records (conftest): not what a user ran since
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
NUMBERS = ("median", "ci", "x_best", "samples_per_s", "first", "peak_mib")


def in_terminal(cols: int, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> list[str]:
    """The lines `argv` prints in a pty of `cols` columns (script(1)), colour codes removed."""
    out = cwd / f"capture-{cols}.txt"
    env = {k: v for k, v in (env or os.environ).items() if k not in ("COLUMNS", "LINES")}
    subprocess.run(["script", "-qec", f"stty cols {cols} rows 50; {shlex.join(argv)}", str(out)], cwd=cwd, env=env,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True, timeout=900)
    text = ANSI.sub("", out.read_text(encoding="utf-8", errors="replace")).replace("\r", "")
    return [ln for ln in text.split("\n") if not ln.startswith("Script ")]


def _assert_fits(lines: list[str], cols: int, comp: comparison.Comparison) -> None:
    assert max(len(ln) for ln in lines) <= cols, max(lines, key=len)
    text = "\n".join(lines)
    for row in comp.rows:
        cells = row.cells()
        for key in NUMBERS:  # whole, on one line, never "992…"
            if cells[key] != comparison.MISSING:
                assert re.search(rf"(^|[\s:]){re.escape(cells[key])}(\s|$)", text, re.M), (cols, key, cells[key])
    assert "…" not in text


@pytest.mark.parametrize("cols", [80, 120, 200])
def test_compare_of_the_shipped_ledger_fits(cols, tmp_path):
    lines = in_terminal(cols, [sys.executable, "-m", "repro", "compare", "--experiment", "quickstart", "--ledger",
                               str(SHIPPED)], tmp_path)
    _assert_fits(lines, cols, comparison.build(compare.newest_sweep(Ledger(SHIPPED), "quickstart")))
    assert any(ln.startswith("machine: ") for ln in lines)


def test_blocks_when_no_grid_fits(tmp_path):
    """A terminal too narrow for the default grid: one block per run, never a squeezed grid."""
    lines = in_terminal(60, [sys.executable, "-m", "repro", "compare", "--experiment", "quickstart", "--ledger",
                             str(SHIPPED)], tmp_path)
    assert "  steady median (ms): 0.30952" in lines and max(len(ln) for ln in lines) <= 60


def test_off_a_terminal_the_same_table_at_120_columns():
    proc = subprocess.run([sys.executable, "-m", "repro", "compare", "--experiment", "quickstart", "--ledger",
                           str(SHIPPED)], capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
    table = proc.stdout.split("## First step")[0].splitlines()
    assert proc.returncode == 0 and max(len(ln) for ln in table) <= FILE_WIDTH
    header = next(ln for ln in table if ln.startswith("run "))
    assert "steady median (ms)" in header and "loss sha256" not in header  # the default columns, one line each
    wide = subprocess.run([sys.executable, "-m", "repro", "compare", "--experiment", "quickstart", "--ledger",
                           str(SHIPPED), "--wide"], capture_output=True, text=True).stdout
    assert "loss sha256" in wide and "p10–p90 (ms)" in wide
    assert {k for k in DEFAULT} < {k for k, _ in comparison.CELLS}


@pytest.mark.slow
def test_a_three_framework_sweep_closes_within_the_terminal(sandbox):
    """The close of `-m framework=jax,torch,torch_compile` in an 80-column pty (the narrowest a
    person is promised), then its `repro compare` at 80, 120 and 200 columns."""
    argv = [*sandbox.repro_cmd("-m", "framework=jax,torch,torch_compile", "model=mlp", "run.steps=6",
                               "tracking.experiment=widths")]
    argv[-1] = "progress.mode=none"
    lines = in_terminal(80, argv, sandbox.root, sandbox.env())
    comp = comparison.build(compare.newest_sweep(Ledger(sandbox.ledger), "widths"))
    assert len(comp.rows) == 3
    _assert_fits(lines, 80, comp)
    assert sum(ln.startswith("machine: ") for ln in lines) == 1 and not any("MACHINE" in ln for ln in lines)
    assert any(ln.startswith("report: ") for ln in lines)
    for cols in (80, 120, 200):
        _assert_fits(in_terminal(cols, [sys.executable, "-m", "repro", "compare", "--experiment", "widths",
                                        "--ledger", str(sandbox.ledger)], sandbox.root, sandbox.env()), cols, comp)
