"""What limits this host: the noise of A/A calibration records taken apart (records in, numbers out).

`repro calibrate` runs one config under two labels, A and B, round by round (each round runs
both labels once, in a random order), trial after trial; each run's record carries
`calibration`: {trial, label} (and `gap` on the label given a known extra step time),
`repeat.index` (its round), `repeat.position` (its place in the round), `results.steady_median_s`
and, where the measurement recorded them, `results.steady_median_sd_s`,
`machine.other_cpu_share` and `machine.repro_cpu_s`. Every field but the trial, the label and the
median may be absent (older records): what cannot be computed is None and said so.

From the A/A trials (no label has a gap; the true ratio is 1):
- **run-to-run noise**: the pooled SD of log run medians within each label of each trial
  (`verdict.noise`): what an unpaired (Welch) verdict sees.
- **paired noise**: the pooled within-trial SD of the within-round log ratio d = log B - log A,
  over complete rounds: what the verdict's paired t sees.
- **variance components** of a run's log median (a one-way random-effects model, rounds as the
  random factor): log t = trial & label mean + s_round + e_run. The round-shared part is the
  covariance of a round's two runs, Cov(A, B) = var(s); the independent part is the rest,
  var(e) = Var(run) - Cov = Var(d) / 2; their correlation rho = Cov / Var. Pairing cancels s.
- **between trials**: whether the trials' mean within-round log ratios spread more than their
  rounds predict (an F test; the excess as an SD): a level above the rounds, shared by one
  label's runs within one sweep, that a paired t over that sweep's rounds cannot see.
- **sampling SD of a run's steady median** (the median of `steady_median_sd_s / steady_median_s`
  over runs; the window's moving-block bootstrap): the part of the independent noise that more
  steady steps would remove.
- **correlation** of run medians (their log, less their trial and label mean) with
  `machine.other_cpu_share` and with `machine.repro_cpu_s` (Pearson r, Fisher-z 95 % interval).
- **label effect**: the mean within-round log ratio of label B over label A over all rounds,
  with its 95 % interval (an order bias that always hits one label shows here).
- **order effect**: for each position p >= 1 in a round, the mean log ratio of the run at p over
  the run at position 0 of the same round, with its 95 % t interval (positions from
  `repeat.position`, else from the job order within the round, said so). Random order within
  rounds makes the labels average out; an interval that excludes 0 is an order bias.
- **which noise it is** (issue 48: most processes agree within 2-3 %, about one in ten is 50-75 %
  slower for its whole life, and an SD is made by those few): the **robust spread**, MAD x 1.4826
  of the log run medians about their config's median (a config: the runs of one injected gap, or
  none), and the **robust paired noise**, MAD x 1.4826 of the A/A within-round log ratios about
  their median (both equal the SD under normal noise); the **slow processes**, runs more than
  `SLOW` (20 %) slower than their config's median, their share and size, and **what caught
  each**: the record's own telemetry, read in this order: `canary.slow` true ("canary"),
  `machine.steal_share` above 0.02 ("steal"), `machine.placement.migrations` above 0 ("placement"),
  else "nothing" (a field absent: not caught); and how often each signal flagged a run that was
  not slow.
- **the floor**: the smallest gap the verdict resolves with 80 % power at 3, 5 and 10 rounds: where
  the trials' rounds are complete, by the verdict's own test (the records' `verdict.statistic` at
  their `verdict.trim`, report/statistic.py) on sweeps resampled from the measured A/A log ratios (`verdict.resampled_gap`:
  no normal assumption; slow processes stay in the distribution as measured; from 20 ratios on);
  else the normal approximation (`verdict.resolvable_gap`). `floor_normal` keeps the normal figure.
- **false verdicts**: each trial's verdict (fixed rounds: one look; `run.repeats=auto` trials:
  the planned looks) and how many called one label faster, with a Wilson 95 % interval.

From `--gap` trials (one label's step time made longer by a known share): the power observed
(the share of trials that called the other label faster), the trials that called the slowed
label faster (the wrong direction), both with Wilson intervals, the rounds each used, and the gap
the slowed label measured (the mean ratio of its run medians over the other's, with a t interval
over the trials): the power is the power at that gap.

    s = summarise(records)       # a JSON-ready dict (stored in the calibration record)
    print("\\n".join(lines(s, host)))
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from repro.ledger.record import view
from repro.report import verdict as V

FLOOR_ROUNDS = (3, 5, 10)
Z95 = 1.959963984540054
MAD_SD = 1.4826  # MAD x this estimates the SD of normal noise
SLOW = 0.20  # a run this much slower than its config's median is a slow process
STEAL = 0.02  # machine.steal_share above this: the hypervisor gave the core to another tenant
SIGNALS = ("canary", "steal", "placement")


@dataclass(frozen=True)
class Interval:
    """A mean with its 95 % t interval over n values."""

    mean: float
    lo: float
    hi: float
    n: int


@dataclass(frozen=True)
class Position:
    """The order effect at one position of a round: the mean log ratio over position 0, its interval."""

    position: int
    mean: float
    lo: float
    hi: float
    n: int


@dataclass(frozen=True)
class LabelEffect:
    """The mean within-round log ratio of `labels[1]` over `labels[0]`, its interval."""

    mean: float
    lo: float
    hi: float
    n: int
    labels: list


@dataclass(frozen=True)
class Correlation:
    """Pearson r with its Fisher-z 95 % interval over n pairs."""

    r: float
    lo: float
    hi: float
    n: int


@dataclass(frozen=True)
class Components:
    """Paired noise and the round-shared and independent parts of a run's log median."""

    paired_noise: float
    rounds: int
    dof: int
    run_sd: float
    shared_sd: float
    independent_sd: float
    rho: float | None


