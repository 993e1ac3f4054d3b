"""Every record the project ships replays: exact (or within tolerance where the hardware differs),
or refused before any worker starts, one line naming the fix. Never a crash.

The whole ledger is planned in the fast tier (tests/test_probe_defects.py
`test_every_shipped_record_plans_for_a_replay_or_is_refused_in_one_line`); here one record of
each outcome runs for real, from a copy of the shipped ledger.
"""

from __future__ import annotations

import shutil

import pytest

from conftest import shipped_ledger
from repro.ledger import Ledger

MADE_BEFORE_A_CHANGE = "d97209714a789bed"  # 2026-11-22, JAX MLP: crashed a replay with an AttributeError once
STILL_THE_SAME = "e4be600cadedd7b6"  # 2026-11-22, torch MLP: today's code computes it as it did


@pytest.fixture
def box(sandbox):
    shutil.copytree(shipped_ledger(), sandbox.ledger)
    return sandbox


def _replay(box, *args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "repro", "replay", *args, "--ledger", str(box.ledger),
                           "--tracking-uri", box.uri, "--progress", "plain"], cwd=box.root,
                          env=box.env(REPRO_ENV_CACHE=str(box.root / "env-cache")), capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_a_record_made_before_a_change_is_refused_plainly_and_replays_exact_as_recorded(box):
    count = len(Ledger(box.ledger).entries())
    refused = _replay(box, MADE_BEFORE_A_CHANGE, STILL_THE_SAME)
    assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith(f"repro replay: {MADE_BEFORE_A_CHANGE} cannot be replayed here: today's code "
                                     "computes jax mlp differently since 2026-11-23")
    assert refused.stderr.rstrip().endswith(f"repro replay {MADE_BEFORE_A_CHANGE} --as-recorded")
    assert len(Ledger(box.ledger).entries()) == count  # nothing ran, nothing written

    same = _replay(box, STILL_THE_SAME)
    assert same.returncode == 0, same.stdout[-2000:] + same.stderr[-2000:]
    (verdict,) = [r for r in Ledger(box.ledger).heads(kind="replay") if r["of"] == STILL_THE_SAME]
    assert verdict["status"] == "exact", verdict["reasons"]

    # the fix the refusal names: its own commit (a worktree), in this environment: the 12 versions the record
    # names are the ones .ci/constraints.txt pins (a bump there makes this a one-line refusal naming them)
    restored = _replay(box, MADE_BEFORE_A_CHANGE, "--as-recorded")
    assert restored.returncode == 0, restored.stdout[-2000:] + restored.stderr[-2000:]
    assert "packages: this environment's (the record predates whole-environment locks; the 12 versions it names " \
           "are all as here)" in restored.stdout
    (verdict,) = [r for r in Ledger(box.ledger).heads(kind="replay") if r["of"] == MADE_BEFORE_A_CHANGE]
    assert verdict["status"] == "exact", verdict["reasons"]
    assert "code restored, packages same" in verdict["reasons"][-1]
