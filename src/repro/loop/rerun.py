"""Which runs telemetry alone flags: the machine was not in the state a measurement needs.

The sweep loop (loop/sweep.py) runs a flagged round again, at most `verdict.max_reruns` times
per sweep. The rule reads only the record's `machine` block (what the worker saw around its
measured window) and, with `verdict.canary_reruns=true`, its `canary` (a fixed kernel timed before
the window, judged against the host's earlier canaries: job/canary.py), never a step time, so a rerun cannot favour an
outcome: a round is not run again because its numbers looked odd, only because the machine was
busy or slowed down, or its process was slow before its first step.
"""

from __future__ import annotations

from repro.job.canary import slow_reason
from repro.ledger.record import view
from repro.ledger.render import others_took

OTHER_CPU_SHARE = 0.10  # other processes' CPU during the measured window, in cores
CLOCK_SHORTFALL = 0.95  # a GPU's SM clock below this share of its maximum


def flag(record: dict) -> str | None:
    """Why telemetry or the run's canary flags this run, or None. verdict.canary_reruns as the run was
    configured (records from before the key: its schema default, off)."""
    run = view(record)
    m = run.machine
    reasons = []
    if (m.other_cpu_share or 0) > OTHER_CPU_SHARE:
        reasons.append(f"{others_took(m.other_cpu_share, m.steal_share)} during its window (bound {OTHER_CPU_SHARE})")
    for gpu in m.gpus_before:  # right before the first measured step, the device slowed down
        if gpu.clocks_sm and gpu.clocks_max_sm and gpu.clocks_sm < CLOCK_SHORTFALL * gpu.clocks_max_sm:
            reasons.append(f"GPU {'?' if gpu.index is None else gpu.index} at {gpu.clocks_sm:.0f} of "
                           f"{gpu.clocks_max_sm:.0f} MHz")
    if run.canary.slow is True and run.config.verdict.canary_reruns:
        reasons.append(slow_reason(run.canary.raw))
    return "; ".join(reasons) or None
