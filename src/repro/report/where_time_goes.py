"""Where the time goes, side by side: the profiled runs of a comparison, per group.

The data of the report's "Where the time goes" section and its stacked-bar plot, computed
here once: each framework's categories (ms per step and share), the check of the profiled
step against the timed steady median, the ops whose time differs most from the reference
framework, the IR op counts (run.capture_ir), and the first step split into tracing,
compilation and first execution, with whether (and why) the second step compiled again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from repro.ledger.record import Op, Profile, view
from repro.profile.categories import CATEGORIES, HOST
from repro.report.md import md_table

TOLERANCE = 0.10  # the profiled step against the timed steady median: the profiler's overhead allowed
DIFFERING_CATEGORIES = 3
TOP_OPS_PER_CATEGORY = 2


@dataclass
class Side:
    framework: str
    record: dict
    profile: Profile

    @property
    def timed_ms(self) -> float:
        return view(self.record).results.steady_median_s * 1e3

    @property
    def overhead(self) -> float:
        """The profiled step's time over the timed steady median, less one."""
        return self.profile.step_ms / self.timed_ms - 1

    @property
    def profiler_overhead(self) -> float | None:
        """The profiler's own overhead, measured: profiled over unprofiled steps run just before."""
        unprofiled = self.profile.unprofiled_ms
        return self.profile.step_ms / unprofiled - 1 if unprofiled else None

    @property
    def within(self) -> bool:
        """The profiled step is the timed step: within TOLERANCE of the timed steady median,
        as measured or less the profiler's measured overhead."""
        if abs(self.overhead) <= TOLERANCE:
            return True
        own = self.profiler_overhead
        return own is not None and abs((1 + self.overhead) / (1 + own) - 1) <= TOLERANCE


@dataclass(frozen=True)
class CategorySide:
    """One framework's time in a category, and its own heaviest ops there."""

    framework: str
    ms: float
    top: list[tuple[str, Op]]


@dataclass(frozen=True)
class Difference:
    """A category whose time differs across the frameworks: the spread, and each framework's side."""

    category: str
    spread_ms: float
    sides: list[CategorySide]


@dataclass(frozen=True)
class FirstStep:
    """A run's first step split into trace/lower, compilation and first execution, and its second step:
    whether it compiled again, and why (`second`, a sentence). None: not measured."""

    framework: str
    first_s: float | None
    second_s: float | None
    steady_s: float | None
    trace_lower_s: float | None
    compile_s: float | None
    second: str
    compiles: list | None = None  # torch_xla: XLA compiles in steps 1 and 2
    first_execution_s: float | None = None  # the first step less what is known of its trace and compile


@dataclass
class Group:
    name: str
    sides: list[Side]
    differing: list[Difference] = field(default_factory=list)  # the categories that differ most
    first_steps: list[FirstStep] = field(default_factory=list)
    counters_only: list[Side] = field(default_factory=list)  # profiled without a per-op trace (torch_xla)


def _top_ops(side: Side, category: str, n: int = TOP_OPS_PER_CATEGORY) -> list[tuple[str, Op]]:
    """This framework's own heaviest ops of one category (their names are its own: never matched
    by name against another framework's)."""
    ops = [(op, v) for op, v in side.profile.ops.items() if v.category == category]
    return sorted(ops, key=lambda kv: -kv[1].ms)[:n]


def category_differences(sides: list[Side], n: int = DIFFERING_CATEGORIES) -> list[Difference]:
    """The categories whose time differs most across the frameworks (of the median profiled step),
    each with every framework's ms and its own top ops in it."""
    rows = []
    for cat in CATEGORIES:
        if cat == HOST:
            continue
        ms = [s.profile.categories_ms.get(cat, 0.0) for s in sides]
        rows.append(Difference(cat, max(ms) - min(ms),
                               [CategorySide(s.framework, m, _top_ops(s, cat)) for s, m in zip(sides, ms)]))
    rows.sort(key=lambda r: (-r.spread_ms, r.category))
    return [r for r in rows[:n] if r.spread_ms > 0]


def reading(ref: Side, other: Side) -> str:
    """One line: the op category whose time differs most (with its op counts on either side),
    and the host gaps' difference."""
    ca, cb = ref.profile.categories_ms, other.profile.categories_ms
    diff = {c: cb.get(c, 0.0) - ca.get(c, 0.0) for c in CATEGORIES}
    cat = max((c for c in CATEGORIES if c != HOST), key=lambda c: abs(diff[c]))
    ops = ref.profile.categories_ops, other.profile.categories_ops
    return (f"{other.framework} spends {abs(diff[cat]):.3g} ms per step {'more' if diff[cat] > 0 else 'less'} than "
            f"{ref.framework} in {cat} ({_n(ops[0].get(cat))} ops per step in {ref.framework}, "
            f"{_n(ops[1].get(cat))} in {other.framework}); host gaps {diff[HOST]:+.3g} ms.")


