"""One stored record, read one way: a typed view over a ledger record's dict.

Records leave the worker typed (config/schema.py) and are stored as JSON; `view(record)` reads one
back as a `Record`: its `config` a `Config` again, read tolerantly by the rule the config hash keeps
(config/spec.py `ADDED_AT_DEFAULT`): a key the record lacks (written before the key existed) takes
the schema's default, so no reader restates a default; a key the schema does not know (written by a
newer repro, or by hand) is kept aside in `unknown_keys` and named, never dropped silently. The
blocks readers use (`repeat`, `results` with its `profile` (its ops `Op`) and `compile` (its
`LazyState`), `sweep`, `scheduler`, `calibration`, `machine`, `environment`, `git`, `wall_split`,
`bisect`, a replay's `replay_verdict` with its `Timing`s) are small frozen dataclasses, each default
written once, in its dataclass; `raw` is the dict, for what is not typed yet.

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

from repro import blocks
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
    position: int | None = None  # the run's place in its round's order (None: an older record, not recorded)
    side_by_side: int = 0  # runs launched at a time on one host (joblib n_jobs > 1; 0: not recorded)


@dataclass(frozen=True)
class Op:
    """One op of a profiled step (results.profile.ops): its ms and calls per step, and its category."""

    ms: float = 0.0
    count: float = 0.0
    category: str | None = None  # None: not recorded


@dataclass(frozen=True)
class Profile:
    """A profiled run's steps (results.profile, run.profile): the median step's time by category and op."""

    profiler: str = ""
    step_ms: float | None = None
    unprofiled_ms: float | None = None  # the step just before, not profiled
    categories_ms: Mapping | None = None  # None: the profiler gave counters only
    categories_ops: Mapping = dataclasses.field(default_factory=dict)
    ops: Mapping = dataclasses.field(default_factory=dict)  # {op name: Op}
    ops_of: str | None = None  # what `ops` covers ("median step")
    executions_per_step: float | None = None  # counters only (torch_xla): graph executions per step
    compiles_during: int | None = None  # counters only: compilations during the profiled steps


@dataclass(frozen=True)
class LazyState:
    """The optimizer state a step created lazily (results.compile.lazy_optimizer_state): its tensors, by name."""

    tensors: int = 0
    names: Mapping = dataclasses.field(default_factory=dict)  # {state name: tensors}


@dataclass(frozen=True)
class Compile:
    """What the framework compiled (results.compile): JAX's trace/lower and compile, torch_xla's XLA
    compiles per step, dynamo's graphs, the optimizer state created lazily."""

    trace_lower_s: float | None = None
    compile_s: float | None = None
    xla_compile_s: float | None = None
    xla_compiles_per_step: list | None = None
    lazy_optimizer_state: LazyState = dataclasses.field(default_factory=LazyState)
    optimizer_state_at_compile: Any = None  # None: a record from before the counter
    dynamo_compiles: int | None = None
    build: Mapping | None = None


@dataclass(frozen=True)
class Results:
    """What a run measured, as far as readers use it typed (the rest: `raw["results"]`)."""

    steps: int | None = None  # the steps measured (run.steps=auto: the count it resolved)
    steady_median_s: float | None = None
    steady_median_sd_s: float | None = None
    steady_steps: int | None = None
    steady_mean_s: float | None = None
    steady_p10_s: float | None = None
    steady_p90_s: float | None = None
    first_step_s: float | None = None
    second_step_s: float | None = None
    step_time_s: list = dataclasses.field(default_factory=list)
    loss: list = dataclasses.field(default_factory=list)
    final_loss: float | None = None
    loss_sha256: str | None = None
    params_sha256: str | None = None
    init_params_sha256: str | None = None
    samples_per_s: float | None = None
    mfu: float | None = None
    achieved_tflops: float | None = None
    test_accuracy: float | None = None
    param_count: int | None = None
    peak_memory: Mapping = dataclasses.field(default_factory=dict)  # {"bytes", ...}
    sharding: Mapping = dataclasses.field(default_factory=dict)  # a sharded run's layout: param_bytes_per_device, ...
    compile_cache: Mapping = dataclasses.field(default_factory=dict)  # {"state": "warm" | "cold", ...}
    ir_ops: Mapping = dataclasses.field(default_factory=dict)
    setup: Mapping = dataclasses.field(default_factory=dict)
    raw: Mapping = dataclasses.field(default_factory=dict, repr=False)

    @property
    def profile(self) -> Profile | None:
        """The profiled steps; None where the run was not profiled."""
        node = self.raw.get("profile")
        if not node:
            return None
        profile = _fill(Profile, node)
        return dataclasses.replace(profile, ops={name: _fill(Op, op) for name, op in profile.ops.items()})

    @property
    def compile(self) -> Compile:
        info = _fill(Compile, self.raw.get("compile") or {})
        lazy = info.lazy_optimizer_state  # the stored object, or the default where the record has none
        return info if isinstance(lazy, LazyState) else dataclasses.replace(info, lazy_optimizer_state=_fill(LazyState, lazy))


