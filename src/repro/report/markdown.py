"""A sweep's report page (markdown) and its table (CSV rows), from the sweep's records alone.

Nothing here depends on when or where it is generated (no dates but the records', no paths
but the report's own files), so the same records give the same bytes.
"""

from __future__ import annotations

import csv
import io

from repro.flat import flatten
from repro.ledger.command import sweep_command
from repro.report import determinism_price, identity, published
from repro.ledger import render
from repro.ledger.record import view
from repro.report import wall
from repro.report.audit import CHECKS
from repro.report.md import md_table
from repro.report.comparison import CELLS, MISSING, Comparison, Table
from repro.usertext import shown

SPLIT = {"ci": ("ci_low_ms", "ci_high_ms"), "p10_p90": ("p10_ms", "p90_ms")}  # "a–b" cells, two CSV columns
CSV_NAMES = {"name": "run", "first": "first_step_ms", "second": "second_step_ms", "median": "steady_median_ms",
             "ledger": "ledger_ids"}
COLUMNS = ("model", "x_best_by", *(n for key, _ in CELLS for n in SPLIT.get(key, (CSV_NAMES.get(key, key),))),
           "verdicts")  # the sentences of the row's table (report/verdict.py), " | " between them


def rows(comparison: Comparison) -> list[dict[str, str]]:
    """One row per config, as the CSV holds it: the cells every view prints ("" for "—", a field the record lacks), the
    intervals split into their two ends."""
    out = []
    for table in comparison.tables:
        for row in table.rows:
            line = {"model": table.model, "x_best_by": table.by}
            for key, cell in row.cells().items():
                ends = cell.split("–") if key in SPLIT and cell.count("–") == 1 else ["", ""]
                line.update(zip(SPLIT[key], ends) if key in SPLIT else [(CSV_NAMES.get(key, key), cell)])
            out.append({**{k: "" if v == MISSING else v for k, v in line.items()},
                        "verdicts": " | ".join(v.text for v in table.verdicts)})
    return out


