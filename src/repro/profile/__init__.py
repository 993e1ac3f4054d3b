"""Where a step's time goes: `run.profile=true` (after the timed loop, a few steps under the
framework's own profiler), its trace reduced to one vocabulary of categories, and the
side-by-side comparison of runs.

- capture: the profiled steps (torch.profiler, jax.profiler, PyTorch/XLA's metrics)
- categories: the one table mapping every framework's op names to categories
- hlo: what each XLA instruction holds (from the compiled HLO text)
- reduce: a trace → per-step ms by category and the top ops
- (the side-by-side view, "where the time goes", is rendered by repro.report.where_time_goes)
- store: trace files kept in the ledger's folder by their hash
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from repro.profile.capture import STEPS

if TYPE_CHECKING:
    from repro.ledger.record import Profile


def run(workload, first: int, out_dir: str) -> tuple[dict, list[str]]:
    """Profile `STEPS` steps after the timed loop: (results["profile"], the files to keep). The
    backend's capture is a `capture.Captured`; the summary is the record's JSON (read back typed as
    ledger/record.py `Profile`)."""
    from repro.profile import hlo, reduce

    cap = workload.profile(first, STEPS, out_dir)
    summary = {"profiler": cap.profiler, "viewer": cap.viewer, "steps": STEPS,
               "files": [{"name": Path(f).name, "sha256": sha256_file(f), "bytes": Path(f).stat().st_size}
                         for f in cap.files]}
    if cap.unprofiled_ms is not None:  # the same steps just before, without the profiler
        summary["unprofiled_ms"] = cap.unprofiled_ms
    if cap.trace:
        instructions = hlo.instructions(cap.hlo) if cap.hlo else None
        summary.update(reduce.reduce(cap.trace, cap.family, instructions))
    else:  # a profiler without a per-op trace: its steps' wall time and its own counters
        each = cap.step_ms_each
        summary.update({"step_ms": sum(each) / len(each), "step_ms_each": each, "categories_ms": None,
                        "executions_per_step": cap.executions_per_step, "compiles_during": cap.compiles_during})
    return summary, cap.files


def metrics(profile: Profile) -> dict[str, float]:
    """A profile's figures (a record's typed `results.profile`) as MLflow metrics: `profile/step_ms`
    and `profile/<category>_ms`."""
    import re

    out = {"profile/step_ms": profile.step_ms}
    for category, ms in (profile.categories_ms or {}).items():
        out[f"profile/{re.sub(r'[^A-Za-z0-9]+', '_', category)}_ms"] = ms
    return out


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
