"""Each calibration trial's rounds and wall time, from its ledger alone (no run is made): the
figure the instrument's "median wall a trial" rows quote.

    .venv/bin/python experiments/instrument/trial_walls.py LEDGER [LEDGER ...]

A trial's wall runs from its first run's start (`created` minus `wall_s` of the earliest run)
to its last run's end; the rounds are its highest round index + 1 (a rerun round counts once,
its discarded attempt's wall inside the trial's).
"""

from __future__ import annotations

import statistics
import sys
from datetime import datetime

from repro.ledger import Ledger


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def walls(path: str) -> list[tuple[int, int, int, float]]:
    """(trial, rounds, runs, wall s) of each trial of the calibration in the ledger at `path`."""
    trials: dict[int, list[dict]] = {}
    for r in Ledger(path).heads():
        if r.get("status") == "ok" and "calibration" in r:
            trials.setdefault(r["calibration"]["trial"], []).append(r)
    out = []
    for trial, runs in sorted(trials.items()):
        start = min(_t(r["created"]) - r["wall_s"] for r in runs)
        out.append((trial, max(r["repeat"]["index"] for r in runs) + 1, len(runs),
                    max(_t(r["created"]) for r in runs) - start))
    return out


if __name__ == "__main__":
    for path in sys.argv[1:]:
        rows = walls(path)
        print(f"# {path}: {len(rows)} trials")
        for trial, rounds, runs, wall in rows:
            print(f"trial {trial}: {rounds} rounds, {runs} runs, {wall:.1f} s")
        print(f"median: {statistics.median(r[1] for r in rows):g} rounds, {statistics.median(r[3] for r in rows):.1f} s a trial")
