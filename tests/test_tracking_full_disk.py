"""A full disk under an existing MLflow store: the run is recorded in the ledger, MLflow's failure
is kept by the projector as one line with the real cause, said by the next command, and `repro sync`
puts the run into MLflow once there is room."""

from __future__ import annotations

import time

import pytest

from conftest import Sandbox, repro_cli, tmpfs
from repro.tracking import handoff

pytestmark = pytest.mark.slow  # every test here starts a process

TINY = ("model=mlp", "framework=torch", "run.warmup=2", "run.steps=4")


def test_a_full_disk_under_an_existing_mlflow_store_is_one_warning_with_the_real_cause(tmp_path):
    """A real 3 MiB tmpfs holds the sqlite store (created with its experiment by repro's Tracker),
    then is filled; the ledger lies elsewhere. The run is recorded; MLflow's failure is one warning."""
    from repro.tracking.mlflow_tracker import Tracker

    sandbox = Sandbox(tmp_path)
    with tmpfs(tmp_path / "mnt", "size=3m") as mnt:
        store = f"tracking.uri=sqlite:///{mnt}/mlflow.db"
        tracker = Tracker(f"sqlite:///{mnt}/mlflow.db", "full")
        with open(mnt / "filler", "wb", buffering=0) as f:
            with pytest.raises(OSError, match="No space left"):
                while True:
                    f.write(b"\0" * 4096)
        proc = sandbox.run(*TINY, store, "tracking.experiment=full")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert len(sandbox.heads()) == 1 and {h["status"] for h in sandbox.heads()} == {"ok"}
        (first,) = sandbox.heads()
        assert "Traceback" not in proc.stderr and "autoflush" not in proc.stderr and "ERROR" not in proc.stderr
        # MLflow is written by the background projector: its failure is kept, one line with the real
        # cause, and said by the next command on this ledger
        deadline = time.time() + 120
        while handoff.busy(sandbox.ledger) and time.time() < deadline:
            time.sleep(0.2)
        failed = handoff.last_failure(sandbox.ledger)
        assert failed and "OperationalError: database or disk is full" in failed["error"], failed
        log = (handoff.folder(sandbox.ledger) / handoff.LOG).read_text()
        assert "Traceback" not in log and "autoflush" not in log, log
        again = sandbox.run(*TINY, "run.seed=1", f"tracking.uri=sqlite:///{tmp_path}/other.db", "tracking.experiment=full")
        warnings = [line for line in again.stderr.splitlines() if "warning" in line]
        assert len(warnings) == 1 and "OperationalError: database or disk is full" in warnings[0], again.stderr
        assert "`repro sync`" in warnings[0]
        while handoff.busy(sandbox.ledger) and time.time() < deadline + 120:  # that command's projector
            time.sleep(0.2)
        synced = repro_cli("sync", "--ledger", str(sandbox.ledger))
        assert synced.returncode == 1 and "Traceback" not in synced.stderr and "ERROR" not in synced.stderr
        assert synced.stderr.count("\n") == 1 and "database or disk is full" in synced.stderr
        (mnt / "filler").unlink()
        assert repro_cli("sync", "--ledger", str(sandbox.ledger)).returncode == 0
        runs = tracker.find_runs("repro.ledger_id")
        assert [r.data.tags["repro.ledger_id"] for r in runs] == [first["id"]]
        tracker.client._tracking_client.store.engine.dispose()  # let the tmpfs be unmounted
