"""`env.packages` checked in the preflight (exit 2, nothing run or written), and the README's
version sweep run as written (with one repeat)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here starts a process

REPO = Path(__file__).resolve().parents[1]


def _repro(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "REPRO_ENV_CACHE": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "repro", *args, f"ledger.dir={tmp_path / 'ledger'}",
                           f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "progress.mode=plain"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("pin, says", [
    ("not a pkg spec", "is not a requirement"),
    ("optax>=0.2", "is not an exact pin"),
    ("repro==0.0.1", "would replace repro itself"),
    ("leftpad==1.3.0", "does not have"),  # a name the worker's environment lacks: refused without env.allow_new
    ("optax==0.0.7", "no package source here serves optax==0.0.7"),
])
def test_a_bad_pin_is_refused_before_anything_runs(tmp_path, pin, says):
    out = _repro(tmp_path, "model=mlp", "framework=jax", f"env.packages=['{pin}']")
    assert out.returncode == 2, out.stdout + out.stderr
    assert says in out.stderr and pin in out.stderr, out.stderr
    assert "--allow-substitutes" not in out.stderr  # a run has no such flag
    assert not (tmp_path / "ledger").exists() and not (tmp_path / "cache" / "venvs").exists()


def test_allow_new_lets_a_new_name_past_the_name_check(tmp_path):
    out = _repro(tmp_path, "model=mlp", "framework=jax", "env.packages=['leftpad==0.0.7']", "env.allow_new=true")
    assert "does not have" not in out.stderr  # past the name check; refused only if no source serves it
    assert out.returncode == 2 and "no package source here serves leftpad==0.0.7" in out.stderr, out.stderr


def test_the_readme_version_sweep_runs_on_the_pinned_stack(tmp_path):
    line = next(l for l in (REPO / "README.md").read_text().splitlines() if l.rstrip().endswith("# a version sweep"))
    command = line.split("#")[0].split()
    assert command[:2] == ["repro", "-m"] and "run.repeats=3" in command
    args = [a.strip('"') for a in command[1:] if a != "run.repeats=3"] + ["run.repeats=1"]
    out = _repro(tmp_path, *args)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    pins = re.findall(r"'([\w.-]+==[\w.]+)'", line)
    assert len(pins) == 2 and all(f"[{i}/2] ok" in out.stdout for i in (1, 2)), out.stdout[-3000:]
    assert all(p in out.stdout for p in pins)
