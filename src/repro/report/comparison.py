"""The one comparison model: ledger records in, the rows every view renders out.

    c = comparison.build(records)   # Comparison(keys, tables=[Table(model, title, by, rows, verdicts, audit)])
    c.rows                          # every Row, table by table, in the records' order

A row is one config: the records of one repeat group, else of one config hash. Its name is
the run name (`varied.run_name`: the values of the keys that name the runs, `jax · batch 16`).
Every number with repeats is the median over the ok repeats (first, second and steady step,
p10/p90, TFLOP/s, MFU, peak memory), the steady median with its 95 % bootstrap CI
(report/stats.py); samples/s is the batch over that median. A table is one model at one
preset; "× best" ranks its rows by one rule, stated in its `by`: samples/s when the batch sizes
differ, else the steady median. Each table carries its verdicts (one per pair of rows that
differ only in the framework, decided by the verdict engine, report/verdict.py) and its
fairness audit (report/audit.py).

`Row.cells()` turns the numbers into the strings a person reads, once: the terminal table,
report.md, results.csv, the MLflow parent's description and `repro compare` all print them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import combinations

from repro.ledger.record import Results, WallSplit, view
from repro.report import determinism_price, floor, reruns, stats, trajectory, varied, verdict
from repro.report.audit import Audit, audit, busy

IN_TITLE = ("model", "model.preset")  # a table is one model at one preset
BY_THROUGHPUT, BY_MEDIAN = "samples/s", "steady median"
MISSING = "—"  # a number or field a record lacks (not ok, an older schema, no GPU): never an error


def _num(v: float | None, digits: int = 5) -> str:
    """Plain digits (no exponent, no thousands separator), so every view and the CSV read alike."""
    if v is None:
        return MISSING
    return f"{v:.{digits}g}" if abs(v) < 10 ** digits else f"{v:.0f}"


def _ms(s: float | None) -> str:
    return MISSING if s is None else _num(s * 1e3)


@dataclass(frozen=True)
class Row:
    """One config of a comparison (times in seconds; medians over its ok repeats)."""

    name: str  # the run name: the values of the comparison's naming keys
    model: str  # "mlp/tiny"
    framework: str
    records: tuple[dict, ...]
    n: int  # ok repeats
    first_s: float | None = None
    second_s: float | None = None
    median_s: float | None = None
    ci_s: tuple[float, float] | None = None  # 95 % bootstrap CI of the median; None below two repeats
    p10_s: float | None = None  # within-run spread: the median of the repeats' p10 and p90
    p90_s: float | None = None
    samples_per_s: float | None = None
    tflops: float | None = None
    mfu: float | None = None
    peak_bytes: float | None = None
    param_bytes_per_device: float | None = None
    final_loss: float | None = None
    test_accuracy: float | None = None
    loss_sha256: str = ""
    trajectory: str = ""  # loss drift against the reference framework ("" without a peer)
    busy: int = 0  # runs measured on a busy machine
    x_best: float | None = None
    warm: int = 0  # ok runs that started with a warm compile cache (run.compile_cache=repeats, warm)
    first_warm: bool = False  # first/second steps from warm runs (the row has no cold one)

    @property
    def ok(self) -> list[dict]:
        return [r for r in self.records if view(r).status == "ok"]

    @property
    def ids(self) -> list[str]:
        return [r.get("id", MISSING) for r in self.records]

    @property
    def status(self) -> str:
        statuses = [view(r).status or "unknown" for r in self.records]
        kinds = dict.fromkeys(statuses)
        text = statuses[0] if len(kinds) == 1 else ", ".join(f"{s} {statuses.count(s)}/{len(statuses)}" for s in kinds)
        return text + ("" if not self.busy else " ⚠ busy" if self.busy == len(statuses) else
                       f" ⚠ busy {self.busy}/{len(statuses)}")

    @property
    def spread(self) -> tuple[float, float, str] | None:
        """The interval drawn around the steady median: the CI with repeats, else p10–p90."""
        if self.median_s is None:
            return None
        if self.ci_s:
            return (*self.ci_s, f"95 % bootstrap CI of the median over {self.n} repeats")
        return self.p10_s, self.p90_s, "p10–p90 of the steady steps (single sample)"

    def cells(self) -> dict[str, str]:
        """Every column as a person reads it (CELLS names them): computed here, printed everywhere."""
        ci = f"{_ms(self.ci_s[0])}–{_ms(self.ci_s[1])}" if self.ci_s else "single sample" if self.median_s else MISSING
        return {
            "name": self.name, "status": self.status, "repeats": str(self.n),
            "first": _ms(self.first_s) + (" warm" if self.first_warm and self.first_s is not None else ""),
            "second": _ms(self.second_s), "median": _ms(self.median_s), "ci": ci,
            "p10_p90": f"{_ms(self.p10_s)}–{_ms(self.p90_s)}" if self.median_s else MISSING,
            "x_best": MISSING if self.x_best is None else f"{self.x_best:.2f}",
            "samples_per_s": MISSING if self.samples_per_s is None else f"{self.samples_per_s:.0f}",
            "tflops": MISSING if self.tflops is None else _num(self.tflops, 3),
            "mfu": MISSING if self.mfu is None else f"{self.mfu:.1%}",
            "peak_mib": MISSING if self.peak_bytes is None else _num(self.peak_bytes / 2**20, 4),
            "param_mib": MISSING if self.param_bytes_per_device is None else _num(self.param_bytes_per_device / 2**20, 4),
            "final_loss": MISSING if self.final_loss is None else f"{self.final_loss:.5f}",
            "trajectory": self.trajectory or MISSING,
            "test_acc": MISSING if self.test_accuracy is None else f"{self.test_accuracy:.3f}",
            "loss_sha256": self.loss_sha256[:12] or MISSING, "ledger": " ".join(self.ids),
        }


# (cell key, column header) in the order every view shows them; OPTIONAL ones only where a row has them
CELLS = (("name", "run"), ("status", "status"), ("repeats", "repeats"), ("first", "first (ms)"),
         ("second", "second (ms)"), ("median", "steady median (ms)"), ("ci", "95 % CI (ms)"),
         ("p10_p90", "p10–p90 (ms)"), ("x_best", "× best"), ("samples_per_s", "samples/s"), ("tflops", "TFLOP/s"),
         ("mfu", "MFU"), ("peak_mib", "peak MiB"), ("param_mib", "param MiB/dev"), ("final_loss", "final loss"),
         ("trajectory", "trajectory"), ("test_acc", "test acc"), ("loss_sha256", "loss sha256"), ("ledger", "ledger"))
OPTIONAL = {"param_mib": "param_bytes_per_device", "trajectory": "trajectory", "test_acc": "test_accuracy"}


@dataclass(frozen=True)
class Table:
    """One model at one preset: its rows, ranked by one rule, its verdicts and its audit."""

    model: str
    title: str  # what every row shares (`mlp/tiny · batch 64 · fp32 · cpu · train step`)
    by: str  # what "× best" ranks by: BY_THROUGHPUT or BY_MEDIAN
    rows: list[Row]
    verdicts: list[verdict.Verdict]  # report/verdict.py: each one's `text` is the sentence every view prints
    audit: Audit

    @property
    def header(self) -> str:
        return f"{self.title} · × best by {self.by}"

    @property
    def columns(self) -> list[tuple[str, str]]:
        """The (cell key, header) pairs this table shows: the optional ones only where a row fills them."""
        return [(k, h) for k, h in CELLS if k not in OPTIONAL or any(getattr(r, OPTIONAL[k]) for r in self.rows)]

    @property
    def records(self) -> list[dict]:
        return [r for row in self.rows for r in row.records]


@dataclass(frozen=True)
class Comparison:
    keys: list[str]  # the keys that name the runs (varied.name_keys)
    tables: list[Table] = field(default_factory=list)

    @property
    def rows(self) -> list[Row]:
        return [row for t in self.tables for row in t.rows]

    @property
    def verdicts(self) -> list[str]:
        return [v.text for t in self.tables for v in t.verdicts]


def group_of(record: dict) -> str:
    """The id shared by one config's runs: its repeat group, else its config hash."""
    rec = view(record)
    return rec.repeat.group or rec.config_hash or rec.id


