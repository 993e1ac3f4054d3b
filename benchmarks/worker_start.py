"""What the worker's start costs a sweep: `+exp=quickstart` (or any sweep) with run.start=fresh and
run.start=fork, interleaved pair by pair, each from a clean folder with its own ledger and sqlite store.

    .venv/bin/python benchmarks/worker_start.py [--pairs N] [--json PATH] [-- OVERRIDE ...]

For each start it prints the command's wall (median over pairs), its runs and reruns, and per
(framework, model) the median of each wall part the records carry (job/wall_split.py: start, build,
setup, first step, steady) with the steady-state step medians and the peak host RSS; then the ratios
fork / fresh measured in this run: the sweep's wall, and each row's steady median (a forked worker
must measure the same steps as a fresh one: its ratio near 1). The store is created before the clock
starts (the writer makes a new one after the command returns, and the next command's measured steps
would wait for it). The script measures the tree PYTHONPATH names.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PARTS = ("start", "build", "setup", "first_step", "steady")
STARTS = ("fresh", "fork")


def one(start: str, overrides: list[str]) -> dict:
    """One command from a clean folder: its wall, and per (framework, model) its runs' parts and figures."""
    from repro.ledger import Ledger
    from repro.ledger.record import view

    folder = Path(tempfile.mkdtemp(prefix=f"worker-start-{start}-"))
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    subprocess.run([sys.executable, "-c", f"import mlflow; mlflow.set_tracking_uri({uri!r}); mlflow.search_experiments()"],
                   capture_output=True, check=True)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "repro", *overrides, f"run.start={start}", f"ledger.dir={folder / 'ledger'}",
                           f"tracking.uri={uri}", "progress.mode=none"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"run.start={start} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    rows: dict[str, list] = {}
    for r in Ledger(folder / "ledger").heads(kind="run"):
        v = view(r)
        if v.status != "ok":
            continue
        parts = v.wall_split.parts if v.wall_split else {}
        rows.setdefault(f"{v.config.framework.name} · {v.config.model.name}", []).append(
            {**{p: parts.get(p, 0.0) for p in PARTS}, "steady_ms": v.results.steady_median_s * 1e3,
             "peak_mib": v.results.peak_memory.get("bytes", 0) / 2**20})
    return {"start": start, "wall_s": wall, "load": load, "runs": sum(map(len, rows.values())),
            "reruns": proc.stdout.count("runs again") + proc.stderr.count("runs again"), "rows": rows}


def median_rows(results: list[dict]) -> dict[str, dict]:
    pooled: dict[str, list] = {}
    for res in results:
        for name, runs in res["rows"].items():
            pooled.setdefault(name, []).extend(runs)
    return {name: {k: statistics.median(run[k] for run in runs) for k in runs[0]} for name, runs in sorted(pooled.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=2, help="interleaved fresh/fork pairs (each side first as often)")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("overrides", nargs="*", default=["+exp=quickstart"], help="the sweep (default: +exp=quickstart)")
    args = ap.parse_args()
    results = {s: [] for s in STARTS}
    for k in range(args.pairs):
        for start in (STARTS if k % 2 == 0 else STARTS[::-1]):
            res = one(start, args.overrides)
            results[start].append(res)
            print(f"pair {k + 1} {start}: {res['wall_s']:.1f} s wall, {res['runs']} runs, {res['reruns']} reruns "
                  f"(1-min load {res['load']:.2f} before)", flush=True)
    medians = {s: median_rows(results[s]) for s in STARTS}
    walls = {s: statistics.median(r["wall_s"] for r in results[s]) for s in STARTS}
    for s in STARTS:
        print(f"\nrun.start={s}: wall {walls[s]:.1f} s (median of {len(results[s])})")
        print(f"  {'row':<14}" + "".join(f"{p:>11}" for p in PARTS) + f"{'steady ms':>11}{'peak MiB':>10}")
        for name, m in medians[s].items():
            print(f"  {name:<14}" + "".join(f"{m[p]:>11.2f}" for p in PARTS) + f"{m['steady_ms']:>11.3f}{m['peak_mib']:>10.0f}")
    print(f"\nfork / fresh, this run: wall {walls['fork'] / walls['fresh']:.2f}")
    for name in medians["fresh"]:
        if name in medians["fork"]:
            print(f"  {name}: steady median {medians['fork'][name]['steady_ms'] / medians['fresh'][name]['steady_ms']:.3f}, "
                  f"peak RSS {medians['fork'][name]['peak_mib'] / medians['fresh'][name]['peak_mib']:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "medians": medians, "walls": walls}, indent=1))


if __name__ == "__main__":
    main()
