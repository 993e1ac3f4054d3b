"""A sweep is one snapshot (job/snapshot.py): the code and conf/ its jobs run
are fixed at its start. The sweep runs from a copy of the checkout (src/ and conf/ in a temp
folder, so that the test can edit it), and the test breaks a model file and edits conf/ while
the sweep's first job runs."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repro import paths
from repro.job import snapshot

BROKEN = 'raise RuntimeError("this model file was edited while the sweep ran")\n'


@pytest.fixture
def checkout(tmp_path) -> Path:
    root = tmp_path / "checkout"
    for part in ("src", "conf"):
        shutil.copytree(paths.repo_root() / part, root / part,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return root


@pytest.mark.slow
def test_editing_the_checkout_during_a_sweep_changes_nothing_it_runs(checkout, tmp_path):
    ledger = tmp_path / "ledger"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "REPRO_SNAPSHOT")}
    env.update(PYTHONPATH=str(checkout / "src"), XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONUNBUFFERED="1",
               MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
    sweep = subprocess.Popen([sys.executable, "-m", "repro", "-m", "framework=torch", "model=mlp", "model.preset=tiny",
                              "run.steps=100", "run.warmup=2", "run.seed=0,1,2", f"ledger.dir={ledger}",
                              "progress.mode=plain"], cwd=checkout, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    model_file = checkout / "src" / "repro" / "models" / "mlp" / "torch_model.py"
    conf_file = checkout / "conf" / "model" / "mlp.yaml"
    deadline = time.time() + 300
    while time.time() < deadline and not any(ledger.rglob("*.json")):
        time.sleep(0.1)  # the first job's `started` record: the sweep has begun
    model_file.write_text(BROKEN + model_file.read_text())
    conf_file.write_text(conf_file.read_text() + "\n# edited while the sweep ran\n")
    out, err = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, out[-3000:] + err[-3000:]
    from repro.ledger import Ledger

    heads = [r for r in Ledger(ledger).heads() if r.get("kind") == "run"]
    assert len(heads) == 3 and {h["status"] for h in heads} == {"ok"}, [(h["status"], h.get("error")) for h in heads]
    codes = {(h["code"]["snapshot"], h["code"]["src_sha256"]) for h in heads}
    assert len(codes) == 1, codes  # every job ran the one snapshot
    assert "the checkout changed while this sweep ran (conf/model/mlp.yaml, src/repro/models/mlp/torch_model.py)" \
           in err, err[-3000:]
    (snap_id, _), = codes
    snap = next((tmp_path / "cache" / "repro" / "snapshots").iterdir())
    assert snap_id.startswith(snap.name) and BROKEN not in (snap / "src/repro/models/mlp/torch_model.py").read_text()


def test_a_snapshot_is_content_addressed_and_reused(checkout, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("REPRO_ROOT", str(checkout))
    monkeypatch.delenv("REPRO_SNAPSHOT", raising=False)
    monkeypatch.setattr(paths, "src_dir", lambda **_: checkout / "src")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as container images set it
    first, again = snapshot.take(), snapshot.take()
    assert first == again and len(list((tmp_path / "cache" / "repro" / "snapshots").iterdir())) == 1
    # its modules compiled once with it: no process of its sweeps compiles repro's source again
    source = first.src / "repro" / "worker" / "worker.py"
    pyc = Path(importlib.util.cache_from_source(str(source))).read_bytes()
    stat = source.stat()  # the header the import system checks: the source's mtime and size
    assert pyc[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(pyc[8:12], "little") == int(stat.st_mtime) and int.from_bytes(pyc[12:16], "little") == stat.st_size
    assert snapshot.changed(first) == []
    (checkout / "conf" / "model" / "mlp.yaml").write_text("# changed\n")
    assert snapshot.changed(first) == ["conf/model/mlp.yaml"]
    assert snapshot.take().id != first.id