@dataclass(frozen=True)
class Machine:
    """The machine's state around a run (job/machine.py): its host, its load and other processes' share of the CPU."""

    host: str | None = None
    cores: int | None = None
    threads: int | None = None
    processes: int | None = None  # the run's processes on this host
    other_cpu_share: float | None = None
    own_cpu_share: float | None = None
    steal_share: float | None = None
    load_before: list | None = None
    load_after: list | None = None
    window_s: float | None = None
    window_from: str | None = None  # "worker start" where the timed loop was too short to read alone
    pinned: Mapping | None = None  # {who: [cores]} where the run and its parent were pinned (worker/pinning.py)
    placement: Mapping = dataclasses.field(default_factory=dict)  # where the OS ran the worker: migrations, ...
    raw: Mapping = dataclasses.field(default_factory=dict, repr=False)

    @property
    def gpus_before(self) -> tuple[GpuState, ...]:
        """Each GPU right before the first measured step (none on a CPU run or without the vendor's tool)."""
        return tuple(_fill(GpuState, g) for g in self.raw.get("gpus_before") or () if isinstance(g, Mapping))


@dataclass(frozen=True)
class GpuState:
    """One GPU as the vendor's telemetry sampled it around a run (hardware.py: NVIDIA's nvidia-smi query,
    its keys with `_` for `.`): the record's `machine.gpus_before` / `gpus_after`."""

    index: int | None = None
    utilization_gpu: float | None = None
    clocks_sm: float | None = None
    clocks_mem: float | None = None
    clocks_max_sm: float | None = None
    temperature_gpu: float | None = None
    other_processes: list = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class Environment:
    """The software a run ran in: its fingerprint, the whole lock's hash and the parts readers compare."""

    fingerprint: str | None = None
    env_hash: str | None = None
    packages: Mapping = dataclasses.field(default_factory=dict)
    python: Mapping = dataclasses.field(default_factory=dict)
    os: Mapping = dataclasses.field(default_factory=dict)
    cpu: Mapping = dataclasses.field(default_factory=dict)
    gpus: list = dataclasses.field(default_factory=list)
    framework: Mapping = dataclasses.field(default_factory=dict)
    variables: Mapping = dataclasses.field(default_factory=dict)
    raw: Mapping = dataclasses.field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Effective:
    """What the framework ran with, read back by the backend (threads, flags, determinism state, the compiled
    program's hash); `raw` for the rest."""

    determinism: Mapping | None = None
    platform: str | None = None
    program_sha256: str | None = None
    raw: Mapping = dataclasses.field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Canary:
    """The process canary (job/canary.py): a fixed kernel timed before the run, and whether it was slow."""

    slow: bool | None = None
    raw: Mapping = dataclasses.field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Data:
    """The data a run read (data/): its name, the generator and seed of synthetic batches, their hash, or the
    DVC-tracked files' md5s."""

    name: str | None = None
    generator: str | None = None
    seed: int | None = None
    batches: int | None = None
    sha256: str | None = None
    md5: Mapping = dataclasses.field(default_factory=dict)  # {path: md5} of DVC-tracked files
    raw: Mapping = dataclasses.field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Git:
    """The code a run ran: its commit, whether the tree was dirty, and the diff's hash."""

    commit: str | None = None
    dirty: bool | None = None
    diff_sha256: str | None = None
    changed: list = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class WallSplit:
    """Where a job's wall went (job/wall_split.py `split`): its parts in seconds, what they do not cover, and the
    measured steps' window on the host's clock."""

    parts: Mapping = dataclasses.field(default_factory=dict)
    measured_s: float | None = None
    rest_s: float = 0.0
    rest: str = ""
    window: list | None = None
    first_step: Mapping | None = None  # trace_lower_s, compile_s, execute_s
    build: Mapping | None = None  # JAX: what its build compiled


