"""A calibration's trials judged again by today's rule, from its ledger alone (no run is made).

    .venv/bin/python experiments/instrument/rejudge.py LEDGER [LEDGER ...]

Calibrations recorded before auto trials said so in their runs (`repeat.auto`) were summarised
as one look at alpha over all of a trial's rounds, while the trial had stopped on an unpaired
(Welch) decision. This gives each auto trial's runs the `auto` field an auto trial now records
(max = the calibration's rounds per trial) and summarises them with calibrate's own
`noise.summarise`: the paired verdict at the planned looks, the one an auto sweep prints. Valid
where no trial stopped early (each ran its maximum): a trial is then judged on exactly the rounds
today's stopping rule would have looked at.
"""

from __future__ import annotations

import sys

from repro.ledger import Ledger
from repro.report import noise
from repro.report.reruns import kept


def rejudge(path: str) -> None:
    heads = Ledger(path).heads()
    (cal,) = [r for r in heads if r.get("kind") == "calibration"]
    proto = cal["protocol"]
    runs = kept([r for r in heads if r.get("calibration")])
    rounds = proto["rounds_of_trials"]
    early = sum(n < proto["rounds_per_trial"] for n in rounds)
    band = cal["config"]["verdict"]["band"]
    for r in runs:
        r["repeat"] = {**r["repeat"], "auto": {"max": proto["rounds_per_trial"], "band": band, "budget_s": None}}
    s = noise.summarise(runs)
    print(f"# {path}: {len(runs)} runs, {len(rounds)} trials, {early} stopped before round "
          f"{proto['rounds_per_trial']} (their later rounds were never run)")
    for line in noise.lines({**s, "repeats": proto["rounds_per_trial"]}, cal["host"]):
        if line.startswith(("false", "gap")):
            print(line)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        rejudge(p)
