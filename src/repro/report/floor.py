"""This host's noise floor, as `repro calibrate` stored it: a verdict below it says so.

A calibration record (kind "calibration", one per `repro calibrate`) holds a host's run-to-run
noise and the smallest gap the verdict engine resolves at 3, 5 and 10 repeats: its own statistic
(`verdict.statistic`, report/statistic.py) on the measured log ratios resampled (`verdict.resampled_gap`), or, with fewer than 20
ratios or unpaired runs, the normal approximation (`verdict.resolvable_gap`). A "faster" verdict whose gap is smaller than the floor at its
repeats (the newest calibration of the host its runs ran on, in the ledger they were recorded
in) carries that floor, and its sentence says so: such a gap is inside what identical configs
show on this machine, however the interval came out.
"""

from __future__ import annotations

from pathlib import Path

from repro.ledger import Ledger
from repro.ledger.record import view

KIND = "calibration"


def newest(ledger_dir: str | Path, host: str) -> dict | None:
    """The newest calibration record of `host` in a ledger (None: never calibrated there)."""
    if not Path(ledger_dir).is_dir():
        return None
    found = [r for r in Ledger(ledger_dir).heads(kind=KIND) if view(r).host == host
             and view(r).status == "ok" and r.get("floor")]  # an interrupted calibration holds no floor
    return max(found, key=lambda r: view(r).created) if found else None


def at(record: dict, repeats: int) -> tuple[int, float]:
    """(calibrated repeats, gap) of a calibration's floor for a verdict on `repeats` per side: the
    largest calibrated count not above it (else the smallest calibrated)."""
    floors = sorted((int(n), gap) for n, gap in record["floor"].items())
    fit = [f for f in floors if f[0] <= repeats]
    return fit[-1] if fit else floors[0]


def below(v, runs: list[dict], ledger_dir: str | Path | None = None) -> tuple[int, float] | None:
    """The host floor a "faster" verdict falls below (None: above it, not faster, or no calibration).
    The calibration is looked for in `ledger_dir` (the ledger the runs were read from) first, then in
    the ledger each run names: a ledger moved or copied elsewhere still finds its own."""
    from repro.report import verdict

    if v.outcome != verdict.FASTER:
        return None
    hosts = {view(r).machine.host for r in runs} - {None}
    dirs = {view(r).config.ledger.dir for r in runs} - {None, ""}
    if len(hosts) != 1:
        return None
    host = next(iter(hosts))
    for where in [*([ledger_dir] if ledger_dir else []), *sorted(dirs)]:
        if (record := newest(where, host)) is not None:
            n, gap = at(record, min(v.n_a, v.n_b))
            return (n, gap) if v.speedup - 1 < gap else None
    return None
