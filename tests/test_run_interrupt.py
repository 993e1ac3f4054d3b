"""Ctrl-C (SIGINT) during a sweep: exit 130, what was recorded is counted, `repro sync` named."""

from __future__ import annotations

import subprocess

import pytest

from conftest import Sandbox

pytestmark = pytest.mark.slow  # every test here starts a process


def test_ctrl_c_between_jobs_counts_what_was_recorded_and_names_repro_sync(tmp_path):
    """A two-job sweep pressed with Ctrl-C (SIGINT) once the first job's record is in the ledger."""
    import signal
    import time

    sandbox = Sandbox(tmp_path)
    parent = subprocess.Popen(sandbox.repro_cmd("-m", "model=mlp", "framework=torch", "run.warmup=2",
                                                "run.steps=4,1000000"),
                              cwd=sandbox.root, env=sandbox.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    deadline = time.time() + 300
    while time.time() < deadline and not any(h["status"] == "ok" for h in sandbox.heads()):
        time.sleep(0.5)
    time.sleep(2)
    parent.send_signal(signal.SIGINT)
    _, err = parent.communicate(timeout=300)
    assert parent.returncode == 130, err[-2000:]
    heads = sandbox.heads()
    recorded = len([h for h in heads if h["status"] != "started"])
    assert heads[0]["status"] == "ok" and recorded == len(heads) >= 1, heads  # the second, if it started: interrupted
    assert f"repro: interrupted; {recorded} job(s) recorded in the ledger; `repro sync` puts any run not yet in " \
           "MLflow there" in err, err[-2000:]
