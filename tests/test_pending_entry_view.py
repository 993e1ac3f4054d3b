"""The pending queue read typed (tracking/handoff.py `Pending`): entries written by an older repro
(a run entry with no `ir` or `owner`, a sweep entry from before `write_report`, `owner` and
`trajectory`, a key this version does not know) still read, at the view's defaults; a sweep entry
written back by the drain keeps the form it was read in. No processes: entries written by hand."""

from __future__ import annotations

import json

from repro.ledger import Ledger
from repro.tracking import drain, handoff


def _entry(ledger, name: str, data: dict, tags: dict | None = None):
    entry = handoff.folder(ledger) / name
    entry.mkdir(parents=True)
    (entry / handoff.ENTRY).write_text(json.dumps(data))
    if tags is not None:
        (entry / handoff.TAGS).write_text(json.dumps(tags))
    return entry


def test_old_entries_read_at_the_views_defaults(tmp_path):
    ledger = tmp_path / "ledger"
    _entry(ledger, "r1", {"kind": "run", "id": "r1"}, tags={"repro.verdict": "equivalent"})  # no ir, no owner
    _entry(ledger, "r2", {"kind": "run", "id": "r2", "ir": ["a.mlir"], "owner": {"host": "h", "pid": 7}})
    _entry(ledger, "sweep-s1", {"kind": "sweep", "id": "s1", "status": "ok", "report_dir": None})  # before write_report
    _entry(ledger, "bisect-b1", {"kind": "bisect", "id": "b1", "report_dir": "/r", "later_key": 3})
    got = {data.id: data for _, data in handoff.entries(ledger)}
    assert sorted(got) == ["b1", "r1", "r2", "s1"]
    r1, r2, s1, b1 = got["r1"], got["r2"], got["s1"], got["b1"]
    assert (r1.kind, r1.ir, r1.owner, dict(r1.tags)) == ("run", (), None, {"repro.verdict": "equivalent"})
    assert (r2.ir, r2.owner) == (("a.mlir",), {"host": "h", "pid": 7})
    assert (s1.status, s1.report_dir, s1.write_report, s1.trajectory, s1.owner) == ("ok", None, False, None, None)
    assert (b1.report_dir, b1.status, b1.raw["later_key"]) == ("/r", "", 3)  # an unknown key: kept in raw
    # runs first (a sweep's parent closes after its children)
    assert [data.kind for _, data in handoff.entries(ledger)][:2] == ["run", "run"]


def test_a_sweep_entry_written_back_keeps_its_form(tmp_path):
    """write_reports marks an announced report done by writing the entry again: every key it was
    read with (one this version does not know included) stays, `write_report` turns false."""
    ledger = tmp_path / "ledger"
    stored = {"kind": "sweep", "id": "s1", "status": "failed", "report_dir": str(tmp_path / "report"),
              "write_report": True, "trajectory": None, "owner": {"host": "h", "pid": 1, "create_time": 2.5},
              "from_a_newer_repro": {"x": 1}}
    entry = _entry(ledger, "sweep-s1", stored)
    drain.write_reports(Ledger(ledger), handoff.entries(ledger))  # no runs in the ledger: no report to write
    assert json.loads((entry / handoff.ENTRY).read_text()) == {**stored, "write_report": False}
    ((_, again),) = handoff.entries(ledger)
    assert (again.write_report, again.status, again.owner) == (False, "failed", stored["owner"])
