"""The culprit search: a posterior over which position made the workload slower, and where to probe next.

Positions 0..n: 0 is the GOOD endpoint, n the BAD one (both measured by decide.confirm), 1..n-1
the candidates between, in order. The culprit is k in 1..n, the first "bad" position: a position
p is truly bad iff p >= k. The search keeps a posterior over k (uniform prior), as Henderson et al.
("Flake Aware Culprit Finding", ICST 2023) do for flaky tests, with Pinpoint's three outcomes
per probe (decide.classify: like-good, like-bad, unknown):
- **Update.** A probe at p called "bad" multiplies the weight of every k <= p (p truly bad) by
  1 - false_good and of every k > p by false_bad; "good" the other way round (false_good for k <= p,
  1 - false_bad for k > p). The rates are `Rates`: P(called bad | truly good) and P(called good |
  truly bad) among the probes that made a call. "unknown" carries no information (the weights are
  left as they are): its probability is nearly the same for a truly good and a truly bad
  candidate (the interval holds the midpoint between them). Weights are kept as logs (many probes
  never underflow), and rates of 0 are refused: one wrong call would zero the true culprit's
  weight with no way back.
- **Next probe.** The position whose call carries the most expected information about k (the
  mutual information between the call and k: H(call) - E_k H(call | k), binary entropies of the
  call's probability under the posterior and under the rates); ties go to the position nearest
  the posterior median. With a uniform posterior that is plain bisection (the middle). Positions
  already probed may be probed again (a second call weighs against a wrong first one; a probe
  left unknown at its cap may make a call with fresh rounds), up to `MAX_REPEATS` probes each.
- **Stop.** `decided()` names k once its posterior is >= `threshold` (0.95, Henderson et al.'s),
  unless the history is non-monotone (below); `next()` is None when decided, or when no position
  left to probe carries information.
- **Non-monotone.** A position called "bad" (by the majority of its calls) before a later one
  called "good" (likewise) is not a history with one culprit: `nonmonotone()` names the pair.
  While it holds, nothing is decided and `next()` probes the one of the pair with fewer calls
  (a second call against a wrong one ties its position and the pair dissolves, the posterior
  keeping the doubt until more calls settle it); once both have
  had `MAX_REPEATS` probes and keep their majority, `next()` is None: the history is non-monotone, said
  with both positions and not forced into one culprit.
- **Replay.** `Search.replay(n, rates, probes)` rebuilds the state from a record's probes in their
  order (resume after an interruption: no finished probe is run again); `Probe.to_dict` /
  `Probe.from_dict` are the record's JSON form.

DEFAULT_RATES are measured, not assumed: benchmarks/bisect_simulation.py classifies probes with
decide.classify (PROBE_ALPHA 0.2, the 10-round cap) under the clean paired model (2 % own noise, 3 %
position effect) and the slow-process one (one process in ten 60 % slower) at 5, 10 and 30 %
regressions, and counts, among the calls made, how often a truly good candidate is called
like-bad and a truly bad one like-good. Its run with 100 bisections per cell (`--trials 100`,
seed 0; about 9,200 calls) gave, pooled, 0.4 % false like-bad and 0.9 % false like-good; the
worst cell was a 5 % regression under slow processes: 16 of 316 truly bad candidates called
like-good, 5.1 % (95 % Wilson 3.1-8.1 %), and 9 of 345 truly good ones like-bad, 2.6 % (1.4-4.9 %);
every other cell stayed at 1.1 % or less. The rates are the worst cell's rates rounded up to a
whole percent, and never below 5 %: false_good 0.06, false_bad 0.05. (Its upper bounds are higher,
and those errors cluster in bisections whose confirmed gap came out too large, so the cell is
worse than the rates say; the same run named a wrong culprit in 1.9 % of its bisections there,
1.1 % in two 30 % cells under slow processes, and in none of the other 15 cells.) At 5 % one call
alone never decides between two neighbouring culprits (odds below 19:1 give less than 0.95), so
the search calls the culprit's boundary twice (ceil(log2 n) + 2 probes for a noiseless bisection
of up to 16 candidates) and a single wrong call is outvoted, not believed
(tests/test_bisect_search.py); where the calls are clean that is conservative.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field
from typing import Iterable

import numpy as np

OUTCOMES = ("good", "bad", "unknown")
THRESHOLD = 0.95
MAX_REPEATS = 4  # probes per position at most (one wrong call and three right ones: net two, enough at 5 %)
INFO_FLOOR = 1e-9  # expected information (bits) below which a probe is not worth its runs


@dataclass(frozen=True)
class Probe:
    """One probed position's final call (decide.classify at a look or at the cap): the
    candidate/GOOD `ratio` and its interval `lo`–`hi`, the paired `rounds` it took, and the ledger
    ids of its runs."""

    position: int
    outcome: str
    ratio: float
    lo: float
    hi: float
    rounds: int
    runs: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if isinstance(self.position, bool) or not isinstance(self.position, numbers.Integral) or self.position < 0:
            raise ValueError(f"probe position {self.position!r:.40} must be a whole number >= 0")
        if self.outcome not in OUTCOMES:
            raise ValueError(f"probe outcome {self.outcome!r:.40} must be one of {', '.join(OUTCOMES)}")
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, numbers.Integral) or self.rounds < 0:
            raise ValueError(f"probe rounds {self.rounds!r:.40} must be a whole number >= 0")
        object.__setattr__(self, "runs", tuple(str(r) for r in self.runs))

    def to_dict(self) -> dict:
        """The record's JSON form (an interval end that is infinite is written as null)."""
        d = asdict(self)
        d["runs"] = list(self.runs)
        for key in ("ratio", "lo", "hi"):
            d[key] = float(d[key]) if math.isfinite(d[key]) else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Probe":
        missing = [k for k in ("position", "outcome", "ratio", "lo", "hi", "rounds") if k not in d]
        if missing:
            raise ValueError(f"a bisect probe record lacks {', '.join(missing)}: it was not written by "
                             "Probe.to_dict (rerun the bisection)")
        num = lambda x, none: none if x is None else float(x)  # noqa: E731
        return cls(position=int(d["position"]), outcome=str(d["outcome"]), ratio=num(d["ratio"], math.nan),
                   lo=num(d["lo"], 0.0), hi=num(d["hi"], math.inf), rounds=int(d["rounds"]),
                   runs=tuple(d.get("runs") or ()))