def _n(v) -> str:
    return "?" if v is None else f"{v:g}"


def first_step(record: dict) -> FirstStep:
    """The first step split into trace/lower, compilation and the first execution, and the
    second step: whether it compiled again, and why (from the backend's own counters)."""
    rec = view(record)
    res, fw = rec.results, rec.config.framework
    info = res.compile
    first = res.first_step_s
    compile_s, compiles = info.compile_s, None
    appeared = ", ".join(f"{k} ×{v}" for k, v in sorted(info.lazy_optimizer_state.names.items()))
    if fw.backend == "torch_xla":
        per_step = info.xla_compiles_per_step or [None, None]
        compile_s, compiles = info.xla_compile_s, per_step
        if per_step[1]:
            second = (f"recompiled ({per_step[1]} new XLA graph(s)): the optimizer state created lazily in "
                      f"step 1 ({appeared or 'none'}) became inputs of step 2's graph")
        else:
            second = "no recompilation (the graph of step 1 was reused)" + (
                "" if appeared else ": the optimizer keeps no state")
    elif fw.backend == "jax":
        state = info.optimizer_state_at_compile  # None: a record from before the counter
        second = ("no recompilation: the compiled executable is called directly, "
                  + (f"its {state} optimizer-state arrays existed before compilation (optax init)"
                     if state is not None else "its optimizer state made by optax's init before compilation"))
    elif fw.compile:
        n = info.dynamo_compiles
        second = ((f"dynamo compiled {n} graph(s) in the run" if n is not None else "compiled by dynamo")
                  + "; the optimizer step runs eagerly"
                  + (f", its state created in step 1 ({appeared})" if appeared else ""))
    else:
        second = "eager: nothing compiled" + (f"; optimizer state created in step 1 ({appeared})"
                                              if appeared else "")
    known = [v for v in (info.trace_lower_s, compile_s) if v is not None]
    execution = max(0.0, first - sum(known)) if first is not None and known and fw.backend != "torch_xla" else None
    return FirstStep(framework=fw.name, first_s=first, second_s=res.second_step_s, steady_s=res.steady_median_s,
                     trace_lower_s=info.trace_lower_s, compile_s=compile_s, second=second, compiles=compiles,
                     first_execution_s=execution)


def groups(comparison) -> list[Group]:
    """Per table of the comparison (repro.report.comparison: one model at one preset), its
    profiled rows side by side and every row's first step."""
    out = []
    for table in comparison.tables:
        frameworks = [row.framework for row in table.rows]  # the table's title names the model
        name = (lambda row: row.framework) if len(set(frameworks)) == len(frameworks) else (lambda row: row.name)
        profiled = [(name(row), r, view(r).results.profile) for row in table.rows for r in row.ok[:1]]
        sides = [Side(*p) for p in profiled if p[2] and p[2].categories_ms]
        firsts = [dataclasses.replace(first_step(row.ok[0]), framework=name(row)) for row in table.rows if row.ok]
        g = Group(table.title, sides, first_steps=firsts,
                  counters_only=[Side(*p) for p in profiled if p[2] and p[2].categories_ms is None])
        if len(sides) > 1:
            g.differing = category_differences(sides)
        out.append(g)
    return out


def has_profiles(comparison) -> bool:
    return any(view(r).results.profile for row in comparison.rows for r in row.ok)


def ir_counts(record: dict) -> str:
    hist = view(record).results.ir_ops
    key = next((k for k in hist if "stablehlo" in k), None)
    if key is None:
        return "—"
    top = sorted(hist[key].items(), key=lambda kv: -kv[1])[:4]
    return f"{sum(hist[key].values())} StableHLO ops (" + ", ".join(f"{k} {v}" for k, v in top) + ")"


def ops_sum(side: Side) -> str:
    """The ops the record keeps, summed, against the categories they fall in (host gaps aside):
    equal to the millisecond when both read the same (median) step and every op was kept."""
    p = side.profile
    if p.ops_of != "median step":
        return "— (older record: its ops averaged over the profiled steps)"
    ops = sum(v.ms for v in p.ops.values())
    cats = sum(ms for c, ms in (p.categories_ms or {}).items() if c != HOST)
    return f"{ops:.3f} ms of {cats:.3f} ms in ops"


def headline(record: dict, name: str) -> str:
    """One profiled run in a line: its median profiled step, its top categories, where its traces are."""
    from repro.profile import store

    p = view(record).results.profile
    if not p or not p.step_ms:
        return ""
    top = sorted(((c, ms) for c, ms in (p.categories_ms or {}).items()), key=lambda kv: -kv[1])[:3]
    parts = ", ".join(f"{c} {ms:.3g} ms ({ms / p.step_ms:.0%})" for c, ms in top) or "no per-op trace"
    traces = store.paths(record)
    where = ", ".join(str(t) for t in traces) if traces else "results.profile.files (MLflow's profile/ artifacts)"
    return f"profile of {name}: median profiled step {p.step_ms:.3g} ms: {parts}; traces: {where}"


