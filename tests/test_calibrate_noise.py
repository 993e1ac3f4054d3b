"""`repro calibrate` says which noise it is (issue 48): the robust spread beside the SD, the slow
processes and what caught them, the floor by the verdict's own test on the measured ratios, and
an allocation whose rounds do not assume normal noise. On synthetic records, seeded."""

from __future__ import annotations

import math

import numpy as np
import pytest

from repro import calibrate
from repro.report import allocation, noise
from repro.report import verdict as V


def _records(rng, trials: int, rounds: int, own: float = 0.025, p: float = 0.1, slow: float = 0.6,
             sampling: float = 0.005) -> list[dict]:
    """A/A trials: a fresh process per run, `own` noise each, a share `p` of processes `slow` slower."""
    out, job = [], 0
    for t in range(trials):
        for k in range(rounds):
            for pos, label in enumerate(rng.permutation(["A", "B"])):
                m = 1e-3 * math.exp(rng.normal(0, own)) * (1 + slow if rng.random() < p else 1)
                out.append({"id": f"{t}-{k}-{label}", "status": "ok", "calibration": {"trial": t, "label": str(label)},
                            "repeat": {"index": k, "position": pos, "count": rounds, "group": f"s/{label}"},
                            "sweep": {"id": "s", "job": job}, "machine": {"host": "h"}, "wall_s": 1.0 + 400 * m,
                            "results": {"steady_median_s": m, "steady_median_sd_s": sampling * m, "steady_steps": 400}})
                job += 1
    return out


def _slow_ids(records: list[dict]) -> list[str]:
    mid = float(np.median([r["results"]["steady_median_s"] for r in records]))
    return [r["id"] for r in records if r["results"]["steady_median_s"] > 1.2 * mid]


def test_slow_processes_are_counted_sized_and_named_by_what_caught_them():
    records = _records(np.random.default_rng(2), 10, 4)
    by_id = {r["id"]: r for r in records}
    for r in records:  # every thread migrates now and then: a run's count counts against its config's median
        r["machine"]["placement"] = {"migrations": 1 + len(r["id"]) % 2}
    slow = _slow_ids(records)
    assert 4 <= len(slow) <= 16
    by_id[slow[0]]["canary"] = {"slow": True}
    by_id[slow[1]]["machine"]["steal_share"] = 0.05
    by_id[slow[2]]["machine"]["placement"] = {"migrations": 5}  # over 2 × the median
    by_id[slow[3]]["canary"] = {"slow": False}  # a canary that did not flag it: not caught
    by_id[slow[3]]["machine"].update(steal_share=0.01, placement=None)  # under the steal threshold, no placement
    fast = next(r for r in records if r["id"] not in slow)
    fast["machine"]["steal_share"] = 0.03  # a false alarm
    s = calibrate.summarise(records, 4)
    w = s.slow
    assert w.runs == 80 and w.slow == len(slow) and w.share == pytest.approx(len(slow) / 80)
    assert w.caught == {"canary": 1, "steal": 1, "placement": 1, "nothing": len(slow) - 3}
    assert w.flagged_others == {"canary": 0, "steal": 1, "placement": 0} and w.others == 80 - len(slow)
    assert 0.5 < w.size_median < 0.7 and 0.2 < w.size_range[0] <= w.size_range[1]
    text = "\n".join(calibrate.lines(s, "h"))
    assert f"slow processes: {len(slow)} of 80 runs" in text and "caught by: canary 1, steal 1, placement 1, nothing" in text


def test_a_gapped_label_is_its_own_config():
    records = _records(np.random.default_rng(2), 6, 4, p=0.0)
    for r in records:
        if r["calibration"]["label"] == "B":
            r["calibration"]["gap"] = 0.5
            r["results"]["steady_median_s"] *= 1.5
    s = noise.summarise(records)
    assert s.slow.slow == 0  # B's +50 % is its config's, not a slow process


def test_robust_spread_sees_the_core_and_the_sd_the_slow_few():
    s = noise.summarise(_records(np.random.default_rng(3), 30, 4))
    assert s.robust_spread == pytest.approx(0.025, rel=0.3)
    assert s.noise > 2.5 * s.robust_spread
    assert s.robust_paired_noise == pytest.approx(0.025 * math.sqrt(2), rel=0.35)
    assert s.paired_noise > 2.5 * s.robust_paired_noise
    clean = noise.summarise(_records(np.random.default_rng(3), 30, 4, p=0.0))
    assert clean.robust_spread == pytest.approx(clean.noise, rel=0.25)  # equal under normal noise


def test_the_floor_is_the_verdicts_own_test_on_the_measured_ratios():
    s = noise.summarise(_records(np.random.default_rng(4), 40, 5))
    assert s.floor_from == "resampled" and s.trim == V.TRIM and s.statistic == V.STATISTIC
    # a tenth slow: the paired SD makes 10 rounds look hopeless; the verdict's statistic on what was measured does not
    assert s.floor["10"] < 0.7 * s.floor_normal["10"]
    trimmed = noise.summarise([{**r, "config": {"verdict": {"statistic": "trimmed"}}}
                               for r in _records(np.random.default_rng(4), 40, 5)])
    assert trimmed.statistic == "trimmed" and trimmed.floor["10"] < 0.6 * s.floor_normal["10"]
    assert s.floor["10"] < s.floor["3"]
    text = "\n".join(noise.lines(s, "h"))
    assert "on the measured log ratios resampled" in text and "a normal assumption at the paired SD" in text
    assert V.resampled_gap([0.01, -0.01, 0.0, 0.02] * 4, 5) is None  # too few ratios to resample
    few = noise.summarise(_records(np.random.default_rng(4), 4, 4))
    assert few.floor_from == "normal" and few.floor == few.floor_normal


