"""`python -m repro.tracking.projector LEDGER`: the ledger's pending entries into MLflow.

Started detached by a session at its close (tracking/handoff.py), after the last worker's
measured steps, so MLflow's import (~2.7 s), its store opening (~1.7 s) and its writes cost
the person at the terminal nothing and run beside no measured step. One projector per ledger
at a time (a lock); each entry is removed once MLflow has it, so a projector that is killed,
or a store that fails, leaves the rest for the next projector or for `repro sync`, which
drains the same entries first. A run already complete in MLflow is not written twice.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

from repro.ledger import Ledger
from repro.runner.envcapture import redact
from repro.tracking import failure_line, handoff


class ProjectionFailed(Exception):
    """Pending entries a store did not take; the message is the store's own error, one line."""


def _store(record: dict) -> tuple[str, str]:
    return record["config"]["tracking"]["uri"], record["config"]["tracking"]["experiment"]


def _project_runs(tracker, items: list[tuple[Path, dict, dict]], parents: dict) -> int:
    from repro.report.varied import run_name
    from repro.tracking.project import COMPLETE_TAG, project_run, sweep_parent

    existing = {run.data.tags["repro.ledger_id"]: run for run in tracker.find_runs("repro.ledger_id")}
    written = 0
    for entry, data, record in items:
        run = existing.get(record["id"])
        if run is not None and run.data.tags.get(COMPLETE_TAG) != "complete":
            tracker.client.delete_run(run.info.run_id)  # cut short earlier: replaced whole, as sync does
            run = None
        if run is None:
            sweep = record.get("sweep") or {}
            parent = None
            if sweep.get("multirun"):
                if sweep["id"] not in parents:
                    parents[sweep["id"]] = sweep_parent(tracker, sweep, record.get("git") or {})
                parent = parents[sweep["id"]]
            ir = [str(entry / "ir" / name) for name in data.get("ir", [])]
            log = entry / "worker.log"
            run_id = project_run(tracker, record, run_name(record, sweep.get("swept") or []), parent, ir,
                                 log if log.exists() else None)
            written += 1
        else:
            run_id = run.info.run_id
        if data.get("tags"):
            tracker.log(run_id, tags=data["tags"])
        handoff.done(entry)
    return written


def _close_sweep(tracker, ledger: Ledger, data: dict, records: list[dict], parents: dict) -> None:
    """The sweep's parent run: its report, trajectory and end, as the session would have left it."""
    from repro.ledger.command import sweep_command
    from repro.report import comparison, sweep_report, trajectory
    from repro.tracking.project import attach_report, close_parent, sweep_parent

    if data["id"] not in parents:
        parents[data["id"]] = sweep_parent(tracker, records[0]["sweep"], records[0].get("git") or {})
    run_id = parents[data["id"]]
    if data.get("trajectory"):
        trajectory.log_parent(tracker, run_id, ledger.get(data["trajectory"]))
    if data.get("report_dir") and Path(data["report_dir"]).is_dir():
        attach_report(tracker, run_id, comparison.build(records), sweep_report.swept_params(records),
                      sweep_command(records, places=False), records[0].get("git") or {}, Path(data["report_dir"]))
    close_parent(tracker, run_id, records, data["status"])


def write_reports(ledger: Ledger, pending: list[tuple[Path, dict]]) -> None:
    """The report folders the sessions announced, before (and whatever becomes of) MLflow; a
    report that fails is said once in the log and left to `repro report --sweep ID`."""
    from repro.report import sweep_report

    for entry, data in pending:
        if data["kind"] != "sweep" or not data.get("write_report"):
            continue
        records = sorted(ledger.heads(kind="run", sweep=data["id"]), key=lambda r: r["sweep"]["job"])
        try:
            if records:
                sweep_report.write(records, Path(data["report_dir"]))
        except Exception as e:  # noqa: BLE001 - the records are in the ledger: the report can be rebuilt
            print(f"repro projector: the report of sweep {data['id']} was not completed ({type(e).__name__}: {e}); "
                  f"`repro report --sweep {data['id']}` rebuilds it from the ledger", file=sys.stderr)
        data["write_report"] = False
        handoff.add_sweep(ledger.root, data["id"], {k: v for k, v in data.items() if k not in ("kind", "id")})