@dataclass(frozen=True)
class BetweenTrials:
    """The F test of the trials' mean ratios against their rounds, and the excess as an SD."""

    trials: int
    f: float
    p: float
    tau: float


@dataclass(frozen=True)
class Slow:
    """The slow processes: their count, share and size, what caught them, what flagged the others."""

    runs: int
    slow: int
    share: float
    size_median: float | None
    size_range: list | None
    caught: Mapping  # {signal or "nothing": runs}
    flagged_others: Mapping  # {signal: runs}
    others: int


@dataclass(frozen=True)
class Rate:
    """k of n with its Wilson 95 % interval (rate None where n is 0)."""

    k: int
    n: int
    rate: float | None
    lo: float
    hi: float


@dataclass(frozen=True)
class MeasuredGap:
    """The gap the slowed label measured, as a ratio less 1, with its t interval over the trials."""

    mean: float
    lo: float
    hi: float
    trials: int


@dataclass(frozen=True)
class GapTrials:
    """The --gap trials: the gap injected, what was measured, the power and the wrong calls."""

    gap: Any  # the one gap, or the sorted gaps where trials differ
    trials: int
    measured: MeasuredGap | None
    power: Rate
    wrong: Rate
    undecided: int
    rounds_median: float | None
    rounds_range: list | None


@dataclass(frozen=True)
class Identity:
    """Whether the calibration's processes gave bit-identical losses and parameters."""

    processes: int
    identical: bool | None
    text: str
    deterministic: bool