@dataclass(frozen=True)
class Sweep:
    """The sweep a run belongs to: its id and the run's job number in it."""

    id: str | None = None
    job: int = 0
    jobs: int | None = None
    experiment: str = ""
    swept: tuple[str, ...] = ()  # the config keys the sweep varied
    multirun: bool = False  # a Hydra multirun (its runs share an MLflow parent)


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


def _fill(block_type: type, node: Mapping) -> Any:
    """A typed block from a stored one: each field the node holds (not None), the rest at the block's
    defaults (written once, in its dataclass), the whole node as `raw` where the block keeps it (unlike
    blocks.typed, a stored null reads as the default: an old record's null and a missing key are one)."""
    names = blocks.names(block_type)
    known = {k: v for k, v in node.items() if k in names and v is not None}
    if "raw" in names:
        known["raw"] = node
    return block_type(**known)


@dataclass(frozen=True)
class Timing:
    """One timing of a replay against its original (replay.py `timing_ratios`): seconds then and now."""

    recorded: float
    now: float
    ratio: float
    within: bool  # within the replay's timing tolerance


@dataclass(frozen=True)
class ReplayVerdict:
    """A replay's verdict (a record of kind "replay", replay.py): the run replayed, the replay's run, the reasons,
    the timings against the original and each part's provenance (restored, same, differs)."""

    of: str = ""
    replay: str = ""
    reasons: tuple[str, ...] = ()
    timing: Mapping = dataclasses.field(default_factory=dict)  # {timing key: Timing}
    parts: Mapping = dataclasses.field(default_factory=dict)
    loss_rtol: float | None = None
    timing_tolerance: float | None = None


@dataclass(frozen=True)
class Call:
    """One call of a bisection (bisect/decide.py): a probe of a position, or the confirmation of BAD against GOOD;
    its outcome, the ratio to GOOD with its interval at `level`, the rounds and the runs it took."""

    position: int | None = None
    label: str = ""
    outcome: str = ""
    ratio: float | None = None
    lo: float | None = None
    hi: float | None = None
    level: float = 0.95  # the interval's confidence (an early look spends less alpha: a wider interval)
    rounds: int = 0
    runs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Bisect:
    """A bisection's state (kind "bisect", bisect/record.py): its endpoints, positions, calls, posterior and result."""

    key: str = ""
    good: str = ""
    bad: str = ""
    n: int = 0  # positions 0 (GOOD) to n (BAD)
    threshold: float | None = None
    cap: int | None = None
    confirmation: Call | None = None
    probes: tuple[Call, ...] = ()
    posterior: tuple[float, ...] = ()
    positions: tuple[Mapping, ...] = ()  # {"position", "label", ...}
    ranges: tuple[Mapping, ...] = ()  # the commits of each repository between the endpoints
    result: Mapping = dataclasses.field(default_factory=dict)  # the culprit (position, label, ratio, ...), or why none
    reason: str = ""
    spent_s: float = 0.0
    sweeps: tuple[str, ...] = ()  # the sweeps its probes ran as
    rates: Mapping = dataclasses.field(default_factory=dict)  # the search's error rates (bisect/search.py Rates)

    @property
    def culprit(self) -> Call | None:
        """The result as a call where it names a position (its ratio to GOOD, interval and level); None where none."""
        return _call(self.result) if "position" in self.result else None


def _call(node: Mapping) -> Call:
    call = _fill(Call, node)
    return dataclasses.replace(call, runs=tuple(call.runs)) if not isinstance(call.runs, tuple) else call