def by_config(records: list[dict]) -> dict[str, list[dict]]:
    """Records grouped by config, in the order each config first appears."""
    out: dict[str, list[dict]] = {}
    for r in records:
        out.setdefault(group_of(r), []).append(r)
    return out


def model_of(record: dict) -> str:
    m = view(record).config.model
    return f"{m.name}/{m.preset}"


def _median(records: list[dict], read) -> float | None:
    return stats.median_of([read(view(r).results) for r in records])


def warm_start(record: dict) -> bool:
    """The run started with a warm compile cache (backends/compile_cache.py): its first step is not a cold one."""
    return view(record).results.compile_cache.get("state") == "warm"


def row(records: list[dict], name: str, drift: dict[str, str]) -> Row:
    """One config's row (x_best is set by its table). The first and second steps are its cold runs'
    (a repeat that reused the first run's compile cache skipped the compile), all runs' where none is."""
    ok = [r for r in records if view(r).status == "ok"]
    cold = [r for r in ok if not warm_start(r)] or ok
    steady = stats.steady_medians(ok)
    median = stats.median_of(steady)
    res = view(ok[0]).results if ok else Results()
    config = view(records[0]).config
    batch = config.run.batch_size
    sharded = any(view(r).results.sharding for r in ok)
    return Row(
        name=name, model=model_of(records[0]), framework=config.framework.name,
        records=tuple(records), n=len(ok),
        first_s=_median(cold, lambda x: x.first_step_s), second_s=_median(cold, lambda x: x.second_step_s),
        median_s=median, ci_s=stats.bootstrap_ci(steady),
        p10_s=_median(ok, lambda x: x.steady_p10_s), p90_s=_median(ok, lambda x: x.steady_p90_s),
        samples_per_s=batch / median if median else None,
        tflops=_median(ok, lambda x: x.achieved_tflops), mfu=_median(ok, lambda x: x.mfu),
        peak_bytes=_median(ok, lambda x: x.peak_memory.get("bytes")),
        param_bytes_per_device=_median(ok, lambda x: x.sharding.get(
            "param_bytes_per_device", (x.param_count or 0) * 4)) if sharded else None,
        final_loss=res.final_loss, test_accuracy=_median(ok, lambda x: x.test_accuracy),
        loss_sha256=res.loss_sha256 or "",
        trajectory=next((drift[r["id"]] for r in records if r["id"] in drift), ""),
        busy=sum(busy(r) is not None for r in records), warm=sum(map(warm_start, ok)),
        first_warm=bool(ok) and all(map(warm_start, cold)))