@dataclass(frozen=True)
class Summary:
    """A calibration's numbers (module docstring); None where it cannot be computed. `as_dict()` is
    the JSON the calibration record stores (field order is the record's key order); `repeats` and
    `allocation` are calibrate.py's, left out of it while unset."""

    trials: int
    gap_trials: int
    runs: int
    ok_runs: int
    busy_runs: int
    rounds: int
    noise: float | None
    paired_noise: float | None
    components: Components | None
    between_trials: BetweenTrials | None
    sampling_sd: float | None
    sampling_runs: int
    correlation: Mapping  # {"other_cpu_share" | "repro_cpu_s": Correlation | None}
    order: list  # [Position]
    order_from: str
    label_effect: LabelEffect | None
    unit: str
    unit_noise: float | None
    floor: Mapping  # {rounds as text: gap}
    floor_normal: Mapping
    floor_from: str
    trim: float
    statistic: str
    robust_spread: float | None
    robust_paired_noise: float | None
    slow: Slow | None
    outcomes: Mapping  # {verdict outcome: trials}
    false_verdicts: int
    false_rate: float | None
    false: Rate | None
    gap: GapTrials | None
    identity: Identity | None
    repeats: int | None = None  # the rounds per trial asked for (calibrate.py)
    allocation: Mapping | None = None  # the recommended steps, rounds and gap (calibrate.py)

    def as_dict(self) -> dict:
        out = dataclasses.asdict(self)
        for key in ("repeats", "allocation"):
            if out[key] is None:
                del out[key]
        return out


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a rate k/n (Wilson 1927): honest at 0 of 20 and at 20 of 20,
    where the normal interval collapses to a point."""
    if n <= 0:
        return 0.0, 1.0
    p, z2 = k / n, z * z
    mid = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return (0.0 if k == 0 else max(0.0, mid - half)), (1.0 if k == n else min(1.0, mid + half))


def _median_s(r: dict) -> float | None:
    rec = view(r)
    if rec.status != "ok":
        return None
    m = rec.results.steady_median_s
    return float(m) if isinstance(m, (int, float)) and math.isfinite(m) and m > 0 else None


def _trials(records: list[dict]) -> dict[tuple, dict[str, list[dict]]]:
    """Records by trial (sweep and trial number), then by label."""
    out: dict[tuple, dict[str, list[dict]]] = {}
    for r in records:
        c = view(r).calibration
        if c.trial is None or c.label is None:
            continue
        out.setdefault((view(r).sweep.id, c.trial), {}).setdefault(c.label, []).append(r)
    return out


def _gap_of(labels: dict[str, list[dict]]) -> tuple[str, float] | None:
    """(the label given an injected gap, the gap) of a trial; None for an A/A trial."""
    for label, rs in labels.items():
        for r in rs:
            gap = view(r).calibration.gap
            if gap:
                return label, float(gap)
    return None


def _index(r: dict):
    return view(r).repeat.index


def _rounds(labels: dict[str, list[dict]]) -> list[dict[str, dict]]:
    """A trial's complete rounds: {label: record} for each round index with exactly one ok run of
    every label (an attempt discarded for a rerun is not one), in round order."""
    by: dict = {}
    for label, rs in labels.items():
        for r in rs:
            if _median_s(r) is None or view(r).repeat.discarded or _index(r) is None:
                continue
            by.setdefault(_index(r), {}).setdefault(label, []).append(r)
    out = []
    for k in sorted(by, key=lambda x: (str(type(x)), x)):
        runs = by[k]
        if set(runs) == set(labels) and all(len(v) == 1 for v in runs.values()):
            out.append({label: v[0] for label, v in runs.items()})
    return out


def _mean_ci(x: list[float], level: float = 0.95) -> Interval | None:
    if len(x) < 2:
        return None
    m, sd = statistics.fmean(x), statistics.stdev(x)
    half = V.t_ppf(1 - (1 - level) / 2, len(x) - 1) * sd / math.sqrt(len(x))
    return Interval(m, m - half, m + half, len(x))


def _pearson(x: list[float], y: list[float]) -> Correlation | None:
    """Pearson r with a Fisher-z 95 % interval (None: fewer than 4 pairs or no spread)."""
    if len(x) < 4:
        return None
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    if sxx <= 0 or syy <= 0:
        return None
    r = max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))
    z, half = math.atanh(max(-0.999999, min(0.999999, r))), Z95 / math.sqrt(len(x) - 3)
    return Correlation(r, math.tanh(z - half), math.tanh(z + half), len(x))


def _components(aa: list[list[dict[str, dict]]]) -> Components | None:
    """Paired noise and the round-shared and independent parts, pooled within trials, from the
    complete rounds of each A/A trial (labels A and B, or the first two labels)."""
    sxx = syy = sxy = sdd = 0.0
    dof = rounds = 0
    for trial in aa:
        if len(trial) < 2:
            continue
        a_label, b_label = sorted(trial[0])[:2]
        x = [math.log(_median_s(r[a_label])) for r in trial]
        y = [math.log(_median_s(r[b_label])) for r in trial]
        mx, my = statistics.fmean(x), statistics.fmean(y)
        d = [v - u for u, v in zip(x, y)]
        md = statistics.fmean(d)
        sxx += sum((u - mx) ** 2 for u in x)
        syy += sum((v - my) ** 2 for v in y)
        sxy += sum((u - mx) * (v - my) for u, v in zip(x, y))
        sdd += sum((e - md) ** 2 for e in d)
        dof += len(trial) - 1
        rounds += len(trial)
    if not dof:
        return None
    var, cov, var_d = (sxx + syy) / (2 * dof), sxy / dof, sdd / dof
    return Components(paired_noise=math.sqrt(var_d), rounds=rounds, dof=dof, run_sd=math.sqrt(var),
                      shared_sd=math.sqrt(max(cov, 0.0)), independent_sd=math.sqrt(var_d / 2),
                      rho=cov / var if var > 0 else None)


def _log_ratio(rnd: dict[str, dict]) -> float:
    """A complete round's log ratio of its second label's run median over its first's (B over A)."""
    first, second = sorted(rnd)[:2]
    return math.log(_median_s(rnd[second])) - math.log(_median_s(rnd[first]))


