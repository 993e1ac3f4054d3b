"""`repro sync [--ledger DIR] [--tracking-uri URI] [--experiment NAME]`: MLflow caught up with the ledger.

Every run the ledger holds and MLflow lacks (its store was down, full or locked, or the
projection was cut short) is projected the way the live path does it (tracking/project.py),
under its sweep's parent run. Runs are matched through the `repro.ledger_id` tag, so a
second sync adds nothing. MLflow runs left RUNNING whose ledger chain has ended, or whose
`started` record's parent process is gone (lost), are closed, and so are sweep parents
whose sweep process is gone. Without --tracking-uri/--experiment each record goes to the
store and experiment it was run with.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from repro.config import ConfigError
from repro.ledger import Ledger, LedgerError
from repro.ledger.record import view
from repro.redaction import redact
from repro.tracking import failure_line


def _heads(ledger: Ledger) -> tuple[list[dict], dict[str, dict]]:
    """The runs' newest records, and every record id of a chain mapped to its newest record.
    Chains come from the ledger's index: only the heads are read."""
    prev_of = {e.id: e.prev for e in ledger.entries()}
    heads = ledger.heads(kind="run")
    head_of = {}
    for head in heads:
        rid = head["id"]
        while rid and rid not in head_of:
            head_of[rid] = head
            rid = prev_of.get(rid)
    return heads, head_of


def sync(ledger_dir: str, tracking_uri: str | None = None, experiment: str | None = None) -> dict[str, int]:
    """Under the ledger's projection lock (a background projector still at work finishes first)."""
    from repro.tracking import handoff

    if handoff.busy(ledger_dir):
        print("repro sync: waiting for the background MLflow projection of this ledger to finish", file=sys.stderr)
    with handoff.lock(ledger_dir):
        return _sync(ledger_dir, tracking_uri, experiment)


def _sync(ledger_dir: str, tracking_uri: str | None, experiment: str | None) -> dict[str, int]:
    from repro.tracking import drain, handoff

    ledger = Ledger(ledger_dir)  # one reader: a damaged file is said once
    drained = {"pushed": 0, "sweeps": 0, "left": 0}
    if not tracking_uri and not experiment and handoff.entries(ledger_dir):
        # what a session handed over (worker logs, IR, a sweep's report) goes in as the projector writes it
        drained = drain.drain(ledger_dir, say=False, ledger=ledger)
        if drained["left"]:
            failed = handoff.recorded_failure(ledger_dir) or {}
            raise drain.ProjectionFailed(failed.get("error") or f"{drained['left']} pending entries could not be projected")
        print(f"repro sync: {drained['pushed']} run(s) and {drained['sweeps']} sweep(s) handed over by earlier "
              "commands put into MLflow")
    if line := handoff.rejected_line(ledger_dir):
        print(f"repro sync: {line}", file=sys.stderr)
    heads, head_of = _heads(ledger)
    stores = defaultdict(list)
    for head in heads:
        tracking = view(head).config.tracking
        stores[(tracking_uri or tracking.uri, experiment or tracking.experiment)].append(head)
    total = {"pushed": 0, "replaced": 0, "closed": 0, "present": 0}
    for (uri, name), runs in stores.items():
        counts = drain.sync_store(drain.open_store(uri, name), runs, head_of)
        print(f"repro sync: {redact(uri)} experiment {name!r}: {counts['pushed']} run(s) put into MLflow "
              f"({counts['replaced']} replacing incomplete ones), {counts['closed']} closed (left RUNNING, or "
              f"a finished sweep's parent), {counts['present']} already there")
        total = {k: total[k] + counts[k] for k in total}
    _bisections(ledger, tracking_uri, experiment)
    # the drained runs were put in by this sync, not found there; their sweeps' parents closed by it
    return {**total, "pushed": total["pushed"] + drained["pushed"], "present": total["present"] - drained["pushed"],
            "closed": total["closed"] + drained["sweeps"]}


def _bisections(ledger: Ledger, tracking_uri: str | None, experiment: str | None) -> None:
    """Each bisection's newest record (repro bisect) as its MLflow parent and probes, in the store of its runs."""
    from repro.tracking import drain
    from repro.tracking.project import project_bisect

    for record in ledger.heads(kind="bisect"):
        try:
            run = view(ledger.get(record["runs"][0]))
        except (LedgerError, IndexError, KeyError):
            continue  # no run recorded (refused before any ran): nothing to show beside
        if not run.recorded("tracking"):
            continue  # a run that names no store (its config lacks `tracking`): nowhere to put it beside
        tracking = run.config.tracking
        project_bisect(drain.open_store(tracking_uri or tracking.uri, experiment or tracking.experiment), record)


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("sync", parents=[common],
                       help="put every ledger run missing from MLflow into it; close runs left RUNNING")
    p.add_argument("--tracking-uri", help="the store to fill (default: each record's own)")
    p.add_argument("--experiment", help="the experiment to fill (default: each record's own)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repro import preflight

    try:
        if args.tracking_uri:
            preflight.check_tracking_uri(args.tracking_uri)
        if args.experiment:
            preflight.check_experiment_name(args.experiment)
    except ConfigError as e:
        print(f"repro sync: {e}", file=sys.stderr)
        return 2
    try:
        sync(args.ledger, args.tracking_uri, args.experiment)
    except LedgerError as e:  # the ledger, not MLflow
        print(f"repro sync: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a store that is down: one line, not a traceback
        from repro.tracking.drain import ProjectionFailed

        line = str(e) if isinstance(e, ProjectionFailed) else failure_line(e)
        print(f"repro sync: MLflow failed: {line}; nothing is lost (the ledger holds every "
              "run): fix the store and sync again", file=sys.stderr)
        return 1
    return 0
