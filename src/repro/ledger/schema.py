"""What a ledger record is: a JSON Schema (draft 2020-12), and the check `repro ledger verify` runs.

`schema_version` is in every record written since it existed (1); records from before carry
none and are read as version 0, which the same schema accepts (every key it names is optional
or was always there). The schema names the keys other parts of repro read, leaves the rest
open (`additionalProperties` is not false): a new key needs no new version, a changed meaning does.

It is checked by `errors()` below, which implements the keywords this schema uses (a test holds
the schema to them), not by the `jsonschema` package: that is not in repro's environment (it
would bring four more packages) and took 0.36 s per 10,000 records, where the whole
`ledger verify` has 2 s. `repro ledger schema` prints the document for other tools.
"""

from __future__ import annotations

import re
from typing import Any, Callable

SCHEMA_VERSION = 3  # 2: environment.env_hash names the whole environment (<ledger>/envs/<hash>.txt); 3: a run names its scheduler (`scheduler`: {"name": "local"} or SLURM's job, nodes, ...)

_ID = {"type": "string", "pattern": "^[0-9a-f]{16}$"}
_OBJECT = {"type": "object"}

SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "repro ledger record",
    "description": "One file under <ledger>/<date>/<id>.json; id = the first 16 hex digits of sha256 over "
                   "the canonical JSON of the record without its id.",
    "type": "object",
    "required": ["id", "kind", "status", "created"],
    "properties": {
        "schema_version": {"type": "integer", "minimum": 1},
        "id": _ID,
        "prev": _ID,
        "replay_of": _ID,
        "superseded_by": _ID,
        "created": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}T"},
        "kind": {"type": "string", "minLength": 1},
        "status": {"type": "string", "minLength": 1},
        "config_hash": {"type": "string"},
        "repro_version": {"type": "string"},
        "overrides": {"type": "array", "items": {"type": "string"}},
        "wall_s": {"type": "number"},
        "parent": {"type": "object", "required": ["host", "pid"], "properties": {
            "host": {"type": "string"}, "pid": {"type": "integer"}, "create_time": {"type": "number"}}},
        "repeat": {"type": "object", "required": ["index", "count", "group"], "properties": {
            "index": {"type": "integer"}, "count": {"type": "integer"}, "group": {"type": "string"}}},
        "scheduler": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "minLength": 1}, "job_id": {"type": "string"},
            "attempt": {"type": "integer", "minimum": 1}, "resources": _OBJECT}},
        # kind "calibration" (repro calibrate): the host and its floor {repeats: gap}; kind "repeats"
        # (run.repeats=auto): the rounds a sweep took and why it stopped
        "host": {"type": "string"},
        "floor": _OBJECT,
        "rounds": {"type": "integer", "minimum": 0},
        "results": {"type": "object", "properties": {
            "step_time_s": {"type": "array", "items": {"type": "number"}}}},
        "environment": {"type": "object", "properties": {"env_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}},
        # kind "bisect" (repro bisect): one step of a bisection, naming the one before (`prev`); its state
        # (endpoints, positions, the confirmation, each probe's call and runs, the posterior, the result)
        # and every run it measured (`runs`, as kind "repeats" lists its own); a calibration counts the runs
        # it read (an integer, as every calibration record has written it)
        "runs": {"type": ["array", "integer"], "items": _ID, "minimum": 0},
        "bisect_probe": {"type": "object", "required": ["key", "probe", "position", "side"]},  # a bisection's run: its probe
        "bisect": {"type": "object", "required": ["key", "good", "bad", "n", "probes"], "properties": {
            "key": {"type": "string", "minLength": 1}, "good": _ID, "bad": _ID, "n": {"type": "integer", "minimum": 1},
            "probes": {"type": "array", "items": {"type": "object", "required": ["position", "outcome", "rounds", "runs"],
                                                  "properties": {"position": {"type": "integer", "minimum": 0},
                                                                 "outcome": {"type": "string", "minLength": 1},
                                                                 "rounds": {"type": "integer", "minimum": 0},
                                                                 "runs": {"type": "array", "items": _ID}}}}}},
        **{key: _OBJECT for key in ("config", "git", "code", "data", "seeds", "effective",
                                    "mlflow", "cluster", "sweep", "machine", "canary")},
    },
}

