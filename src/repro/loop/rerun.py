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
from repro.ledger.render import others_took

OTHER_CPU_SHARE = 0.10  # other processes' CPU during the measured window, in cores
CLOCK_SHORTFALL = 0.95  # a GPU's SM clock below this share of its maximum


def _canary_reruns(record: dict) -> bool:
    """verdict.canary_reruns, as the run was configured (records from before the key: off)."""
    return bool(((record.get("config") or {}).get("verdict") or {}).get("canary_reruns", False))


def flag(record: dict) -> str | None:
    """Why telemetry or the run's canary flags this run, or None."""
    m = record.get("machine") or {}
    reasons = []
    if (m.get("other_cpu_share") or 0) > OTHER_CPU_SHARE:
        reasons.append(f"{others_took(m['other_cpu_share'], m.get('steal_share'))} during its window "
                       f"(bound {OTHER_CPU_SHARE})")
    for gpu in m.get("gpus_before") or []:  # right before the first measured step, the device busy
        clock, top = gpu.get("clocks_sm"), gpu.get("clocks_max_sm")
        if clock and top and clock < CLOCK_SHORTFALL * top:
            reasons.append(f"GPU {gpu.get('index', '?')} at {clock:.0f} of {top:.0f} MHz")
        if gpu.get("throttle"):
            reasons.append(f"GPU {gpu.get('index', '?')} throttled ({gpu['throttle']})")
    if (canary := record.get("canary")) and canary.get("slow") is True and _canary_reruns(record):
        reasons.append(slow_reason(canary))
    return "; ".join(reasons) or None
