"""`repro ledger list | show ID | verify | diff A B | recover | schema` (export: export.py)."""

from __future__ import annotations

import argparse
import json
import sys

from repro.console import console as terminal
from rich.table import Table

from repro.ledger import export, listing
from repro.ledger.diff import SECTIONS, record_diff
from repro.ledger.index import bulk
from repro.ledger.record import RecordError, view
from repro.ledger.schema import SCHEMA
from repro.ledger.state import state_of
from repro.ledger.store import Ledger, LedgerError
from repro.usertext import shown, shown_rows, plain


def _short(value, limit: int = 80) -> str:
    text = "—" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("ledger", help="list, show, verify, diff, recover, export ledger records; print their schema", parents=[common])
    lsub = p.add_subparsers(dest="action", required=True)
    ls = lsub.add_parser("list", help="the current state of every recorded run", parents=[common])
    ls.add_argument("--json", action="store_true", help="one JSON array of the records")
    ls.add_argument("--all", action="store_true", help="every record, superseded ones too")
    show = lsub.add_parser("show", help="one record", parents=[common])
    show.add_argument("id", help="a record id or a unique prefix of one")
    show.add_argument("--json", action="store_true", help="the record as JSON, as it is on disk")
    v = lsub.add_parser("verify", help="check every record file: JSON, schema, content hash, duplicates, links; "
                        "warn of lost runs", parents=[common])
    v.add_argument("--full", action="store_true",
                   help="read and hash every file (default: a file unchanged since it last passed is not read again)")
    lsub.add_parser("recover", help="append the finished records spooled under <ledger>/.spool/", parents=[common])
    lsub.add_parser("schema", help="print the JSON Schema of a record (reads no ledger: no --ledger)"
                    ).set_defaults(reads_ledger=False)
    d = lsub.add_parser("diff", help="config, environment, data and results differences of two records",
                        parents=[common])
    d.add_argument("a", help="a record id (or a unique prefix of one)")
    d.add_argument("b", help="the record to compare it with")
    p.set_defaults(func=run)
    export.add_parser(lsub, common)


def _list(ledger: Ledger, args: argparse.Namespace) -> int:
    with ledger.one_scan(), bulk():  # its rows and the records it marks changed: one listing of the files
        return _list_once(ledger, args)


def _list_once(ledger: Ledger, args: argparse.Namespace) -> int:
    entries = ledger.entries() if args.all else ledger.head_entries()
    if args.json:  # the record files as they are: nothing to parse and print again
        texts = [data.rstrip() for e in entries if (data := ledger.read(e)) is not None]
        sys.stdout.flush()
        sys.stdout.buffer.write(b"[\n" + b",\n".join(texts) + b"\n]\n")
        return 0
    # a run's state (lost...) from its newest record; --all lists superseded ones too, as recorded
    body = shown_rows(listing.rows(ledger, entries, states=not args.all))  # user text: no escapes
    listing.print_table(terminal(), shown(f"ledger {ledger.root} ({len(body)} records)"), body)
    if marked := sum(listing.CHANGED_MARK in row[2] for row in body):
        print(f"{marked} record(s) marked '{listing.CHANGED_MARK}' were edited after they were written: their "
              "figures cannot be trusted (repro ledger verify names each file)", file=sys.stderr)
    return 0


def _show(ledger: Ledger, args: argparse.Namespace) -> int:
    record = ledger.get(args.id)
    if args.json:
        print(json.dumps(record, indent=1, default=str))
        return 0
    console = terminal()
    console.print_json(json.dumps(record, default=str))
    if "config" in record:
        try:
            unknown = view(record).unknown_keys
        except RecordError as e:
            print(f"repro ledger show: {e}", file=sys.stderr)
            return 2
        if unknown:  # kept in the record as written; no reader of this repro reads them
            console.print(shown(f"config keys this repro's schema does not know (kept as written): {', '.join(unknown)}"))
    if "scheduler" in record:
        from repro.ledger.render import scheduler

        console.print(f"ran under: {scheduler(record['scheduler'])}")
    state = state_of(ledger.current(record))
    if state.text != record.get("status"):
        console.print(f"its run: {state}")
    return 0


def _diff(ledger: Ledger, args: argparse.Namespace) -> int:
    a, b = ledger.get(args.a), ledger.get(args.b)
    sections = record_diff(a, b)
    if not sections:
        print(f"{a['id']} and {b['id']}: no differences in {', '.join(SECTIONS)}")
    for section, rows in sections.items():
        t = Table(title=f"{section}: {len(rows)} difference(s)", title_justify="left")
        for col in ("key", a["id"], b["id"]):
            t.add_column(col, overflow="fold")
        for key, x, y in rows:
            t.add_row(plain(key), plain(_short(x)), plain(_short(y)))
        terminal().print(t)
    return 0


def _verify(ledger: Ledger, args: argparse.Namespace) -> int:
    found = ledger.check(full=args.full)
    for p in found.warnings:
        print(f"WARN {p}", file=sys.stderr)
    warned = f"; {len(found.warnings)} warning(s)" if found.warnings else ""
    if found.problems:
        for p in found.problems:
            print(f"FAIL {p}", file=sys.stderr)
        print(f"ledger verify: {len(found.problems)} problem(s) in {found.files} files under {ledger.root}"
              f"{warned}", file=sys.stderr)
        return 1
    unread = found.files - found.read
    said = [f"{unread} unchanged since they last passed, not read again"] if unread else []
    if found.vouched:
        said.append(f"{found.vouched} read and hashed, not parsed: the travelling index (.checked/) vouched for their bytes")
    again = f" ({'; '.join(said)}; --full reads every file)" if said else ""
    print(f"ledger verify: {found.files} records under {ledger.root}, every content hash and schema "
          f"matches{again}{warned}")
    return 0


def _schema(ledger: Ledger, args: argparse.Namespace) -> int:
    print(json.dumps(SCHEMA, indent=1))
    return 0


def _recover(ledger: Ledger, args: argparse.Namespace) -> int:
    done = ledger.recover()
    for path, record in done.recovered:
        print(f"recovered {path} as record {record['id']} ({record.get('status')}, after {record.get('prev')})")
    for path in done.running:
        print(f"left {path}: its run is still running and will record it itself")
    if done.released:
        print(f"freed {len(done.released)} reservation(s) of runs that ended without using them "
              f"({', '.join(p.name for p in done.released)})")
    for r in done.superseded:
        print(f"marked the lost run {r['prev']} superseded by run {r['superseded_by']} (record {r['id']})")
    for p in done.failed:
        print(f"repro ledger recover: {p}", file=sys.stderr)
    if not (done.recovered or done.running or done.failed or done.released or done.superseded):
        print(f"nothing to recover: no spooled records under {ledger.spool_dir}")
    return 1 if done.failed else 0


ACTIONS = {"list": _list, "show": _show, "diff": _diff, "verify": _verify, "recover": _recover, "schema": _schema}


_last: list = []  # the last command's Ledger, kept (see run)


def run(args: argparse.Namespace) -> int:
    """`repro ledger ACTION`: one function per action (export is its own module); a LedgerError is one line, exit 2.

    The Ledger is kept until the next command: `repro` ends by os._exit (repro.cli.main), and
    freeing what a command over 100,000 records built (listing, index, checks) took 0.19 s of
    its wall on the 2-core machine, after its output was written."""
    try:
        ledger = Ledger(args.ledger) if args.ledger else None
        _last[:] = [ledger]
        return ACTIONS[args.action](ledger, args)
    except LedgerError as e:
        print(f"repro ledger: {e}", file=sys.stderr)
        return 2
