"""A profiler's trace reduced to one step's time by category, and its top ops.

Input: a Chrome-trace JSON file (plain or gzipped), the format both torch.profiler
(`export_chrome_trace`) and jax.profiler (`create_perfetto_trace=True`) write, with each
profiled step wrapped in a `repro_step_<i>` annotation. Why not the `perfetto` package's
trace processor: its Python API fetches a `trace_processor_shell` binary on first use,
which an offline machine cannot; nor XProf's converters: they read only XLA's xplane.pb,
not torch's traces. Both traces are plain JSON with `ph: "X"` complete events, so a few
lines of Python read them.

Per step window: every op's *self* time (its duration less that of the ops nested in it,
on its thread) is put in its category (repro.profile.categories). Where ops run on several
threads at once (XLA's CPU thunks), the categories are scaled down to the time some op was
running (the union of their intervals). The rest of the window, when no op runs, is
"host gaps". So a step's categories always sum to the step's profiled wall time.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.profile.categories import CATEGORIES, HOST, OPTIMIZER, OPTIMIZER_SCOPES, categorize, op_key
from repro.profile.hlo import Instruction

STEP_PREFIX = "repro_step_"
TOP_OPS = 15
TORCH_OP_CATS = {"cpu_op", "kernel", "gpu_memcpy", "gpu_memset"}
TORCH_DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
TORCH_OP_NAMES = ("## Call CompiledFxGraph", "triton_", "cpp_fused_")
DEVICE_ANNOTATION = "gpu_user_annotation"  # a record_function range as torch's profiler copies it onto a GPU stream


@dataclass(frozen=True)
class Event:
    """One complete ("X") event of a Chrome trace, as this reduction reads it: times in µs (floats), what
    XLA's thunks name (`hlo_op`) and torch's ops' input shapes (`dims`) taken out of its `args`."""

    name: Any = ""
    cat: Any = None
    ph: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None
    args: Any = None
    hlo_op: str | None = None  # args' "hlo_op": the XLA instruction a thunk ran
    dims: Any = None  # args' "Input Dims" (torch, record_shapes=True)

    @property
    def end(self) -> float:
        return self.ts + self.dur


_FIELDS = frozenset(f.name for f in dataclasses.fields(Event)) - {"hlo_op", "dims"}


def load(path: str | Path) -> list[dict]:
    """The trace's events (Chrome trace JSON: a {"traceEvents": [...]} object or a bare list)."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def events(path: str | Path) -> list[Event]:
    """The trace's complete events (ph "X" with a start and a duration), typed."""
    out = []
    for raw in load(path):
        e = Event(**{k: v for k, v in raw.items() if k in _FIELDS})
        if e.ph == "X" and e.ts is not None and e.dur is not None:
            args = e.args or {}
            out.append(dataclasses.replace(e, ts=float(e.ts), dur=float(e.dur), hlo_op=args.get("hlo_op"),
                                           dims=args.get("Input Dims")))
    return out


def _windows(events: list[Event]) -> list[tuple[float, float]]:
    """One (start, end) per profiled step: its host-side annotation. On CUDA, torch's profiler also
    puts each `record_function` range on the GPU's timeline (cat "gpu_user_annotation", spanning
    only the kernels of that range); that copy is not a step of its own (seen on an H100, torch 2.11:
    10 windows for 5 steps)."""
    marks = sorted((e.ts, e.end) for e in events if str(e.name).startswith(STEP_PREFIX) and e.cat != DEVICE_ANNOTATION)
    if not marks:
        raise ValueError(f"no '{STEP_PREFIX}N' step annotations in the trace: it was not made by repro.profile")
    return marks


def _is_op(family: str, e: Event, device: bool) -> bool:
    if family == "xla":
        return e.hlo_op is not None
    if device:
        return e.cat in TORCH_DEVICE_CATS
    name = str(e.name)  # autograd nodes, Python and profiler scopes: host time
    return (e.cat in TORCH_OP_CATS and name.startswith("aten::")) or name.startswith(TORCH_OP_NAMES)


def _self_times(events: list[Event]) -> list[tuple[Event, float, list[str]]]:
    """(event, self time, enclosing event names) for the complete events of one thread."""
    events = sorted(events, key=lambda e: (e.ts, -e.dur))
    out, stack = [], []  # stack: [event, end, children's time]
    for e in events:
        while stack and stack[-1][1] <= e.ts:
            stack.pop()
        if stack:
            stack[-1][2][0] += e.dur
        entry = [e, e.end, [0.0], [s[0].name for s in stack]]
        stack.append(entry)
        out.append(entry)
    return [(e, max(0.0, e.dur - child[0]), parents) for e, _, child, parents in out]


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _instruction(e: Event, hlo: dict[str, Instruction]) -> Instruction | None:
    """The XLA instruction an event ran (by its hlo_op, else its name), where the module names it."""
    return hlo.get(e.hlo_op if e.hlo_op is not None else e.name)


