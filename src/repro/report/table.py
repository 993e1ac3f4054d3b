"""The comparison in the terminal (rich): one table per model, its verdicts, its audit.

A renderer of report/comparison.py and nothing else: every cell is `Row.cells()`, the title
and the "× best" rule are the table's `header`.
"""

from __future__ import annotations

from rich.table import Table as RichTable

from repro.report.audit import print_audit
from repro.report.comparison import Comparison, Table

LEFT = ("name", "status", "ledger", "loss_sha256", "trajectory")


def rich_table(table: Table) -> RichTable:
    t = RichTable(title=table.header, title_justify="left")
    for key, header in table.columns:
        t.add_column(header, justify="left" if key in LEFT else "right", no_wrap=key in ("name", "status", "ledger", "ci"))
    for row in table.rows:
        cells = row.cells()
        t.add_row(*(cells[key] for key, _ in table.columns))
    return t


def print_comparison(console, comparison: Comparison) -> None:
    """Per model: its table, its verdicts, then its audit (a sweep's closing output and `repro compare`)."""
    for table in comparison.tables:
        console.print(rich_table(table))
        for verdict in table.verdicts:
            console.print(f"[bold]{verdict.text}[/]")
        print_audit(console, table.audit, table.records)