def drain(ledger_root: str | Path, say: bool = True, ledger: Ledger | None = None, opened=None) -> dict[str, int]:
    """Write the announced reports, then project every pending entry; the caller holds
    `handoff.lock`. Per store, a failure stops that store's entries (left for later) and is
    recorded (and said, with `say`); the others go on. `opened()` is called once every store
    is open (created, for a new one)."""
    from repro.tracking.mlflow_tracker import Tracker

    ledger = ledger or Ledger(ledger_root)
    counts = {"pushed": 0, "sweeps": 0, "left": 0}
    write_reports(ledger, handoff.entries(ledger_root))
    pending = handoff.entries(ledger_root)
    by_store: dict[tuple[str, str], list] = defaultdict(list)
    for entry, data in pending:
        if data["kind"] == "run":
            try:
                record = ledger.get(data["id"])
            except Exception:  # noqa: BLE001 - a record that is not there: nothing to project
                handoff.done(entry)
                continue
            by_store[_store(record)].append((entry, data, record))
        else:
            records = sorted(ledger.heads(kind="run", sweep=data["id"]), key=lambda r: r["sweep"]["job"])
            if not records:
                handoff.done(entry)
                continue
            by_store[_store(records[0])].append((entry, data, records))
    trackers = {}
    for key in by_store:
        try:
            trackers[key] = Tracker(*key)
        except Exception as e:  # noqa: BLE001 - said below, with the store's entries
            trackers[key] = e
    if opened:
        opened()
    failed = False
    for (uri, experiment), items in by_store.items():
        parents: dict[str, str] = {}
        try:
            tracker = trackers[(uri, experiment)]
            if isinstance(tracker, Exception):
                raise tracker
            runs = [i for i in items if i[1]["kind"] == "run"]
            counts["pushed"] += _project_runs(tracker, runs, parents)
            for entry, data, records in (i for i in items if i[1]["kind"] == "sweep"):
                _close_sweep(tracker, ledger, data, records, parents)
                handoff.done(entry)
                counts["sweeps"] += 1
        except Exception as e:  # noqa: BLE001 - whatever the store does, the runs are in the ledger
            left = sum(1 for entry, _, _ in items if entry.exists())
            counts["left"] += left
            failed = True
            line = failure_line(e)
            handoff.record_failure(ledger_root, uri, experiment, line, left)
            if say:
                print(f"repro projector: MLflow at {redact(uri)} (experiment {experiment!r}) failed: {line}; "
                      f"{left} entries left for `repro sync`", file=sys.stderr)
    if not failed:
        handoff.clear_failure(ledger_root)
    return counts


def main(argv: list[str]) -> int:
    """`LEDGER [LOCK_FD [READY_FD]]`: LOCK_FD is the ledger's lock file as the session opened it
    (and locked it where it was free; taking it again through the same open file is immediate);
    READY_FD a pipe told once the stores are open (a session waiting for a new store's creation)."""
    import os

    ledger_root = argv[0]
    start = time.time()
    if len(argv) > 1:
        import fcntl

        def opened() -> None:
            os.write(int(argv[2]), b"1")
            os.close(int(argv[2]))

        fcntl.flock(int(argv[1]), fcntl.LOCK_EX)
        counts = drain(ledger_root, opened=opened if len(argv) > 2 else None)
    else:
        with handoff.lock(ledger_root):
            counts = drain(ledger_root)
    print(f"repro projector {time.strftime('%Y-%m-%dT%H:%M:%S')}: {counts['pushed']} run(s) and "
          f"{counts['sweeps']} sweep(s) into MLflow, {counts['left']} left, {time.time() - start:.1f} s")
    return 1 if counts["left"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