def _shape(family: str, e: Event, hlo: dict[str, Instruction]) -> str:
    if family == "xla":
        return inst.shape if (inst := _instruction(e, hlo)) else ""
    return " ".join(str(d).replace(" ", "") for d in e.dims if d) if e.dims else ""


@dataclass(frozen=True)
class OpRow:
    """One op (name, shape, category) of the median step: its ms and calls; `top_ops` stores these fields."""

    op: str
    shape: str
    category: str
    ms: float
    count: float


def _named(ops: list[tuple[tuple[str, str], list[float]]]) -> dict[str, dict]:
    """{op name: its ms, count and category} (the record's `ops`); a name found in two categories
    keeps both, the second named with its category."""
    out: dict[str, dict] = {}
    for (name, category), (ms, count) in ops:
        out[name if name not in out else f"{name} ({category})"] = {
            "ms": round(ms, 4), "count": round(count, 2), "category": category}
    return out


def reduce(path: str | Path, family: str, hlo: dict[str, Instruction] | None = None) -> dict:
    """{"steps", "step_ms" (the median profiled step's wall time), "step_ms_each",
    "categories_ms" (that step's, summing to step_ms), "top_ops" and "ops" (that same step's: a
    category's ops add up to its time)} of one trace: the record's `results.profile` (read back
    typed as ledger/record.py `Profile`).
    `family`: "torch" or "xla"; `hlo`: repro.profile.hlo.instructions() of the module XLA ran."""
    hlo = hlo or {}
    complete = events(path)
    windows = _windows(complete)
    device = family == "torch" and any(e.cat in TORCH_DEVICE_CATS for e in complete)
    by_thread: dict[tuple, list[Event]] = defaultdict(list)
    for e in complete:
        if not str(e.name).startswith(STEP_PREFIX):
            by_thread[(e.pid, e.tid)].append(e)
    timed = [item for thread in by_thread.values() for item in _self_times(thread)]
    cats_each, ops_each = [], []
    for w0, w1 in windows:
        in_window = [(e, self_t, parents) for e, self_t, parents in timed
                     if w0 <= e.ts < w1 and _is_op(family, e, device)
                     or (w0 <= e.ts < w1 and family == "torch" and not device
                         and OPTIMIZER_SCOPES.match(e.name))]  # on a GPU the scope's kernels count, not it
        cats = dict.fromkeys(CATEGORIES, 0.0)
        ops: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0])
        spans = []
        for e, self_t, parents in in_window:
            name = e.name
            info = _instruction(e, hlo)
            optimizer = bool(info and info.optimizer) or any(OPTIMIZER_SCOPES.match(p) for p in parents) \
                or bool(OPTIMIZER_SCOPES.match(name))
            category = categorize(family, name, inside=set(info.inside if info else ()), optimizer=optimizer)
            cats[category] += self_t
            spans.append((e.ts, e.end))
            op = ops[(op_key(name), _shape(family, e, hlo), category)]  # an optimizer scope's own time too
            op[0] += self_t
            op[1] += 1
        busy = sum(cats.values())
        running = _union(spans)
        scale = running / busy if busy > running > 0 else 1.0  # ops on several threads at once: their share
        cats = {k: v * scale for k, v in cats.items()}
        cats[HOST] = max(0.0, (w1 - w0) - sum(cats.values()))
        cats_each.append({k: v / 1e3 for k, v in cats.items()})
        ops_each.append({k: (ms * scale / 1e3, count) for k, (ms, count) in ops.items()})
    n = len(windows)
    step_each = [(w1 - w0) / 1e3 for w0, w1 in windows]
    # The median step stands for them all (the first profiled step can carry the profiler's start):
    # its categories and its ops, so that a category's ops add up to the category.
    median = sorted(range(n), key=lambda k: step_each[k])[n // 2]
    rows = [OpRow(key, shape, cat, ms, count) for (key, shape, cat), (ms, count) in ops_each[median].items()]
    rows.sort(key=lambda r: -r.ms)
    by_key: dict[tuple, list[float]] = {}
    for r in rows:  # per op name and category, all shapes together: [ms, count]
        k = by_key.setdefault((r.op, r.category), [0.0, 0.0])
        k[0] += r.ms
        k[1] += r.count
    return {
        "steps": n,
        "step_ms": step_each[median],
        "step_ms_each": step_each,
        "categories_ms": cats_each[median],
        "top_ops": [dataclasses.asdict(dataclasses.replace(r, ms=round(r.ms, 4), count=round(r.count, 2)))
                    for r in rows[:TOP_OPS]],
        "categories_ops": {c: round(sum(r.count for r in rows if r.category == c), 2) for c in CATEGORIES
                           if c != HOST},  # ops (kernels, thunks) per step
        "ops": _named(sorted(by_key.items(), key=lambda kv: -kv[1][0])[:60]),
        "ops_of": "median step",  # ops and categories of the same step (older records: ops averaged over all)
    }
