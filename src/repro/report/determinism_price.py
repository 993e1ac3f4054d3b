"""The price of determinism per framework: what `run.deterministic=true` costs each one, measured.

A sweep that varies `run.deterministic` (+exp=price_of_determinism) has, per model and framework, a
verdict between its deterministic and its free config (report/comparison.py: the axis
`run.deterministic`); its interval is the verdict engine's, inverted to read "deterministic / free".
Beside it, per mode, whether the config's processes were bit-identical (report/identity.py), and for
torch the share of the cost that its NaN fill of uninitialised memory takes: from the verdict between
deterministic mode with and without the fill (`run.fill_uninitialized_memory=false`), as
log(det / det without fill) / log(det / free), a point estimate from two medians (said so).

The same program is not a price. Before two modes are judged, what each actually ran is compared
(`same_program`): for XLA (JAX, PyTorch/XLA) the compiled step's hash (`effective.program_sha256`) and the
effective determinism settings; for torch the determinism state its worker read back (algorithms, cuDNN,
workspace, fill). Where every run of both configs ran one program under the same settings (XLA:CPU compiles
one program in both modes: it has no nondeterministic kernels to replace), the pair is not judged: its
sentence and its price row say "the same program in both modes (...): no price to measure" in place of a
verdict, since a difference in its times is the processes' noise (a calibrated test still calls one pair in
twenty). Records without a program hash are judged as before.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from repro.ledger.record import Effective, view
from repro.report import identity, verdict
from repro.report.verdict import FASTER, UNFAIR

DETERMINISTIC, FILL = "run.deterministic", "run.fill_uninitialized_memory"


@dataclass(frozen=True)
class Price:
    model: str
    framework: str
    ratio: float  # deterministic time / free time (> 1: determinism costs)
    interval: tuple[float, float] | None  # its confidence interval (None: a single sample)
    level: float
    outcome: str  # the verdict's
    deterministic: str  # bit-identity of the deterministic config's processes (identity.of)
    free: str
    fill_share: float | None = None  # torch: the NaN fill's share of the cost
    no_fill: str = ""  # bit-identity without the fill
    same: str = ""  # both modes ran the same program under the same settings, and why: no price to measure
    platform: str = ""  # where it ran (the workers' effective.platform)

    @property
    def verdict_words(self) -> str:
        """The verdict as it reads on this axis: which mode is faster, where one is."""
        if self.outcome != FASTER:
            return self.outcome
        return "deterministic slower" if self.ratio > 1 else "deterministic faster"

    def cells(self) -> dict[str, str]:
        ci = "–".join(verdict.bound_text(x) for x in self.interval) if self.interval else "single sample"
        return {"model": self.model, "framework": self.framework, "ratio": "—" if self.same else f"{self.ratio:.2f}",
                "ci": "—" if self.same else ci,
                "outcome": f"the same program in both modes ({self.same}): no price to measure" if self.same
                else self.verdict_words, "deterministic": self.deterministic or "one process",
                "free": self.free or "one process",
                "fill": ("—" if self.fill_share is None else f"{self.fill_share:.0%} (point estimate)") if self.no_fill
                else "not measured",
                "no_fill": self.no_fill or "—"}


HEADERS = (("model", "model"), ("framework", "framework"), ("ratio", "deterministic / free"),
           ("ci", "CI"), ("outcome", "verdict"), ("deterministic", "deterministic: processes"),
           ("free", "free: processes"), ("fill", "NaN fill's share of the cost"),
           ("no_fill", "without the fill: processes"))


def _over_free(v, det_row) -> tuple[float, tuple[float, float] | None]:
    """The verdict's ratio (b's time over a's) as deterministic time over free time."""
    if v.rows[1] is det_row:
        return v.ratio, v.interval
    lo_hi = v.interval
    return 1 / v.ratio, (1 / lo_hi[1], 1 / lo_hi[0]) if lo_hi else None


