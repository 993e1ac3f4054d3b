"""A workload's runs from the ledger, as series of run medians over time.

What is read (the index picks the records, only theirs are parsed, as `repro compare` does):
- `select(ledger, ...)`: the current records of `ok` runs, by config hash (a prefix naming one),
  by `--experiment` (that experiment's runs, one workload per config hash) or by a sweep's labels
  (`--sweep ID`: each config of that sweep, named by its run name as the sweep's table names it,
  with every ok run of its config hash in the ledger); `--label` keeps the workloads of that name.
- Runs a rerun replaced are left out (report/reruns.py), and so are replays (`replay_of`: a
  recorded run measured again later, in its old code or packages) and a bisection's probes
  (`bisect_probe`): neither is the workload as it was at its time. What was left out is counted.
- `split(...)`: one series per workload, hardware class (report's `hardware_of`: CPU model, usable
  cores, GPUs) and determinism mode (`run.deterministic`): points measured on other machines
  or in the other mode are never mixed into one series; the caller says how many series there are.
Each point: the run's steady median, when it finished (its `ok` record's `created`), its commit
and dirty flag, its environment (`environment.env_hash`, else the environment's fingerprint).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from repro.ledger import Ledger, LedgerError
from repro.ledger.record import view
from repro.preflight.estimate import hardware_of
from repro.report import compare, comparison, reruns, varied

HEX = re.compile(r"[0-9a-f]+")


@dataclass(frozen=True)
class Point:
    id: str
    finished: str  # ISO time its ok record was written
    median_s: float  # results.steady_median_s
    commit: str | None
    dirty: bool | None
    env: str | None  # environment.env_hash, else environment.fingerprint
    sweep: str | None

    def to_dict(self) -> dict:
        return {"id": self.id, "finished": self.finished, "median_s": self.median_s, "commit": self.commit,
                "dirty": self.dirty, "env": self.env, "sweep": self.sweep}


@dataclass(frozen=True)
class Series:
    model: str  # "mlp/tiny"
    label: str  # the run name ("jax", "jax · batch 64")
    config_hash: str
    hardware: str  # in words
    mode: str  # "deterministic" | "default kernels"
    points: tuple[Point, ...]

    @property
    def title(self) -> str:
        return f"{self.model} · {self.label} · config {self.config_hash[:12]} · {self.hardware} · {self.mode}"

    def values(self) -> list[float]:
        return [p.median_s for p in self.points]


@dataclass
class Selection:
    workloads: dict[str, tuple[str, list[dict]]]  # config hash -> (label, its ok run records)
    left_out: dict[str, int] = field(default_factory=dict)  # why -> how many records


def hardware_words(record: dict) -> str:
    hw = hardware_of(record)
    if hw is None:
        return "hardware not recorded"
    cpu, cores, gpus = hw
    words = [str(cpu or "unknown CPU"), f"{cores} cores" if cores else "cores not recorded"]
    for name in dict.fromkeys(gpus):
        words.append(f"{gpus.count(name)}× {name}")
    return ", ".join(words)


def mode_words(record: dict) -> str:
    return "deterministic" if view(record).config.run.deterministic else "default kernels"


def _ok_entries(ledger: Ledger) -> list:
    return [e for e in ledger.head_entries(kind="run", status="ok") if e.has_config and e.config_hash]


def _load(ledger: Ledger, entries: list) -> list[dict]:
    return [r for e in entries if (r := ledger.load(e)) is not None and "config" in r]


def _named(records: list[dict]) -> dict[str, str]:
    """config hash -> its run name among `records` (the names a sweep's table gives its rows)."""
    firsts = list({view(r).config_hash: r for r in records}.values())
    keys = varied.name_keys(firsts)
    return {view(r).config_hash: varied.run_name(r, keys) for r in firsts}


def select(ledger: Ledger, config_hash: str | None = None, experiment: str | None = None,
           sweep: str | None = None, label: str | None = None) -> Selection:
    """The ok run records of the workloads asked for (exactly one of `config_hash`, `experiment`,
    `sweep`); LedgerError, naming what to give instead, where none is found."""
    entries = _ok_entries(ledger)
    if config_hash is not None:
        prefix = config_hash.strip().lower()
        if not HEX.fullmatch(prefix):
            raise LedgerError(f"{config_hash!r} is not a config hash (hex digits; `repro ledger list` shows each "
                              "run's config hash)")
        hashes = sorted({e.config_hash for e in entries if e.config_hash.startswith(prefix)})
        if not hashes:
            raise LedgerError(f"no ok run with config hash {prefix!r} in {ledger.root} (`repro ledger list` shows "
                              "each run's config hash)")
        if len(hashes) > 1:
            raise LedgerError(f"config hash {prefix!r} is ambiguous in {ledger.root}: "
                              f"{', '.join(h[:12] for h in hashes)}; give more of it")
        records = _load(ledger, [e for e in entries if e.config_hash == hashes[0]])
        names = _named(records)
    elif experiment is not None:
        records = _load(ledger, [e for e in entries if e.experiment == experiment])
        if not records:
            raise LedgerError(f"no ok runs of experiment {experiment!r} in {ledger.root} (`repro ledger list` "
                              "shows each run's experiment)")
        names = _named(records)
    else:
        own = compare.sweep_runs(ledger, sweep)
        names = _named([r for r in own if view(r).status == "ok" and view(r).config_hash] or own)
        records = _load(ledger, [e for e in entries if e.config_hash in names])
        if not records:
            raise LedgerError(f"sweep {sweep!r} has no ok runs in {ledger.root}: nothing to draw a history of")
    if label is not None:
        kept = {h for h, n in names.items() if n == label}
        if not kept:
            raise LedgerError(f"no workload labelled {label!r}; the labels here: "
                              f"{', '.join(repr(n) for n in dict.fromkeys(names.values()))}")
        records = [r for r in records if view(r).config_hash in kept]
    return _kept(records, names)


def _kept(records: list[dict], names: dict[str, str]) -> Selection:
    left_out: dict[str, int] = {}

    def drop(why: str, keep) -> list[dict]:
        out = [r for r in records if keep(r)]
        if len(out) < len(records):
            left_out[why] = left_out.get(why, 0) + len(records) - len(out)
        return out

    before = len(records)
    records = reruns.kept(records)
    if len(records) < before:
        left_out["replaced by a rerun"] = before - len(records)
    records = drop("replays", lambda r: not view(r).replay_of)
    records = drop("bisection probes", lambda r: not view(r).bisect_probe)  # bisect/probe.py marks its runs so
    records = drop("without a steady median", lambda r: _median(r) is not None)
    out: dict[str, tuple[str, list[dict]]] = {}
    for r in records:
        chash = view(r).config_hash
        out.setdefault(chash, (names.get(chash, chash[:12]), []))[1].append(r)
    return Selection(out, left_out)


def _median(record: dict) -> float | None:
    m = view(record).results.steady_median_s
    return float(m) if isinstance(m, (int, float)) and not isinstance(m, bool) and m > 0 else None


def point(record: dict) -> Point:
    rec = view(record)
    git, env = rec.git, rec.environment
    return Point(rec.id, str(rec.created), _median(record), git.commit, git.dirty,
                 env.env_hash or env.fingerprint, rec.sweep.id)


def split(selection: Selection) -> list[Series]:
    """One series per workload, hardware class and determinism mode, each in the order its runs
    finished; series in order of their workload, then the most points first."""
    out = []
    for config_hash, (label, records) in selection.workloads.items():
        groups: dict[tuple[str, str], list[dict]] = {}
        for r in records:
            groups.setdefault((hardware_words(r), mode_words(r)), []).append(r)
        for (hardware, mode), rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            rs.sort(key=lambda r: (str(view(r).created), view(r).id))
            out.append(Series(comparison.model_of(rs[0]), label, config_hash, hardware, mode,
                              tuple(point(r) for r in rs)))
    return out