def _measured_gap(gapped) -> MeasuredGap | None:
    """The gap the slowed label actually had: each gapped trial's mean log ratio of the slowed
    label's run medians over the other's (its complete rounds), then a t interval over the
    trials (their means, so a part shared within a trial is inside it), as a ratio minus 1."""
    means = []
    for labels in gapped:
        slow, _ = _gap_of(labels)
        rounds = _rounds(labels)
        other = next((label for label in labels if label != slow), None)
        if other is None or not rounds:
            continue
        means.append(statistics.fmean(math.log(_median_s(r[slow]) / _median_s(r[other])) for r in rounds))
    ci = _mean_ci(means)
    return MeasuredGap(math.expm1(ci.mean), math.expm1(ci.lo), math.expm1(ci.hi), ci.n) if ci else None


def _between_trials(aa: list[list[dict[str, dict]]]) -> BetweenTrials | None:
    """A level above the rounds (Kalibera & Jones 2013's levels: steps < processes < sweeps):
    whether the trials' mean within-round log ratios spread more than their own rounds predict.
    F = variance of the trial means / mean of (within-trial variance / rounds), tested against
    F(trials - 1, sum of rounds - 1); the excess, tau^2 = var(means) - mean(s^2 / n) (moments), is
    a part shared by one label's runs within one sweep: more rounds of that sweep do not average
    it, a paired t over them does not see it. None with fewer than 3 trials of 2+ rounds."""
    means, within, dof = [], [], 0
    for trial in aa:
        if len(trial) < 2:
            continue
        d = [_log_ratio(rnd) for rnd in trial]
        means.append(statistics.fmean(d))
        within.append(statistics.variance(d) / len(d))
        dof += len(d) - 1
    if len(means) < 3 or not statistics.fmean(within):
        return None
    var_means, expected = statistics.variance(means), statistics.fmean(within)
    f = var_means / expected
    return BetweenTrials(trials=len(means), f=f, p=V.f_sf(f, len(means) - 1, dof),
                         tau=math.sqrt(max(var_means - expected, 0.0)))


def _residuals(aa_trials: Iterable[dict[str, list[dict]]]) -> list[tuple[dict, float]]:
    """(record, log median less its trial and label mean) of each ok run in a group of two or more."""
    out = []
    for labels in aa_trials:
        for rs in labels.values():
            ok = [(r, math.log(m)) for r in rs if (m := _median_s(r)) is not None
                  and not view(r).repeat.discarded]
            if len(ok) < 2:
                continue
            mean = statistics.fmean(v for _, v in ok)
            out += [(r, v - mean) for r, v in ok]
    return out


def _correlation(residuals: list[tuple[dict, float]], key: str) -> Correlation | None:
    pairs = [(v, float(x)) for r, v in residuals
             if isinstance(x := view(r).machine.raw.get(key), (int, float)) and math.isfinite(x)]
    return _pearson([v for v, _ in pairs], [x for _, x in pairs])


