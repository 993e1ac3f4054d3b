"""`ledger verify` reads only what changed since it last passed (`<ledger>/.index/verified.json`),
yet a changed or tampered file is always caught, whatever the cache says; `--full` reads all."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from repro.cli import dispatch
from repro.ledger import Ledger, recordfile, verified
from repro.ledger.index import FOLDER
from test_ledger_index import grow


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/*.json") if not p.parent.name.startswith("."))


@pytest.fixture
def settled(tmp_path, monkeypatch) -> Path:
    """A ledger of 40 records whose files count as settled 10 ms after they were written (the
    real margin is 2 s: a test would wait that long), verified once."""
    monkeypatch.setattr(verified, "RACY_NS", 10_000_000)
    root = grow(tmp_path / "ledger", 20)
    time.sleep(0.05)
    first = Ledger(root).check()
    assert first.problems == [] and first.read == first.files == 40
    return root


def test_an_unchanged_ledger_is_not_read_again_and_a_new_record_is(settled):
    assert Ledger(settled).check().read == 0
    Ledger(settled).append({"kind": "run", "status": "ok"})
    time.sleep(0.05)
    again = Ledger(settled).check()
    assert again.problems == [] and (again.files, again.read) == (41, 1)
    assert Ledger(settled).check().read == 0


def test_a_tampered_record_is_caught_although_the_cache_says_it_passed(settled):
    path = _files(settled)[5]
    st = path.stat()
    data = path.read_bytes()
    tampered = data.replace(b'"status": "ok"', b'"status": "OK"').replace(b'"status": "started"', b'"status": "STARTED"')
    assert tampered != data and len(tampered) == len(data)
    path.write_bytes(tampered)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: only its ctime tells
    assert json.loads((settled / FOLDER / verified.FILE).read_text())["files"][f"{path.parent.name}/{path.name}"]
    found = Ledger(settled).check()
    assert found.read == 1 and [p.path for p in found.problems] == [path]
    assert "changed after it was written" in found.problems[0].reason
    assert [p.path for p in Ledger(settled).check().problems] == [path]  # a file that failed is never trusted


def test_a_record_rewritten_with_its_own_bytes_passes_and_a_copy_under_another_name_fails(settled):
    path = _files(settled)[3]
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)  # as a git checkout writes a file: new inode, same content
    copied = path.parent / "0123456789abcdef.json"
    copied.write_bytes(data)
    found = Ledger(settled).check()
    assert found.read == 2 and (copied, f"file name does not match the record id {path.stem}") in [
        (p.path, p.reason) for p in found.problems]
    assert path not in {p.path for p in found.problems if "duplicate" not in p.reason}
    assert found == Ledger(settled).check(full=True)  # the bytes seen before: what reading them in full finds


def test_full_reads_every_file_and_a_lost_cache_costs_one_full_read(settled, capsys):
    assert Ledger(settled).check(full=True).read == 40
    capsys.readouterr()
    assert dispatch(["ledger", "verify", "--full", "--ledger", str(settled)]) == 0
    assert "not read again" not in capsys.readouterr().out
    assert dispatch(["ledger", "verify", "--ledger", str(settled)]) == 0
    assert "(40 unchanged since they last passed, not read again" in capsys.readouterr().out
    for damage in (lambda c: c.write_text("{nope"), lambda c: c.write_text('{"format": 1, "checker": 0, "files": {}}'),
                   lambda c: c.unlink()):
        damage(settled / FOLDER / verified.FILE)
        assert Ledger(settled).check().read == 40
    shutil.rmtree(settled / FOLDER)
    assert Ledger(settled).check().read == 40 and Ledger(settled).check().read == 0


def test_a_file_written_within_the_racy_margin_is_read_again(settled, monkeypatch):
    monkeypatch.setattr(verified, "RACY_NS", 10**15)  # every file counts as just written
    assert Ledger(settled).check(full=True).read == 40
    assert Ledger(settled).check().read == 40  # none was trusted by its stat (its bytes were: no parse)


def test_the_verify_cache_is_dropped_when_the_checks_change(settled, monkeypatch):
    from repro.ledger import store

    monkeypatch.setattr(store, "KEPT", (*store.KEPT, "kind"))
    assert Ledger(settled).check().read == 40


def test_a_damaged_record_fails_verify_every_time(settled):
    path = _files(settled)[0]
    path.write_text("{not json")
    time.sleep(0.05)
    for _ in range(2):
        found = Ledger(settled).check()
        assert [p.path for p in found.problems] == [path] and "not valid JSON" in found.problems[0].reason
    assert recordfile.parse_json((settled / FOLDER / verified.FILE).read_bytes())["files"].keys() == {
        f"{p.parent.name}/{p.name}" for p in _files(settled) if p != path}
