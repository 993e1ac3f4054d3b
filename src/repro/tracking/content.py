"""What an MLflow run shows, as pure functions of the ledger record (no MLflow import here), and
what a sweep's parent run shows: a rendering of the comparison it is handed (report/comparison.py;
tracking never imports report: the rows and the run names come to it).

The UI lines runs up by param and metric names and fills its columns from MLflow's own tags,
so: params are what defines the run (the config hash's keys) plus the same `effective.*` keys
for every framework; times are milliseconds with the unit in the name; the compile step is
its own metrics and the per-step series start after it, each point at its real time.
"""

from __future__ import annotations

import getpass
import json
from datetime import datetime
from typing import Any

from repro.config.spec import semantic
from repro.flat import flatten
from repro.ledger import render
from repro.ledger.record import Git, view

NOT_APPLICABLE = "n/a"
# Every effective setting any backend reads back (jax_backend, torch_backend, torch_xla_backend):
# each run logs all of them, "n/a" where its framework has no such knob, so the compare view
# lines them up. A key not listed here stays in the ledger record (artifact), not in params.
EFFECTIVE_KEYS = (
    "platform", "matmul_precision", "fp32_matmul", "param_dtypes", "compute_dtype", "autocast",
    "loss_scale", "x64", "donated", "compiled", "compile_backend", "compile_cache",
    "compilation_cache_dir", "inductor_cache_dir", "cuda_matmul_allow_tf32", "cudnn_allow_tf32",
    "deterministic_algorithms", "threads", "lazy_tensors", "xla_device_type", "xla_device",
    "xla_device_hw", "xla_mat_mul_precision", "xla_mat_mul_precision_requested",
    "xla_persistent_cache_dir", "xla_variables",
)
# Results that are not metrics: hashes, series, lists (they live in the ledger record).
NOT_METRICS = ("loss_sha256", "params_sha256", "ir_ops", "loss", "step_time_s", "ranks", "profile")


def _param(v: Any) -> str:
    """A param's text; None (a setting that does not apply to this run) reads "n/a" as an absent
    one does, so the compare view draws one value, not "None" beside "n/a"."""
    if v is None:
        return NOT_APPLICABLE
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else str(v)


# What a person compares runs by, first in MLflow's views: they sort param keys by code point
# (the compare page, its box and contour plots), where a capital letter comes before every
# lower-case key; the same values stay under their own keys (framework.name, ...) too.
FIRST = (("Framework", "framework.name"), ("Model", "model.name"), ("Precision", "precision.name"),
         ("Batch size", "run.batch_size"))


def params(record: dict) -> dict[str, str]:
    """What a person compares by (FIRST), the keys that define the run (those of its config hash:
    no tracking, ledger, progress or local cluster keys) and every `effective.*` setting, "n/a"
    where it does not apply."""
    flat = flatten(semantic(record["config"]))
    out = {name: _param(flat.get(key)) for name, key in FIRST}
    out.update({k: _param(v) for k, v in flat.items()})
    eff = view(record).effective
    if eff is not None:
        eff = eff.raw
        out.update({f"effective.{k}": _param(eff[k]) if k in eff else NOT_APPLICABLE for k in EFFECTIVE_KEYS})
    return out


def _metric_name(dotted: str) -> tuple[str, float]:
    """(MLflow name, factor): seconds → `_ms`, bytes → `_mib`; nesting with `/`."""
    name = dotted.replace(".", "/")
    if name.endswith("_s") and not name.endswith("per_s"):
        return name[:-2] + "_ms", 1e3
    if name.endswith("bytes"):
        return name.removesuffix("/bytes").removesuffix("_bytes") + "_mib", 1 / 2**20
    return name, 1.0


def metrics(record: dict) -> dict[str, float]:
    """The record's numeric results as metrics with their unit in the name, the compile step's
    (first step) loss included; `wall_ms` for the whole worker."""
    rec = view(record)
    res = rec.results
    flat = flatten({k: v for k, v in res.raw.items() if k not in NOT_METRICS})
    if rec.wall_s is not None:
        flat["wall_s"] = rec.wall_s
    out = {}
    for k, v in flat.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            name, factor = _metric_name(k)
            out[name] = v * factor
    if res.loss:
        out["first_step_loss"] = res.loss[0]
    if res.profile:
        from repro.profile import metrics as profile_metrics

        out.update(profile_metrics(res.profile))
    return out


def _epoch_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def run_window(record: dict) -> tuple[int | None, int | None]:
    """(start, end) of the run in ms since the epoch: its worker's start (the record's time less
    its wall time) and the record's time. The MLflow run is created only after the ledger has the
    record, so without these the UI's Duration column would time the projection, not the run."""
    rec = view(record)
    if not rec.created:
        return None, None
    end = _epoch_ms(rec.created)
    return end - int((rec.wall_s or 0) * 1e3), end