def _title(model: str, records: list[dict]) -> str:
    differs = set(varied.differing_keys(records))
    first = view(records[0]).config
    parts = [model]
    if "run.batch_size" not in differs:
        parts.append(f"batch {first.run.batch_size}")
    for group in ("precision", "sharding", "hardware"):
        if group not in differs and not (group == "sharding" and first.sharding.name == "none"):
            parts.append(getattr(first, group).name)
    if "run.task" not in differs:
        parts.append(f"{first.run.task} step")
    return " · ".join(parts)


def _ranked(rows: list[Row], by: str) -> list[Row]:
    if by == BY_THROUGHPUT:
        best = max((r.samples_per_s for r in rows if r.samples_per_s), default=None)
        return [replace(r, x_best=best / r.samples_per_s if r.samples_per_s else None) for r in rows]
    best = min((r.median_s for r in rows if r.median_s), default=None)
    return [replace(r, x_best=r.median_s / best if r.median_s else None) for r in rows]


def _interleaved(a: Row, b: Row) -> bool:
    """Both configs' repeats ran in one sweep, in the loop's rounds, one after another: never where
    their measured windows overlapped (`overlaps`). Runs launched side by side (`repeat.side_by_side`)
    never reach here: `_verdicts` refuses their pair first."""
    both = a.records + b.records
    return len({view(r).sweep.id for r in both}) == 1 and \
        all(view(r).repeat.count > 1 for r in both) and not overlaps(a, b, apart=None)


def _node(record: dict) -> str:
    """The node a run was measured on: its SLURM node, else its host."""
    rec = view(record)
    return rec.scheduler.node or rec.machine.host or ""


def _window(record: dict) -> tuple[str, float, float] | None:
    """(host, start, end) of a run's measured steps on the host's clock (wall_split.window), if recorded."""
    rec = view(record)
    w = (rec.wall_split or WallSplit()).window
    return (rec.machine.host or "", w[0], w[1]) if w else None


def overlaps(a: Row, b: Row, apart: bool | None = False) -> list[tuple[str, str, str]]:
    """(run of a, run of b, host) whose measured windows overlapped on one host: runs a launcher started
    at the same time (submitit_local, joblib with n_jobs > 1, two array tasks on one node) share its
    cores, so neither measured the other's speed. `apart`: False, those that shared cores (a run not
    pinned shares them all); True, those pinned to disjoint cores (`machine.pinned`, worker and
    parent, on a host of 4 cores or more: worker/pinning.py), which measured their own; None, both."""
    out = []
    for x in a.ok:
        for y in b.ok:
            wx, wy = _window(x), _window(y)
            if wx and wy and wx[0] == wy[0] and wx[1] < wy[2] and wy[1] < wx[2] and \
                    (apart is None or _disjoint(x, y) == apart):
                out.append((view(x).id, view(y).id, wx[0]))
    return out