def _positions(aa: list[list[dict[str, dict]]]) -> tuple[list[Position], str]:
    """The order effect: for each position p >= 1, the mean log ratio of the run at p over the run
    at position 0 of its round, with its 95 % interval; and where positions came from."""
    recorded = all(view(r).repeat.position is not None for trial in aa for rnd in trial for r in rnd.values())
    by_p: dict[int, list[float]] = {}
    for trial in aa:
        for rnd in trial:
            runs = list(rnd.values())
            if recorded:
                placed = sorted(runs, key=lambda r: view(r).repeat.position)
            else:
                placed = sorted(runs, key=lambda r: (view(r).sweep.job, view(r).created))
            first = math.log(_median_s(placed[0]))
            for p, r in enumerate(placed[1:], 1):
                by_p.setdefault(p, []).append(math.log(_median_s(r)) - first)
    out = []
    for p in sorted(by_p):
        ci = _mean_ci(by_p[p])
        if ci:
            out.append(Position(p, ci.mean, ci.lo, ci.hi, ci.n))
    return out, "repeat.position" if recorded else "job order"


def _label_effect(aa: list[list[dict[str, dict]]]) -> LabelEffect | None:
    """The mean within-round log ratio of the second label over the first over every complete
    A/A round, with its 95 % interval: a bias toward one label (0 between identical configs)."""
    ci = _mean_ci([_log_ratio(rnd) for trial in aa for rnd in trial])
    return LabelEffect(ci.mean, ci.lo, ci.hi, ci.n, sorted(aa[0][0])[:2] if aa and aa[0] else []) if ci else None


def _mad_sd(x: list[float]) -> float | None:
    """MAD x 1.4826 about the median (None: fewer than 3 values)."""
    if len(x) < 3:
        return None
    mid = statistics.median(x)
    return MAD_SD * statistics.median(abs(v - mid) for v in x)


PLACEMENT = 2.0  # a run's CPU migrations above this multiple of its config's median (at least 1) flag it


def _migrations(record: dict) -> int:
    return view(record).machine.placement.get("migrations") or 0


def caught_by(record: dict, median_migrations: float = 0.0) -> str:
    """What flagged a run, from its own record: "canary", "steal", "placement" (more CPU migrations
    than PLACEMENT × its config's median: every thread migrates a few times in any run) or "nothing"."""
    rec = view(record)
    if rec.canary.slow is True:
        return "canary"
    if (rec.machine.steal_share or 0) > STEAL:
        return "steal"
    if _migrations(record) > PLACEMENT * max(median_migrations, 1):
        return "placement"
    return "nothing"


def slow_processes(records: list[dict]) -> Slow | None:
    """The runs more than SLOW slower than their config's median (a config: the runs sharing an
    injected gap, or none), their share and size, what caught each, and what flagged the others."""
    configs: dict = {}
    for r in records:
        if (m := _median_s(r)) is not None and not view(r).repeat.discarded:
            configs.setdefault(view(r).calibration.gap, []).append((r, m))
    slow, fast = [], []
    for runs in configs.values():
        if len(runs) < 3:
            continue
        mid = statistics.median(m for _, m in runs)
        moves = statistics.median(_migrations(r) for r, _ in runs)
        for r, m in runs:
            (slow if m > (1 + SLOW) * mid else fast).append((r, m / mid - 1, moves))
    runs = len(slow) + len(fast)
    if not runs:
        return None
    sizes = sorted(x for _, x, _ in slow)
    caught = {k: 0 for k in (*SIGNALS, "nothing")}
    for r, _, moves in slow:
        caught[caught_by(r, moves)] += 1
    flagged = {k: 0 for k in SIGNALS}
    for r, _, moves in fast:
        if (by := caught_by(r, moves)) != "nothing":
            flagged[by] += 1
    return Slow(runs=runs, slow=len(slow), share=len(slow) / runs,
                size_median=statistics.median(sizes) if sizes else None,
                size_range=[sizes[0], sizes[-1]] if sizes else None, caught=caught, flagged_others=flagged,
                others=len(fast))


def aa_log_ratios(records: list[dict]) -> list[float]:
    """The within-round log ratios (second label over first) of every complete A/A round."""
    trials = _trials(records)
    return [_log_ratio(rnd) for labels in trials.values() if _gap_of(labels) is None for rnd in _rounds(labels)]