def _opt_ms(v) -> str:
    return "—" if v is None else f"{v:.3g} ms"


def _pct(v) -> str:
    return "—" if v is None else f"{v:+.0%}"


def _ms(v) -> str:
    return "—" if v is None else f"{v * 1e3:,.1f}"


def markdown(comparison) -> list[str]:
    """The report's "Where the time goes" section (where runs were profiled) and its "First
    step" section (every report: why the first run is slow, and whether the second compiled)."""
    found = groups(comparison)
    return (_where(found) if has_profiles(comparison) else []) + _first_steps(found)


def _where(found: list[Group]) -> list[str]:
    lines = ["## Where the time goes", "",
             "Each framework's step, profiled after its timed loop (`run.profile=true`) by its own profiler, "
             "in one vocabulary (repro/profile/categories.py): ms and share of the median profiled step (every "
             "table and plot here reads that one step). The profiled step is "
             f"checked against the timed steady median (within ±{TOLERANCE:.0%}, after taking off the profiler's "
             "own overhead, measured against as many unprofiled steps run just before). Traces: each "
             "record's `results.profile.files`, in the ledger's `.profiles/` and the MLflow run's `profile/` "
             "artifacts.", ""]
    for g in found:
        if not g.sides and not g.counters_only:
            continue
        lines += [f"### {g.name}", ""]
        for c in g.counters_only:
            lines += [f"- {c.framework}: no per-op trace ({c.profile.profiler}): profiled step "
                      f"{c.profile.step_ms:.3g} ms against the timed steady median {c.timed_ms:.3g} ms, "
                      f"{c.profile.executions_per_step or '?'} graph executions per step and "
                      f"{_n(c.profile.compiles_during)} compilations during the profiled steps.", ""]
        if not g.sides:
            continue
        header = ["category", *[s.framework for s in g.sides]]
        body = []
        for cat in CATEGORIES:
            row = [cat]
            for s in g.sides:
                ms = s.profile.categories_ms.get(cat, 0.0)
                row.append(f"{ms:.3g} ms ({ms / s.profile.step_ms:.0%})")
            body.append(row)
        body.append(["**profiled step**", *[f"{s.profile.step_ms:.3g} ms" for s in g.sides]])
        body.append(["its ops, summed (the per-op table)", *[ops_sum(s) for s in g.sides]])
        body.append(["timed steady median", *[f"{s.timed_ms:.3g} ms" for s in g.sides]])
        body.append(["unprofiled, just before", *[_opt_ms(s.profile.unprofiled_ms) for s in g.sides]])
        body.append(["profiler overhead (measured)", *[_pct(s.profiler_overhead) for s in g.sides]])
        body.append(["profiled / timed", *[f"{s.overhead:+.0%} " + ("✓" if s.within else
                                            f"✗ (beyond ±{TOLERANCE:.0%}, overhead allowed: the machine changed)")
                                            for s in g.sides]])
        body.append(["IR (run.capture_ir)", *[ir_counts(s.record) for s in g.sides]])
        body.append(["profiler", *[s.profile.profiler for s in g.sides]])
        lines += md_table(header, body) + [""]
        if g.differing:
            lines += ["The categories whose time differs most, each framework's own heaviest ops in it "
                      "(ms in the median profiled step × calls; op names are each framework's own, "
                      "compared through their category):", ""]
            body = [[d.category, *(f"{x.ms:.3g} ms: " + (", ".join(f"`{op}` {v.ms:.3g} ms × {v.count:g}"
                                                               for op, v in x.top) or "—")
                                  for x in d.sides)] for d in g.differing]
            lines += md_table(["category", *[s.framework for s in g.sides]], body) + [""]
            lines += [f"- {reading(g.sides[0], other)}" for other in g.sides[1:]] + [""]
    return lines


def _first_steps(found: list[Group]) -> list[str]:
    if not any(g.first_steps for g in found):
        return []
    lines = ["## First step", "",
             "The first step split into tracing/lowering, compilation and first execution, from each "
             "framework's own counters (JAX: `jit(...).lower` / `.compile`; torch.compile: dynamo's and "
             "inductor's compile times; PyTorch/XLA: its `CompileTime` metric, summed over the first and "
             "second steps' compilations, whose counts it names), and why the second step did or did not "
             "compile again (ms).", ""]
    for g in found:
        if not g.first_steps:
            continue
        body = [[f.framework, _ms(f.first_s), _ms(f.trace_lower_s), _ms(f.compile_s),
                 _ms(f.first_execution_s), _ms(f.second_s), _ms(f.steady_s), f.second]
                for f in g.first_steps]
        lines += [f"### {g.name}", ""] + md_table(["framework", "first", "trace/lower", "compile",
                                                    "first execution", "second", "steady", "second step"], body)
        lines += [""]
    return lines
