"""A sweep's report page (markdown) and its table (CSV rows), from the sweep's records alone.

Nothing here depends on when or where it is generated (no dates but the records', no paths
but the report's own files), so the same records give the same bytes.
"""

from __future__ import annotations

import csv
import io

from repro.report import published
from repro.report.audit import CHECKS, audit, run_name
from repro.report.summary import Config, ratio_to_best, sweep_command, verdict_line
from repro.tracking.flat import flatten

COLUMNS = ("config", "model", "framework", "status", "runs", "first_step_ms", "second_step_ms", "steady_median_ms",
           "spread_low_ms", "spread_high_ms", "spread", "x_best", "samples_per_s", "tflops", "mfu", "peak_mib",
           "final_loss", "loss_sha256", "ledger_ids")


def _num(v: float | None, digits: int = 5) -> str:
    """Plain digits (no exponent below a million), so the CSV and the page read alike."""
    if v is None:
        return ""
    return f"{v:.{digits}g}" if abs(v) < 10 ** digits else f"{v:.0f}"


def rows(cfgs: list[Config]) -> list[dict[str, str]]:
    """One row per configuration: the sweep's table, as the CSV holds it."""
    ratios = ratio_to_best(cfgs)
    out = []
    for c in cfgs:
        s = c.spread
        res = c.ok[0]["results"] if c.ok else {}
        m = c.first["config"]["model"]
        out.append({
            "config": c.label, "model": f"{m['name']}/{m['preset']}", "framework": c.framework,
            "status": ",".join(sorted({r["status"] for r in c.records})), "runs": str(len(c.records)),
            "first_step_ms": _num(res.get("first_step_s") and res["first_step_s"] * 1e3),
            "second_step_ms": _num(res.get("second_step_s") and res["second_step_s"] * 1e3),
            "steady_median_ms": _num(s and s.median_s * 1e3), "spread_low_ms": _num(s and s.low_s * 1e3),
            "spread_high_ms": _num(s and s.high_s * 1e3), "spread": s.kind if s else "",
            "x_best": f"{ratios[c.label]:.2f}" if c.label in ratios else "", "samples_per_s": _num(res.get("samples_per_s")),
            "tflops": _num(res.get("achieved_tflops"), 3), "mfu": _num(res.get("mfu"), 3),
            "peak_mib": _num((res.get("peak_memory") or {}).get("bytes") and res["peak_memory"]["bytes"] / 2**20),
            "final_loss": _num(res.get("final_loss"), 6), "loss_sha256": (res.get("loss_sha256") or "")[:12],
            "ledger_ids": " ".join(r["id"] for r in c.records),
        })
    return out


def to_csv(table: list[dict[str, str]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return buf.getvalue()


def _md_table(header: list[str], body: list[list[str]]) -> list[str]:
    clean = lambda cell: str(cell).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(clean(c) for c in row) + " |" for row in body])


def results_table(cfgs: list[Config]) -> list[str]:
    shown = ("config", "status", "first_step_ms", "second_step_ms", "steady_median_ms", "spread_low_ms",
             "spread_high_ms", "x_best", "samples_per_s", "peak_mib", "final_loss", "loss_sha256")
    table = rows(cfgs)
    names = ["configuration", "status", "first (ms)", "second (ms)", "steady median (ms)", "low (ms)", "high (ms)",
             "× best", "samples/s", "peak MiB", "final loss", "loss sha256"]
    lines = _md_table(names, [[r[k] for k in shown] for r in table])
    kinds = sorted({r["spread"] for r in table if r["spread"]})
    return lines + ["", f"low–high: {'; '.join(kinds)}. × best: steady median over the fastest of its group."
                    if kinds else "No run ended ok."]


