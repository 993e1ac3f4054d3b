"""The fairness audit: everything that differs between runs besides the framework.

A comparison is fair when only the framework differs. Each check reads one property from
the records (effective settings where the backends report them, else the config); any
property with more than one value across the compared runs is listed, loudly.
"""

from __future__ import annotations

from typing import Any, Callable


def _get(record: dict, dotted: str) -> Any:
    node: Any = record
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _model_shape(r: dict) -> Any:
    model = r.get("config", {}).get("model", {})
    return {k: v for k, v in model.items() if k != "preset"}


def _hardware(r: dict) -> Any:
    env = r.get("environment") or {}
    return ((env.get("cpu") or {}).get("model"), tuple(g["name"] for g in env.get("gpus", [])))


CHECKS: list[tuple[str, Callable[[dict], Any]]] = [
    ("precision policy", lambda r: _get(r, "config.precision.name")),
    ("matmul precision setting", lambda r: _get(r, "config.precision.matmul")),
    ("fp32 matmuls compute in", lambda r: _get(r, "effective.fp32_matmul")),
    ("parameter dtypes", lambda r: tuple(_get(r, "effective.param_dtypes") or ())),
    ("compute dtype", lambda r: _get(r, "config.precision.compute_dtype")),
    ("autocast / loss scaling", lambda r: (_get(r, "config.precision.autocast"), _get(r, "config.precision.loss_scaling"))),
    ("batch size", lambda r: _get(r, "config.run.batch_size")),
    ("model and input shapes", _model_shape),
    ("parameter count", lambda r: _get(r, "results.param_count")),
    ("data", lambda r: _get(r, "data.sha256")),
    ("optimizer and lr", lambda r: (_get(r, "config.run.optimizer"), _get(r, "config.run.lr"))),
    ("task", lambda r: _get(r, "config.run.task")),
    ("steps / warm-up", lambda r: (_get(r, "config.run.steps"), _get(r, "config.run.warmup"))),
    ("attention implementation", lambda r: _get(r, "config.model.attention") or "eager"),
    ("compile cache", lambda r: _get(r, "config.run.compile_cache")),
    ("threads", lambda r: _get(r, "environment.variables.REPRO_THREADS")),
    ("deterministic algorithms", lambda r: _get(r, "config.run.deterministic")),
    ("sharding", lambda r: _get(r, "config.sharding")),
    ("hardware", _hardware),
]


def audit(records: list[dict]) -> list[tuple[str, dict[str, Any]]]:
    """(property, {record id: value}) for every property that is not the same in all records."""
    found = []
    for label, read in CHECKS:
        values = {r["id"]: read(r) for r in records}
        if len({repr(v) for v in values.values()}) > 1:
            found.append((label, values))
    return found


def print_audit(console, records: list[dict]) -> list:
    rows = audit([r for r in records if r.get("status") == "ok"])
    if not rows:
        if len(records) > 1:
            console.print("[green]fairness audit: the runs differ only in the framework[/] "
                          f"({', '.join(label for label, _ in CHECKS)} all equal)")
        return rows
    console.print(f"[bold red]WARNING: unequal comparison — the runs differ in {len(rows)} way(s) besides the framework:[/]")
    names = {r["id"]: f"{r['config']['framework']['name']} ({r['id'][:8]})" for r in records}
    for label, values in rows:
        console.print(f"  [red]{label}[/]: " + "; ".join(f"{names[i]}={v}" for i, v in values.items()))
    return rows
