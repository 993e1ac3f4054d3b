"""The ledger: content-hashed, never rewritten, safe under concurrent writers, verifiable."""

from __future__ import annotations

import json
import multiprocessing as mp
import subprocess
import sys

import pytest

from repro.ledger import Ledger, LedgerError, record_id


def test_append_names_file_by_content_hash(tmp_path):
    ledger = Ledger(tmp_path)
    rec = ledger.append({"kind": "run", "status": "started", "config_hash": "abc"})
    path = next(tmp_path.glob("*/*.json"))
    assert path.stem == rec["id"] == record_id(json.loads(path.read_text()))
    assert ledger.get(rec["id"][:6]) == rec


def test_status_change_is_a_new_record(tmp_path):
    ledger = Ledger(tmp_path)
    first = ledger.append({"kind": "run", "status": "started"})
    second = ledger.append({"kind": "run", "status": "ok", "prev": first["id"]})
    assert len(ledger.paths()) == 2
    assert [r["id"] for r in ledger.heads()] == [second["id"]]
    assert [r["status"] for r in ledger.chain(second)] == ["ok", "started"]


def test_verify_names_the_changed_record(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.append({"kind": "run", "status": "ok", "x": 1})
    target = ledger.append({"kind": "run", "status": "ok", "x": 2})
    assert ledger.verify() == []
    path = next(p for p in ledger.paths() if p.stem == target["id"])
    text = path.read_text()
    path.write_text(text.replace('"x": 2', '"x": 3'))  # one byte
    problems = ledger.verify()
    assert len(problems) == 1 and problems[0].path == path and target["id"] in str(problems[0])


@pytest.mark.slow
def test_cli_verify_fails_naming_record(tmp_path):
    ledger = Ledger(tmp_path)
    rec = ledger.append({"kind": "run", "status": "ok"})
    cmd = [sys.executable, "-m", "repro", "ledger", "verify", "--ledger", str(tmp_path)]
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    path = ledger.paths()[0]
    path.write_bytes(path.read_bytes().replace(b"ok", b"ko"))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 1 and rec["id"] in proc.stderr


def test_unknown_id_is_a_clear_error(tmp_path):
    with pytest.raises(LedgerError, match="no record with id"):
        Ledger(tmp_path).get("deadbeef")


def _writer(root: str, n: int, who: int) -> None:
    ledger = Ledger(root)
    for i in range(n):
        ledger.append({"kind": "run", "status": "ok", "writer": who, "i": i})


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(tmp_path):
    procs = [mp.get_context("spawn").Process(target=_writer, args=(str(tmp_path), 25, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    ledger = Ledger(tmp_path)
    assert len(ledger.paths()) == 100
    assert ledger.verify() == []
    assert not list(tmp_path.glob("*/.tmp-*"))
