"""The closing comparison: one table per model, frameworks side by side, ratios to the best."""

from __future__ import annotations

from collections import defaultdict

from rich.table import Table

from repro.report import trajectory


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:,.2f}"


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / 2**20:,.0f}" if b >= 2**20 else f"{b / 2**20:.3f}"


def comparison_tables(records: list[dict]) -> list[Table]:
    by_model: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        m = r["config"]["model"]
        by_model[f"{m['name']}/{m['preset']}"].append(r)
    tables = []
    for model, rows in by_model.items():
        ok = [r["results"]["steady_median_s"] for r in rows if r["status"] == "ok"]
        best = min(ok) if ok else None
        first = rows[0]["config"]
        title = (f"{model} · batch {first['run']['batch_size']} · {first['precision']['name']} · "
                 f"{first['hardware']['name']} · {first['run']['task']} step (ms)")
        t = Table(title=title, title_justify="left")
        accuracy = any("test_accuracy" in (r.get("results") or {}) for r in rows)
        sharded = any((r.get("results") or {}).get("sharding") for r in rows)
        agreement = trajectory.cells(rows)  # loss drift between runs that differ only in the framework
        for col in ("framework", "status", "first", "second", "steady median", "p10–p90", "× best",
                    "samples/s", "TFLOP/s", "MFU", "peak MiB", *(["param MiB/dev"] if sharded else []), "final loss", *(["trajectory"] if agreement else []), *(["test acc"] if accuracy else []), "loss sha256", "ledger"):
            t.add_column(col, justify="left" if col in ("framework", "status", "ledger", "loss sha256") else "right")
        for r in rows:
            res = r.get("results") or {}
            med = res.get("steady_median_s")
            layout = r["config"]["sharding"]["name"]
            t.add_row(
                r["config"]["framework"]["name"] + ("" if layout == "none" else f" {layout}"), r["status"], _ms(res.get("first_step_s")),
                _ms(res.get("second_step_s")), _ms(med),
                f"{_ms(res.get('steady_p10_s'))}–{_ms(res.get('steady_p90_s'))}" if med else "-",
                f"{med / best:.2f}" if med and best else "-",
                f"{res['samples_per_s']:,.0f}" if med else "-",
                f"{res['achieved_tflops']:.3g}" if "achieved_tflops" in res else "-",
                f"{res['mfu']:.1%}" if "mfu" in res else "-",
                _mib((res.get("peak_memory") or {}).get("bytes")),
                *([_mib((res.get("sharding") or {}).get("param_bytes_per_device", res.get("param_count", 0) * 4))
                   if res else "-"] if sharded else []),
                f"{res['final_loss']:.5f}" if "final_loss" in res else "-",
                *([agreement.get(r["id"], "-")] if agreement else []),
                *([f"{res['test_accuracy']:.3f}" if "test_accuracy" in res else "-"] if accuracy else []),
                res.get("loss_sha256", "-")[:12], r["id"],
            )
        tables.append(t)
    return tables