def trial_verdict(labels: dict[str, list[dict]], names: tuple[str, str]) -> V.Verdict | None:
    """A trial's verdict between two labels, from its ok runs paired by round, at the planned looks
    where its runs were auto repeats (calibrate's stopping rule reads the same)."""
    from repro.report.comparison import round_of

    sides = []
    for name in names:
        rs = sorted((r for r in labels.get(name, []) if _median_s(r) is not None
                     and not view(r).repeat.discarded),
                    key=lambda r: (_index(r) if isinstance(_index(r), int) else 0, view(r).sweep.job))
        if not rs:
            return None
        sides.append(V.Side(name, tuple(_median_s(r) for r in rs), rounds=tuple(round_of(r) for r in rs)))
    (v,) = V.decide_family([(sides[0], sides[1], "")], V.Plan.of([r for x in labels.values() for r in x]))
    return v


def _rate(k: int, n: int) -> Rate:
    return Rate(k, n, k / n if n else None, *wilson(k, n))


def summarise(records: list[dict]) -> Summary:
    """The numbers of a calibration (module docstring): what cannot be computed is None."""
    from repro.report.audit import busy

    trials = _trials(records)
    aa = {k: labels for k, labels in trials.items() if _gap_of(labels) is None}
    gapped = {k: labels for k, labels in trials.items() if _gap_of(labels) is not None}
    aa_rounds = [_rounds(labels) for labels in aa.values()]
    # what is measured within each label of each trial (run-to-run noise, sampling SD, CPU
    # correlations): the A/A trials, or, in a gap-only calibration, the gapped ones (each label's
    # runs there are identical configs too)
    alike = aa or gapped
    sigma = V.noise([[_median_s(r) for r in rs if _median_s(r) is not None] for labels in alike.values()
                     for rs in labels.values()])
    parts = _components(aa_rounds)
    between = _between_trials(aa_rounds)
    residuals = _residuals(alike.values())
    positions, source = _positions(aa_rounds)
    sd = [sd_s / m for labels in alike.values() for rs in labels.values() for r in rs
          if (m := _median_s(r)) is not None and isinstance(sd_s := view(r).results.steady_median_sd_s, (int, float))]

    outcomes = {V.FASTER: 0, V.EQUIVALENT: 0, V.UNDECIDED: 0, V.SINGLE: 0}
    for labels in aa.values():
        names = tuple(sorted(labels))[:2]
        if len(names) == 2 and (v := trial_verdict(labels, names)) is not None:
            outcomes[v.outcome] += 1
    judged = sum(outcomes.values())

    unit = "paired" if parts else "run"
    unit_noise = parts.paired_noise if parts else (sigma if sigma == sigma else None)
    floor_normal = {str(n): V.resolvable_gap(unit_noise, n, paired=unit == "paired") for n in FLOOR_ROUNDS} \
        if unit_noise else {}
    ratios = aa_log_ratios(records)
    plan = V.Plan.of(records)
    trim, statistic = plan.trim, plan.statistic
    resampled = {str(n): V.resampled_gap(ratios, n, trim, statistic=statistic) for n in FLOOR_ROUNDS} \
        if unit == "paired" else {}
    floor = resampled if resampled and all(g is not None for g in resampled.values()) else floor_normal
    logs = [math.log(m) for rs in (alike or trials).values() for x in rs.values() for r in x
            if (m := _median_s(r)) is not None and not view(r).calibration.gap]

    gap = None
    if gapped:
        right = wrong = undecided = 0
        used, sizes = [], set()
        for labels in gapped.values():
            slow, size = _gap_of(labels)  # type: ignore[misc]
            sizes.add(size)
            names = tuple(sorted(labels))[:2]
            v = trial_verdict(labels, names) if len(names) == 2 else None
            if v is None:
                undecided += 1
                continue
            used.append(min(v.n_a, v.n_b))
            if v.outcome == V.FASTER:
                right += v.faster != slow
                wrong += v.faster == slow
            else:
                undecided += 1
        n = len(gapped)
        gap = GapTrials(gap=sorted(sizes)[0] if len(sizes) == 1 else sorted(sizes), trials=n,
                        measured=_measured_gap(gapped.values()),
                        power=_rate(right, n), wrong=_rate(wrong, n), undecided=undecided,
                        rounds_median=statistics.median(used) if used else None,
                        rounds_range=[min(used), max(used)] if used else None)

    return Summary(
        trials=len(aa), gap_trials=len(gapped), runs=len(records),
        ok_runs=sum(view(r).status == "ok" for r in records),
        busy_runs=sum(busy(r) is not None for r in records),
        rounds=statistics.median_low([len(t) for t in aa_rounds]) if aa_rounds else 0,  # an integer (the schema)
        noise=sigma if sigma == sigma else None,
        paired_noise=parts.paired_noise if parts else None,
        components=parts, between_trials=between,
        sampling_sd=statistics.median(sd) if sd else None, sampling_runs=len(sd),
        correlation={key: _correlation(residuals, key) for key in ("other_cpu_share", "repro_cpu_s")},
        order=positions, order_from=source, label_effect=_label_effect([t for t in aa_rounds if t]),
        unit=unit, unit_noise=unit_noise, floor=floor, floor_normal=floor_normal,
        floor_from="resampled" if floor is resampled else "normal", trim=trim, statistic=statistic,
        robust_spread=_mad_sd(logs), robust_paired_noise=_mad_sd(ratios), slow=slow_processes(records),
        outcomes=outcomes, false_verdicts=outcomes[V.FASTER],
        false_rate=outcomes[V.FASTER] / judged if judged else None,
        false=_rate(outcomes[V.FASTER], judged) if judged else None,
        gap=gap,
        identity=_identity(records),
    )


