"""A snapshot is what its records name (job/snapshot.py): a sweep's snapshot taken away while it
runs (a cache clean, another sweep's cleanup) is rebuilt before the next job from the bytes the
sweep copied, or from the checkout while it still hashes the same; else the job fails naming it.
A worker never runs the checkout's code under a snapshot's name; an unwritable cache is one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repro import paths
from repro.job import snapshot
from repro.worker import worker


@pytest.fixture
def checkout(tmp_path) -> Path:
    root = tmp_path / "checkout"
    for part in ("src", "conf"):
        shutil.copytree(paths.repo_root() / part, root / part,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return root


@pytest.fixture
def taken(checkout, tmp_path, monkeypatch) -> snapshot.Snapshot:
    """A snapshot of the copied checkout, active (REPRO_SNAPSHOT) as in a sweep."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("REPRO_ROOT", str(checkout))
    monkeypatch.setattr(paths, "src_dir", lambda **_: checkout / "src")
    snap = snapshot.take()
    monkeypatch.setenv(snapshot.ENV, str(snap.root))
    return snap


def _whole(snap: snapshot.Snapshot) -> bool:
    return snapshot.manifest(snap.src, snap.root / "conf") == snap.files and \
        json.loads((snap.root / snapshot.MANIFEST).read_text())["id"] == snap.id


def test_a_deleted_snapshot_is_rebuilt_from_the_bytes_the_sweep_copied(taken, checkout):
    assert snapshot.ensure_active() is False  # whole: nothing to do
    shutil.rmtree(taken.root)
    model = checkout / "src/repro/models/mlp/torch_model.py"
    model.write_text("raise RuntimeError('edited meanwhile')\n")  # the checkout moved on: not what was copied
    assert snapshot.ensure_active() is True
    assert _whole(taken) and "edited meanwhile" not in (taken.src / "repro/models/mlp/torch_model.py").read_text()


def test_a_changed_file_is_put_back(taken):
    target = taken.src / "repro/models/mlp/torch_model.py"
    before = target.read_bytes()
    target.write_text("print('not the recorded code')\n")
    (taken.root / "conf/model/mlp.yaml").unlink()
    assert snapshot.ensure_active() is True and target.read_bytes() == before and _whole(taken)


@pytest.fixture
def pauses(monkeypatch) -> list[float]:
    """The pauses ensure_active takes between rebuilds (recorded, not slept)."""
    seen: list[float] = []
    monkeypatch.setattr(snapshot.time, "sleep", seen.append)
    return seen


def test_a_rebuild_a_clean_still_walking_undoes_is_rebuilt_again(taken, monkeypatch, pauses):
    """`rm -rf` of the cache still at work while the job rebuilds: the folder goes under the file being
    written (ENOENT), then files the rebuild put back go again; each check after a rebuild sees it."""
    put, calls = snapshot._put, []
    target = taken.src / "repro/models/mlp/torch_model.py"

    def clean_meanwhile(path, data):
        calls.append(path.name)
        if len(calls) == 1:
            shutil.rmtree(taken.root)  # the folder, as the file is written into it
        put(path, data)

    monkeypatch.setattr(snapshot, "_put", clean_meanwhile)
    target.unlink()
    write_whole, wholes = snapshot._write_whole, []

    def and_after(*args):
        write_whole(*args)
        wholes.append(1)
        if len(wholes) == 1:
            (taken.root / "conf/model/mlp.yaml").unlink()  # the clean, still walking, takes one more

    monkeypatch.setattr(snapshot, "_write_whole", and_after)
    assert snapshot.ensure_active() is True and _whole(taken)
    # a file put back (ENOENT), the folder written whole, its one lost file put back, then whole
    assert calls == ["torch_model.py", "mlp.yaml"] and len(wholes) == 1 and pauses == [0.05, 0.1]
    assert snapshot.ensure_active() is False and len(pauses) == 2


def test_a_snapshot_that_cannot_be_rebuilt_names_the_last_failure(taken, monkeypatch, pauses):
    def unwritable(path, data):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(snapshot, "_put", unwritable)
    (taken.src / "repro/models/mlp/torch_model.py").unlink()
    with pytest.raises(snapshot.SnapshotError, match=r"cannot write the sweep's code snapshot at .*Permission denied"):
        snapshot.ensure_active()
    assert len(pauses) == snapshot.REPAIRS - 1 and pauses == sorted(pauses)


def test_a_snapshot_changed_after_every_rebuild_names_what_changes_it(taken, monkeypatch, pauses):
    put, target = snapshot._put, taken.src / "repro/models/mlp/torch_model.py"

    def undone(path, data):
        put(path, data)
        path.write_text("# another process again\n")

    monkeypatch.setattr(snapshot, "_put", undone)
    target.unlink()
    with pytest.raises(snapshot.SnapshotError, match=rf"snapshot {taken.id[:12]} .* was changed again each of the "
                                                     rf"{snapshot.REPAIRS} times .*src/repro/models/mlp/torch_model.py"):
        snapshot.ensure_active()


