"""The closing comparison: one table per model, one row per config, labelled by what varied.

Rows are configs: a config's repeats (`run.repeats`) make one row with the median of their
steady medians, its 95 % CI and the repeat count (report/stats.py). Row labels are the values
of the keys that differ between the rows (`jax · batch 64`); the title holds what they all
share. "× best" ranks by throughput (samples/s) when batch sizes differ, else by the steady
median. A row measured on a busy machine is marked. `verdict_lines` gives one sentence per
pair of configs that differ only in the framework.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

from rich.table import Table

from repro.report import stats, trajectory, varied
from repro.report.audit import busy

IN_TITLE = ("model", "model.preset")  # a table is one model at one preset


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:,.2f}"


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / 2**20:,.0f}" if b >= 2**20 else f"{b / 2**20:.3f}"


def by_model(records: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        m = r["config"]["model"]
        out[f"{m['name']}/{m['preset']}"].append(r)
    return out


def row_keys(records: list[dict]) -> list[str]:
    """The keys that label the rows: the framework, then every other key that differs."""
    return ["framework"] + [k for k in varied.differing_keys(records) if k not in ("framework", *IN_TITLE)]


def _title(model: str, records: list[dict]) -> str:
    differs = set(varied.differing_keys(records))
    first = records[0]["config"]
    parts = [model]
    if "run.batch_size" not in differs:
        parts.append(f"batch {first['run']['batch_size']}")
    for group in ("precision", "sharding", "hardware"):
        if group not in differs and not (group == "sharding" and first[group]["name"] == "none"):
            parts.append(first[group]["name"])
    if "run.task" not in differs:
        parts.append(f"{first['run']['task']} step (ms)")
    return " · ".join(parts)


def _median_of(rows: list[dict], key: str) -> float | None:
    return stats.median_of([(r.get("results") or {}).get(key) for r in rows if r.get("status") == "ok"])


def _status(rows: list[dict]) -> str:
    statuses = [r["status"] for r in rows]
    kinds = dict.fromkeys(statuses)
    text = statuses[0] if len(kinds) == 1 else ", ".join(f"{s} {statuses.count(s)}/{len(rows)}" for s in kinds)
    n_busy = sum(busy(r) is not None for r in rows)
    return text + ("" if not n_busy else " ⚠ busy" if n_busy == len(rows) else f" ⚠ busy {n_busy}/{len(rows)}")


def comparison_tables(records: list[dict]) -> list[Table]:
    tables = []
    for model, records_of_model in by_model(records).items():
        keys = row_keys(records_of_model)
        groups = stats.by_config(records_of_model)
        summaries = {g: stats.summarise(rows) for g, rows in groups.items()}
        by_throughput = len({r["config"]["run"]["batch_size"] for r in records_of_model}) > 1
        if by_throughput:
            best = max((s.samples_per_s for s in summaries.values() if s.samples_per_s), default=None)
        else:
            best = min((s.median_s for s in summaries.values() if s.median_s), default=None)
        title = _title(model, records_of_model) + (" · × best by samples/s" if by_throughput else "")
        t = Table(title=title, title_justify="left")
        accuracy = any("test_accuracy" in (r.get("results") or {}) for r in records_of_model)
        sharded = any((r.get("results") or {}).get("sharding") for r in records_of_model)
        agreement = trajectory.cells(records_of_model)  # loss drift between runs that differ only in the framework
        label_col = " · ".join(varied.describe(k, "").strip() or k for k in keys) if len(keys) > 1 else "framework"
        for col in (label_col, "status", "first", "second", "steady median", "95 % CI (repeats)", "p10–p90",
                    "× best", "samples/s", "TFLOP/s", "MFU", "peak MiB",
                    *(["param MiB/dev"] if sharded else []), "final loss", *(["trajectory"] if agreement else []),
                    *(["test acc"] if accuracy else []),
                    "loss sha256", "ledger"):
            t.add_column(col, justify="left" if col in (label_col, "status", "ledger", "loss sha256") else "right",
                         no_wrap=col in (label_col, "status", "ledger", "95 % CI (repeats)"))
        for group, rows in groups.items():
            s = summaries[group]
            ok = [r for r in rows if r["status"] == "ok"]
            res = (ok or rows)[0].get("results") or {}
            med = s.median_s
            if not med or not best:
                rank = "-"
            else:
                rank = f"{best / s.samples_per_s:.2f}" if by_throughput else f"{med / best:.2f}"
            tflops, mfu = _median_of(ok, "achieved_tflops"), _median_of(ok, "mfu")
            t.add_row(
                varied.label(rows[0], keys), _status(rows), _ms(s.first_s), _ms(s.second_s), _ms(med),
                (f"{_ms(s.ci_s[0])}–{_ms(s.ci_s[1])} ({s.n})" if s.ci_s else "single sample") if med else "-",
                f"{_ms(s.p10_s)}–{_ms(s.p90_s)}" if med else "-", rank,
                f"{s.samples_per_s:,.0f}" if s.samples_per_s else "-",
                f"{tflops:.3g}" if tflops is not None else "-",
                f"{mfu:.1%}" if mfu is not None else "-",
                _mib((res.get("peak_memory") or {}).get("bytes")),
                *([_mib((res.get("sharding") or {}).get("param_bytes_per_device", res.get("param_count", 0) * 4))
                   if res else "-"] if sharded else []),
                f"{res['final_loss']:.5f}" if "final_loss" in res else "-",
                *([next((agreement[r["id"]] for r in rows if r["id"] in agreement), "-")] if agreement else []),
                *([f"{res['test_accuracy']:.3f}" if "test_accuracy" in res else "-"] if accuracy else []),
                res.get("loss_sha256", "-")[:12], rows[0]["id"] + (f" +{len(rows) - 1}" if len(rows) > 1 else ""),
            )
        tables.append(t)
    return tables


def _interleaved(a: list[dict], b: list[dict]) -> bool:
    """Both configs' repeats ran in one sweep (RepeatSweeper interleaves them)."""
    sweeps = {(r.get("sweep") or {}).get("id") for r in a + b}
    return len(sweeps) == 1 and all((r.get("repeat") or {}).get("count", 1) > 1 for r in a + b)


def verdict_lines(records: list[dict]) -> list[str]:
    """Per model: one verdict per pair of configs that differ only in the framework."""
    lines = []
    for model, records_of_model in by_model(records).items():
        others = row_keys(records_of_model)[1:]
        groups = [rows for rows in stats.by_config(records_of_model).values() if stats.steady_medians(rows)]
        for a, b in combinations(groups, 2):
            rest_a, rest_b = varied.label(a[0], others), varied.label(b[0], others)
            fw_a, fw_b = (rows[0]["config"]["framework"]["name"] for rows in (a, b))
            if rest_a != rest_b or fw_a == fw_b:
                continue
            what = model + (f" · {rest_a}" if rest_a else "")
            lines.append(stats.compare(fw_a, a, fw_b, b, what, interleaved=_interleaved(a, b)).text)
    return lines
