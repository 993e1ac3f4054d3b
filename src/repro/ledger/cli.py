"""`repro ledger list | show ID | verify`."""

from __future__ import annotations

import argparse
import json
import sys

from repro import report
from rich.table import Table

from repro.ledger import export
from repro.ledger.diff import SECTIONS, record_diff
from repro.ledger.store import Ledger, LedgerError


def _short(value, limit: int = 80) -> str:
    text = "—" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("ledger", help="list, show and verify ledger records", parents=[common])
    lsub = p.add_subparsers(dest="action", required=True)
    ls = lsub.add_parser("list", help="the current state of every recorded run", parents=[common])
    ls.add_argument("--json", action="store_true", help="one JSON array of the records")
    ls.add_argument("--all", action="store_true", help="every record, superseded ones too")
    show = lsub.add_parser("show", help="one record", parents=[common])
    show.add_argument("id", help="a record id or a unique prefix of one")
    show.add_argument("--json", action="store_true")
    lsub.add_parser("verify", help="recompute every record's content hash", parents=[common])
    d = lsub.add_parser("diff", help="config, environment, data and results differences of two records",
                        parents=[common])
    d.add_argument("a")
    d.add_argument("b")
    p.set_defaults(func=run)
    export.add_parser(lsub, common)


def _row(r: dict) -> list[str]:
    cfg = r.get("config", {})
    res = r.get("results") or {}
    med = res.get("steady_median_s")
    return [r["id"], r.get("created", "")[:19], r.get("status", ""), r.get("kind", ""),
            (r.get("sweep") or {}).get("experiment", ""), cfg.get("framework", {}).get("name", ""),
            f"{cfg.get('model', {}).get('name', '')}/{cfg.get('model', {}).get('preset', '')}",
            f"{med * 1e3:.2f}" if med else "-", r.get("config_hash", "")[:12]]


def run(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger)
    console = report.console()
    try:
        if args.action == "list":
            records = list(ledger.records()) if args.all else ledger.heads()
            if args.json:
                print(json.dumps(records, indent=1, default=str))
                return 0
            t = Table(title=f"ledger {ledger.root} ({len(records)} records)", title_justify="left")
            for col in ("id", "created", "status", "kind", "experiment", "framework", "model", "steady ms", "config hash"):
                t.add_column(col)
            for r in records:
                t.add_row(*_row(r))
            console.print(t)
        elif args.action == "show":
            record = ledger.get(args.id)
            if args.json:
                print(json.dumps(record, indent=1, default=str))
            else:
                console.print_json(json.dumps(record, default=str))
        elif args.action == "diff":
            a, b = ledger.get(args.a), ledger.get(args.b)
            sections = record_diff(a, b)
            if not sections:
                print(f"{a['id']} and {b['id']}: no differences in {', '.join(SECTIONS)}")
            for section, rows in sections.items():
                t = Table(title=f"{section}: {len(rows)} difference(s)", title_justify="left")
                for col in ("key", a["id"], b["id"]):
                    t.add_column(col, overflow="fold")
                for key, x, y in rows:
                    t.add_row(key, _short(x), _short(y))
                console.print(t)
        elif args.action == "verify":
            problems = ledger.verify()
            count = len(ledger.paths())
            if problems:
                for p in problems:
                    print(f"FAIL {p}", file=sys.stderr)
                print(f"ledger verify: {len(problems)} problem(s) in {count} records under {ledger.root}", file=sys.stderr)
                return 1
            print(f"ledger verify: {count} records under {ledger.root}, every content hash matches")
    except LedgerError as e:
        print(f"repro ledger: {e}", file=sys.stderr)
        return 2
    return 0
