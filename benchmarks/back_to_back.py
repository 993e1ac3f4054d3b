"""Single runs back to back, as a person at a terminal runs them: what each pays for MLflow.

    .venv/bin/python benchmarks/back_to_back.py [--runs N] [--pairs P] [--json PATH]

The fixed job of benchmarks/harness_overhead.py (jax mlp tiny, 10 steps) is run N times in a row,
the next command started the moment the last returns (nothing waited for), in two arms:
- `projector`: `tracking.writer_idle_s=0`, a projector process per command (each imports MLflow);
- `writer`: the default, the machine's long-lived MLflow writer (tracking/writer.py).
Each arm has a machine folder, ledger and sqlite store of its own, so one arm's MLflow process never
meets the other's runs. The arms alternate in pairs (A B, B A, ...), `--pairs` times. Per run it reads,
from its record: the fixed cost beyond framework import, build and steps (harness_overhead's own
`_beyond_framework`: CLI wall − steps − import − build), the worker's `setup` part
(`wall_split.parts.setup`, which holds the wait for an MLflow process still at work), repro's own
CPU in the measured window (`machine.repro_cpu_s`) and whether the steps ran beside an MLflow
process (`machine.beside_projector`). It prints medians per arm, first run and later runs apart, and the
ratios writer/projector, measured in this one run. A speed target lives here, never in a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness_overhead import FIXED_JOB, PY, _beyond_framework, _check, _run, newest_ok  # noqa: E402

ARMS = {"projector": ["tracking.writer_idle_s=0"], "writer": []}


def one_arm(name: str, work: Path, runs: int) -> list[dict]:
    """`runs` commands of one arm back to back; then wait until its MLflow process has drained."""
    machine, ledger = work / name / "machine", work / name / "ledger"
    machine.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{work / name / 'mlflow.db'}",
           "REPRO_MACHINE_DIR": str(machine)}
    rows = []
    for i in range(runs):
        proc, wall = _run([PY, "-m", "repro", *FIXED_JOB, *ARMS[name], f"ledger.dir={ledger}", "progress.mode=none"],
                          cwd=work / name, env=env)
        _check(proc, f"{name} run {i}")
        record = newest_ok(ledger)
        machine_block = record.get("machine") or {}
        rows.append({"arm": name, "index": i, "wall_s": wall, "fixed_s": _beyond_framework(wall, record),
                     "setup_s": record["wall_split"]["parts"]["setup"],
                     "repro_cpu_s": machine_block.get("repro_cpu_s") or 0.0,
                     "beside": bool(machine_block.get("beside_projector"))})
    _drained(ledger)
    return rows


def _drained(ledger: Path, limit_s: float = 300) -> None:
    from repro.tracking import handoff

    deadline = time.monotonic() + limit_s
    while handoff.entries(ledger) or handoff.busy(ledger):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{ledger}: MLflow's hand-over not drained after {limit_s:g} s")
        time.sleep(0.2)


def summary(rows: list[dict]) -> dict:
    out = {}
    for arm in ARMS:
        mine = [r for r in rows if r["arm"] == arm]
        first, later = [r for r in mine if r["index"] == 0], [r for r in mine if r["index"] > 0]
        out[arm] = {
            "first_fixed_s": statistics.median(r["fixed_s"] for r in first),
            "later_fixed_s": statistics.median(r["fixed_s"] for r in later),
            "later_fixed_max_s": max(r["fixed_s"] for r in later),
            "later_setup_s": statistics.median(r["setup_s"] for r in later),
            "later_wall_s": statistics.median(r["wall_s"] for r in later),
            "repro_cpu_max_s": max(r["repro_cpu_s"] for r in mine),
            "beside": sum(r["beside"] for r in mine), "runs": len(mine),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=4, help="commands in a row per arm and pair (default 4)")
    p.add_argument("--pairs", type=int, default=2, help="A B / B A pairs of arms (default 2)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    print(f"load {os.getloadavg()[0]:.2f} at the start; {args.pairs} pairs × {args.runs} runs per arm", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="repro-b2b-") as tmp:
        for pair in range(args.pairs):
            order = list(ARMS) if pair % 2 == 0 else list(reversed(ARMS))
            for arm in order:
                rows += one_arm(arm, Path(tmp) / f"pair{pair}", args.runs)
    s = summary(rows)
    print(f"{'arm':10} {'first fixed':>12} {'later fixed':>12} {'later max':>10} {'later setup':>12} "
          f"{'later wall':>11} {'repro cpu':>10} {'beside':>7}")
    for arm, v in s.items():
        print(f"{arm:10} {v['first_fixed_s']:>11.2f}s {v['later_fixed_s']:>11.2f}s {v['later_fixed_max_s']:>9.2f}s "
              f"{v['later_setup_s']:>11.2f}s {v['later_wall_s']:>10.2f}s {v['repro_cpu_max_s']:>9.2f}s "
              f"{v['beside']:>3}/{v['runs']}")
    w, pr = s["writer"], s["projector"]
    print(f"writer/projector, runs after the first: fixed cost {w['later_fixed_s'] / pr['later_fixed_s']:.2f}, "
          f"setup {w['later_setup_s'] / pr['later_setup_s']:.2f}, wall {w['later_wall_s'] / pr['later_wall_s']:.2f}; "
          f"load {os.getloadavg()[0]:.2f} at the end")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": s}, indent=1))


if __name__ == "__main__":
    main()
