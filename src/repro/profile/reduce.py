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

import gzip
import json
from collections import defaultdict
from pathlib import Path

from repro.profile.categories import CATEGORIES, HOST, OPTIMIZER, OPTIMIZER_SCOPES, categorize, op_key

STEP_PREFIX = "repro_step_"
TOP_OPS = 15
TORCH_OP_CATS = {"cpu_op", "kernel", "gpu_memcpy", "gpu_memset"}
TORCH_DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
TORCH_OP_NAMES = ("## Call CompiledFxGraph", "triton_", "cpp_fused_")
DEVICE_ANNOTATION = "gpu_user_annotation"  # a record_function range as torch's profiler copies it onto a GPU stream


def load(path: str | Path) -> list[dict]:
    """The trace's events (Chrome trace JSON: a {"traceEvents": [...]} object or a bare list)."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def _windows(events: list[dict]) -> list[tuple[float, float]]:
    """One (start, end) per profiled step: its host-side annotation. On CUDA, torch's profiler also
    puts each `record_function` range on the GPU's timeline (cat "gpu_user_annotation", spanning
    only the kernels of that range); that copy is not a step of its own (seen on an H100, torch 2.11:
    10 windows for 5 steps)."""
    marks = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith(STEP_PREFIX)
                   and e.get("cat") != DEVICE_ANNOTATION)
    if not marks:
        raise ValueError(f"no '{STEP_PREFIX}N' step annotations in the trace: it was not made by repro.profile")
    return marks


def _is_op(family: str, e: dict, device: bool) -> bool:
    if family == "xla":
        return "hlo_op" in (e.get("args") or {})
    if device:
        return e.get("cat") in TORCH_DEVICE_CATS
    name = str(e.get("name", ""))  # autograd nodes, Python and profiler scopes: host time
    return (e.get("cat") in TORCH_OP_CATS and name.startswith("aten::")) or name.startswith(TORCH_OP_NAMES)


def _self_times(events: list[dict]) -> list[tuple[dict, float, list[str]]]:
    """(event, self time, enclosing event names) for the complete events of one thread."""
    events = sorted(events, key=lambda e: (float(e["ts"]), -float(e["dur"])))
    out, stack = [], []  # stack: [event, end, children's time]
    for e in events:
        ts, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        while stack and stack[-1][1] <= ts:
            stack.pop()
        if stack:
            stack[-1][2][0] += float(e["dur"])
        entry = [e, end, [0.0], [s[0]["name"] for s in stack]]
        stack.append(entry)
        out.append(entry)
    return [(e, max(0.0, float(e["dur"]) - child[0]), parents) for e, _, child, parents in out]


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _shape(family: str, e: dict, hlo: dict) -> str:
    args = e.get("args") or {}
    if family == "xla":
        return (hlo.get(args.get("hlo_op", e["name"])) or {}).get("shape", "")
    dims = args.get("Input Dims")
    return " ".join(str(d).replace(" ", "") for d in dims if d) if dims else ""


def _named(ops: list[tuple[tuple[str, str], dict]]) -> dict[str, dict]:
    """{op name: its ms and count}; a name found in two categories keeps both, the second named
    with its category."""
    out: dict[str, dict] = {}
    for (name, category), v in ops:
        out[name if name not in out else f"{name} ({category})"] = {
            **v, "ms": round(v["ms"], 4), "count": round(v["count"], 2)}
    return out


def reduce(path: str | Path, family: str, hlo: dict | None = None) -> dict:
    """{"steps", "step_ms" (the median profiled step's wall time), "step_ms_each",
    "categories_ms" (that step's, summing to step_ms), "top_ops" and "ops" (that same step's: a
    category's ops add up to its time)} of one trace.
    `family`: "torch" or "xla"; `hlo`: repro.profile.hlo.instructions() of the module XLA ran."""
    hlo = hlo or {}
    events = [e for e in load(path) if e.get("ph") == "X" and "dur" in e and "ts" in e]
    windows = _windows(events)
    device = family == "torch" and any(e.get("cat") in TORCH_DEVICE_CATS for e in events)
    by_thread: dict[tuple, list[dict]] = defaultdict(list)
    for e in events:
        if not str(e.get("name", "")).startswith(STEP_PREFIX):
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    timed = [item for thread in by_thread.values() for item in _self_times(thread)]
    cats_each, ops_each = [], []
    for w0, w1 in windows:
        in_window = [(e, self_t, parents) for e, self_t, parents in timed
                     if w0 <= float(e["ts"]) < w1 and _is_op(family, e, device)
                     or (w0 <= float(e["ts"]) < w1 and family == "torch" and not device
                         and OPTIMIZER_SCOPES.match(e["name"]))]  # on a GPU the scope's kernels count, not it
        cats = dict.fromkeys(CATEGORIES, 0.0)
        ops: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0])
        spans = []
        for e, self_t, parents in in_window:
            name = e["name"]
            info = hlo.get((e.get("args") or {}).get("hlo_op", name)) or {}
            optimizer = bool(info.get("optimizer")) or any(OPTIMIZER_SCOPES.match(p) for p in parents) \
                or bool(OPTIMIZER_SCOPES.match(name))
            category = categorize(family, name, inside=set(info.get("inside") or ()), optimizer=optimizer)
            cats[category] += self_t
            spans.append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
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
    rows = [{"op": key, "shape": shape, "category": cat, "ms": ms, "count": count}
            for (key, shape, cat), (ms, count) in ops_each[median].items()]
    rows.sort(key=lambda r: -r["ms"])
    by_key: dict[tuple, dict] = {}
    for r in rows:  # per op name and category, all shapes together
        k = by_key.setdefault((r["op"], r["category"]), {"ms": 0.0, "count": 0.0, "category": r["category"]})
        k["ms"] += r["ms"]
        k["count"] += r["count"]
    return {
        "steps": n,
        "step_ms": step_each[median],
        "step_ms_each": step_each,
        "categories_ms": cats_each[median],
        "top_ops": [{**r, "ms": round(r["ms"], 4), "count": round(r["count"], 2)} for r in rows[:TOP_OPS]],
        "categories_ops": {c: round(sum(r["count"] for r in rows if r["category"] == c), 2) for c in CATEGORIES
                           if c != HOST},  # ops (kernels, thunks) per step
        "ops": _named(sorted(by_key.items(), key=lambda kv: -kv[1]["ms"])[:60]),
        "ops_of": "median step",  # ops and categories of the same step (older records: ops averaged over all)
    }
