"""A sweep's close: the closing table, the loss trajectories, the report's announcement, and the
closed sweep handed to MLflow's projector (which writes the report and closes the sweep's
parent run: tracking/drain.py). Whatever fails on the way, the sweep is handed over.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from repro.console import say
from repro.usertext import markup
from repro.ledger import Ledger
from repro.preflight import xla_hardware
from repro.job import snapshot
from repro.redaction import redact
from repro.ledger.record import view
from repro.tracking import drain, handoff

# What the close needs: imported while the first worker starts (`prepare`), not on the way to it nor after it.
# Among them what its first table imports lazily: NumPy's masked arrays (np.median's NaN check, 15 ms on the
# 2-core reference machine), rich's emoji table (its first markup, 4 ms) and the profile store (a cell's link).
MODULES = ("repro.report.comparison", "repro.report.table", "repro.report.sweep_report",
           "repro.report.trajectory", "repro.report", "repro.profile.store", "numpy.ma", "rich._emoji_codes")
NOT_OK = ("failed", "killed", "timeout", "interrupted")


def prepare() -> None:
    for module in MODULES:
        importlib.import_module(module)


def sweep_records(session) -> list[dict]:
    """The sweep's records: those of its jobs run here, and those run by other processes."""
    found = {view(r).id: r for r in session.records}
    if session.multirun:
        for r in Ledger(session.ledger_dir).heads(kind="run", sweep=session.sweep_id):
            found.setdefault(view(r).id, r)
    return sorted(found.values(), key=lambda r: view(r).sweep.job)


def close(session, interrupted: bool) -> list[dict]:
    """Print the closing table, store the trajectories, announce the report, hand the sweep over."""
    from repro import report
    from repro.report import comparison, sweep_report, trajectory
    from repro.report.table import print_comparison

    session.display.close()
    status, sweep_record, report_dir = "interrupted" if interrupted else "failed", None, None
    try:
        session.records = records = sweep_records(session)
        print_comparison(report.console(), comparison.build(records),
                         hint=f"every column: repro compare --sweep {session.sweep_id} --wide" if session.multirun else "")
        if line := xla_hardware.left_out(records):
            report.console().print(line, markup=False, highlight=False)
        if session.multirun:  # the loss drift between frameworks, stored with the sweep
            sweep_record = trajectory.store(Ledger(session.ledger_dir), {
                "id": session.sweep_id, "experiment": session.experiment, "jobs": session.jobs}, records,
                "interrupted" if interrupted else "ok")
            report_dir = sweep_report.announce(records, report.console(), session.sweep_id)
        if not interrupted and not any(view(r).status in NOT_OK for r in records):
            status = "ok"
        _say_snapshot(session)
    finally:  # the closed sweep reaches the projector whatever happened above
        _hand_over(session, status, sweep_record, report_dir)
        if session.pending:
            say(f"{session.pending} runs not yet in MLflow: repro sync")
    return session.records


def _say_snapshot(session) -> None:
    """The jobs ran the snapshot taken at the sweep's start; say if the checkout moved on meanwhile."""
    if session.snapshot and (moved := snapshot.changed(session.snapshot)):
        say(f"the checkout changed while this sweep ran ({', '.join(moved[:5])}"
            f"{f' and {len(moved) - 5} more' if len(moved) > 5 else ''}); every job ran the code and conf/ "
            f"as they were at its start (snapshot {session.snapshot.id[:12]}, {session.snapshot.root})")


def _hand_over(session, status: str, sweep_record: dict | None, report_dir: Path | None) -> None:
    """The closed sweep to the projector, which writes its report (announced, not yet written) and
    then MLflow, in its own process. A store that cannot be reached is said here: its runs wait
    for `repro sync`, and the projector is started only if there is a report to write."""
    from repro import report

    records = session.records
    if session.multirun and records:
        handoff.add_sweep(session.ledger_dir, session.sweep_id, {
            "status": status, "trajectory": sweep_record["id"] if sweep_record else None, "owner": session.owner,
            "report_dir": str(report_dir) if report_dir else None, "write_report": bool(report_dir)})
    if not session.handed and not (session.multirun and records):
        return
    stores = sorted({drain.store_of(r) for r in records})
    for uri, experiment in stores:
        if why := handoff.unreachable(uri):
            say(f"warning: MLflow at {redact(uri)} (experiment {experiment!r}) failed: {why}. Runs stay "
                "in the ledger; once the store works, `repro sync` puts them into MLflow")
            session.pending += sum(drain.store_of(r) == (uri, experiment) for r in records)
            if report_dir:
                handoff.start_projector(session.ledger_dir, writer_idle_s=session.writer_idle_s)
            return
    if new := [uri for uri, _ in stores if handoff.new_sqlite_store(uri)]:  # made by the writer, not waited for
        report.console().print(f"[dim]MLflow: creating the store {markup(redact(new[0]))} (its first runs)[/]")
    handoff.start_projector(session.ledger_dir, writer_idle_s=session.writer_idle_s)
    report.console().print(f"[dim]MLflow: {len(session.handed) or len(records)} run(s) being written in the "
                           f"background (log {markup(handoff.folder(session.ledger_dir) / handoff.LOG)}); "
                           "`repro sync` finishes what it does not[/]")