def audit_lines(cfgs: list[Config]) -> list[str]:
    """The fairness audit per group of configurations: what differs besides what was varied on
    purpose, and the machine's state (report/audit.py, as in the terminal and `repro compare`)."""
    by_group: dict[str, list[dict]] = {}
    for c in cfgs:
        by_group.setdefault(c.group, []).extend(c.ok)
    lines = []
    for group, records in by_group.items():
        found = audit(records)
        names = {r["id"]: run_name(r) for r in records}
        if found.varied:
            lines.append(f"- **{group}**: varied on purpose: {', '.join(found.swept)}")
        if not found.differences:  # the configs: equal but for what was varied; the machine apart
            lines.append(f"- **{group}**: the runs differ only in the framework"
                         + (" and what was varied on purpose." if found.varied else "."))
        else:
            lines.append(f"- **{group}**: WARNING, unequal comparison: {len(found.differences)} difference(s) "
                         "nobody asked for")
            lines += [f"  - {label}: " + "; ".join(f"{names.get(i, i)}={v}" for i, v in values.items())
                      for label, values in found.differences]
        if not found.machine:
            lines.append("  - the machine was quiet: no busy run, no wide spread.")
        lines += [f"  - MACHINE: {line}" for line in found.machine]
    return lines + ["", f"Checked: {', '.join(label for label, *_ in CHECKS)}."]


def machine_lines(records: list[dict]) -> list[str]:
    """The machine each run saw: CPU, cores, ISA, threads, and the record's `machine` state."""
    keys = sorted({k for r in records for k in flatten(r.get("machine") or {})})
    header = ["run", "framework", "cpu", "cores", "isa", "threads", *keys]
    body = []
    for r in records:
        env = r.get("environment") or {}
        cpu = env.get("cpu") or {}
        machine = flatten(r.get("machine") or {})
        body.append([r["id"], r["config"]["framework"]["name"], cpu.get("model", ""), cpu.get("cores", ""),
                     " ".join(cpu.get("isa") or []), (env.get("variables") or {}).get("REPRO_THREADS", ""),
                     *[machine.get(k, "") for k in keys]])
    gpus = sorted({g["name"] for r in records for g in (r.get("environment") or {}).get("gpus", [])})
    return _md_table(header, body) + ([f"", f"GPUs: {', '.join(gpus)}"] if gpus else [])


def _time_goes(cfgs: list[Config]) -> list[str]:
    from repro.profile import breakdown  # its section: only where runs were profiled

    return breakdown.markdown(cfgs)


def page(records: list[dict], cfgs: list[Config], plot_files: list[str], table_file: str) -> str:
    first = min(records, key=lambda r: r.get("created", ""))
    sweep = first.get("sweep") or {}
    experiment = sweep.get("experiment", "")
    git = first.get("git") or {}
    commits = sorted({str((r.get("git") or {}).get("commit")) for r in records})
    dirty = any((r.get("git") or {}).get("dirty") for r in records)
    lines = [
        f"# {experiment}: sweep {sweep.get('id', '')}", "",
        f"**Verdict:** {verdict_line(cfgs)}", "",
        f"{len(records)} run(s), {first.get('created', '')[:19].replace('T', ' ')} UTC, "
        f"repro {first.get('repro_version', '')}.", "",
        "## Command", "", "```bash", sweep_command(records), "```", "",
        f"Commit: `{', '.join(commits)}`" + (" (with uncommitted changes: "
                                            f"`{', '.join(git.get('changed') or [])[:300]}`)" if dirty else "") + ".",
        "", "## Results", "", *results_table(cfgs), "", f"The table as CSV: [{table_file}]({table_file}).", "",
        "## Fairness audit", "", *audit_lines(cfgs), "",
        *published.section(experiment, cfgs),
        *_time_goes(cfgs),
        "## Machine", "", *machine_lines(records), "",
        "## Plots", "",
    ]
    for name in plot_files:
        lines += [f"![{name}]({name})", ""]
    lines += ["Regenerate from the ledger: `repro report --sweep " + sweep.get("id", "") + "`.", ""]
    return "\n".join(lines)