def series(record: dict) -> dict[str, list[tuple[int, float, int]]]:
    """Per-step series as (step, value, timestamp ms) from step 1 on (step 0, the compile
    step, is `first_step_*`). Timestamps: the worker's start (the record's time less its wall
    time) plus its setup, then each step's end (cumulative step times); records without step
    times get their record's time."""
    res = view(record).results
    losses, times = res.loss, res.step_time_s
    begin, end = run_window(record)
    end = end or 0
    if times:
        setup = sum(v for v in res.setup.values() if isinstance(v, (int, float)))
        stamps, t = [], (begin or 0) + setup * 1e3
        for s in times:
            t += s * 1e3
            stamps.append(int(t))
    else:
        stamps = [end] * len(losses)
    out = {"loss": [(i, float(v), stamps[i] if i < len(stamps) else end) for i, v in enumerate(losses) if i > 0]}
    if times:
        out["step_time_ms"] = [(i, s * 1e3, stamps[i]) for i, s in enumerate(times) if i > 0]
    return out


def source_tags(git: Git, command: str, user: str | None = None) -> dict[str, str]:
    """MLflow's own tags for the Source, Version and User columns (a record's typed `git`; no commit
    outside a git checkout)."""
    tags = {"mlflow.source.type": "LOCAL", "mlflow.source.name": command, "mlflow.user": user or getpass.getuser()}
    if git.commit:
        tags["mlflow.source.git.commit"] = str(git.commit)
    return tags


def run_tags(record: dict) -> dict[str, str]:
    """A finished run's tags: status, ledger id, fingerprints, and a one-line description."""
    rec = view(record)
    tags = {"repro.status": rec.status, "repro.ledger_id": rec.id}
    if rec.environment.raw:
        tags["repro.env_fingerprint"] = rec.environment.fingerprint
    if rec.data.raw:
        tags["repro.data_sha256"] = rec.data.sha256
    tags.update(render.scheduler_tags(rec.raw.get("scheduler")))  # where it ran: local, or SLURM's job, nodes, logs
    tags["mlflow.note.content"] = description(record)
    return tags


def description(record: dict) -> str:
    rec = view(record)
    res = rec.results
    if rec.status != "ok":
        return f"{rec.status}: {rec.error.get('reason', '')}"
    ms = lambda s: f"{s * 1e3:,.4g}" if s < 1 else f"{s * 1e3:,.0f}"  # noqa: E731
    return (f"steady {ms(res.steady_median_s)} ms (p10–p90 {ms(res.steady_p10_s)}–{ms(res.steady_p90_s)}), "
            f"first step {ms(res.first_step_s)} ms; ledger {rec.id}")


def datasets(record: dict) -> list[dict[str, str]]:
    """The run's data as MLflow datasets: one per DVC-tracked file (digest: its dvc.lock md5,
    source: its path), or the synthetic generator (digest: the batches' hash)."""
    data = view(record).data
    if data.md5:
        return [{"name": f"{data.name}/{path.rsplit('/', 1)[-1]}", "digest": md5, "source_type": "dvc",
                 "source": path, "context": "test" if "/test_" in path else "train"}
                for path, md5 in sorted(data.md5.items())]
    if data.sha256:
        return [{"name": data.name or "data", "digest": data.sha256[:32], "source_type": "code",
                 "source": f"{data.generator or 'generated'} seed {data.seed}", "context": "train"}]
    return []


DESCRIPTION_CELLS = (("name", "run"), ("status", "status"), ("repeats", "repeats"), ("median", "steady median (ms)"),
                     ("ci", "95 % CI (ms)"), ("p10_p90", "p10–p90 (ms)"), ("x_best", "× best"),
                     ("samples_per_s", "samples/s"))


def sweep_description(comparison) -> str:
    """The sweep's parent run description (markdown, the MLflow UI renders it): the verdicts, then
    per table its main cells (`Row.cells()`, as every view prints them) and its audit in brief."""
    lines = ["Verdicts:", ""] + [f"- {v}" for v in comparison.verdicts or ["no two configs differ only in the framework"]]
    for table in comparison.tables:
        lines += ["", f"**{table.header}**", "", "| " + " | ".join(h for _, h in DESCRIPTION_CELLS) + " |",
                  "|" + "---|" * len(DESCRIPTION_CELLS)]
        lines += ["| " + " | ".join(row.cells()[k] for k, _ in DESCRIPTION_CELLS) + " |" for row in table.rows]
        found = table.audit
        lines += ["", "Fairness audit: " + (f"WARNING, unequal comparison: {', '.join(label for label, _ in found.differences)}"
                                            if found.differences else "equal but for what was varied on purpose"
                                            + (f" ({', '.join(found.swept)})" if found.swept else ""))]
        lines += [f"- MACHINE: {line}" for line in found.machine]
    return "\n".join(lines)
