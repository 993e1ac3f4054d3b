"""The verdict's trimmed paired t (issue 48; `verdict.statistic=trimmed`): its level on seeded
simulated A/A sweeps, with and without a minority of slow processes, at 3, 5 and 10 rounds and at
the planned looks (the default adaptive statistic's too); its power where a tenth of the processes
are slow; its sentence; `verdict.trim` refused outside [0, 0.4). The adaptive statistic's own tests:
tests/test_verdict_statistic.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

import repro
from repro.report import statistic as S
from repro.report import verdict as V

SLOW = {"own": 0.025, "p": 0.1, "slow": 0.6}  # the model: 2.5 % per process, 10 % of processes +60 %
NORMAL = {"own": 0.02, "p": 0.0, "slow": 0.0}


def _ratios(rng, model: dict, sweeps: int, rounds: int, gap: float = 0.0) -> np.ndarray:
    """Within-round log ratios B/A of `sweeps` simulated sweeps (a row each)."""
    runs = rng.normal(0, model["own"], (2, sweeps, rounds))
    runs += math.log1p(model["slow"]) * (rng.random((2, sweeps, rounds)) < model["p"])
    return runs[1] + math.log1p(gap) - runs[0]


def _faster(d: np.ndarray, trim: float, alpha: float = V.ALPHA) -> np.ndarray:
    """Each row called faster (either way) by the engine's test at one look: its own trimmed rows
    and fitted null, as `judge` computes them (`test_the_vectorised_test_is_the_engines` holds it)."""
    n = d.shape[1]
    k = V.trim_count(n, trim)
    m, var, _ = V._trimmed_rows(d, k)
    c, nu = V._null_fit(n, k) if k else (1.0, n - 1.0)
    return np.abs(m) > V.t_ppf(1 - alpha / 2, nu) * c * np.sqrt(var)


def _sides(row) -> tuple[V.Side, V.Side]:
    keys = tuple(range(len(row)))
    return V.Side("A", (1.0,) * len(row), rounds=keys), V.Side("B", tuple(math.exp(x) for x in row), rounds=keys)


def test_the_vectorised_test_is_the_engines():
    d = _ratios(np.random.default_rng(0), SLOW, 60, 10, gap=0.03)
    for n in (3, 5, 10):
        fast = _faster(d[:, :n], V.TRIM)
        judged = [V.judge(*_sides(row[:n]), statistic="trimmed").outcome == V.FASTER for row in d]
        assert list(fast) == judged


@pytest.mark.parametrize("model", [SLOW, NORMAL], ids=["slow processes", "normal"])
@pytest.mark.parametrize("rounds", [3, 5, 10])
def test_aa_false_faster_stays_at_alpha(model, rounds):
    """4000 seeded A/A sweeps: at most 5 % called faster (binomial SE 0.34 %: 5.8 % is 2.4 SE)."""
    d = _ratios(np.random.default_rng(rounds), model, 4000, rounds)
    rate = _faster(d, V.TRIM).mean()
    assert rate <= 0.058
    if model is SLOW and rounds >= 5:  # slow processes make the trimmed null lighter-tailed, not heavier
        assert rate <= 0.045


def test_the_fitted_null_holds_the_level_under_normal_noise_at_every_look_level():
    """The plain trimmed t (no fit) is liberal at small n; the fitted one holds 5 % and the looks' shares."""
    rng = np.random.default_rng(99)
    d = rng.normal(0, 1, (40000, 5))
    k = V.trim_count(5, V.TRIM)
    m, var, h = V._trimmed_rows(d, k)
    raw = np.abs(m) / np.sqrt(var) > V.t_ppf(0.975, h - 1)
    assert raw.mean() > 0.06  # Tukey–McLaughlin's t at 5 rounds, one trimmed from each end
    for alpha in (0.05, 0.032, 0.018, 0.008):
        assert _faster(d, V.TRIM, alpha).mean() <= alpha * 1.15
    assert V._null_fit(5, 1) == V._null_fit.__wrapped__(5, 1)  # seeded: the same fit every time


