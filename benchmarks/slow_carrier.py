"""Is a persistently slow process repro's worker, or the model in any fresh process? (issue 48, item 1)

    python benchmarks/slow_carrier.py [--pairs 30] [--steps 300] [--warmup 20] framework=jax model=vit model.preset=tiny

Alternates two carriers of the same config, each a fresh process, in AB/BA pairs (so a drift of
the machine falls on both alike):
- `worker`: a real repro run (`python -m repro OVERRIDES run.steps=S run.warmup=W`), its record's
  `results.steady_median_s`: everything repro wraps around a step (spec, telemetry, canary,
  quiet window, the measured loop of worker/measure.py);
- `bare`: a process that builds the workload exactly as the worker does (benchmarks/_workload.py)
  and times the same steps with `perf_counter` around `step` + `sync`, nothing else in it.

Before each process the previous run's MLflow projector is waited for, so neither carrier runs
beside repro's own work. Prints each carrier's median, the SD of log medians, the robust spread
(MAD x 1.4826), and the processes more than `--slower` above their carrier's median. Slow
processes in both at a like rate say the carrier is the framework's process (its allocation, its
thread placement), not repro's worker; in the worker only, repro.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _workload  # benchmarks/_workload.py: this script's folder is on sys.path when it runs


def bare(spec_path: str) -> None:
    """The bare carrier: build, then time `steps` steps; print the steady median (JSON)."""
    spec = json.loads(Path(spec_path).read_text())
    work = _workload.build(spec["config"], spec["cache_dir"])[0]
    times = []
    for i in range(spec["steps"]):
        t = time.perf_counter()
        work.sync(work.step(i))
        times.append(time.perf_counter() - t)
    print(json.dumps({"steady_median_s": statistics.median(times[spec["warmup"]:])}))


def _wait_for_projectors(ledger: Path, limit_s: float = 120) -> None:
    import psutil

    end = time.time() + limit_s
    while time.time() < end:
        if not any("repro.tracking.projector" in " ".join(p.info["cmdline"] or []) and str(ledger) in " ".join(p.info["cmdline"] or [])
                   for p in psutil.process_iter(["cmdline"])):
            return
        time.sleep(0.2)


def run_worker(overrides: list[str], steps: int, warmup: int, root: Path) -> float:
    ledger = root / "ledger"
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}"}
    before = set(ledger.glob("*/*.json")) if ledger.exists() else set()
    proc = subprocess.run([sys.executable, "-m", "repro", *overrides, f"run.steps={steps}", f"run.warmup={warmup}",
                           f"ledger.dir={ledger}", "progress.mode=plain"], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the repro run failed: {proc.stderr[-2000:]}")
    _wait_for_projectors(ledger)
    for path in sorted(set(ledger.glob("*/*.json")) - before):
        record = json.loads(path.read_text())
        if record.get("kind") == "run" and record.get("status") == "ok":
            return record["results"]["steady_median_s"]
    raise SystemExit("the repro run left no ok record")


def run_bare(spec_path: Path) -> float:
    proc = subprocess.run([sys.executable, __file__, "--bare", str(spec_path)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the bare process failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["steady_median_s"]


def spread(xs: list[float]) -> tuple[float, float, float]:
    """(median, SD of logs, MAD of logs x 1.4826)."""
    logs = [math.log(x) for x in xs]
    mid = statistics.median(logs)
    return math.exp(mid), statistics.stdev(logs), 1.4826 * statistics.median(abs(v - mid) for v in logs)


def main() -> None:
    if sys.argv[1:2] == ["--bare"]:
        bare(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=30, help="processes of each carrier (default 30)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--slower", type=float, default=0.2, help="slow: more than this share above the carrier's median")
    ap.add_argument("overrides", nargs="*", default=["framework=jax", "model=vit", "model.preset=tiny"])
    args = ap.parse_args()
    from repro import preflight
    from repro.config.schema import as_dict

    root = Path(tempfile.mkdtemp(prefix="slow-carrier-"))
    config = preflight.plan([*args.overrides, f"run.steps={args.steps}", f"run.warmup={args.warmup}"]).jobs[0]
    spec = root / "spec.json"
    spec.write_text(json.dumps({"config": as_dict(config), "cache_dir": str(root / "cache"), "steps": args.steps,
                                "warmup": args.warmup}))
    medians: dict[str, list[float]] = {"worker": [], "bare": []}
    for k in range(args.pairs):
        for carrier in (("worker", "bare") if k % 2 == 0 else ("bare", "worker")):
            s = run_worker(args.overrides, args.steps, args.warmup, root) if carrier == "worker" else run_bare(spec)
            medians[carrier].append(s)
            print(f"pair {k + 1:>2} {carrier:<6} {1e3 * s:7.3f} ms", flush=True)
    print(f"\n{' '.join(args.overrides)}: {args.pairs} processes of each carrier, AB/BA pairs, {args.steps} steps "
          f"({args.warmup} warm-up)")
    print(f"{'carrier':<8} {'median':>9} {'SD logs':>8} {'robust':>7} {'slow (> +' + format(args.slower, '.0%') + ')':>14}  slow ones")
    for carrier, xs in medians.items():
        mid, sd, mad = spread(xs)
        slow = [x for x in xs if x > (1 + args.slower) * mid]
        print(f"{carrier:<8} {1e3 * mid:7.3f}ms {100 * sd:7.1f}% {100 * mad:6.1f}% {len(slow):>6} of {len(xs):<6} "
              f"{', '.join(f'+{100 * (x / mid - 1):.0f} %' for x in slow) or '-'}")
    (root / "medians.json").write_text(json.dumps(medians))
    print(f"(medians: {root / 'medians.json'})")


if __name__ == "__main__":
    main()
