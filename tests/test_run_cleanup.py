"""What a run leaves behind is bounded: the temp folders of parents that are gone are removed at the
next run's start, and Hydra's run folders are pruned to the newest."""

from __future__ import annotations

import os

import pytest

from conftest import Sandbox, dead_parent

TINY = ("model=mlp", "framework=torch", "run.warmup=2", "run.steps=4")


@pytest.mark.slow
def test_a_run_removes_the_temp_folders_of_parents_that_are_gone(tmp_path):
    """A `repro-run-<pid>-*` folder left by a parent killed with SIGKILL (its pid is gone), one of a
    live process (this test's) and one without a pid in its name: the next run start removes the first."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    stale = tmp / f"repro-run-{dead_parent()['pid']}-abc123"
    live = tmp / f"repro-run-{os.getpid()}-def456"
    other = tmp / "repro-run-xyz789"
    for folder in (stale, live, other):
        (folder / "compile-cache").mkdir(parents=True)
    sandbox = Sandbox(tmp_path / "box")
    sandbox.root.mkdir()
    proc = sandbox.run(*TINY, TMPDIR=str(tmp))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in tmp.glob("repro-run-*")) == sorted([live.name, other.name])

def test_hydra_run_folders_are_pruned_to_the_newest(tmp_path):
    from repro.job import hydra_dirs

    runs = tmp_path / "cache" / "repro" / "hydra" / "runs"
    made = [runs / f"2026-01-0{d}" / f"10-00-0{s}.000000" for d in (1, 2) for s in range(5)]
    for folder in made:
        (folder / ".hydra").mkdir(parents=True)
    current = runs / "2026-01-03" / "09-00-00.000000"
    assert hydra_dirs.prune(current, keep=3) == made[:7]
    assert sorted(runs.glob("*/*")) == made[7:] and not (runs / "2026-01-01").exists()
    own = tmp_path / "mine" / "2026-01-01" / "x"
    own.mkdir(parents=True)
    assert hydra_dirs.prune(tmp_path / "mine" / "2026-01-02" / "y", keep=0) == [] and own.exists()
