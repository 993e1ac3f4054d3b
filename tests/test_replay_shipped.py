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


def _made_on_this_cpu_kind(record: dict) -> bool:
    """Whether this machine's CPU is the kind the record names: its model string and its vector
    extensions. A record without them (before 2026-11-24, as the shipped ones) names no kind: one
    "AMD EPYC" string covered machines with and without AVX-512, whose results differ in the last bits
    (test_units.py), and the replay lists the unrecorded extensions as a hardware difference."""
    from repro import hardware

    cpu = (record.get("environment") or {}).get("cpu") or {}
    return cpu.get("model") == hardware.cpu_model() and cpu.get("isa") is not None \
        and sorted(cpu["isa"]) == sorted(hardware.cpu_isa())


def _assert_replayed(box, record_id: str, verdict: dict) -> None:
    """`exact` on the CPU kind the record was made on; elsewhere, or where the record names no kind,
    `exact` or `close` (the same steps through other kernels: within tolerance, not bitwise), the
    hardware named among the reasons."""
    record = Ledger(box.ledger).get(record_id)
    if _made_on_this_cpu_kind(record):
        assert verdict["status"] == "exact", verdict["reasons"]
        return
    assert verdict["status"] in ("exact", "close"), (record["environment"]["cpu"], verdict["reasons"])
    if verdict["status"] == "close":
        assert "hardware differs" in verdict["reasons"][-1], verdict["reasons"]


def _replay(box, *args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "repro", "replay", *args, "--ledger", str(box.ledger),
                           "--tracking-uri", box.uri, "--progress", "plain"], cwd=box.root,
                          env=box.env(REPRO_ENV_CACHE=str(box.root / "env-cache")), capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_a_record_made_before_a_change_is_refused_plainly_and_replays_exact_as_recorded(box):
    """`exact` where the CPU is the kind the records were made on (the verdicts read the record's CPU:
    on another kind, or where the record names none, `close` naming the hardware is as right)."""
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
    _assert_replayed(box, STILL_THE_SAME, verdict)  # exact on the record's CPU kind, else close naming the hardware

    # the fix the refusal names: its own commit (a worktree), in this environment: the 12 versions the record
    # names are the ones .ci/constraints.txt pins (a bump there makes this a one-line refusal naming them)
    restored = _replay(box, MADE_BEFORE_A_CHANGE, "--as-recorded")
    assert restored.returncode == 0, restored.stdout[-2000:] + restored.stderr[-2000:]
    assert "packages: this environment's (the record predates whole-environment locks; the 12 versions it names " \
           "are all as here)" in restored.stdout
    (verdict,) = [r for r in Ledger(box.ledger).heads(kind="replay") if r["of"] == MADE_BEFORE_A_CHANGE]
    _assert_replayed(box, MADE_BEFORE_A_CHANGE, verdict)
    assert "code restored, packages same" in verdict["reasons"][-1]


def test_the_verdict_expected_of_a_shipped_record_reads_its_cpu(monkeypatch):
    """`exact` is asked only where this CPU is the kind the record names (model string, and its vector
    extensions where recorded): on the project's other VM kind (an Intel Xeon with AVX-512 FP16) `close`
    naming the hardware is as right."""
    from repro import hardware

    epyc = {"environment": {"cpu": {"model": "AMD EPYC", "affinity": 2, "cores": 2}}}  # as shipped: no isa
    monkeypatch.setattr(hardware, "cpu_model", lambda: "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz")
    monkeypatch.setattr(hardware, "cpu_isa", lambda: ("avx2", "avx512f", "avx512_fp16"))
    assert not _made_on_this_cpu_kind(epyc)
    monkeypatch.setattr(hardware, "cpu_model", lambda: "AMD EPYC")
    assert not _made_on_this_cpu_kind(epyc)  # no extensions recorded: the same string, maybe not the same kind
    with_isa = {"environment": {"cpu": {"model": "AMD EPYC", "isa": ["avx2", "avx512_fp16", "avx512f"]}}}
    assert _made_on_this_cpu_kind(with_isa)
    assert not _made_on_this_cpu_kind({"environment": {"cpu": {"model": "AMD EPYC", "isa": ["avx2"]}}})