def test_without_the_bytes_the_checkout_rebuilds_it_while_it_hashes_the_same(taken, checkout, monkeypatch):
    monkeypatch.setattr(snapshot, "_HELD", {})  # another process of the sweep: it copied nothing
    shutil.rmtree(taken.root / "src/repro/report")
    assert snapshot.ensure_active() is True and _whole(taken)
    (checkout / "src/repro/report/table.py").write_text("# edited\n")
    (taken.src / "repro/report/table.py").unlink()
    with pytest.raises(snapshot.SnapshotError, match=rf"snapshot {taken.id[:12]} .* lost src/repro/report/table.py"):
        snapshot.ensure_active()


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The files job/snapshot.py reads from here on (a fresh memo of what it read)."""
    monkeypatch.setattr(snapshot, "_READ", {})
    monkeypatch.setattr(snapshot, "_CHECKED", {})
    seen, read = [], snapshot._read

    def counted(path):
        seen.append(str(path))
        return read(path)

    monkeypatch.setattr(snapshot, "_read", counted)
    return seen


def test_a_file_whose_stat_did_not_move_is_not_read_again(taken, checkout, reads, monkeypatch):
    """As git's index: the snapshot and the checkout are read once, then only what moved (RACY_S 0:
    every file counts as changed long before it was read)."""
    monkeypatch.setattr(snapshot, "RACY_S", 0.0)
    assert snapshot.ensure_active() is False and len(reads) == len(taken.files)
    assert snapshot.changed(taken) == [] and len(reads) == 2 * len(taken.files)
    del reads[:]
    assert snapshot.ensure_active() is False and snapshot.changed(taken) == [] and reads == []
    target = taken.src / "repro/models/mlp/torch_model.py"
    before = target.read_bytes()
    tmp = target.with_name("replaced.tmp")  # another file in its place (a new inode), same size, same mtime
    tmp.write_bytes(bytes(len(before)))
    os.utime(tmp, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns))
    os.replace(tmp, target)
    edited = checkout / "conf/model/mlp.yaml"
    edited.write_text(edited.read_text() + "# edited\n")
    assert snapshot.ensure_active() is True and target.read_bytes() == before
    assert snapshot.changed(taken) == ["conf/model/mlp.yaml"]
    assert sorted(reads) == sorted([str(target), str(target), str(edited)])  # put back: read by the check after it


def test_a_later_process_starts_from_the_signatures_kept_in_the_snapshot(taken, reads, monkeypatch):
    """The first check writes what matched into the snapshot's folder (snapshot.CHECKED); a new process (an empty
    memo) then reads nothing that did not move, reads again a file put in another's place with its size and mtime,
    and an index that cannot be read is no index: every file read, the index written again."""
    monkeypatch.setattr(snapshot, "RACY_S", 0.0)

    def new_process():
        monkeypatch.setattr(snapshot, "_READ", {})
        monkeypatch.setattr(snapshot, "_CHECKED", {})
        del reads[:]

    assert snapshot.ensure_active() is False and len(reads) == len(taken.files)
    index = json.loads((taken.root / snapshot.CHECKED).read_text())
    assert sorted(index) == sorted(taken.files)
    new_process()
    assert snapshot.ensure_active() is False and reads == []
    target = taken.src / "repro/models/mlp/torch_model.py"
    before = target.read_bytes()
    tmp = target.with_name("replaced.tmp")
    tmp.write_bytes(bytes(len(before)))
    os.utime(tmp, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns))
    os.replace(tmp, target)
    new_process()
    # put back, and read once by the check after the rebuild (a new signature): the next check reads nothing
    assert snapshot.ensure_active() is True and target.read_bytes() == before and reads == [str(target)] * 2
    assert snapshot.ensure_active() is False and reads == [str(target)] * 2
    new_process()
    assert snapshot.ensure_active() is False and reads == []  # ... and kept for the next process
    (taken.root / snapshot.CHECKED).write_text("{not json")
    new_process()
    assert snapshot.ensure_active() is False and len(reads) == len(taken.files)
    assert sorted(json.loads((taken.root / snapshot.CHECKED).read_text())) == sorted(taken.files)
    assert _whole(taken)


def test_a_file_changed_just_before_it_was_read_is_read_again(taken, reads, monkeypatch):
    """The racy case: a file changed within RACY_S of its read (here every file: RACY_S an hour, so the test
    holds on a machine of any speed) could keep its stat through a write in the same clock tick: nothing of
    it is kept, and each check reads it all again."""
    monkeypatch.setattr(snapshot, "RACY_S", 3600.0)
    assert snapshot.ensure_active() is False and snapshot.ensure_active() is False
    assert len(reads) == 2 * len(taken.files) and not set(snapshot._READ) & set(reads)
    assert not (taken.root / snapshot.CHECKED).exists()  # nothing trusted, nothing kept for the next process


def test_an_unreadable_checkout_file_is_named_and_nothing_is_taken(checkout, tmp_path, monkeypatch):
    """A file that goes between the listing and its read (an editor's save): one line naming it, no snapshot."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(paths, "src_dir", lambda **_: checkout / "src")
    monkeypatch.setenv("REPRO_ROOT", str(checkout))
    target, read = checkout / "src/repro/models/mlp/torch_model.py", snapshot._read

    def vanishing(path):
        if path == target:
            target.unlink()
        return read(path)

    monkeypatch.setattr(snapshot, "_read", vanishing)
    with pytest.raises(snapshot.SnapshotError, match=r"cannot read the checkout's .*mlp/torch_model.py: No such file"):
        snapshot.take()
    assert not (tmp_path / "cache/repro/snapshots").exists()


def test_a_worker_refuses_code_from_outside_its_snapshot(monkeypatch, tmp_path):
    """The folder it was given is gone: Python imported repro from elsewhere (here, the checkout)."""
    monkeypatch.setenv(snapshot.ENV, str(tmp_path / "snap"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "snap" / "src"))
    with pytest.raises(RuntimeError, match="code snapshot .*snap/src is missing: this worker imported repro from"):
        worker.check_code_origin()
    here = Path(worker.__file__).resolve().parents[2]
    monkeypatch.setenv(snapshot.ENV, str(here.parent))  # given the folder it runs from: fine
    monkeypatch.setenv("PYTHONPATH", str(here))
    worker.check_code_origin()


def test_an_unwritable_snapshot_cache_is_one_line(tmp_path, monkeypatch, capsys):
    from repro import cli

    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file" / "cache"))
    monkeypatch.delenv(snapshot.ENV, raising=False)
    rc = cli.run_experiment(["framework=torch", "model=mlp", f"ledger.dir={tmp_path / 'ledger'}"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "cannot write the sweep's code snapshot at" in err and "XDG_CACHE_HOME" in err and "Traceback" not in err
    assert not (tmp_path / "ledger").exists()


@pytest.mark.slow
def test_deleting_the_snapshot_mid_sweep_changes_nothing_it_runs(checkout, tmp_path):
    """The snapshot folder removed while the first job runs: the later jobs run it, rebuilt, and the
    close (which imports the report's modules from it) ends well."""
    ledger = tmp_path / "ledger"
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "REPRO_SNAPSHOT")}
    env.update(PYTHONPATH=str(checkout / "src"), XDG_CACHE_HOME=str(cache), PYTHONUNBUFFERED="1",
               MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
    sweep = subprocess.Popen([sys.executable, "-m", "repro", "-m", "framework=torch", "model=mlp", "model.preset=tiny",
                              "run.steps=60", "run.warmup=2", "run.seed=0,1", f"ledger.dir={ledger}",
                              "progress.mode=plain"], cwd=checkout, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    for line in sweep.stdout:  # the first job's worker has imported its code and compiled
        if line.startswith("[1/2]   step 1/"):
            break
    snaps = cache / "repro" / "snapshots"
    (root,) = [p for p in snaps.iterdir() if not p.name.startswith(".")]
    files = sum(1 for p in root.rglob("*") if p.is_file())
    # a cache clean, once: where a process of the sweep writes into the folder meanwhile (a worker started
    # ahead, a rebuild), what it wrote stays, as after `rm -rf`; cleaning again would tear down that rebuild
    refused = []
    shutil.rmtree(root, onerror=lambda *failed: refused.append(failed))
    assert files > 100 and len(refused) < 10, refused  # the folder went, but for what was written meanwhile
    (checkout / "src/repro/report/table.py").write_text("raise ImportError('the checkout, not the snapshot')\n")
    out, err = sweep.communicate(timeout=600)
    out = line + out
    assert sweep.returncode == 0, out[-3000:] + err[-3000:]
    assert "closing step failed" not in err and "ImportError" not in out + err, err[-3000:]
    from repro.ledger import Ledger

    heads = [r for r in Ledger(ledger).heads() if r.get("kind") == "run"]
    assert len(heads) == 2 and {h["status"] for h in heads} == {"ok"}, [(h["status"], h.get("error")) for h in heads]
    assert {h["code"]["snapshot"] for h in heads} == {json.loads((root / snapshot.MANIFEST).read_text())["id"]}
    assert "the checkout" not in (root / "src/repro/report/table.py").read_text()


def test_the_listing_holds_sources_and_conf_and_leaves_out_caches_builds_and_linked_folders(tmp_path):
    src, conf = tmp_path / "src", tmp_path / "conf"
    files = ["src/repro/__init__.py", "src/repro/job/deep/x.py", "src/repro/data.json", "src/hydra_plugins/p/__init__.py",
             "conf/config.yaml", "conf/model/mlp.yaml"]
    left_out = ["src/repro/__pycache__/x.cpython-311.pyc", "src/repro/job/y.pyc", "src/repro.egg-info/PKG-INFO",
                "src/other/z.py"]
    for name in files + left_out:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    (src / "repro" / "linked").symlink_to(src / "other", target_is_directory=True)  # a linked folder: not walked
    (src / "repro" / "linked.py").symlink_to(src / "other" / "z.py")  # a linked file: listed, as a file
    listed = snapshot._sources(src, conf)
    assert list(listed) == sorted(files + ["src/repro/linked.py"])
    assert all(listed[name] == tmp_path / name for name in files)
    assert snapshot._sources(tmp_path / "none", tmp_path / "none") == {}
