"""The fairness audit: everything that differs between runs besides what was meant to.

A comparison is fair when only what the user varied differs. Each check reads one property
from the records (effective settings where the backends report them, else the config) and
names the config keys it depends on; a property with more than one value across the
compared runs is
- "varied" when a key the user swept (the records' command-line overrides) explains it,
- a loud warning otherwise.
Values are compared as canonical JSON: dict key order never makes a difference.

The machine is judged too: runs measured on different hosts or CPUs with different vector
extensions (ISA), runs during which other processes were busy (`machine` in the record,
worker/machine.py), and runs whose own spread (p90/p10) is wide.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


from repro.usertext import markup
from repro.hashing import canonical_json
from repro.ledger.record import view
from repro.ledger.render import others_took
from repro.report import varied

BUSY_CPU_SHARE = 0.10  # other processes' CPU time during the timed loop, in cores
BUSY_LOAD_MARGIN = 1.0  # 1-min load before the loop above threads + this (the average still holds the previous run)
WIDE_SPREAD = 1.5  # a run's steady p90/p10 above this is noisy


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
    env = view(r).environment
    return (env.cpu.get("model"), tuple(g["name"] for g in env.gpus))


def _determinism(prop: str) -> Callable[[dict], Any]:
    """One property of what the worker ran with (`effective.determinism`, backends/determinism.py):
    the same meaning in every framework. A record older than that says only its config value."""
    def read(r: dict) -> Any:
        ran = _get(r, "effective.determinism")
        if ran is None:
            return f"not recorded (run.deterministic={_get(r, 'config.run.deterministic')})"
        return ran.get(prop)
    return read


def _determinism_detail(r: dict) -> str:
    """The raw settings behind the two properties: XLA_FLAGS, torch's and cuDNN's switches, cuBLAS's
    workspace, the default matmul precision (only the ones this worker's framework has)."""
    ran = dict(_get(r, "effective.determinism") or {})
    for prop in ("deterministic_kernels", "autotuning"):
        ran.pop(prop, None)
    return ", ".join(f"{k}={v if v not in ('', None) else '—'}" for k, v in ran.items())


def _isa(r: dict) -> str:
    isa = _get(r, "environment.cpu.isa")
    if isa is None:
        return "not recorded (a record older than ISA capture)"
    wide = "avx512" if any(x.startswith("avx512") for x in isa) else "no avx512"
    return f"{' '.join(isa) or 'none'} ({wide})"


# (label, config keys the property depends on, reader)
CHECKS: list[tuple[str, tuple[str, ...], Callable[[dict], Any]]] = [
    ("precision policy", ("precision",), lambda r: _get(r, "config.precision.name")),
    ("matmul precision setting", ("precision",), lambda r: _get(r, "config.precision.matmul")),
    ("fp32 matmuls compute in", ("precision", "hardware"), lambda r: _get(r, "effective.fp32_matmul")),
    ("parameter dtypes", ("precision",), lambda r: tuple(_get(r, "effective.param_dtypes") or ())),
    ("compute dtype", ("precision",), lambda r: _get(r, "config.precision.compute_dtype")),
    ("autocast / loss scaling", ("precision",),
     lambda r: (_get(r, "config.precision.autocast"), _get(r, "config.precision.loss_scaling"))),
    ("batch size", ("run.batch_size", "model"), lambda r: _get(r, "config.run.batch_size")),
    ("model and input shapes", ("model",), _model_shape),
    ("parameter count", ("model",), lambda r: _get(r, "results.param_count")),
    ("data", ("data", "run.seed", "run.batch_size", "model"), lambda r: _get(r, "data.sha256")),
    ("optimizer and lr", ("run.optimizer", "run.lr"), lambda r: (_get(r, "config.run.optimizer"), _get(r, "config.run.lr"))),
    ("task", ("run.task",), lambda r: _get(r, "config.run.task")),
    ("steps / warm-up", ("run.steps", "run.warmup"), lambda r: (_get(r, "config.run.steps"), _get(r, "config.run.warmup"))),
    ("attention implementation", ("model",), lambda r: _get(r, "config.model.attention") or "eager"),
    ("compile cache", ("run.compile_cache",), lambda r: _get(r, "config.run.compile_cache")),
    ("worker start", ("run.start",), lambda r: _get(r, "config.run.start") or "fresh"),  # before the key: fresh
    ("threads", ("run.threads",), lambda r: _get(r, "environment.variables.REPRO_THREADS")),
    ("deterministic kernels", ("run.deterministic", "hardware"), _determinism("deterministic_kernels")),
    ("autotuning", ("run.deterministic", "hardware"), _determinism("autotuning")),
    ("sharding", ("sharding",), lambda r: _get(r, "config.sharding")),
    ("hardware", ("hardware",), _hardware),
    ("host", (), lambda r: _get(r, "machine.host") or "not recorded"),
    ("CPU ISA (vector extensions)", (), _isa),
]
# What a difference in a check is read from, named beside each run's value.
DETAIL: dict[str, Callable[[dict], str]] = {"deterministic kernels": _determinism_detail,
                                            "autotuning": _determinism_detail}


@dataclass
class Audit:
    differences: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # warned about
    varied: list[tuple[str, dict[str, Any], list[str]]] = field(default_factory=list)  # explained by swept keys
    swept: list[str] = field(default_factory=list)
    machine: list[str] = field(default_factory=list)  # per-run warnings: busy machine, wide spread
    names: dict[str, str] = field(default_factory=dict)  # ledger id -> the run as the lines name it
    details: dict[tuple[str, str], str] = field(default_factory=dict)  # (label, ledger id) -> what its value was read from

    @property
    def equal(self) -> bool:
        return not self.differences and not self.machine


def busy(record: dict) -> str | None:
    """Why the machine was busy during this run's timed loop, or None."""
    m = view(record).machine
    if not m.raw:
        return None
    reasons = []
    if (m.other_cpu_share or 0) > BUSY_CPU_SHARE:
        during = "the worker's start and its timed loop (a loop too short to read alone)" \
            if m.window_from == "worker start" else "the timed loop"
        reasons.append(f"{others_took(m.other_cpu_share, m.steal_share)} during {during} "
                       f"(bound {BUSY_CPU_SHARE})")
    threads = (m.threads or 1) * (m.processes or 1)  # the run's own: all its processes on this host
    if m.load_before and (m.load_before[0] or 0) > threads + BUSY_LOAD_MARGIN:
        reasons.append(f"load {m.load_before[0]:.2f} before the loop with {threads} thread(s)")
    return "; ".join(reasons) or None


def spread(record: dict) -> float | None:
    res = view(record).results
    p10, p90 = res.steady_p10_s, res.steady_p90_s
    return p90 / p10 if p10 and p90 else None


def _load(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def _machine_warnings(records: list[dict], name: Callable[[dict], str]) -> list[str]:
    out = []
    for r in records:
        if why := busy(r):
            m = view(r).machine
            before, after = ((load or [None])[0] for load in (m.load_before, m.load_after))
            out.append(f"busy machine during {name(r)}: {why} (1-min load {_load(before)} before, "
                       f"{_load(after)} after; host {m.host or '—'})")
        if (s := spread(r)) and s > WIDE_SPREAD:
            out.append(f"wide spread in {name(r)}: steady p90/p10 = {s:.2f} (bound {WIDE_SPREAD})")
    return out


def audit(records: list[dict], name: Callable[[dict], str]) -> Audit:
    """What differs between the ok records, split into what was swept and what nobody asked for;
    `name(record)` names a run in the lines (report/comparison.py: its run name and id)."""
    ok = [r for r in records if view(r).status == "ok"]
    result = Audit(swept=varied.swept_keys(ok), machine=_machine_warnings(ok, name),
                   names={view(r).id: name(r) for r in records})
    library_defaults = bool(ok) and not any(_get(r, "config.run.deterministic") for r in ok)
    for label, keys, read in CHECKS:
        if library_defaults and label in DETAIL:  # each library's own kernels, as its framework picks them
            keys = (*keys, "framework")
        values = {view(r).id: read(r) for r in ok}
        if len({canonical_json(v) for v in values.values()}) <= 1:
            continue
        if label in DETAIL:
            result.details.update({(label, view(r).id): DETAIL[label](r) for r in ok})
        why = [s for s in result.swept if any(varied.related(s, k) for k in keys)]
        if why:
            result.varied.append((label, values, why))
        else:
            result.differences.append((label, values))
    return result


def _show(value: Any) -> str:
    return markup(value if isinstance(value, str) else canonical_json(value))  # "[...]" is rich markup


def _detail(found: Audit, label: str, run_id: str) -> str:
    return f" ({escape(d)})" if (d := found.details.get((label, run_id))) else ""


def _varied_words(swept: list[str]) -> str:
    if not swept:
        return "the runs are equal"
    return "the runs differ only in the framework" if swept == ["framework"] else \
        f"the runs differ only in what was varied ({', '.join(swept)})"


def print_audit(console, found: Audit, records: list[dict]) -> None:
    """An audit (`audit(records)`), printed: what was varied, loud warnings for what else differs,
    the machine apart (print_machine_summary: one line for the whole comparison; each run's detail
    in report.md), so that a fair config on a noisy machine says both."""
    ok = [r for r in records if view(r).status == "ok"]
    if found.varied:
        console.print(f"varied on purpose: {markup(', '.join(found.swept))} "
                      f"(so these differ: {', '.join(label for label, _, _ in found.varied)})")
    if found.differences:
        console.print(f"[bold red]WARNING: unequal comparison — the runs differ in {len(found.differences)} "
                      "way(s) nobody varied:[/]")
        for label, values in found.differences:
            console.print(f"  [red]{label}[/]: " + "; ".join(f"{markup(found.names[i])}={_show(v)}{_detail(found, label, i)}"
                                                         for i, v in values.items()))
    elif len(ok) > 1:
        console.print(f"[green]fairness audit: {markup(_varied_words(found.swept))}[/] "
                      f"({', '.join(equal_labels(found))} all equal)")


def equal_labels(found: Audit) -> list[str]:
    """The checks whose value every run shares: not what was varied, nor what follows from it."""
    differ = {label for label, *_ in found.varied} | {label for label, _ in found.differences}
    return [label for label, _, _ in CHECKS if label not in differ]


def machine_summary(records: list[dict], name: Callable[[dict], str]) -> str:
    """One line for a whole sweep's machine (the per-run detail is report.md's): how many ok runs
    ran beside other processes' work or a high load, the worst, and how many spread widely."""
    ok = [r for r in records if view(r).status == "ok"]
    if not ok:
        return ""
    unknown = sum(not view(r).machine.raw for r in ok)
    shared = [r for r in ok if (view(r).machine.other_cpu_share or 0) > BUSY_CPU_SHARE]
    loaded = [r for r in ok if busy(r) and r not in shared]
    wide = [r for r in ok if (spread(r) or 0) > WIDE_SPREAD]
    parts = []
    if shared:
        worst = max(shared, key=lambda r: view(r).machine.other_cpu_share)
        parts.append(f"{len(shared)} of {len(ok)} runs ran while other processes used > {BUSY_CPU_SHARE} of a core "
                     f"(worst: {name(worst)}, {view(worst).machine.other_cpu_share:.1f} cores)")
    if loaded:
        parts.append(f"{len(loaded)} of {len(ok)} started with a 1-min load above their threads + {BUSY_LOAD_MARGIN:g}")
    if wide:
        parts.append(f"{len(wide)} of {len(ok)} spread widely (steady p90/p10 > {WIDE_SPREAD})")
    if unknown:
        parts.append(f"state not recorded for {unknown} run(s) (records older than its capture)")
    if not parts:
        return f"machine: quiet during all {len(ok)} runs (no busy run, no wide spread)"
    return "machine: " + "; ".join(parts) + "; details in the report"


def print_machine_summary(console, comparison) -> None:
    """The machine line under a comparison (report/comparison.py's), once for all its tables."""
    several = len(comparison.tables) > 1  # then a run is named with its model ("torch · vit")
    names = {view(r).id: row.name + (f" · {m}" if several and (m := row.model.split('/')[0]) not in row.name.split(" · ")
                                  else "")
             for row in comparison.rows for r in row.records}
    line = machine_summary([r for row in comparison.rows for r in row.records], lambda r: names[view(r).id])
    if line:
        console.print(markup(line), style="bold red" if "details" in line else "green")