def _cores(record: dict) -> set[int] | None:
    """The cores a run and its parent were pinned to (None: not pinned)."""
    pinned = view(record).machine.pinned
    return {c for cores in pinned.values() for c in cores} if pinned else None


def _disjoint(x: dict, y: dict) -> bool:
    cx, cy = _cores(x), _cores(y)
    return cx is not None and cy is not None and not cx & cy


# What a verdict compares: two rows that differ in one of these keys and in nothing else swept.
# framework: JAX vs PyTorch; env.packages: two releases of a package (a version sweep, repro.envs);
# run.deterministic and run.fill_uninitialized_memory: the price of determinism (and of torch's NaN fill)
# in one framework, where a sweep varies them on purpose (+exp=price_of_determinism).
COMPARED = ("framework", "env.packages", "run.deterministic", "run.fill_uninitialized_memory")
# The conditions a verdict is measured under (backends/determinism.py): said in every sentence, and two
# sides measured under different ones are not compared unless they are the axis varied on purpose.
MODE_KEYS = ("run.deterministic", "run.fill_uninitialized_memory", "run.start")


def round_of(record: dict) -> tuple | None:
    """The round a run belongs to, as the verdict engine pairs them: (its sweep's group family,
    its calibration trial, `repeat.index`); None for a run not in a round. Two configs' runs
    with the same key ran in the same round of the same sweep."""
    r = view(record)
    if r.repeat.index is None:
        return None
    group = r.repeat.group
    family = group.rsplit("/", 1)[0] if "/" in group else r.sweep.id
    return family, r.calibration.trial, r.repeat.index


def _side(name: str, row: Row) -> verdict.Side:
    """A row's ok runs as the verdict engine reads them: steady medians in the order they ran
    (round by round: a repeat's index, then its job number), each with its round, so that the
    engine pairs complete rounds, whether it ran on a busy machine (a look counts the busy
    runs it used) and its node (rounds on several nodes: a level of the verdict's interval). A
    round's attempt set aside for a rerun (`repeat.discarded`) is not among them."""
    ok = [r for r in row.ok if not view(r).repeat.discarded and view(r).results.steady_median_s is not None]
    ok.sort(key=lambda r: (view(r).repeat.index or 0, view(r).sweep.job))
    flags = tuple(busy(r) is not None for r in ok)
    return verdict.Side(name, tuple(stats.steady_medians(ok)), sum(flags), rounds=tuple(round_of(r) for r in ok),
                        busy_at=flags, nodes=tuple(_node(r) for r in ok))


def mode_of(record: dict, determinism: bool = True) -> str:
    """The conditions a run was measured in, in words, as its verdicts say them: the determinism mode
    (unless `determinism` is False: the axis varied), and a forked start (run.start=fork: job/forked.py;
    a fresh interpreter per worker, the default, is what a bare script of the framework is)."""
    run = view(record).config.run
    start = "each worker forked from an interpreter that had imported its framework (run.start=fork)" \
        if run.start == "fork" else ""
    if not determinism:
        return f"with {start}" if start else ""
    start = f", {start}" if start else ""
    if not run.deterministic:
        return f"with each library's default kernels (run.deterministic=false){start}"
    fill = " without torch's NaN fill" if run.fill_uninitialized_memory is False else ""
    return f"in deterministic mode{fill} (run.deterministic=true){start}"


def _unfair(a: Row, b: Row, what: str, why: str, axis: str = "framework") -> verdict.Verdict:
    """A pair measured under conditions that make it unfair (different determinism modes nobody
    varied, measured windows that overlapped): refused, never judged."""
    return verdict.Verdict(verdict.UNFAIR, a.name, b.name, 1.0, a.n, b.n, what=what, axis=axis, rows=(a, b),
                           refused=why)


