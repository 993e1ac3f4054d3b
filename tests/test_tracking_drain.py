"""One way into MLflow: whatever the launcher, runs reach MLflow through the pending queue and
tracking/drain.py, the only code that opens a tracker. A sweep through a real SLURM (its jobs drain
inline, bounded) and a local sweep (a detached projector) are both cut off from MLflow (the test
holds the ledger's projection lock, so every drain waits, the inline ones are stopped at their bound
and what took the local sweep's hand-over, the machine's MLflow writer, is killed); `repro sync` then completes both, and their MLflow runs carry the
same parameters and tags."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import repro
from conftest import at_work_on
from repro.tracking import handoff

SRC = Path(repro.__file__).parent
FAST = ("model=mlp", "model.preset=tiny", "run.steps=6", "run.warmup=2", "tracking.experiment=one_writer",
        "tracking.inline_drain_s=3")


def test_only_the_drain_opens_a_tracker_and_imports_mlflow():
    """Read from the source with `ast`: `Tracker(...)` is called in one function, and MLflow is
    imported by the tracker's own module alone."""
    opens, imports = [], []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Tracker":
                opens.append(str(path.relative_to(SRC)))
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] == "mlflow" for n in names):
                imports.append(str(path.relative_to(SRC)))
    assert opens == ["tracking/drain.py"]
    assert set(imports) == {"tracking/mlflow_tracker.py"}


def _cut_off(sandbox, *args: str) -> subprocess.CompletedProcess:
    """A sweep run while this test holds the ledger's projection lock; what took its hand-over (the
    machine's MLflow writer, waiting for the lock) killed after."""
    with handoff.lock(sandbox.ledger):
        proc = sandbox.run("-m", "framework=jax,torch", *FAST, *args)
        taken = at_work_on(sandbox.ledger)
        taken.kill()
        taken.wait(timeout=30)
    return proc


@pytest.mark.slow
def test_slurm_and_local_sweeps_reach_mlflow_through_one_drain_and_sync_finishes_both(slurm, sandbox):
    subprocess.run([sys.executable, "-c", "import sys; from repro.tracking.drain import open_store; "
                    "open_store(sys.argv[1], 'one_writer')", sandbox.uri], check=True, timeout=120)  # the store exists
    on_slurm = _cut_off(sandbox, "hydra/launcher=submitit_slurm", "hydra.launcher.timeout_min=10",
                        "hydra.launcher.partition=both", f"hydra.sweep.dir={sandbox.root / 'sweep'}")
    assert on_slurm.returncode == 0, on_slurm.stdout[-3000:] + on_slurm.stderr[-3000:]
    slurm_heads = sandbox.heads()
    assert len(slurm_heads) == 2 and {h["scheduler"]["name"] for h in slurm_heads} == {"slurm"}
    assert len({h["scheduler"]["job_id"] for h in slurm_heads}) == 1  # one round: one SLURM job
    out = Path(slurm_heads[0]["scheduler"]["stdout"])  # its one drain, at the round's end, stopped at its bound
    log = out.read_text() + out.with_suffix(".err").read_text()
    assert log.count("the projection of this round's runs took over 3 s and was stopped") == 1, log[-2000:]
    assert "2 run(s) of this round not yet in MLflow: repro sync" in log, log[-2000:]
    local = _cut_off(sandbox)
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    heads = sandbox.heads()
    assert len(heads) == 4 and len(handoff.entries(sandbox.ledger)) == 6  # 4 runs, 2 sweeps: none in MLflow yet
    sync = subprocess.run([sys.executable, "-m", "repro", "sync", "--ledger", str(sandbox.ledger)], cwd=sandbox.root,
                          env=sandbox.env(), capture_output=True, text=True, timeout=300)
    assert sync.returncode == 0, sync.stdout[-2000:] + sync.stderr[-2000:]
    assert "4 run(s) and 2 sweep(s) handed over by earlier commands put into MLflow" in sync.stdout
    runs = sandbox.mlflow_runs("one_writer")
    children = {r.data.tags["repro.ledger_id"]: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert sorted(children) == sorted(h["id"] for h in heads)
    assert len(parents) == 2 and {p.info.status for p in parents} == {"FINISHED"}
    assert {c.data.tags["repro.projected"] for c in children.values()} == {"complete"}
    by_where = {}
    for head in heads:
        run = children[head["id"]]
        keys = (frozenset(run.data.params), frozenset(k for k in run.data.tags if not k.startswith("repro.scheduler")))
        by_where.setdefault(head["scheduler"]["name"], set()).add(keys)
    assert by_where["slurm"] == by_where["local"]  # the same parameters and tags: one writer