def _deterministic_row(v):
    return next(r for r in v.rows if view(r.records[0]).config.run.deterministic)


def same_program(records: list[dict]) -> str | None:
    """Why these runs (both configs of a mode pair) ran the same program under the same settings, in words;
    None where they did not, or where their records cannot tell (no program hash from an XLA backend, no
    determinism state read back)."""
    effective = [view(r).effective or Effective() for r in records]
    states = {json.dumps(e.determinism, sort_keys=True, default=str) for e in effective}
    if not effective or len(states) != 1 or not effective[0].determinism:
        return None
    state, platform = effective[0].determinism, effective[0].platform or "?"
    if len({e.platform for e in effective}) != 1:
        return None
    if "xla_flags" in state:  # an XLA backend: the compiled program says what ran
        programs = {e.program_sha256 for e in effective}
        if len(programs) != 1 or None in programs:
            return None
        program = f"one compiled program in {len(records)} runs, sha256 {next(iter(programs))[:12]}"
        if platform != "gpu":
            return f"XLA:{platform.upper()} has no nondeterministic kernels to replace; {program}"
        return f"XLA_FLAGS {state.get('xla_flags') or '(none)'} in both; {program}"
    if "torch_deterministic_algorithms" not in state:  # not torch's full state read back: cannot tell
        return None
    switches = ", ".join(f"{k}={v}" for k, v in sorted(state.items()) if k not in ("deterministic_kernels", "autotuning"))
    return f"torch on {platform} read back the same determinism state in {len(records)} runs: {switches}"


def prices(comparison) -> list[Price]:
    """One Price per model and framework whose deterministic and free configs were compared."""
    out = []
    for table in comparison.tables:
        by_axis = {}
        for v in table.verdicts:
            if (v.outcome != UNFAIR or v.same) and v.axis in (DETERMINISTIC, FILL):
                by_axis.setdefault(v.axis, []).append(v)
        for v in by_axis.get(DETERMINISTIC, []):
            det = _deterministic_row(v)
            free = next(r for r in v.rows if r is not det)
            ratio, interval = _over_free(v, det)
            fill = next((f for f in by_axis.get(FILL, []) if det in f.rows), None)
            share, no_fill = None, ""
            if fill is not None:
                without = next(r for r in fill.rows if r is not det)
                over_without = without.median_s and det.median_s / without.median_s
                if over_without and v.outcome == FASTER and not v.same and ratio > 1:  # a cost resolved: its share
                    share = math.log(over_without) / math.log(ratio)
                no_fill = identity.of(list(without.records)).text
            platform = next((p for r in det.records if (p := (view(r).effective or Effective()).platform)), "")
            out.append(Price(table.model, det.framework, ratio, interval, v.level, v.outcome,
                             identity.of(list(det.records)).text, identity.of(list(free.records)).text,
                             share, no_fill, v.same, platform))
    return out


def lines(comparison) -> list[str]:
    """The price, one sentence per model and framework (the close and report.md print these)."""
    out = []
    for p in prices(comparison):
        c = p.cells()
        if p.same:  # no verdict: the two modes ran one program
            out.append(f"{p.framework} on {p.platform or p.model}: the same program in both modes ({p.same}): no price to "
                       f"measure ({p.model}); deterministic: {c['deterministic']}; free: {c['free']}")
            continue
        interval = f"{100 * p.level:.3g} % CI {c['ci']}" if p.interval else c["ci"]
        line = (f"{p.framework} on {p.model}: deterministic mode costs {c['ratio']}× ({interval}; {c['outcome']}); "
                f"deterministic: {c['deterministic']}; free: {c['free']}")
        if p.no_fill:
            share = f"the NaN fill takes {c['fill']} of it" if p.fill_share is not None else \
                "the NaN fill's share: no cost resolved to share"
            line += f"; {share}; without the fill: {c['no_fill']}"
        out.append(line)
    return out
