"""The comparison in the terminal (rich): one table per model, its verdicts, a machine line, its audit.

A renderer of report/comparison.py and nothing else: every cell is `Row.cells()`, the title
and the "× best" rule are the table's `header`.

Where it is read decides its width: a terminal's own width (at least 80 columns), else (a
file, CI, a SLURM log) a fixed 120. By default the columns a person decides on (DEFAULT);
`wide` shows every column at its natural width, as report.md and results.csv do. A number is
never cut: a grid that cannot hold its cells whole at that width becomes one block per run
(its name, then `key: value` lines). Verdicts and the audit wrap at word boundaries.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table as RichTable

from repro.console import UNBOUNDED_WIDTH
from repro.usertext import markup, plain
from repro.report import determinism_price, identity
from repro.report.audit import print_audit, print_machine_summary
from repro.report.comparison import Comparison, Table
from repro.report.where_time_goes import headline

LEFT = ("name", "status", "ledger", "loss_sha256", "trajectory")
WRAPS = ("name", "status", "trajectory", "ledger")  # text cells that may wrap at their words; numbers never
DEFAULT = ("name", "status", "median", "ci", "x_best", "samples_per_s", "first", "peak_mib",
           "test_acc")  # test accuracy only where a row has it (a training run on real data: +exp=digits)
FILE_WIDTH = 120  # not a terminal: the same table at a fixed width
# No frame, blank dividers, one rule under the header broken where the columns part (a reader,
# or a test, finds the columns from it): the least width a grid can take and still read as one.
RULED = box.Box("    \n    \n ─  \n    \n    \n    \n    \n    \n")


def width_of(console: Console) -> int:
    return console.width if console.is_terminal else FILE_WIDTH


def _columns(table: Table, wide: bool) -> list[tuple[str, str]]:
    return table.columns if wide else [(k, h) for k, h in table.columns if k in DEFAULT]


def _grid(table: Table, columns: list[tuple[str, str]], widths: list[int] | None) -> RichTable:
    t = RichTable(title=plain(table.header), title_justify="left", box=RULED, show_edge=False, pad_edge=False,
                  collapse_padding=True)
    for i, (key, header) in enumerate(columns):
        t.add_column(plain(header), justify="left" if key in LEFT else "right", width=widths[i] if widths else None,
                     no_wrap=widths is None, overflow="fold")
    for row in table.rows:
        cells = row.cells()
        t.add_row(*(plain(cells[key]) for key, _ in columns))
    return t


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def fitted(table: Table, width: int, wide: bool = False) -> RichTable | None:
    """The table at most `width` columns wide with every cell's words whole (numbers whole), or
    None when even that does not fit (then: blocks). `wide`: every column, at its natural width."""
    columns = _columns(table, wide)
    if wide:
        return _grid(table, columns, None)
    cells = [row.cells() for row in table.rows]
    natural = [max([len(h), *(len(c[k]) for c in cells)]) for k, h in columns]
    minimum = [max([_longest_word(h), *((_longest_word(c[k]) if k in WRAPS else len(c[k])) for c in cells)])
               for k, h in columns]
    overhead = 2 * (len(columns) - 1)  # no edges, collapsed padding: a space and a (blank) divider between columns
    room = width - overhead - sum(minimum)
    if room < 0:
        return None
    widths = list(minimum)
    for i in sorted(range(len(columns)), key=lambda i: natural[i] - minimum[i]):  # unwrap the cheapest first
        grow = min(room, natural[i] - minimum[i])
        widths[i] += grow
        room -= grow
    return _grid(table, columns, widths)


def print_blocks(console: Console, table: Table, wide: bool = False) -> None:
    """One block per run: its name, then `header: cell` lines (the width holds no grid)."""
    console.print(plain(table.header, style="bold"))
    for row in table.rows:
        cells = row.cells()
        console.print(plain(cells["name"], style="bold"))
        for key, header in _columns(table, wide):
            if key != "name":
                console.print(plain(f"  {header}: {cells[key]}"), highlight=False)


def print_comparison(console: Console, comparison: Comparison, wide: bool = False, hint: str = "") -> None:
    """Per model: its table, its verdicts, its audit; then one machine line for all runs (a
    sweep's closing output and `repro compare`). `hint`: where every column is (default tables)."""
    width = width_of(console)
    out = console if console.is_terminal else Console(file=console.file, width=width, highlight=False)
    for table in comparison.tables:
        grid = fitted(table, width, wide)
        if grid is None:
            print_blocks(out, table, wide)
        elif wide:  # its natural width, whatever the terminal's
            Console(file=console.file, width=UNBOUNDED_WIDTH, force_terminal=console.is_terminal,
                    highlight=False).print(grid)
        else:
            out.print(grid)
        for verdict in table.verdicts:
            out.print(plain(verdict.text, style="bold"))
        if (same := identity.table_line(table.rows))[0]:
            out.print(plain(same[0], style="bold red" if same[1] else ""))
        print_audit(out, table.audit, table.records)
        for row in table.rows:  # profiled runs: their top categories and where their traces are
            if row.ok and (line := headline(row.ok[0], row.name)):
                out.print(plain(line), highlight=False)
    if warm := sum(row.warm for row in comparison.rows):
        cold_too = any(row.warm and not row.first_warm for row in comparison.rows)
        out.print(plain(f"first/second steps: {'each config’s cold runs only; ' if cold_too else ''}{warm} run(s) started "
                        "with a warm compile cache (run.compile_cache), whose first steps did not compile from nothing"
                        + ("; a first step marked 'warm' had no cold run" if any(r.first_warm for r in comparison.rows)
                           else "")), highlight=False)
    for line in determinism_price.lines(comparison):
        out.print(plain(f"price of determinism: {line}", style="bold"))
    print_machine_summary(out, comparison)
    if hint and not wide and any(len(t.columns) > len(_columns(t, False)) for t in comparison.tables):
        out.print(f"[dim]{markup(hint)}[/]")