# What each top-level field means: `repro ledger schema` prints it as the field's "description", and the
# generated ledger reference (docs/reference/ledger.md) fails its build on a field without one.
FIELDS = {
    "schema_version": "the version of this schema the record was written under (none: version 0, older records)",
    "id": "the record's content hash: the first 16 hex digits of sha256 over its canonical JSON without `id`",
    "prev": "the record this one follows in its chain (a run's `started` record, a bisection's previous step)",
    "replay_of": "the run this record replays (`repro replay`)",
    "superseded_by": "the ok run that replaced a lost one (in a `supersession` record)",
    "created": "when the record was written (UTC, ISO 8601)",
    "kind": "what the record is: run, sweep, replay, calibration, repeats, bisect, supersession, ...",
    "status": "where it stands: see Statuses below",
    "config_hash": "the hash of the run's semantic config (the keys that change results; not tracking, ledger, ...)",
    "repro_version": "the repro version that wrote the record",
    "overrides": "the command-line overrides the config was composed from",
    "wall_s": "the wall time the run (or sweep) took, in seconds",
    "parent": "the process that started the run: host, pid and its create_time (tells a lost run from a running one)",
    "repeat": "a repeat of a config: its index, how many, and the group its repeats share",
    "scheduler": "what ran it: local, or SLURM's job id, attempt and resources",
    "host": "the host a calibration measured",
    "floor": "a calibration's noise floor: the smallest gap each repeat count can tell, {repeats: gap}",
    "rounds": "how many rounds a run.repeats=auto sweep took",
    "results": "what was measured: step times (step_time_s), first step, loss and its hash, parameters' hash, peak memory, throughput, MFU, ...",
    "environment": "the software it ran in: python, packages (env_hash names the whole lock), devices, variables",
    "runs": "the run records a sweep step or bisection measured (a calibration: how many runs it read)",
    "bisect_probe": "a bisection's run: which probe, position and side it measured",
    "bisect": "a bisection's state: its endpoints, commit count, every probe and its outcome",
    "config": "the run's whole config, every group and key (docs/reference/config.md)",
    "git": "the code's commit, whether the tree was dirty, the changed files and the diff's hash",
    "code": "the digest of the repro source the run executed (src_sha256)",
    "data": "the data: its name, generator, seed, batches and content hash",
    "seeds": "every seed the run drew from",
    "effective": "what the framework actually ran with, read back (threads, flags, determinism, program hash)",
    "mlflow": "where the run is in MLflow: tracking URI (credentials masked), experiment id and run id",
    "cluster": "the hosts and processes of the run: nodes, this node's rank, rendezvous port, JAX processes",
    "sweep": "the sweep the run belongs to: its id, experiment, this job's index and the job count",
    "machine": "the machine's state around the run: load, other processes' CPU, clocks, throttling",
    "canary": "the process canary: a fixed kernel timed before the run, and whether it was slow",
}
SCHEMA["properties"] = {k: {**v, "description": FIELDS[k]} if k in FIELDS else v for k, v in SCHEMA["properties"].items()}

# What each `status` means (`repro ledger list` shows a run's newest; `lost` and `running` are read, not written).
STATUSES = {
    "started": "the run began; a record with its end follows (while none does: running, lost or cannot tell)",
    "ok": "it ended and its results are recorded",
    "failed": "it ended without results: the worker raised, exited without a result, or ran past run.timeout_s",
    "oom": "it ran out of memory (run.memory_limit_gb or the device's)",
    "killed": "its process was killed by a signal, or SLURM ended it (cancelled, preempted, node failure, requeued)",
    "timeout": "SLURM ended it at the job's time limit",
    "interrupted": "Ctrl-C or SIGTERM stopped it (a sweep resumes it with run.resume=true)",
    "superseded": "it was lost, and its config was later recorded ok (`superseded_by` names that run)",
    "lost": "(read, not written) a started run whose parent process is gone from this host: it will never end",
    "running": "(read, not written) a started run whose parent process still runs on this host",
    "decided": "(bisect) the bisection named the commit; undecided, non-monotone, not reproduced: why it did not",
}

KEYWORDS = {"$schema", "title", "description", "type", "required", "properties", "items", "pattern",
            "minLength", "minimum"}
_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float),
          "boolean": bool, "null": type(None)}
_JSON_NAMES = {dict: "object", list: "array", str: "string", int: "integer", float: "number", bool: "boolean",
               type(None): "null"}


def _is(kind: str | list[str]):
    if isinstance(kind, list):  # JSON Schema's list of types: any of them
        each = [_is(k) for k in kind]
        return lambda v: any(is_kind(v) for is_kind in each)
    types = _TYPES[kind]
    if kind == "boolean":
        return lambda v: isinstance(v, bool)
    return lambda v: isinstance(v, types) and not isinstance(v, bool)


def _name(value: Any) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


def compile_schema(schema: dict) -> Callable[[Any], list[tuple[str, str]]]:
    """A checker for `schema`: value -> (where below it, what is wrong) per place the value breaks it.
    Compiled once into closures, places spelt out only on failure: verify runs it over every record."""
    checks: list[Callable[[Any], list[tuple[str, str]]]] = []
    ok = _is(schema["type"]) if "type" in schema else None
    if required := schema.get("required"):
        checks.append(lambda v: [("", f"has no {k!r}") for k in required if k not in v] if isinstance(v, dict) else [])
    if props := {k: compile_schema(sub) for k, sub in schema.get("properties", {}).items()}:
        def properties(v):
            if not isinstance(v, dict):
                return []
            return [(f".{k}{where}", what) for k in props.keys() & v.keys() for where, what in props[k](v[k])]
        checks.append(properties)
    if "items" in schema:
        item = compile_schema(schema["items"])
        checks.append(lambda v: [(f"[{i}]{where}", what) for i, x in enumerate(v) for where, what in item(x)]
                      if isinstance(v, list) else [])
    if min_length := schema.get("minLength"):
        checks.append(lambda v: [("", f"is shorter than {min_length}")] if isinstance(v, str) and len(v) < min_length else [])
    if pattern := schema.get("pattern"):
        match = re.compile(pattern).search
        checks.append(lambda v: [] if not isinstance(v, str) or match(v) else [("", f"{v[:40]!r} does not match {pattern}")])
    if (minimum := schema.get("minimum")) is not None:
        checks.append(lambda v: [("", f"is {v}, below {minimum}")] if isinstance(v, (int, float)) and v < minimum else [])

    def check(value: Any) -> list[tuple[str, str]]:
        if ok and not ok(value):
            wanted = schema["type"] if isinstance(schema["type"], str) else " or ".join(schema["type"])
            return [("", f"is a JSON {_name(value)}, not {wanted}")]
        return [e for c in checks for e in c(value)] if checks else []
    return check


_check_record = compile_schema(SCHEMA)


def errors(record: Any) -> list[str]:
    """Where `record` breaks the schema, one line each (empty: it conforms)."""
    return [f"record{where} {what}" for where, what in _check_record(record)]
