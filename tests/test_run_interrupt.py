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


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_during_a_replay_records_it_interrupted_in_one_line(tmp_path, sig):
    """`kill -TERM` during `repro replay` exited 143 with no message and left the replayed run `lost`;
    SIGINT printed a raw KeyboardInterrupt traceback. Both: exit 130, one line, recorded interrupted."""
    import signal
    import time

    sandbox = Sandbox(tmp_path)
    first = sandbox.run("model=mlp", "model.preset=tiny", "framework=torch", "run.warmup=2", "run.steps=4")
    assert first.returncode == 0, first.stderr[-2000:]
    (original,) = sandbox.heads()
    replay = subprocess.Popen([*sandbox.repro_cmd()[:3], "replay", original["id"], "--ledger", str(sandbox.ledger),
                               "--progress", "plain"], cwd=sandbox.root, env=sandbox.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not any(h.get("replay_of") for h in sandbox.heads()):
        time.sleep(0.05)
    replay.send_signal(getattr(signal, sig))
    _, err = replay.communicate(timeout=120)
    replays = [h for h in sandbox.heads() if h.get("replay_of")]
    # the `started` record is written before its worker starts (torch's import alone takes a second): the
    # signal comes while the replay runs
    assert replay.returncode == 130, err[-2000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("repro replay: interrupted")
    assert [h["status"] for h in replays] == ["interrupted"], replays