def _verdicts(model: str, rows: list[Row], keys: list[str], ledger_dir=None, swept=()) -> list[verdict.Verdict]:
    """The verdicts of one table: a pair per two rows that differ only in the framework, or only in
    the pinned package versions, or only in the determinism mode; decided together (Holm over the
    table's pairs; looks spent over rounds for run.repeats=auto) by report/verdict.py. A record
    written before the `verdict` config existed gets its verdict recomputed, and the sentence says so.
    Two rows that differ in the framework and in a mode nobody swept are refused (`_unfair`)."""
    pairs, refused = [], []  # ((side a, side b, what), the runs, the verdict's fields beside the engine's)
    for key in COMPARED:
        unswept_modes = [k for k in MODE_KEYS if k not in swept and key not in MODE_KEYS]
        others = [k for k in keys if k != key and k not in IN_TITLE and k not in unswept_modes]
        for a, b in combinations([r for r in rows if r.median_s], 2):
            rest_a, rest_b = (varied.describe_values(r.records[0], others) for r in (a, b))
            name_a, name_b = (varied.describe_values(r.records[0], [key]) or varied.UNSET.get(key, "default")
                              for r in (a, b))
            if rest_a != rest_b or name_a == name_b:
                continue
            what = model + (f" · {rest_a}" if rest_a else "")
            mode_a, mode_b = mode_of(a.records[0]), mode_of(b.records[0])
            if key in MODE_KEYS and (same := determinism_price.same_program(a.ok + b.ok)):
                refused.append(replace(_unfair(a, b, what, "", key), a=name_a, b=name_b, same=same))  # not judged
                continue
            if key in MODE_KEYS:  # the mode is the axis: the fill is compared within deterministic mode
                mode_a = mode_a if key == "run.fill_uninitialized_memory" else mode_of(a.records[0], determinism=False)
            elif mode_a != mode_b:
                refused.append(_unfair(a, b, what, f"{a.name} was measured {mode_a}, {b.name} {mode_b}; compare runs "
                                       "of one mode, or sweep run.deterministic=true,false to measure its price"))
                continue
            if side := max((view(r).repeat.side_by_side for r in a.ok + b.ok), default=0):
                refused.append(_unfair(a, b, what, f"their runs were launched {side} at a time on one host "
                                       "(hydra/launcher=joblib with n_jobs > 1): each slowed the other; run them one "
                                       "after another (hydra.launcher.n_jobs=1, or the default launcher)", key))
                continue
            if found := overlaps(a, b):
                refused.append(_unfair(a, b, what, f"their measured steps ran at the same time on one host ({len(found)} "
                                       f"pair(s) of runs overlapped on {found[0][2] or 'one host'}, e.g. "
                                       f"{found[0][0][:8]} and {found[0][1][:8]}): each slowed the other; run them one "
                                       "after another (the default launcher), never side by side", key))
                continue
            pairs.append(((_side(name_a, a), _side(name_b, b), what), a.ok + b.ok,
                          {"interleaved": _interleaved(a, b), "mode": mode_a, "axis": key, "rows": (a, b),
                           "nodes": len({_node(r) for r in a.ok + b.ok}), "apart": len(overlaps(a, b, apart=True))}))
    if not pairs:
        return refused
    decided = verdict.decide_family([p for p, _, _ in pairs], verdict.Plan.of([r for _, runs, _ in pairs for r in runs]))
    return [replace(v, floor=floor.below(v, runs, ledger_dir), recomputed=not any(view(r).recorded("verdict") for r in runs),
                    **fields) for v, (_, runs, fields) in zip(decided, pairs)] + refused


def audit_name(record: dict, keys: list[str]) -> str:
    """A run in the audit's lines: its name and its ledger id (repeats share a name)."""
    return f"{varied.run_name(record, keys)} ({record['id'][:8]})"


def build(records: list[dict], ledger_dir=None) -> Comparison:
    """The comparison of `records` (run records, in the order their rows should appear); runs a
    rerun replaced are left out (report/reruns.py). `ledger_dir`: the ledger they were read from
    (its calibrations first: a moved or copied ledger holds its own)."""
    records = reruns.kept(records)
    keys = varied.name_keys(records)
    drift = trajectory.cells(records)  # loss drift between runs that differ only in the framework
    by_model: dict[str, list[dict]] = {}
    for r in records:
        by_model.setdefault(model_of(r), []).append(r)
    tables = []
    for model, of_model in by_model.items():
        rows = [row(rs, varied.run_name(rs[0], keys), drift) for rs in by_config(of_model).values()]
        by = BY_THROUGHPUT if len({view(r).config.run.batch_size for r in of_model}) > 1 else BY_MEDIAN
        verdicts = _verdicts(model, rows, keys, ledger_dir, swept=varied.swept_keys(of_model))
        tables.append(Table(model, _title(model, of_model), by, _ranked(rows, by), verdicts,
                            audit(of_model, lambda r: audit_name(r, keys))))
    return Comparison(keys, tables)
