"""Seconds from `python -m repro` to the worker's first step, for two source trees.

    python benchmarks/first_step_latency.py --a <other checkout>/src --b src [--repeats 3] [--steps 8]

One job (torch mlp tiny, a fresh ledger and a fresh sqlite MLflow store each time) runs
under each tree (PYTHONPATH), interleaved A B, B A, ... so drift on a shared machine falls
on both. The parent's plain progress lines are read as they arrive: the time until
"step 1/" shows (the first step has ended) and until the command exits. Medians and the
ratio B/A, measured in this one run, are printed: compare only within one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one(src: str, steps: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="repro-latency-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(Path(src).resolve()), "PYTHONUNBUFFERED": "1",
               "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db"}
        cmd = [sys.executable, "-m", "repro", "model=mlp", "framework=torch", f"run.steps={steps}", "run.warmup=2",
               f"ledger.dir={tmp}/ledger", "progress.mode=plain"]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        first = None
        for line in proc.stdout:
            if first is None and "step 1/" in line:
                first = time.perf_counter() - start
        if proc.wait() != 0 or first is None:
            raise SystemExit(f"{src}: the run failed (exit {proc.returncode})")
        return first, time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="the src/ folder before")
    p.add_argument("--b", required=True, help="the src/ folder after")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    times: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
    for i in range(args.repeats):
        for side in ("a", "b") if i % 2 == 0 else ("b", "a"):
            times[side].append(one(getattr(args, side), args.steps))
    med = {side: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)) for side, ts in times.items()}
    print(f"{'':>4} {'to first step (s)':>18} {'to exit (s)':>12}   runs: {args.repeats} each, interleaved")
    for side in ("a", "b"):
        print(f"{side:>4} {med[side][0]:>18.2f} {med[side][1]:>12.2f}   {getattr(args, side)}")
    print(f"B/A  {med['b'][0] / med['a'][0]:>17.2f}× {med['b'][1] / med['a'][1]:>11.2f}×")


if __name__ == "__main__":
    main()