def _bisect(node: Mapping) -> Bisect:
    b = _fill(Bisect, {k: v for k, v in node.items() if k not in ("confirmation", "probes")})
    confirmation = node.get("confirmation")
    return dataclasses.replace(b, confirmation=_call(confirmation) if confirmation else None,
                               probes=tuple(_call(p) for p in node.get("probes") or ()),
                               posterior=tuple(b.posterior), positions=tuple(b.positions), ranges=tuple(b.ranges),
                               sweeps=tuple(b.sweeps))


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
                      replaces=tuple(rep.get("replaces") or ()), position=rep.get("position"),
                      side_by_side=rep.get("side_by_side") or 0)

    @property
    def results(self) -> Results:
        return _fill(Results, _block(self.raw, "results"))

    @property
    def machine(self) -> Machine:
        return _fill(Machine, _block(self.raw, "machine"))

    @property
    def environment(self) -> Environment:
        return _fill(Environment, _block(self.raw, "environment"))

    @property
    def canary(self) -> Canary:
        return _fill(Canary, _block(self.raw, "canary"))

    @property
    def data(self) -> Data:
        return _fill(Data, _block(self.raw, "data"))

    @property
    def effective(self) -> Effective | None:
        """What the framework ran with, read back (backends' `effective`); None where the record has none."""
        node = self.raw.get("effective")
        return None if node is None else _fill(Effective, _block(self.raw, "effective"))

    @property
    def overrides(self) -> tuple[str, ...]:
        """The command-line overrides the config was composed from."""
        return tuple(self.raw.get("overrides") or ())

    @property
    def host(self) -> str | None:
        """The host a calibration measured (kind "calibration")."""
        return self.raw.get("host")

    @property
    def git(self) -> Git:
        return _fill(Git, _block(self.raw, "git"))

    @property
    def wall_split(self) -> WallSplit | None:
        """Where the job's wall went; None where it was not split (a worker that never started, an older record)."""
        node = _block(self.raw, "wall_split")
        return _fill(WallSplit, node) if node else None

    @property
    def status(self) -> str:
        return self.raw.get("status", "")

    @property
    def kind(self) -> str:
        return self.raw.get("kind", "")

    @property
    def created(self) -> str:
        return self.raw.get("created", "")

    @property
    def config_hash(self) -> str | None:
        return self.raw.get("config_hash")

    @property
    def wall_s(self) -> float | None:
        return self.raw.get("wall_s")

    @property
    def bisect(self) -> Bisect:
        return _bisect(_block(self.raw, "bisect"))

    @property
    def runs(self) -> tuple[str, ...]:
        """The run records a sweep step or a bisection measured (a calibration's count is not a list: ())."""
        runs = self.raw.get("runs")
        return tuple(runs) if isinstance(runs, list) else ()

    @property
    def prev(self) -> str | None:
        """The record this one follows in its chain (a status change names the earlier one); None for a chain's first."""
        return self.raw.get("prev")

    @property
    def replay_verdict(self) -> ReplayVerdict:
        """A replay verdict's fields (kind "replay"); the defaults on any other record."""
        v = _fill(ReplayVerdict, self.raw)
        return dataclasses.replace(v, reasons=tuple(v.reasons),
                                   timing={key: _fill(Timing, t) for key, t in v.timing.items()})

    @property
    def code(self) -> Mapping:
        """What names the run's code beside git (its source hash, the sweep snapshot's id); {} where none."""
        return _block(self.raw, "code")

    @property
    def replay_of(self) -> str | None:
        """The run this record replays (repro replay); None for any other."""
        return self.raw.get("replay_of")

    @property
    def bisect_probe(self) -> Mapping | None:
        """A bisection's run: its probe, position and side (bisect/probe.py); None for any other run."""
        return self.raw.get("bisect_probe")

    @property
    def error(self) -> Mapping:
        """What ended a run that did not end ok (its reason, kind, traceback); {} where none was recorded."""
        return _block(self.raw, "error")

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
        return Sweep(id=sw.get("id"), job=sw.get("job", 0), jobs=sw.get("jobs"), experiment=sw.get("experiment") or "",
                     swept=tuple(sw.get("swept") or ()), multirun=bool(sw.get("multirun")))


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
