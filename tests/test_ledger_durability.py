"""The ledger under faults: damaged and foreign files, duplicates, the record schema, lost runs,
spool recovery, failed writes, file modes and the derived index."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from repro import paths
from conftest import tmpfs, shipped_ledger
from repro.ledger import SCHEMA, SCHEMA_VERSION, Ledger, LedgerError, record_id, schema, state_of
from repro.ledger.index import FILE, FOLDER

DAMAGED = {  # file name -> content: what a crash, an editor or a stray tool leaves in a ledger
    "truncated.json": b'{"id": "0123456789abcdef", "kind": "run", "sta',
    "empty-object.json": b"{}",
    "array.json": b"[1, 2]",
    "text.json": b"these are my notes\n",
    "no-id.json": b'{"kind": "run", "status": "ok"}',
    "binary.json": b"\xff\xfe\x00garbage",
}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repro", "ledger", *args], capture_output=True, text=True,
                          timeout=120)


def _chain(ledger: Ledger, **extra) -> tuple[dict, dict]:
    started = ledger.append({"kind": "run", "status": "started", "sweep": {"id": "s1", "job": 0}, **extra})
    return started, ledger.append({"kind": "run", "status": "ok", "prev": started["id"], "sweep": {"id": "s1", "job": 0}})


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> tuple[Path, dict, dict]:
    """A ledger with one good chain, every kind of damaged file, a duplicate and dot-folders."""
    root = tmp_path_factory.mktemp("damaged")
    started, ok = _chain(Ledger(root))
    folder = root / ok["created"][:10]
    for name, data in DAMAGED.items():
        (folder / name).write_bytes(data)
    (root / "2020-01-01").mkdir()
    shutil.copy(folder / f"{ok['id']}.json", root / "2020-01-01" / f"{ok['id']}.json")  # a bad merge
    for dot in (".spool", ".index", ".other"):
        (root / dot).mkdir(exist_ok=True)
        (root / dot / "x.json").write_text("{}")
    (folder / ".tmp-123-abc.json").write_text('{"id": "half')
    return root, started, ok


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_every_reader_skips_a_damaged_file_with_one_warning(damaged, name, caplog):
    root, started, ok = damaged
    ledger = Ledger(root)
    with caplog.at_level(logging.WARNING, logger="repro.ledger"):
        assert [r["id"] for r in ledger.heads()] == [ok["id"]]
        assert [r["id"] for r in ledger.heads(kind="run", sweep="s1")] == [ok["id"]]  # a sweep's closing table
        assert sorted(r["id"] for r in ledger.records()) == sorted([started["id"], ok["id"]])
        assert ledger.get(ok["id"][:6]) == ok
        assert [r["id"] for r in ledger.chain(ok)] == [ok["id"], started["id"]]
        assert ledger.current(started) == ok
    named = [m for m in caplog.messages if name in m]
    assert len(named) == 1 and "skipping" in named[0]
    assert not any(".spool" in m or ".index" in m or ".tmp-" in m for m in caplog.messages)


def test_verify_names_every_damaged_file_and_the_duplicate(damaged):
    root, started, ok = damaged
    found = Ledger(root).check()
    named = {p.path.name: p.reason for p in found.problems}
    assert set(named) == set(DAMAGED) | {f"{ok['id']}.json"}
    assert "not valid JSON" in named["truncated.json"] and "not valid JSON" in named["binary.json"]
    assert "a JSON list, not an object" in named["array.json"]
    assert "no id" in named["empty-object.json"] and "no id" in named["no-id.json"]
    dup = next(p for p in found.problems if p.path.name == f"{ok['id']}.json")
    assert "duplicate" in dup.reason and ok["id"] in dup.reason
    assert found.files == len(DAMAGED) + 3  # dot-files and dot-folders are never records


@pytest.mark.slow
def test_cli_on_a_damaged_ledger_lists_shows_and_fails_verify_without_a_traceback(damaged):
    root, started, ok = damaged
    listed = _cli("list", "--json", "--ledger", str(root))
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [ok["id"]]  # the duplicate listed once
    assert all(name in listed.stderr for name in DAMAGED)
    shown = _cli("show", ok["id"], "--json", "--ledger", str(root))
    assert shown.returncode == 0 and json.loads(shown.stdout) == ok  # not ambiguous with itself
    verified = _cli("verify", "--ledger", str(root))
    assert verified.returncode == 1 and all(name in verified.stderr for name in DAMAGED)
    assert "duplicate" in verified.stderr
    for proc in (listed, shown, verified):
        assert "Traceback" not in proc.stderr


def test_new_records_carry_the_schema_version_and_old_ones_still_verify(tmp_path):
    shipped = Ledger(shipped_ledger()).check()
    assert shipped.files >= 24 and shipped.problems == []
    # records from before schema_version existed are among them, and verified above
    assert any("schema_version" not in p.read_text() for p in Ledger(shipped_ledger()).paths())
    ledger = Ledger(tmp_path)
    rec = ledger.append({"kind": "run", "status": "ok", "overrides": ["model=mlp"]})
    assert rec["schema_version"] == SCHEMA_VERSION and schema.errors(rec) == []
    bad = {"kind": "run", "status": 3, "created": "2026-01-01T00:00:00Z", "overrides": "model=mlp",
           "parent": {"host": "h"}, "results": {"step_time_s": [0.1, "x"]}}
    bad["id"] = record_id(bad)  # a well-hashed record that breaks the schema
    (tmp_path / "2026-01-01").mkdir()
    (tmp_path / "2026-01-01" / f"{bad['id']}.json").write_text(json.dumps(bad))
    reasons = " | ".join(p.reason for p in ledger.verify())
    for where in ("record.status", "record.overrides", "record.parent has no 'pid'", "record.results.step_time_s[1]"):
        assert where in reasons


def test_runs_is_a_list_of_ids_or_a_calibrations_count_and_nothing_else(tmp_path):
    # a calibration record counts the runs it read (report/noise.py); a sweep step or bisection lists them
    ledger = Ledger(tmp_path)
    for runs in (12, ["0123456789abcdef"]):
        rec = ledger.append({"kind": "calibration" if isinstance(runs, int) else "bisect", "status": "ok", "runs": runs})
        assert schema.errors(rec) == []
    assert [p.reason for p in ledger.verify()] == []
    for runs, what in (("12", "is a JSON string, not array or integer"), (-1, "is -1, below 0"),
                       ([3], "record.runs[0] is a JSON integer, not string")):
        assert any(what in e for e in schema.errors({"runs": runs})), (runs, schema.errors({"runs": runs}))


@pytest.mark.slow
def test_the_schema_uses_only_keywords_its_checker_implements():
    def keywords(node: dict) -> set[str]:
        found = set(node)
        for sub in node.get("properties", {}).values():
            found |= keywords(sub)
        return found | (keywords(node["items"]) if "items" in node else set())
    assert keywords(SCHEMA) <= schema.KEYWORDS
    assert json.loads(_cli("schema").stdout) == SCHEMA


def _started_by(parent: dict) -> dict:
    return {"kind": "run", "status": "started", "id": "0" * 16, "parent": parent}


@pytest.mark.slow
def test_a_started_run_whose_parent_is_gone_is_lost(tmp_path):
    host = socket.gethostname()
    proc = subprocess.Popen(["sleep", "60"])
    parent = {"host": host, "pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time()}
    assert state_of(_started_by(parent)).name == "running"
    proc.kill()  # not yet reaped: a zombie is gone too
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)
    assert str(state_of(_started_by(parent))) == f"lost (host {host}, pid {proc.pid})"
    proc.wait()
    assert state_of(_started_by(parent)).name == "lost"
    reused = {"host": host, "pid": os.getpid(), "create_time": psutil.Process().create_time() - 100}
    assert state_of(_started_by(reused)).name == "lost"  # the pid now belongs to a later process
    elsewhere = state_of(_started_by({**parent, "host": "other-host"}))
    assert elsewhere.name == "started" and "other-host" in str(elsewhere)
    older = state_of({"kind": "run", "status": "started"})
    assert older.name == "started" and "names no parent" in str(older)
    assert state_of({"status": "ok"}).name == "ok"

    ledger = Ledger(tmp_path)
    lost = ledger.append({"kind": "run", "status": "started", "parent": parent})
    _chain(ledger, parent=parent)  # ended: never lost
    listed = _cli("list", "--ledger", str(tmp_path))
    assert f"lost (host {host}, pid {proc.pid})" in listed.stdout and listed.stdout.count("lost (") == 1, listed.stdout
    shown = _cli("show", lost["id"], "--ledger", str(tmp_path))
    assert f"lost (host {host}, pid {proc.pid})" in shown.stdout
    verified = _cli("verify", "--ledger", str(tmp_path))
    assert verified.returncode == 0 and "1 warning" in verified.stdout
    assert f"WARN {ledger.paths()[0].parent}/{lost['id']}.json: lost" in verified.stderr


def _spool(ledger: Ledger, started: dict, **results) -> Path:
    ledger.spool_dir.mkdir(exist_ok=True)
    path = ledger.spool_path(started["id"])
    path.write_text(json.dumps({"kind": "run", "status": "ok", "prev": started["id"], "results": results,
                                "created": "2026-11-23T10:00:00.000Z"}))
    return path


def _parent(pid: int) -> dict:
    return {"host": socket.gethostname(), "pid": pid, "create_time": psutil.Process(pid).create_time()}


@pytest.mark.slow
def test_recover_appends_spooled_records_once_and_removes_the_spool(tmp_path):
    ledger = Ledger(tmp_path)
    a = ledger.append({"kind": "run", "status": "started", "parent": _parent(os.getpid())})  # this process's
    b = ledger.append({"kind": "run", "status": "started", "n": 2})
    live = subprocess.Popen(["sleep", "60"])
    c = ledger.append({"kind": "run", "status": "started", "parent": _parent(live.pid)})
    spool_a, spool_b = _spool(ledger, a, final_loss=1.5), _spool(ledger, b, final_loss=2.5)
    spool_c = _spool(ledger, c, final_loss=3.5)
    ledger.append(json.loads(spool_b.read_text()))  # b's end made it, its spool was not yet deleted
    (ledger.spool_dir / "junk.json").write_text("{trunc")
    done = ledger.recover()
    live.kill()
    live.wait()
    assert {p for p, _ in done.recovered} == {spool_a, spool_b} and not spool_a.exists() and not spool_b.exists()
    assert done.running == [spool_c] and spool_c.exists()  # its run still runs: it records its own end
    assert [p.path for p in done.failed] == [ledger.spool_dir / "junk.json"]
    assert sorted((r.get("results") or {}).get("final_loss", 0) for r in ledger.heads()) == [0, 1.5, 2.5]
    assert [r["id"] for r in ledger.heads(status="started")] == [c["id"]]
    assert len(ledger.paths()) == 5 and ledger.verify() == []
    spool_c.unlink()
    again = _cli("recover", "--ledger", str(tmp_path))
    assert again.returncode == 1 and "junk.json" in again.stderr and len(again.stderr.splitlines()) == 1
    (ledger.spool_dir / "junk.json").unlink()
    assert "nothing to recover" in _cli("recover", "--ledger", str(tmp_path)).stdout


@pytest.mark.slow
def test_recover_frees_the_reservations_of_runs_that_are_over(tmp_path):
    from repro.job import spool

    ledger = Ledger(tmp_path)
    gone = subprocess.Popen(["sleep", "60"])
    dead = ledger.append({"kind": "run", "status": "started", "parent": _parent(gone.pid)})  # a killed parent's
    gone.kill()
    gone.wait()
    mine = ledger.append({"kind": "run", "status": "started", "parent": _parent(os.getpid())})  # in flight here
    stale, live = spool.reserve(ledger.root, dead["id"], 10), spool.reserve(ledger.root, mine["id"], 10)
    orphan = spool.reserve(ledger.root, "0" * 16, 10)  # its `started` never reached the ledger
    done = ledger.recover()
    assert done.released == sorted([stale, orphan]) and not stale.exists() and not orphan.exists()
    assert live.exists() and not done.recovered and not done.failed  # a running run keeps its room
    out = _cli("recover", "--ledger", str(tmp_path)).stdout
    assert "nothing to recover" in out  # the live reservation is this test's, not the CLI's: still running
    assert len(ledger.paths()) == 2 and ledger.verify() == []


@pytest.fixture
def small_fs(tmp_path):
    """A real 2 MiB tmpfs, unmounted afterwards (conftest.tmpfs: needs root, as `make test` does)."""
    with tmpfs(tmp_path / "mnt", "size=2m") as mnt:
        yield mnt


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC
    return filler


@pytest.mark.slow
def test_a_full_disk_is_one_line_keeps_the_spool_and_leaves_no_temp_file(small_fs):
    ledger = Ledger(small_fs / "ledger")
    started = ledger.append({"kind": "run", "status": "started", "pad": "x" * 3000})
    spool = _spool(ledger, started, loss=[0.5] * 200)
    filler = _fill(small_fs)
    with pytest.raises(LedgerError, match=r"cannot write ledger record .*full.*ledger.dir"):
        ledger.append({"kind": "run", "status": "ok", "pad": "y" * 3000})
    with pytest.raises(LedgerError, match="free"):
        ledger.check_writable()
    proc = _cli("recover", "--ledger", str(ledger.root))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and str(spool) in proc.stderr and "kept" in proc.stderr
    assert spool.exists() and not list(ledger.root.rglob(".tmp-*"))
    filler.unlink()
    ledger.check_writable()
    assert [p for p, _ in ledger.recover().recovered] == [spool] and not spool.exists()
    assert ledger.heads()[0]["results"]["loss"] == [0.5] * 200


@pytest.mark.slow
def test_a_read_only_ledger_is_read_but_refuses_writes(small_fs):
    ledger = Ledger(small_fs / "ledger")
    _, ok = _chain(ledger)
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    assert [r["id"] for r in Ledger(ledger.root).heads()] == [ok["id"]]  # its index stays in memory
    with pytest.raises(LedgerError, match="read-only.*ledger.dir"):
        ledger.append({"kind": "run", "status": "ok"})
    with pytest.raises(LedgerError, match="read-only"):
        ledger.check_writable()


def test_a_ledger_that_is_a_file_or_under_proc_is_refused(tmp_path):
    (tmp_path / "file").write_text("")
    for root, what in ((tmp_path / "file", "is a file"), (tmp_path / "file" / "sub", "is a file"),
                       (Path("/proc/self/ledger"), "/proc")):
        with pytest.raises(LedgerError, match=what):
            Ledger(root).check_writable()
        with pytest.raises(LedgerError, match="ledger"):
            Ledger(root).append({"kind": "run", "status": "ok"})
    with pytest.raises(LedgerError, match="is a file"):
        Ledger(tmp_path / "file").heads()
    Ledger(tmp_path / "new" / "ledger").check_writable()
    assert not (tmp_path / "new").exists()  # the check writes nothing


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600)])
def test_records_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        Ledger(tmp_path).append({"kind": "run", "status": "ok"})
    finally:
        os.umask(old)
    path = next(tmp_path.glob("*/*.json"))
    assert path.stat().st_mode & 0o777 == mode


@pytest.mark.slow
def test_the_index_follows_other_writers_and_is_rebuilt_when_corrupt(tmp_path):
    ledger = Ledger(tmp_path)
    _, ok = _chain(ledger)
    assert [r["id"] for r in ledger.heads()] == [ok["id"]]
    index = tmp_path / FOLDER / FILE
    assert (tmp_path / FOLDER / ".gitignore").read_text().splitlines()[-1] == "*"
    assert len(json.loads(index.read_text())["files"]) == 2
    code = (f"from repro.ledger import Ledger; Ledger({str(tmp_path)!r}).append("
            f"{{'kind': 'run', 'status': 'failed', 'prev': {ok['id']!r}}})")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(paths.src_dir())})
    heads = ledger.heads()  # the same Ledger object: its index in memory is stale, the files are not
    assert [r["status"] for r in heads] == ["failed"]
    assert len(json.loads(index.read_text())["files"]) == 3
    for junk in ("{not json", '{"format": 1, "files": {"x/y.json": [1, 2]}}', "[]",
                 '{"format": 1, "files": {"x/y.json": [1, 2, {"id": 5, "prev": 0, "created": 0, "kind": 0, '
                 '"status": 0, "sweep": 0}]}}'):
        index.write_text(junk)
        assert [r["id"] for r in Ledger(tmp_path).heads()] == [heads[0]["id"]]
        assert len(json.loads(index.read_text())["files"]) == 3
    ledger.paths()[0].unlink()
    assert len(Ledger(tmp_path).entries()) == 2


def test_verify_sees_a_change_that_orjsons_bytes_would_hide(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.append({"kind": "run", "status": "ok", "x": None, "tiny": 1e-05, "big": 2**70})
    assert ledger.verify() == []  # 1e-05 and 2**70 are dumped otherwise by orjson: the stdlib decides
    path = ledger.paths()[0]
    path.write_text(path.read_text().replace('"x": null', '"x": NaN'))  # orjson would dump NaN as null
    assert "changed after it was written" in str(ledger.verify())


@pytest.mark.slow
def test_verify_split_over_forked_workers_finds_what_one_process_finds(damaged, monkeypatch):
    from repro.ledger import verify

    root, _, _ = damaged
    serial = Ledger(root).check()
    pools = []

    class CountedPool(verify.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            pools.append(args)
            super().__init__(*args, **kwargs)

    # The split that 2,000+ files get on a machine with two usable cores, whatever this one has.
    monkeypatch.setattr(verify, "workers_for", lambda files: 2)
    monkeypatch.setattr(verify, "ProcessPoolExecutor", CountedPool)
    assert Ledger(root).check() == serial and len(serial.problems) == len(DAMAGED) + 1
    assert pools == [(2,)]  # the files really went to two forked workers


@pytest.mark.slow
def test_a_disk_that_fills_during_a_sweep_ends_it_in_one_line(small_fs, tmp_path):
    """A full disk after the first job: a later job's `started` append ended the sweep in a raw
    traceback and the announced report was never written. Now: the close, one line, exit 1, what was
    recorded kept, the rest in the spool for `repro ledger recover`."""
    import threading
    import time

    from conftest import Sandbox

    box = Sandbox(tmp_path / "box")
    box.root.mkdir()
    ledger = small_fs / "ledger"
    stop = threading.Event()

    def fill_after_the_first_run():
        while not stop.is_set():
            if any(r.get("status") == "ok" for r in Ledger(ledger).heads(kind="run")):
                _fill(small_fs)
                return
            time.sleep(0.05)

    filler = threading.Thread(target=fill_after_the_first_run)
    filler.start()
    try:
        proc = subprocess.run([*box.repro_cmd("-m", "framework=torch", "model=mlp", "model.preset=tiny",
                                              "run.warmup=2", "run.steps=4,5,6,7")[:-2], f"ledger.dir={ledger}",
                               "progress.mode=plain"], cwd=box.root, env=box.env(), capture_output=True, text=True,
                              timeout=600)
    finally:
        stop.set()
        filler.join()
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("repro: the sweep stopped:")]
    assert "repro ledger recover" in line and "ledger.dir" in line
    assert any(r["status"] == "ok" for r in Ledger(ledger).heads(kind="run"))  # what was recorded stays