def to_csv(table: list[dict[str, str]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return buf.getvalue()


def results_table(table: Table) -> list[str]:
    """One model's rows, the columns and cells of the terminal's table."""
    lines = [f"**{table.header}**", ""]
    lines += md_table([h for _, h in table.columns], [[row.cells()[k] for k, _ in table.columns] for row in table.rows])
    kinds = sorted({row.spread[2] for row in table.rows if row.spread})
    return lines + ["", f"Spread: {'; '.join(kinds)}." if kinds else "No run ended ok."]


def verdict_lines(comparison: Comparison) -> list[str]:
    lines = [f"- {line}" for line in comparison.verdicts] or ["- no two configs differ only in the framework"]
    for table in comparison.tables:
        if (same := identity.table_line(table.rows))[0]:
            lines.append(f"- **{table.model}**: {same[0]}")
    return lines


def price_lines(comparison: Comparison) -> list[str]:
    """The price of determinism (report/determinism_price.py), where the sweep varied run.deterministic."""
    found = determinism_price.prices(comparison)
    if not found:
        return []
    body = [[p.cells()[k] for k, _ in determinism_price.HEADERS] for p in found]
    return ["## The price of determinism", "", *md_table([h for _, h in determinism_price.HEADERS], body), "",
            *(f"- {line}" for line in determinism_price.lines(comparison)), ""]


def audit_lines(comparison: Comparison) -> list[str]:
    """The fairness audit per table: what differs besides what was varied on purpose, and the
    machine's state (report/audit.py, as in the terminal and `repro compare`)."""
    lines = []
    for table in comparison.tables:
        found, group = table.audit, table.model
        if found.varied:
            lines.append(f"- **{group}**: varied on purpose: {', '.join(found.swept)}")
        if not found.differences:  # the configs: equal but for what was varied; the machine apart
            lines.append(f"- **{group}**: the runs differ only in "
                         + ("what was varied on purpose." if found.varied else "the framework."))
        else:
            lines.append(f"- **{group}**: WARNING, unequal comparison: {len(found.differences)} difference(s) "
                         "nobody asked for")
            lines += [f"  - {label}: " + "; ".join(f"{found.names.get(i, i)}={v}"
                                                   + (f" ({d})" if (d := found.details.get((label, i))) else "")
                                                   for i, v in values.items())
                      for label, values in found.differences]
        if not found.machine:
            lines.append("  - the machine was quiet: no busy run, no wide spread.")
        lines += [f"  - MACHINE: {line}" for line in found.machine]
    return lines + ["", f"Checked: {', '.join(label for label, *_ in CHECKS)}."]


def _shown(v) -> str:
    """A machine value as a person reads it: no `None`, no `[]`, lists as their items."""
    if v is None or v == "":
        return MISSING
    if isinstance(v, (list, tuple)):
        return " ".join(_shown(x) for x in v) if v else "none"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _machine(record: dict) -> dict[str, str]:
    rec = view(record)
    env = rec.environment
    cpu = env.cpu
    isa = cpu.get("isa")
    facts = {"cpu": cpu.get("model"), "cores": cpu.get("cores"),
             "ISA": (f"{len(isa)} extensions, " + ("avx512" if any(x.startswith("avx512") for x in isa) else "no avx512")
                     if isa is not None else None),
             "threads (REPRO_THREADS)": env.variables.get("REPRO_THREADS")}
    machine = flatten(rec.machine.raw)
    facts.update({k: machine[k] for k in sorted(machine)  # its cores and threads: where the env's disagree
                  if k not in ("cores", "threads") or str(machine[k]) != str(facts["cores" if k == "cores" else
                                                                                     "threads (REPRO_THREADS)"])})
    facts["GPUs"] = [g.get("name") for g in env.gpus]
    facts["scheduler"] = render.scheduler(rec.raw.get("scheduler"))  # local, or SLURM's job, nodes, log
    return {k: _shown(v) for k, v in facts.items()}


def machine_lines(comparison: Comparison) -> list[str]:
    """The machine each run saw: what all runs share once, above a table of what differs."""
    records = [r for row in comparison.rows for r in row.records]
    facts = {view(r).id: _machine(r) for r in records}
    keys = list(dict.fromkeys(k for f in facts.values() for k in f))
    same = [k for k in keys if len({f.get(k, MISSING) for f in facts.values()}) == 1]
    differs = [k for k in keys if k not in same]
    names = {view(r).id: f"{row.name} ({view(r).id[:8]})" for row in comparison.rows for r in row.records}
    first = next(iter(facts.values()), {})
    lines = ["Every run:", ""] + [f"- {k}: {first.get(k, MISSING)}" for k in same if k != "ISA"]  # the ISA in full below
    isas = sorted({" ".join(view(r).environment.cpu.get("isa") or []) for r in records} - {""})
    lines += [f"- ISA extensions{f' (set {i + 1})' if len(isas) > 1 else ''}: {isa}" for i, isa in enumerate(isas)]
    if differs:
        lines += ["", "What differs between the runs:", ""]
        lines += md_table(["run", *differs], [[names[i], *(f.get(k, MISSING) for k in differs)]
                                              for i, f in facts.items()])
    return lines


def _time_goes(comparison: Comparison) -> list[str]:
    from repro.report import where_time_goes  # "where the time goes" (profiled runs) and "first step"

    return where_time_goes.markdown(comparison)


def page(records: list[dict], comparison: Comparison, plot_files: list[str], table_file: str) -> str:
    first = view(min(records, key=lambda r: view(r).created))
    sweep = first.sweep
    experiment = sweep.experiment
    commits = sorted({str(view(r).git.commit) for r in records})
    dirty = any(view(r).git.dirty for r in records)
    lines = [
        f"# {experiment}: sweep {sweep.id or ''}", "",
        "## Verdicts", "", *verdict_lines(comparison), "",
        f"{len(records)} run(s), {first.created[:19].replace('T', ' ')} UTC, "
        f"repro {first.raw.get('repro_version', '')}.", "",
        "## Command", "", "```bash", sweep_command(records), "```", "",
        f"Commit: `{', '.join(commits)}`" + (" (with uncommitted changes: "
                                            f"`{', '.join(first.git.changed)[:300]}`)" if dirty else "") + ".",
        "", "## Results", "", *(line for t in comparison.tables for line in [*results_table(t), ""]),
        f"The table as CSV: [{table_file}]({table_file}).", "",
        *price_lines(comparison),
        "## Fairness audit", "", *audit_lines(comparison), "",
        *published.section(experiment, comparison),
        *_time_goes(comparison),
        *wall.markdown(comparison),
        "## Machine", "", *machine_lines(comparison), "",
        "## Plots", "",
    ]
    for name in plot_files:
        lines += [f"![{name}]({name})", ""]
    lines += ["Regenerate from the ledger: `repro report --sweep " + (sweep.id or "") + "`.", ""]
    return shown("\n".join(lines))  # what users typed, without the control characters a viewer would act on
