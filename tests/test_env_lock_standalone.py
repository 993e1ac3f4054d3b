"""The environment lock is read by running `python -I lock.py` in the run's interpreter, which need
not have repro installed: that file imports only the standard library. Stop 71's CI failed where
it imported `repro.paths` (every record of a fresh cache named no `environment.env_hash`, silently);
these two tests fail fast on either half of that."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from repro.envs import lock, runs

pytestmark = pytest.mark.slow  # both start a process (each well under a second)


def test_the_lock_script_runs_in_an_interpreter_without_repro(tmp_path):
    bare = [sys._base_executable, "-I"]  # the base interpreter, isolated: no venv, no PYTHONPATH, no cwd
    assert subprocess.run([*bare, "-c", "import repro"], cwd=tmp_path, capture_output=True).returncode != 0
    out = subprocess.run([*bare, lock.__file__], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(lock.HEADER + "\n")
    assert lock.parse(out.stdout).python == "%d.%d.%d" % sys.version_info[:3]


def test_a_lock_that_cannot_be_read_is_said_not_silently_dropped(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_ENV_CACHE", str(tmp_path / "cache"))
    python = tmp_path / "venv" / "bin" / "python"  # starts, prints a traceback's last line, exits 1
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named repro' >&2\nexit 1\n")
    python.chmod(0o755)
    said = []
    assert runs.record_hash(tmp_path / "ledger", str(python), said.append) is None
    assert len(said) == 1
    assert "exit 1" in said[0] and "No module named repro" in said[0] and "environment.env_hash" in said[0]
    assert not (tmp_path / "ledger" / "envs").exists() or not os.listdir(tmp_path / "ledger" / "envs")
