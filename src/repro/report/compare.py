"""`repro compare ID ID...`: the fairness audit, then the runs side by side."""

from __future__ import annotations

import sys
from collections import defaultdict

from repro import report
from repro.ledger import Ledger, LedgerError
from repro.report.audit import print_audit
from repro.report.table import comparison_tables


def print_comparison(console, records: list[dict]) -> None:
    """Per model: the audit of its runs, then their table (also a sweep's closing output)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        groups[f"{r['config']['model']['name']}/{r['config']['model']['preset']}"].append(r)
    for rows in groups.values():
        for table in comparison_tables(rows):
            console.print(table)
        print_audit(console, rows)


def add_parser(sub, common) -> None:
    p = sub.add_parser("compare", help="runs side by side, with every difference besides the framework",
                       parents=[common])
    p.add_argument("ids", nargs="+", help="ledger ids (or unique prefixes) of runs")
    p.set_defaults(func=run)


def run(args) -> int:
    ledger = Ledger(args.ledger)
    try:
        records = [ledger.get(i) for i in args.ids]
    except LedgerError as e:
        print(f"repro compare: {e}", file=sys.stderr)
        return 2
    not_runs = [r["id"] for r in records if r.get("kind") != "run" or "config" not in r]
    if not_runs:
        print(f"repro compare: {', '.join(not_runs)} are not run records", file=sys.stderr)
        return 2
    console = report.console()
    print_audit(console, records)
    for table in comparison_tables(records):
        console.print(table)
    return 0