def test_the_new_tests_aa_rate_on_seeded_simulated_trials():
    """200 A/A trials of 10 rounds in the slow-process model, judged as calibrate judges them."""
    s = noise.summarise(_records(np.random.default_rng(5), 200, 10))
    # 5 % nominal; at 200 trials a binomial SD of 1.5 %: the default's rate itself is held on 20,000
    # sweeps (tests/test_verdict_statistic.py, benchmarks/verdict_calibration.py: 4.5 % at 10 rounds)
    assert s.false.n == 200 and s.false.rate <= 0.08
    trimmed = noise.summarise([{**r, "config": {"verdict": {"statistic": "trimmed"}}}
                               for r in _records(np.random.default_rng(5), 200, 10)])
    assert trimmed.false.rate <= 0.06
    old = noise.summarise([{**r, "config": {"verdict": {"trim": 0}}} for r in _records(np.random.default_rng(5), 200, 10)])
    assert old.false.rate <= 0.06  # the paired t holds it too (by losing its power)


def test_allocation_takes_its_rounds_from_the_measured_distribution():
    records = _records(np.random.default_rng(6), 40, 5)
    groups: dict = {}
    for r in records:
        groups.setdefault((r["calibration"]["trial"], r["calibration"]["label"]), []).append(r)
    normal = allocation.recommend(list(groups.values()), gap=0.05)
    measured = allocation.recommend(list(groups.values()), gap=0.05, ratios=noise.aa_log_ratios(records))
    assert normal.rounds_from == "normal" and measured.rounds_from == "resampled"
    assert measured.rounds is not None and (normal.rounds is None or measured.rounds < normal.rounds / 2)
    assert "not a normal assumption" in measured.line() and "not a normal" not in normal.line()


def test_calibrate_refuses_a_bad_trim_before_anything_runs(tmp_path, capsys):
    from repro.cli import dispatch

    assert dispatch(["calibrate", "framework=jax", "model=mlp", "verdict.trim=0.45", f"ledger.dir={tmp_path / 'l'}"]) == 2
    err = capsys.readouterr().err
    assert "verdict.trim=0.45 must be in [0, 0.4)" in err and len(err.strip().splitlines()) == 2  # header + the line
    assert not (tmp_path / "l").exists() or not any((tmp_path / "l").rglob("*.json"))


@pytest.mark.parametrize("deterministic, diverged, says", [
    (True, False, "bit-identity: bit-identical across 8 processes (loss and parameters)"),
    (True, True, "WARNING: a deterministic config diverged: not bit-identical: 2 distinct loss hashes among 8 "
                 "processes; the losses first differ at step 3"),
    (False, True, "(expected: run.deterministic=false)"),
])
def test_the_aa_says_whether_its_processes_were_bit_identical(deterministic, diverged, says):
    """An A/A is K processes of one config (issue 49): its close says so, as every sweep's does."""
    records = _records(np.random.default_rng(5), 2, 2)
    for i, r in enumerate(records):
        other = diverged and i == len(records) - 1
        r["config"] = {"run": {"deterministic": deterministic}}
        r["results"].update(steps=5, loss=[2.0, 1.9, 1.7 if other else 1.8, 1.6, 1.5],
                            loss_sha256=("b" if other else "a") * 64, params_sha256="c" * 64)
    s = calibrate.summarise(records, 2)
    assert s.identity.processes == 8 and s.identity.identical is (not diverged)
    line = next(x for x in calibrate.lines(s, "h") if "bit-identical" in x)
    assert says in line, line


@pytest.mark.slow
def test_an_interrupt_while_the_summary_is_computed_ends_as_one_during_the_trials(tmp_path):
    """The device pass's budget once cut an A/A after its trials, in its summary: a traceback, and no
    calibration record. Now it ends as an interrupt during the trials does: one line, the trials recorded."""
    import json
    import os
    import re
    import subprocess
    import sys

    cut = ("import sys\nfrom repro.report import allocation\n"
           "def cut(*a, **k):\n    raise KeyboardInterrupt\n"
           "allocation.recommend = cut\nfrom repro.cli import dispatch\nsys.exit(dispatch(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", cut, "calibrate", "--trials", "2", "--repeats", "2", "framework=jax",
                           "model=mlp", "model.preset=tiny", "run.steps=20", "run.warmup=2",
                           f"ledger.dir={tmp_path / 'l'}", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}",
                           "progress.mode=none"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "REPRO_MACHINE_DIR": str(tmp_path / "m")})
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert re.search(r"repro calibrate: interrupted after 2 of 2 trials; \d+ runs recorded\n", proc.stderr), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "run-to-run noise" in proc.stdout
    kinds = [json.loads(p.read_text()) for p in (tmp_path / "l").rglob("*.json")]
    assert [r["status"] for r in kinds if r.get("kind") == "calibration"] == ["interrupted"]
