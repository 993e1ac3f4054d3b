"""Which slow processes the canary, steal time and placement caught, from a ledger's records (issue 48).

    python benchmarks/canary_caught.py LEDGER_DIR [--slower 0.2] [--sweep ID]

A run is slow where its steady median is more than `--slower` above its config's median (all ok runs
of that config hash in the ledger, or in the sweep `--sweep` names, reruns' replaced attempts included:
every process is a sample).
Caught by: the canary (`canary.slow`), steal (`machine.steal_share` > STEAL cores), placement (its
migrations more than PLACEMENT × the median of the config's runs), busy (the existing rule: other
processes above loop/rerun.py's OTHER_CPU_SHARE). Prints one line per slow run and a table of
caught / missed / flagged-but-not-slow per signal.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from repro.report.noise import PLACEMENT, STEAL  # calibrate's rules: migrations over PLACEMENT × the config's median


def ok_runs(root: Path) -> list[dict]:
    runs = []
    for path in sorted(root.glob("*/*.json")):
        record = json.loads(path.read_text())
        if record.get("kind") == "run" and record.get("status") == "ok" and "canary" in record:
            runs.append(record)
    return runs


def signals(run: dict, median_migrations: float) -> dict[str, bool]:
    m, c = run.get("machine") or {}, run.get("canary") or {}
    migrations = (m.get("placement") or {}).get("migrations") or 0
    return {"canary": c.get("slow") is True, "steal": (m.get("steal_share") or 0) > STEAL,
            "placement": migrations > PLACEMENT * max(median_migrations, 1), "busy": (m.get("other_cpu_share") or 0) > 0.10}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("ledger", type=Path)
    parser.add_argument("--slower", type=float, default=0.2)
    parser.add_argument("--sweep", help="one sweep's runs (its id); the canaries were judged against the whole ledger")
    args = parser.parse_args()
    by_config: dict[str, list[dict]] = {}
    for run in ok_runs(args.ledger):
        if args.sweep and (run.get("sweep") or {}).get("id") != args.sweep:
            continue
        by_config.setdefault(run["config_hash"], []).append(run)
    rows, names = [], ("canary", "steal", "placement", "busy")
    for runs in by_config.values():
        median = statistics.median(r["results"]["steady_median_s"] for r in runs)
        mig = statistics.median((r["machine"].get("placement") or {}).get("migrations") or 0 for r in runs)
        for r in sorted(runs, key=lambda r: r["created"]):
            ratio = r["results"]["steady_median_s"] / median
            rows.append((r, ratio, ratio > 1 + args.slower, signals(r, mig)))
    judged = [row for row in rows if row[0]["canary"].get("slow") is not None]
    print(f"{len(rows)} ok runs, {sum(s for _, _, s, _ in rows)} more than {args.slower:.0%} slower than their "
          f"config's median; {len(judged)} canaries judged (the rest built the history)")
    for r, ratio, slow, sig in rows:
        if slow or any(sig.values()):
            c, m = r["canary"], r["machine"]
            print(f"  {r['id']} step ×{ratio:.2f}{' SLOW' if slow else '     '}  canary {c['seconds'] * 1e3:.2f} ms "
                  f"(slow={c.get('slow')})  steal {m.get('steal_share')}  other {m.get('other_cpu_share')}  "
                  f"migrations {(m.get('placement') or {}).get('migrations')}  "
                  f"invol {(m.get('placement') or {}).get('involuntary_switches')}  flags: "
                  f"{', '.join(k for k, v in sig.items() if v) or '-'}")
    print("\n| signal | slow runs caught | slow runs missed | flagged, not slow |\n|---|---|---|---|")
    for name in names:
        caught = sum(1 for _, _, slow, sig in rows if slow and sig[name])
        missed = sum(1 for _, _, slow, sig in rows if slow and not sig[name])
        false = sum(1 for _, _, slow, sig in rows if not slow and sig[name])
        print(f"| {name} | {caught} | {missed} | {false} |")


if __name__ == "__main__":
    main()
