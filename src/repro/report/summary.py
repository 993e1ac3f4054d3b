"""What a sweep's records say, ready to print or plot: swept values, configurations, spreads.

Pure functions of ledger records (no MLflow, no matplotlib), shared by the markdown page,
the CSV, the plots and the MLflow run names, so all of them name a run the same way.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property

from repro.report import stats, varied

def overrides(record: dict) -> dict[str, str]:
    """The record's command-line overrides as {key: value}, display keys left out."""
    return varied.override_values(record)


def swept_keys(records: list[dict]) -> list[str]:
    """Keys whose override differs between the records, in the order the first record gives them.
    One record alone: its framework (what every comparison is about)."""
    values: dict[str, set] = defaultdict(set)
    order: list[str] = []
    for r in records:
        for k, v in overrides(r).items():
            if k not in values:
                order.append(k)
            values[k].add(v)
    swept = [k for k in order if len(values[k]) > 1 or any(k not in overrides(r) for r in records)]
    return swept or ["framework"]


def value(record: dict, key: str) -> str:
    """The record's value of a swept key (its override, else its config's)."""
    found = overrides(record).get(key)
    if found is not None:
        return found
    node = record.get("config") or {}
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):  # a config group: its name
        node = node.get("name")
    return str(node)


def run_name(record: dict, swept: list[str]) -> str:
    """`framework=jax model=mlp`: a run named by its swept values."""
    return " ".join(f"{k}={value(record, k)}" for k in swept)


def group_label(record: dict, swept: list[str]) -> str:
    """The swept values other than the framework (one plot panel each), else model/preset."""
    rest = [value(record, k) for k in swept if k != "framework"]
    if rest:
        return " · ".join(rest)
    m = record["config"]["model"]
    return f"{m['name']}/{m['preset']}"


def framework(record: dict) -> str:
    return record["config"]["framework"]["name"]


@dataclass(frozen=True)
class Spread:
    """A configuration's steady step time: its centre and an interval around it."""

    median_s: float
    low_s: float
    high_s: float
    samples: int
    kind: str


def steady_spread(records: list[dict]) -> Spread | None:
    """The steady step time of one configuration's ok runs.

    One run: its steady median and p10–p90 over its steps ("single sample"). Several (repeats):
    the median of their medians and its 95 % bootstrap CI (report/stats.py).
    """
    ok = [r["results"] for r in records if r.get("status") == "ok" and "steady_median_s" in (r.get("results") or {})]
    if not ok:
        return None
    if len(ok) == 1:
        res = ok[0]
        return Spread(res["steady_median_s"], res["steady_p10_s"], res["steady_p90_s"], 1,
                      "p10–p90 of the steady steps (single sample)")
    s = stats.summarise(records)  # repeats: the median of their medians, its 95 % bootstrap CI
    return Spread(s.median_s, *s.ci_s, s.n, f"95 % bootstrap CI of the median over {s.n} repeats")


@dataclass
class Config:
    """One configuration of a sweep: its runs (several with repeats) and how to name it."""

    label: str  # the run name: its swept values
    group: str  # the plot panel: swept values other than the framework
    framework: str
    records: list[dict]

    @property
    def first(self) -> dict:
        return self.records[0]

    @property
    def ok(self) -> list[dict]:
        return [r for r in self.records if r.get("status") == "ok"]

    @cached_property  # with repeats a bootstrap: computed once, read by every table, plot and line
    def spread(self) -> Spread | None:
        return steady_spread(self.records)


def configs(records: list[dict]) -> list[Config]:
    """The sweep's configurations in job order (repeats of one config hash together)."""
    records = sorted(records, key=lambda r: ((r.get("sweep") or {}).get("job", 0), r["id"]))
    swept = swept_keys(records)
    found: dict[str, Config] = {}
    for r in records:
        key = (r.get("repeat") or {}).get("group") or r.get("config_hash") or r["id"]
        if key not in found:
            found[key] = Config(run_name(r, swept), group_label(r, swept), framework(r), [])
        found[key].records.append(r)
    return list(found.values())


def groups(cfgs: list[Config]) -> dict[str, list[Config]]:
    out: dict[str, list[Config]] = defaultdict(list)
    for c in cfgs:
        out[c.group].append(c)
    return dict(out)


def ratio_to_best(cfgs: list[Config]) -> dict[str, float]:
    """Each configuration's steady median over the best of its group."""
    out = {}
    for members in groups(cfgs).values():
        spreads = {c.label: c.spread for c in members if c.spread}
        if spreads:
            best = min(s.median_s for s in spreads.values())
            out.update({label: s.median_s / best for label, s in spreads.items()})
    return out


def verdict_line(cfgs: list[Config]) -> str:
    """The sweep in one line: per group, the fastest framework and how far behind the others are."""
    parts = []
    for group, members in groups(cfgs).items():
        timed = sorted(((c.spread.median_s, c.framework) for c in members if c.spread))
        if not timed:
            parts.append(f"{group}: no ok run")
            continue
        best_s, best = timed[0]
        others = ", ".join(f"{fw} {s / best_s:.2f}× slower" for s, fw in timed[1:])
        failed = [c.framework for c in members if not c.spread]
        parts.append(f"{group}: {best} fastest ({best_s * 1e3:.3g} ms steady)"
                     + (f", {others}" if others else "") + (f"; not ok: {', '.join(failed)}" if failed else ""))
    single = any(c.spread and c.spread.samples == 1 for c in cfgs)
    return " · ".join(parts) + (" (single samples: no interval can be given; run.repeats=3 gives one)"
                                if single else "")


PLACES = ("ledger.", "tracking.", "progress.", "hydra.", "hydra/")  # overrides that name places and display


def _kept(items: list[str], places: bool) -> list[str]:
    """Overrides, without those naming places and display (ledger.dir=/..., progress.mode) unless `places`."""
    return [o for o in items if places or "=" not in o or not o.lstrip("+~").startswith(PLACES)]


def command(record: dict, places: bool = True) -> str:
    """The command line of one run (`places=False`: without paths, for MLflow's Source column,
    which shows the last path component)."""
    return " ".join(["python -m repro", *_kept(record.get("overrides") or [], places)])


def sweep_command(records: list[dict], places: bool = True) -> str:
    """The command that runs this sweep again: the overrides every job shares, then each swept
    key with its values in job order (rebuilt from the records alone)."""
    ordered = sorted(records, key=lambda r: (r.get("sweep") or {}).get("job", 0))
    items = [_kept(list(r.get("overrides") or []), places) for r in ordered]
    shared = [o for o in items[0] if all(o in other for other in items)] if items else []
    swept: dict[str, list[str]] = {}
    for r_items in items:
        for o in r_items:
            if o not in shared:
                key, _, val = o.partition("=")
                if val not in swept.setdefault(key, []):
                    swept[key].append(val)
    multirun = len(records) > 1 and not any(o.startswith("+exp=") for o in shared)
    args = (["-m"] if multirun else []) + shared + [f"{k}={','.join(v)}" for k, v in swept.items()]
    return " ".join(["python -m repro", *args])
