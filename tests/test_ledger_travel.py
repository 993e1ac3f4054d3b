"""The travelling index (`<ledger>/.checked/`, committed with the records): a fresh clone's first
check reads and hashes each file but parses none the index vouches for; a stale index (records a
merge brought), a tampered one (an entry changed, with or without its name recomputed) or one of
another checker is found out, set aside and replaced, and every record is still checked; two
branches that both ran and verified merge without a conflict in it (real git)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from repro.cli import dispatch
from repro.ledger import Ledger, recordfile, travel
from repro.ledger.index import FOLDER as INDEX
from test_ledger_index import grow


@pytest.fixture(autouse=True)
def small(monkeypatch):
    """Ledgers of tens of records keep a travelling index; no file audited unless a test says so."""
    monkeypatch.setattr(travel, "TRAVEL_FROM", 10)
    monkeypatch.setattr(travel, "AUDIT", 0)


def _cold(root: Path) -> Ledger:
    """As a clone meets the ledger: no `.index/` (its verify cache and list index)."""
    shutil.rmtree(root / INDEX, ignore_errors=True)
    return Ledger(root)


def _segments(root: Path) -> list[Path]:
    return sorted((root / travel.FOLDER).glob("*.json"))


def _rename_to_content(path: Path) -> Path:
    """What a forger does: the segment renamed to the hash of its changed bytes."""
    named = path.with_name(f"{hashlib.sha256(path.read_bytes()).hexdigest()[:travel.NAME_LEN]}.json")
    path.rename(named)
    return named


def _edit_segment(path: Path, edit) -> None:
    saved = recordfile.parse_json(path.read_bytes())
    edit(saved["records"])
    path.write_bytes(recordfile.dump_compact(saved))


@pytest.fixture
def ledger(tmp_path) -> Path:
    root = grow(tmp_path / "ledger", 15)  # 30 records
    first = Ledger(root).check()
    assert first.problems == [] and first.vouched == 0 and len(_segments(root)) == 1
    return root


def test_a_cold_check_parses_nothing_the_travelling_index_vouches_for_and_finds_the_same(ledger):
    cold = _cold(ledger).check()
    assert cold.problems == [] and (cold.files, cold.read, cold.vouched) == (30, 30, 30)
    assert cold == Ledger(ledger).check(full=True)  # what reading every file in full finds
    assert len(_segments(ledger)) == 1  # nothing new to cover: no segment written
    listed = _cold(ledger).entries()  # the list index rebuilt from the travelling summaries
    shutil.rmtree(ledger / travel.FOLDER)
    assert _cold(ledger).entries() == listed  # as parsing every file makes it


def test_a_cold_list_index_is_built_from_one_check_and_reads_as_parsing_every_file_does(ledger, monkeypatch):
    from repro.ledger import store, verified

    parsed = _cold(ledger).entries()  # 30 files: under RESOLVE_FROM, each parsed here
    assert not (ledger / INDEX / verified.FILE).exists()
    monkeypatch.setattr(store, "RESOLVE_FROM", 10)
    resolved = _cold(ledger).entries()
    assert resolved == parsed and (ledger / INDEX / verified.FILE).exists()  # a check (with .checked/) made them
    shutil.rmtree(ledger / travel.FOLDER)
    assert _cold(ledger).entries() == parsed  # a check that parsed every file made them


def test_records_a_merge_brought_are_read_in_full_and_then_covered(ledger):
    for i in range(3):
        Ledger(ledger).append({"kind": "run", "status": "ok", "note": f"merged {i}"})
    found = _cold(ledger).check()
    assert found.problems == [] and (found.files, found.vouched) == (33, 30)  # the 3 new ones parsed
    assert len(_segments(ledger)) == 2
    again = _cold(ledger).check()
    assert again.problems == [] and again.vouched == 33


def test_a_tampered_segment_is_ignored_named_and_replaced_and_every_record_still_verifies(ledger, capsys):
    segment = _segments(ledger)[0]
    _edit_segment(segment, lambda records: next(iter(records.values()))[0].update(status="failed"))
    found = _cold(ledger).check()
    assert found.problems == [] and found.vouched == 0 and found.read == 30
    assert [w.path for w in found.warnings] == [segment] and "does not hash to its name" in found.warnings[0].reason
    (replaced,) = _segments(ledger)  # what was read, the same as the segment was before it was changed: its name
    assert hashlib.sha256(replaced.read_bytes()).hexdigest().startswith(replaced.stem) and replaced == segment
    assert _cold(ledger).check().vouched == 30
    shutil.rmtree(ledger / INDEX)
    capsys.readouterr()
    assert dispatch(["ledger", "verify", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "30 records" in out and "30 read and hashed, not parsed: the travelling index" in out


def test_a_forged_segment_that_vouches_for_an_edited_record_is_caught_by_the_audit(ledger, monkeypatch):
    monkeypatch.setattr(travel, "AUDIT", 64)  # a ledger this small: every file is audited
    record = sorted(ledger.glob("*/*.json"))[4]
    data = record.read_bytes()
    edited = data.replace(b'"status": "ok"', b'"status": "OK"').replace(b'"status": "started"', b'"status": "STARTED"')
    assert edited != data
    record.write_bytes(edited)
    parsed = recordfile.parse(edited)
    old = recordfile.parse(data)

    def forge(records):  # the edited bytes vouched for with the original's kept fields and summary
        digest = hashlib.sha256(data).hexdigest()[:32]
        kept, summary = records.pop(digest)
        summary[4] = parsed["status"]
        records[hashlib.sha256(edited).hexdigest()[:32]] = [{**kept, "status": parsed["status"]}, summary]

    segment = _segments(ledger)[0]
    _edit_segment(segment, forge)
    forged = _rename_to_content(segment)
    found = _cold(ledger).check()
    assert [p.path for p in found.problems] == [record] and "changed after it was written" in found.problems[0].reason
    assert found.vouched == 0 and any("travelling index vouches" in w.reason for w in found.warnings)
    assert not forged.exists() and len(_segments(ledger)) == 1  # replaced by what reading found
    assert old["status"] != parsed["status"]
    assert [p.path for p in _cold(ledger).check().problems] == [record]  # never vouched for since


def test_full_checks_every_claim_of_the_travelling_index(ledger, monkeypatch):
    segment = _segments(ledger)[0]
    _edit_segment(segment, lambda records: next(iter(records.values()))[1].__setitem__(6, "forged"))
    _rename_to_content(segment)
    found = Ledger(ledger).check(full=True)
    assert found.problems == [] and any("travelling index vouches" in w.reason for w in found.warnings)
    assert _cold(ledger).check().vouched == 30 and _cold(ledger).check().warnings == []


def test_a_segment_of_another_checker_is_replaced_silently(ledger, monkeypatch):
    old = _segments(ledger)[0]
    monkeypatch.setattr(travel, "checker_id", lambda: "another-checker")
    found = _cold(ledger).check()
    assert found.problems == [] and found.warnings == [] and found.vouched == 0
    assert not old.exists() and len(_segments(ledger)) == 1
    assert _cold(ledger).check().vouched == 30


def test_an_edited_record_is_read_in_full_whatever_the_index_says(ledger):
    record = sorted(ledger.glob("*/*.json"))[7]
    record.write_bytes(record.read_bytes().replace(b'"kind": "run"', b'"kind": "xun"'))
    found = _cold(ledger).check()
    assert [p.path for p in found.problems] == [record] and found.vouched == 29


def test_past_max_segments_the_small_ones_are_merged(ledger, monkeypatch):
    monkeypatch.setattr(travel, "MAX_SEGMENTS", 2)
    for i in range(3):
        Ledger(ledger).append({"kind": "run", "status": "ok", "note": f"later {i}"})
        _cold(ledger).check()
    assert len(_segments(ledger)) == 2
    assert _cold(ledger).check().vouched == 33


def test_a_small_ledger_keeps_none(tmp_path, monkeypatch):
    monkeypatch.setattr(travel, "TRAVEL_FROM", 1000)
    root = grow(tmp_path / "ledger", 5)
    assert Ledger(root).check().problems == [] and not (root / travel.FOLDER).exists()


def test_two_branches_that_both_ran_and_verified_merge_without_conflict_and_a_clone_verifies(ledger, tmp_path):
    def git(*a, cwd=ledger):
        return subprocess.run(["git", "-C", str(cwd), "-c", "user.email=t@t", "-c", "user.name=t", *a],
                              check=True, capture_output=True, text=True).stdout

    git("init", "-q", "-b", "main")
    git("add", ".")
    git("commit", "-qm", "records and their travelling index")
    assert git("ls-files", travel.FOLDER).split() and git("status", "--porcelain") == ""
    ids = {}
    for branch in ("a", "b"):
        git("checkout", "-q", "-b", branch, "main")
        ids[branch] = [Ledger(ledger).append({"kind": "run", "status": "ok", "note": f"{branch} {i}"})["id"]
                       for i in range(2)]
        assert Ledger(ledger).check().problems == []  # writes this branch's segment
        git("add", ".")
        git("commit", "-qm", branch)
    git("merge", "-q", "--no-edit", "a")  # check=True: a conflict fails here
    assert git("status", "--porcelain") == "" and len(_segments(ledger)) == 3
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ledger), str(clone)], check=True, capture_output=True)
    found = Ledger(clone).check()
    assert found.problems == [] and found.warnings == [] and (found.files, found.vouched) == (34, 34)
    listed = {e.id for e in Ledger(clone).entries()}
    assert set(ids["a"] + ids["b"]) <= listed


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_clone_listed_without_a_stat_per_file_checks_and_lists_as_a_stated_listing_does(ledger, monkeypatch,
                                                                                          workers):
    """No `.index/`: the files are listed without a stat each, and the check that reads them all
    (in forked workers, or here) takes each stat from the opened file. It finds and lists what a
    listing with a stat per file finds, a file too large for a record included (the check goes
    back to a stat'ed listing for it), and keeps the stats as read: the next check reads nothing."""
    import os
    import time

    from repro.ledger import index, store, verified, verify

    monkeypatch.setattr(verify, "workers_for", lambda files: workers)
    for module in (index, store, verify):
        monkeypatch.setattr(module, "MAX_RECORD_BYTES", 64 << 10)
    for module in (index, verified):  # files settle 10 ms after they were written (the real margin is 2 s)
        monkeypatch.setattr(module, "RACY_NS", 10_000_000)
    big = next(ledger.glob("2026-*/")) / "0123456789abcdef.json"
    big.write_bytes(b'{"id": "0123456789abcdef", "rows": [' + b"1," * (40 << 10) + b"1]}")
    time.sleep(0.05)
    stated = Ledger(ledger)
    assert stated._list().stated  # (.index/ is there)
    expected, entries = stated.check(full=True), stated.entries()
    assert any("larger than any record" in p.reason for p in expected.problems)
    for with_big in (True, False):
        if not with_big:
            big.unlink()
            expected, entries = Ledger(ledger).check(full=True), Ledger(ledger).entries()
        cold = _cold(ledger)
        assert not cold._list().stated
        assert cold.check() == expected and cold.entries() == entries
        again = Ledger(ledger)
        assert again.check() == expected and again.check().read == 0  # the verify cache's stats are the files'
        saved = again._index._load()
        assert saved and all(saved[n][:3] == [(st := os.stat(ledger / n)).st_size, st.st_mtime_ns, st.st_ino]
                             for n in saved)  # the list index's too
