"""One stored record, read one way: a typed view over a ledger record's dict.

Records leave the worker typed (config/schema.py) and are stored as JSON; `view(record)` reads one
back as a `Record`: its `config` a `Config` again, read tolerantly by the rule the config hash keeps
(config/spec.py `ADDED_AT_DEFAULT`): a key the record lacks (written before the key existed) takes
the schema's default, so no reader restates a default; a key the schema does not know (written by a
newer repro, or by hand) is kept aside in `unknown_keys` and named, never dropped silently. The
blocks readers use most (`repeat`, `results`, `sweep`, `scheduler`, `calibration`) are small frozen dataclasses; `raw` is the
dict, for what is not typed yet.

A record whose typed read fails (a group that is not an object, a value of the wrong type) raises
`RecordError` naming the record's id and the field. The view is memoized per record dict
(`view`): a report reads thousands of records, each config typed once (read again only where a
reader changed the dict's config since).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping

from repro.config import schema
from repro.config.schema import Config


class RecordError(ValueError):
    """A record whose typed read fails: names the record's id and the field."""

    def __init__(self, record_id: str, field: str, why: str):
        self.record_id, self.field = record_id, field
        super().__init__(f"record {record_id}: {field} {why}; fix or supersede the record "
                         f"(`repro ledger show {record_id}` prints it)")


_GROUPS = {f.name: f.default_factory for f in dataclasses.fields(Config) if f.name != "model"}


def _rule(hint: Any) -> tuple[tuple[type, ...] | None, bool, bool]:
    """A schema field's type as (types a value may be, None: any; None allowed; bool refused): bool is
    no number, an int is a float."""
    if hint is Any:
        return None, True, False
    args = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
    none_ok, types = type(None) in args, []
    for h in (a for a in args if a is not type(None)):
        if h is Any:
            return None, True, False
        origin = typing.get_origin(h) or h
        types += [int, float] if origin is float else [origin]
    return tuple(types), none_ok, bool(set(types) & {int, float}) and bool not in types


@functools.lru_cache(maxsize=None)
def _rules(group_type: type) -> dict[str, tuple]:
    """{field: its rule} of one config group (the schema's type hints, read once)."""
    return {k: (h, *_rule(h)) for k, h in typing.get_type_hints(group_type, vars(schema)).items()}


def _fits(rule: tuple, value: Any) -> bool:
    _, types, none_ok, no_bool = rule
    if value is None:
        return none_ok
    return types is None or (isinstance(value, types) and not (no_bool and isinstance(value, bool)))


def read_config(d: Any, record_id: str = "?") -> tuple[Config, tuple[str, ...]]:
    """A record's `config` as a `Config` and the dotted keys the schema does not know (kept aside,
    in the record's order). Keys the dict lacks take the schema's default; a group that is not an
    object or a value of the wrong type is a `RecordError` naming `record_id` and the key."""
    if d is None:
        d = {}
    if not isinstance(d, dict):
        raise RecordError(record_id, "config", f"is {type(d).__name__}, not an object")
    unknown: list[str] = []
    groups = {}
    for name, node in d.items():
        if name == "model":
            continue
        group_type = _GROUPS.get(name)
        if group_type is None:
            unknown.append(name)
            continue
        if not isinstance(node, dict):
            raise RecordError(record_id, f"config.{name}", f"is {node!r}, not an object")
        rules, known = _rules(group_type), {}
        for key, value in node.items():
            rule = rules.get(key)
            if rule is None:
                unknown.append(f"{name}.{key}")
            elif not _fits(rule, value):
                raise RecordError(record_id, f"config.{name}.{key}", f"is {value!r}, not {rule[0]}")
            else:
                known[key] = value
        groups[name] = group_type(**known)
    model = d.get("model")
    if model is not None and not isinstance(model, dict):
        raise RecordError(record_id, "config.model", f"is {model!r}, not an object")
    try:
        typed_model = schema.model_from_dict(model or {})
    except TypeError as e:  # a key that is no identifier
        raise RecordError(record_id, "config.model", f"cannot be read ({e})") from None
    return Config(model=typed_model, **groups), tuple(unknown)


@dataclass(frozen=True)
class Repeat:
    """A repeated run's place (loop/sweep.py `repeat_field`): its round, its config's group, auto's
    plan (`{"max": ...}`; None for a fixed count) and whether a rerun set it aside."""

    index: int | None = None  # None: not a run of a round
    count: int = 1  # the rounds planned
    group: str = ""
    auto: Mapping | None = None
    discarded: bool = False
    rerun: int = 0  # a rerun's attempt (0: the round's first)
    replaces: tuple[str, ...] = ()  # the ids of the runs a rerun replaces