def test_planned_looks_keep_aa_at_alpha_with_slow_processes():
    rng = np.random.default_rng(4)
    plan = V.Plan(sequential=True, max_repeats=10)
    false = 0
    sweeps = 300
    for row in _ratios(rng, SLOW, sweeps, 10):
        (v,) = V.decide_family([(*_sides(row), "")], plan)
        false += v.outcome == V.FASTER
    assert false / sweeps <= 0.06


def test_trimming_triples_the_power_at_ten_rounds_with_slow_processes():
    d = _ratios(np.random.default_rng(5), SLOW, 4000, 10, gap=0.05)
    old, new = _faster(d, 0.0).mean(), _faster(d, V.TRIM).mean()
    assert old < 0.3 and new > 2.5 * old


def test_trim_zero_is_the_plain_paired_t_and_welch():
    a, b = (1.0, 1.2, 0.9, 1.1, 1.05, 0.97), (1.1, 1.3, 1.0, 1.25, 1.1, 1.0)
    assert V.trimmed_paired(a, b, 0.0)[:3] == V.paired_t(a, b)
    assert V.yuen(a, b, 0.0)[:3] == V.welch(a, b)
    keys = tuple(range(6))
    v = V.judge(V.Side("A", a, rounds=keys), V.Side("B", b, rounds=keys), trim=0)
    assert v.trimmed == 0 and "paired t over 6 rounds)" in v.text


def test_every_sentence_names_its_estimator():
    rng = np.random.default_rng(6)
    a = [list(rng.lognormal(0, 0.02, 4)) for _ in range(10)]
    b = [[1.05 * x for x in run] for run in a[::-1]]
    assert "trimmed paired t over 10 rounds, 20 % trimmed" in repro.verdict(a, b, paired=True, statistic="trimmed").text
    assert "adaptive trimmed paired t over 10 rounds, none trimmed (tail weight " in repro.verdict(a, b, paired=True).text
    slow = [run if i != 7 else [1.6 * x for x in run] for i, run in enumerate(a)]  # a slow process
    assert "adaptive trimmed paired t over 10 rounds, 20 % trimmed (tail weight " in \
        repro.verdict(slow, b, paired=True).text
    for statistic in S.names():
        assert "paired t over 3 rounds, too few to trim" in repro.verdict(a[:3], b[:3], paired=True,
                                                                          statistic=statistic).text \
            or statistic == "paired-t"
    assert "paired t over 10 rounds)" in repro.verdict(a, b, paired=True, statistic="paired-t").text
    assert "Yuen's trimmed t, 20 % trimmed" in repro.verdict(a, b).text
    assert "trimmed paired t over 10 rounds, 30 % trimmed" in \
        repro.verdict(a, b, paired=True, trim=0.3, statistic="trimmed").text
    assert V.trim_count(10, 0.3) == 3 and V.trim_count(3, 0.39) == 0 and V.trim_count(4, 0.39) == 1


@pytest.mark.parametrize("trim", [0.4, -0.1, 1, True, "0.2"])
def test_repro_verdict_refuses_a_trim_outside_its_range(trim):
    with pytest.raises(ValueError, match=r"repro.verdict: trim=.* must be in \[0, 0.4\)"):
        repro.verdict([[1.0], [1.1]], [[1.2], [1.3]], trim=trim)


@pytest.mark.parametrize("value", ["0.4", "-0.1", "0.5"])
def test_a_trim_outside_its_range_exits_2_naming_the_key(tmp_path, capsys, value):
    from repro.cli import dispatch

    for args in (["framework=jax", "model=mlp"], ["calibrate", "framework=jax", "model=mlp"]):
        assert dispatch([*args, f"verdict.trim={value}", f"ledger.dir={tmp_path / 'ledger'}"]) == 2
        err = capsys.readouterr().err
        assert f"verdict.trim={float(value)!r} must be in [0, 0.4)" in err and "verdict.trim=0.2" in err
    assert not (tmp_path / "ledger").exists() or not any((tmp_path / "ledger").rglob("*.json"))


def test_records_carry_their_trim_into_the_verdict():
    from repro import preflight

    assert preflight.plan(["verdict.trim=0"]).jobs[0].verdict.trim == 0
    assert V.Plan.of([{"config": {"verdict": {"trim": 0.1}}}]).trim == 0.1
    assert V.Plan.of([{"config": {"verdict": {"band": 0.02}}}]).trim == V.TRIM  # before the key
