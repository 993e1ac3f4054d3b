"""Trajectory agreement: how far the loss curves of runs that differ only in the framework drift apart.

Runs are peers when their semantic configs (`repro.config.spec.semantic`) are equal once the
framework is left out. In each group of peers the first run is the reference; every other run
gets the largest relative difference of its losses from the reference's over the steps,
|loss - ref| / |ref|, and the first step (1-based) where that exceeds THRESHOLD, or None:
"never". Under run.init=shared both start from the same parameters (`same_init`, from the
records' init_params_sha256) on the same batches, so a drift is a finding; under native
they start apart and the figures only say how far.

The sweep's closing table and `repro compare` show it as a column (`cells`); a multirun
sweep stores it as a ledger record of kind "sweep" and on its MLflow parent run (`store`).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from repro.config.spec import semantic
from repro.hashing import sha256_json
from repro.ledger.record import view

THRESHOLD = 1e-4


@dataclass(frozen=True)
class Agreement:
    """One run's losses against its reference peer's: an entry of a sweep record's `trajectory`."""

    model: str  # "<name>/<preset>"
    run: str
    framework: str
    reference: str
    reference_framework: str
    steps: int  # the steps both recorded
    threshold: float
    max_rel_diff: float  # inf where a side's loss was NaN
    first_step_over: int | None  # 1-based; None: never over the threshold
    same_init: bool | None  # None: a side did not record its start (init_params_sha256)
    rel_diff: list

    @classmethod
    def stored(cls, entry: Mapping) -> Agreement:
        """An entry as a sweep record holds it (every field written since the record kind exists)."""
        return cls(**{f.name: entry[f.name] for f in dataclasses.fields(cls)})


# what a sweep record keeps of a run it took from an earlier sweep (run.resume=true; `repeat` where it has one)
REUSED = ("id", "resumed_from", "sweep", "repeat")


def _peer_key(record: dict) -> str:
    config = semantic(record["config"])
    config.pop("framework", None)
    return sha256_json(config)


def _label(record: dict) -> str:
    return view(record).config.framework.name


def agreements(records: list[dict]) -> list[Agreement]:
    """One entry per run that has a reference peer (see the module's doc), in the records' order."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if view(r).kind == "run" and view(r).status == "ok" and view(r).results.loss:
            groups[_peer_key(r)].append(r)
    out = []
    for rows in groups.values():
        ref, *others = rows
        for r in others:
            out.append(_agreement(ref, r))
    return out


def _agreement(ref: dict, run: dict) -> Agreement:
    ref_res, run_res = view(ref).results, view(run).results
    a = np.asarray(ref_res.loss, dtype=np.float64)
    b = np.asarray(run_res.loss, dtype=np.float64)
    n = min(len(a), len(b))
    rel = np.abs(b[:n] - a[:n]) / np.maximum(np.abs(a[:n]), 1e-12)
    rel = np.where(np.isnan(rel), math.inf, rel)  # a NaN on either side is as far apart as can be
    over = np.flatnonzero(rel > THRESHOLD)
    init_a, init_b = ref_res.init_params_sha256, run_res.init_params_sha256
    m = view(run).config.model
    return Agreement(model=f"{m.name}/{m.preset}", run=view(run).id, framework=_label(run), reference=view(ref).id,
                     reference_framework=_label(ref), steps=n, threshold=THRESHOLD,
                     max_rel_diff=float(rel.max()) if n else 0.0,
                     first_step_over=int(over[0]) + 1 if len(over) else None,
                     same_init=init_a == init_b if init_a and init_b else None, rel_diff=[float(x) for x in rel])


def describe(a: Agreement) -> str:
    """'max 2.1e-07, never >1e-4' or 'max 7.7e-04, >1e-4 from step 16' (+ ', other start' or
    ', start not recorded')."""
    where = "never" if a.first_step_over is None else f"from step {a.first_step_over}"
    # None: a side did not record its start (model.impl=hf draws its own weights in each framework,
    # hashed nowhere): the drift may be the start's, and the column must not read as if it were not
    start = {False: ", other start", None: ", start not recorded"}.get(a.same_init, "")
    threshold = f"{a.threshold:.0e}".replace("e-0", "e-")
    return f"max {a.max_rel_diff:.1e}, >{threshold} {where}{start}"


def cells(records: list[dict]) -> dict[str, str]:
    """Run id -> the trajectory column's text ('ref' for a reference); {} when no run has a peer."""
    out = {}
    for a in agreements(records):
        out[a.reference] = f"ref ({a.reference_framework})"
        out[a.run] = describe(a)
    return out


def store(ledger, sweep: dict, records: list[dict], status: str = "ok") -> dict | None:
    """A multirun sweep's agreements, each config's bit-identity across its processes
    (report/identity.py) and the earlier runs it took as its own (`run.resume=true`: `reused`, read
    back by report/compare.py `sweep_runs`) as a ledger record (kind "sweep"); None when there is none.
    `status`: "interrupted" for a sweep that did not run all it planned (never an `ok` record of it)."""
    from repro.report import identity

    found, same = agreements(records), identity.by_config(records)
    reused = [{k: r[k] for k in REUSED if k in r and (k != "repeat" or r[k])} for r in records if r.get("resumed_from")]
    if not found and not same and not reused:
        return None
    return ledger.append({"kind": "sweep", "status": status, "sweep": sweep,
                          "trajectory": [dataclasses.asdict(a) for a in found], "identity": same,
                          **({"reused": reused} if reused else {})})


def log_parent(tracker, run_id: str, record: dict) -> None:
    """The sweep record's agreements on the sweep's MLflow parent run: per pair the max as a
    metric, the text as a tag and the per-step relative difference as a series."""
    metrics, tags, series = {}, {"repro.trajectory_ledger_id": view(record).id}, {}
    for a in map(Agreement.stored, record.get("trajectory") or ()):
        name = f"trajectory/{a.model}/{a.framework}_vs_{a.reference_framework}_{a.run[:8]}"
        metrics[f"{name}/max_rel_diff"] = a.max_rel_diff if math.isfinite(a.max_rel_diff) else None
        series[f"{name}/rel_diff"] = [min(x, 1e30) for x in a.rel_diff]  # inf: a NaN loss
        tags[f"repro.{name.replace('/', '.')}"] = describe(a)
    for group, same in (record.get("identity") or {}).items():  # bit-identity across a config's processes
        tags[f"repro.identity.{group.replace('/', '.')}"] = same["text"]
    tracker.log(run_id, metrics=metrics, tags=tags, series=series)