@dataclass(frozen=True)
class Results:
    """What a run measured, as far as readers use it typed (the rest: `raw["results"]`)."""

    steady_median_s: float | None = None
    steady_median_sd_s: float | None = None
    steady_steps: int | None = None


@dataclass(frozen=True)
class Sweep:
    """The sweep a run belongs to: its id and the run's job number in it."""

    id: str | None = None
    job: int = 0


@dataclass(frozen=True)
class Calibration:
    """A `repro calibrate` run's place (calibrate.py): its trial, its label and the gap injected into it (None: none)."""

    trial: int | None = None
    label: str | None = None
    gap: float | None = None


@dataclass(frozen=True)
class Scheduler:
    """Where the scheduler placed a run (job/scheduler.py): its name (local, slurm) and node, where recorded."""

    name: str = ""
    node: str = ""


def _block(record: dict, key: str) -> dict:
    node = record.get(key)
    if node is None:
        return {}
    if not isinstance(node, dict):
        raise RecordError(record.get("id", "?"), key, f"is {node!r}, not an object")
    return node


def _snapshot(config: Any) -> Any:
    """A copy of a config dict two levels deep (groups and their keys): equal to it until a key changes."""
    return {g: dict(n) if isinstance(n, dict) else n for g, n in config.items()} if isinstance(config, dict) else config


class Record:
    """A typed view over one stored record (`raw`, the dict, is never changed). The typed config is
    read once, and again only if the dict's config changed since (a reader that edits a record it
    holds: the snapshot it was read from no longer equals it); the blocks are read on each access."""

    def __init__(self, raw: dict):
        self.raw = raw
        self._read: tuple | None = None  # (snapshot of raw["config"], Config, unknown keys)

    @property
    def id(self) -> str:
        return self.raw.get("id", "?")

    def _typed(self) -> tuple:
        config = self.raw.get("config")
        if self._read is None or self._read[0] != config:
            self._read = (_snapshot(config), *read_config(config, self.id))
        return self._read

    @property
    def config(self) -> Config:
        """The record's config, typed; keys it lacks at the schema's defaults."""
        return self._typed()[1]

    @property
    def unknown_keys(self) -> tuple[str, ...]:
        """The config's dotted keys the schema does not know: kept in `raw`, named here."""
        return self._typed()[2]

    def recorded(self, group: str) -> bool:
        """Whether the record's config holds `group` itself (else its values are the schema's defaults)."""
        return group in (self.raw.get("config") or {})

    @property
    def repeat(self) -> Repeat:
        rep = _block(self.raw, "repeat")
        return Repeat(index=rep.get("index"), count=rep.get("count", 1), group=rep.get("group") or "",
                      auto=rep.get("auto") or None,
                      discarded=bool(rep.get("discarded")), rerun=rep.get("rerun") or 0,
                      replaces=tuple(rep.get("replaces") or ()))

    @property
    def results(self) -> Results:
        res = _block(self.raw, "results")
        return Results(steady_median_s=res.get("steady_median_s"), steady_median_sd_s=res.get("steady_median_sd_s"),
                       steady_steps=res.get("steady_steps"))

    @property
    def calibration(self) -> Calibration:
        cal = _block(self.raw, "calibration")
        label = cal.get("label")
        return Calibration(trial=cal.get("trial"), label=None if label is None else str(label), gap=cal.get("gap"))

    @property
    def scheduler(self) -> Scheduler:
        sch = _block(self.raw, "scheduler")
        return Scheduler(name=sch.get("name") or "", node=sch.get("node") or "")

    @property
    def sweep(self) -> Sweep:
        sw = _block(self.raw, "sweep")
        return Sweep(id=sw.get("id"), job=sw.get("job", 0))


_VIEWS: OrderedDict[int, tuple[dict, Record]] = OrderedDict()
_MAX_VIEWS = 1 << 16


def view(record: dict | Record) -> Record:
    """The typed view of a record dict, made once per dict (a report reads the same records in many
    places); a `Record` is returned as it is."""
    if isinstance(record, Record):
        return record
    key = id(record)
    hit = _VIEWS.get(key)
    if hit is not None and hit[0] is record:
        return hit[1]
    made = Record(record)
    _VIEWS[key] = (record, made)  # the dict is held, so its id is not reused while the entry lives
    if len(_VIEWS) > _MAX_VIEWS:
        _VIEWS.popitem(last=False)
    return made