def _identity(records: list[dict]) -> Identity | None:
    """Whether the calibration's processes (one config under two labels: an injected gap is time, not
    maths) gave bit-identical losses and parameters (report/identity.py); None below two ok runs."""
    from repro.report import identity

    found = identity.of(records)
    if found.identical is None and not found.text:
        return None
    promised = view(records[0]).config.run.deterministic
    return Identity(processes=found.processes, identical=found.identical, text=found.text, deterministic=promised)


def _pct(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{100 * x:.{digits}f} %"


def _pct_ci(d: Rate) -> str:
    return f"{100 * d.lo:.0f}–{100 * d.hi:.0f} %"


def lines(s: Summary, host: str) -> list[str]:
    """What `repro calibrate` prints, one finding a line (`benchmarks/verdict_calibration.py`
    reads back the line that starts "run-to-run noise:")."""
    out = []
    if s.noise is None:
        out.append(f"run-to-run noise: not measured: no trial has two ok runs of a label ({s.ok_runs} ok runs of "
                   f"{s.runs}; host {host})")
    else:
        out.append(f"run-to-run noise: {_pct(s.noise)} (sd of log run medians within each label of each trial; "
                   f"{s.ok_runs} ok runs of {s.runs}, {s.busy_runs} on a busy machine; host {host})")
    parts = s.components
    if parts:
        rho = "" if parts.rho is None else f", round correlation {parts.rho:.2f}"
        out.append(f"paired noise: {_pct(parts.paired_noise)} (sd of the within-round log ratio, {parts.rounds} "
                   f"complete rounds): shared by a round {_pct(parts.shared_sd)}, independent per run "
                   f"{_pct(parts.independent_sd)}{rho}; pairing cancels the shared part")
    if b := s.between_trials:
        beyond = f"a part shared by a label's runs within one trial, sd {_pct(b.tau)}, that more rounds of one " \
                 "sweep do not average (repeat sweeps to shrink it)" if b.f > 1 else "no part beyond the rounds' own noise"
        out.append(f"between trials: the trials' mean ratios spread {b.f:.2f}× what their rounds predict "
                   f"(F test p {b.p:.2g}, {b.trials} trials): {beyond}")
    if s.sampling_sd is not None:
        share = "" if not s.noise else \
            f"; {min(1.0, (s.sampling_sd / s.noise) ** 2):.0%} of the run-to-run variance"
        out.append(f"sampling sd of a run's steady median: {_pct(s.sampling_sd)} (median of {s.sampling_runs} "
                   f"runs{share})")
    else:
        out.append("sampling sd of a run's steady median: not recorded by these runs")
    words = {"other_cpu_share": "other processes' CPU share", "repro_cpu_s": "repro's own CPU in the window"}
    cors = []
    for key, c in (s.correlation or {}).items():
        cors.append(f"{words[key]} r = {c.r:+.2f} (95 % CI {c.lo:+.2f} to {c.hi:+.2f}, {c.n} runs)"
                    if c else f"{words[key]}: not recorded or constant")
    out.append("run medians vs " + "; ".join(cors))
    for p in s.order or []:
        out.append(f"order: position {p.position} over position 0: {100 * p.mean:+.2f} % (95 % CI "
                   f"{100 * p.lo:+.2f} to {100 * p.hi:+.2f} %, {p.n} rounds; positions from {s.order_from})")
    if e := s.label_effect:
        out.append(f"label {e.labels[1]} over label {e.labels[0]}: {100 * e.mean:+.2f} % (95 % CI "
                   f"{100 * e.lo:+.2f} to {100 * e.hi:+.2f} %, {e.n} rounds; 0 between identical configs)")
    o, f = s.outcomes, s.false
    if f:
        out.append(f"false verdicts: {s.false_verdicts} of {f.n} A/A trials called one label faster "
                   f"({100 * f.rate:.1f} %, 95 % CI {_pct_ci(f)}); {o[V.EQUIVALENT]} equivalent, "
                   f"{o[V.UNDECIDED]} cannot tell ({s.rounds:g} rounds per trial)")
    if s.robust_spread is not None:
        paired = "" if s.robust_paired_noise is None else \
            f"; robust paired noise {_pct(s.robust_paired_noise)} (the SD: {_pct(s.paired_noise)})"
        out.append(f"robust spread: {_pct(s.robust_spread)} (MAD × 1.4826 of log run medians; the SD: "
                   f"{_pct(s.noise)}){paired}; equal under normal noise, far apart when a few processes are slow")
    if w := s.slow:
        caught = ", ".join(f"{k} {v}" for k, v in w.caught.items())
        size = "" if w.size_median is None else \
            f", by {100 * w.size_median:+.0f} % ({100 * w.size_range[0]:+.0f} to {100 * w.size_range[1]:+.0f} %)"
        others = ", ".join(f"{k} {v}" for k, v in w.flagged_others.items())
        out.append(f"slow processes: {w.slow} of {w.runs} runs ({100 * w.share:.1f} %) more than "
                   f"{100 * SLOW:.0f} % slower than their config's median{size}; caught by: {caught}; flagged among the "
                   f"{w.others} others: {others}")
    if s.floor:
        gaps = ", ".join(f"{100 * g:.1f} % in {n} rounds" for n, g in s.floor.items())
        if s.floor_from == "resampled":
            normal = ", ".join(f"{100 * g:.1f} %" for g in s.floor_normal.values())
            out.append(f"smallest gap resolved (80 % power, 5 % false verdicts, the verdict's statistic "
                       f"verdict.statistic={s.statistic or 'trimmed'} at verdict.trim={s.trim:g} on the "
                       f"measured log ratios resampled): {gaps} (a normal "
                       f"assumption at the paired SD: {normal})")
        else:
            unit = "paired rounds" if s.unit == "paired" else "runs per side, unpaired"
            out.append(f"smallest gap resolved (80 % power, 5 % false verdicts, {unit}, normal approximation): {gaps}")
    if same := s.identity:  # the A/A's own determinism check, as every sweep's close says it
        diverged = same.identical is False
        head = "WARNING: a deterministic config diverged: " if diverged and same.deterministic else "bit-identity: "
        out.append(head + same.text + (" (expected: run.deterministic=false)" if diverged and not same.deterministic
                                       else ""))
    g = s.gap
    if g:
        size = g.gap if isinstance(g.gap, list) else [g.gap]
        rounds = "" if g.rounds_median is None else \
            f"; rounds used: median {g.rounds_median:g} ({g.rounds_range[0]}–{g.rounds_range[1]})"
        m = g.measured
        seen = "" if not m else f" (measured {100 * m.mean:.1f} %, 95 % CI {100 * m.lo:.1f} to " \
                                f"{100 * m.hi:.1f} % over {m.trials} trials)"
        out.append(f"gap {', '.join(f'{100 * x:g} %' for x in size)}{seen}: {g.power.k} of {g.trials} trials called "
                   f"the unslowed label faster (power {100 * g.power.rate:.0f} %, 95 % CI {_pct_ci(g.power)}), "
                   f"{g.wrong.k} in the wrong direction (95 % CI {_pct_ci(g.wrong)}), {g.undecided} "
                   f"undecided{rounds}")
    return out