@dataclass(frozen=True)
class Rates:
    """A probe's error rates among the calls it makes: false_bad = P(called bad | truly good),
    false_good = P(called good | truly bad); each in (0, 0.5)."""

    false_bad: float
    false_good: float

    def __post_init__(self) -> None:
        for key in ("false_bad", "false_good"):
            x = getattr(self, key)
            if isinstance(x, bool) or not isinstance(x, numbers.Real) or not 0 < x < 0.5:
                raise ValueError(f"{key}={x!r:.40} must be in (0, 0.5): a probe wrong that often says nothing, and "
                                 "a rate of 0 lets one wrong call rule the true culprit out for good")


DEFAULT_RATES = Rates(false_bad=0.05, false_good=0.06)  # measured: module docstring, benchmarks/bisect_simulation.py


def _h(p: np.ndarray | float) -> np.ndarray:
    """Binary entropy in bits (0 at 0 and 1)."""
    p = np.clip(np.asarray(p, dtype=float), 1e-300, 1 - 1e-16)
    return -(p * np.log2(p) + (1 - p) * np.log2(1 - p))


class Search:
    """The posterior over culprit k in 1..n and the probes that made it (module docstring)."""

    def __init__(self, n: int, rates: Rates = DEFAULT_RATES, threshold: float = THRESHOLD):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n={n!r:.40} must be a whole number >= 1 (positions 0..n: GOOD, the candidates, BAD)")
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0.5 < threshold < 1:
            raise ValueError(f"threshold={threshold!r:.40} must be in (0.5, 1) (0.95: a culprit at 95 % posterior)")
        if not isinstance(rates, Rates):
            raise ValueError(f"rates must be a Rates(false_bad, false_good), not {type(rates).__name__}")
        self.n, self.rates, self.threshold = int(n), rates, float(threshold)
        self.probes: list[Probe] = []
        self._log = np.zeros(self.n)  # log weight of culprit k at index k - 1 (uniform prior)

    @property
    def posterior(self) -> list[float]:
        """P(culprit = k) at index k - 1."""
        w = np.exp(self._log - self._log.max())
        return [float(x) for x in w / w.sum()]

    def update(self, probe: Probe) -> None:
        """Take a probe's call into the posterior ("unknown": no information, kept in `probes`)."""
        if probe.position > self.n:
            raise ValueError(f"probe position {probe.position} is past the BAD endpoint at {self.n}")
        self.probes.append(probe)
        if probe.outcome == "unknown":
            return
        bad = np.arange(1, self.n + 1) <= probe.position  # culprits for which this position is truly bad
        fb, fg = self.rates.false_bad, self.rates.false_good
        if probe.outcome == "bad":
            self._log += np.where(bad, math.log1p(-fg), math.log(fb))
        else:
            self._log += np.where(bad, math.log(fg), math.log1p(-fb))
        self._log -= self._log.max()

    def calls(self, position: int) -> list[str]:
        """The decided calls ("good"/"bad") made at a position, in order."""
        return [p.outcome for p in self.probes if p.position == position and p.outcome != "unknown"]

    def _majority(self) -> dict[int, str]:
        out = {}
        for pos in sorted({p.position for p in self.probes}):
            c = self.calls(pos)
            if c.count("bad") > c.count("good"):
                out[pos] = "bad"
            elif c.count("good") > c.count("bad"):
                out[pos] = "good"
        return out

    def nonmonotone(self) -> tuple[int, int] | None:
        """(a position called bad, a later one called good) by the majority of each one's calls;
        the closest such pair (None: the calls fit one culprit)."""
        major = self._majority()
        pairs = [(p, q) for p, cp in major.items() if cp == "bad" for q, cq in major.items() if cq == "good" and q > p]
        return min(pairs, key=lambda pq: (pq[1] - pq[0], pq[0])) if pairs else None

    def decided(self) -> tuple[int, float] | None:
        """(culprit k, its posterior) once it holds >= threshold and the history is monotone."""
        if self.nonmonotone() is not None:
            return None
        post = self.posterior
        k = int(np.argmax(post))
        return (k + 1, post[k]) if post[k] >= self.threshold else None

    def _open(self, position: int) -> bool:
        probed = [p for p in self.probes if p.position == position]
        return len(probed) < MAX_REPEATS

    def information(self) -> list[float]:
        """The expected information (bits) about k of a call at each position 1..n-1 (index p - 1)."""
        post = np.array(self.posterior)
        s = np.cumsum(post)[:-1]  # P(position p truly bad) = P(k <= p), p = 1..n-1
        fb, fg = self.rates.false_bad, self.rates.false_good
        p_bad = s * (1 - fg) + (1 - s) * fb
        return [float(x) for x in _h(p_bad) - (s * _h(fg) + (1 - s) * _h(fb))]

    def next(self) -> int | None:
        """The next position to probe (module docstring); None when decided or nothing is left worth probing."""
        if (pair := self.nonmonotone()) is not None:
            open_ = [p for p in pair if self._open(p)]
            return min(open_, key=lambda p: (len(self.calls(p)), p)) if open_ else None
        if self.decided() is not None:
            return None
        info = self.information()
        post = np.array(self.posterior)
        median = int(np.searchsorted(np.cumsum(post), 0.5)) + 1  # the k holding the posterior's middle
        best = None
        for p in range(1, self.n):
            if not self._open(p) or info[p - 1] < INFO_FLOOR:
                continue
            key = (-round(info[p - 1], 12), abs(p - median), p)
            best = key if best is None or key < best else best
        return None if best is None else best[2]

    @classmethod
    def replay(cls, n: int, rates: Rates, probes: Iterable[Probe | dict], threshold: float = THRESHOLD) -> "Search":
        """The search as it stood after `probes` (Probes or their dicts), in order."""
        s = cls(n, rates, threshold)
        for p in probes:
            s.update(p if isinstance(p, Probe) else Probe.from_dict(p))
        return s
