"""A sweep's report folder (report.md, results.csv, PNGs): written at the end of every multirun,
attached to its MLflow parent run, and rebuilt from the ledger alone by `repro report`."""

from __future__ import annotations

import sys
from pathlib import Path

from repro import paths
from repro.ledger import Ledger, LedgerError
from repro.ledger.record import view
from repro.redaction import redact
from repro.report import compare, comparison, markdown, varied
from repro.usertext import markup

PAGE, TABLE = "report.md", "results.csv"


def default_dir(records: list[dict], ledger_dir: str, sweep_id: str | None = None) -> Path:
    """The report folder of the sweep these records are (`sweep_id`, where the caller knows it): a
    resumed sweep's earlier runs (which name the sweep they ran in, `resumed_from`) never point its
    report at that earlier sweep's, even when the sweep ran nothing itself."""
    own = [r for r in records if not r.get("resumed_from")] or records
    return paths.default_reports_dir(ledger_dir) / (sweep_id or view(own[0]).sweep.id)


def write(records: list[dict], out: Path, comp: comparison.Comparison | None = None,
          ledger_dir: str | Path | None = None) -> list[Path]:
    """Write the report of `records` (one sweep's runs; `comp`: their comparison, when already
    built; `ledger_dir`: the ledger they were read from) into `out`; returns the files written."""
    from repro.report import plots  # matplotlib: imported when a report is written, not by every sweep

    out.mkdir(parents=True, exist_ok=True)
    comp = comp or comparison.build(records, ledger_dir)
    pngs = plots.write(comp, out)
    # UTF-8 whatever the locale; redacted, as every file repro writes (the records already are)
    (out / TABLE).write_text(redact(markdown.to_csv(markdown.rows(comp))), encoding="utf-8")
    (out / PAGE).write_text(redact(markdown.page(records, comp, [p.name for p in pngs], TABLE)), encoding="utf-8")
    return [out / PAGE, out / TABLE, *pngs]


def publish(records: list[dict], console, comp: comparison.Comparison | None = None) -> Path | None:
    """The end of a multirun: write its report (from the records alone) and print where, once it
    exists. The records are in the ledger already: a report that fails is a warning, never a lost sweep."""
    runs = [r for r in records if r.get("kind") == "run"]
    if not runs:
        return None
    out = default_dir(runs, view(runs[0]).config.ledger.dir)
    try:
        write(runs, out, comp)
    except Exception as e:  # noqa: BLE001
        console.print(f"[yellow]warning: the sweep's report was not completed ({type(e).__name__}: {markup(e)}); "
                      f"`repro report --sweep {markup(runs[0]['sweep']['id'])}` rebuilds it from the ledger[/]")
        return None
    console.print(f"report: {markup(out / PAGE)}", highlight=False)
    return out


def announce(records: list[dict], console, sweep_id: str) -> Path | None:
    """The end of the multirun `sweep_id`, whose report the MLflow projector writes
    (tracking/projector.py) after the command returns: where it will be, said now."""
    runs = [r for r in records if r.get("kind") == "run"]
    if not runs:
        return None
    out = default_dir(runs, view(runs[0]).config.ledger.dir, sweep_id)
    console.print(f"report: {markup(out / PAGE)} (being written in the background; ready when the projector ends)")
    return out


def swept_params(records: list[dict]) -> dict[str, str]:
    """The parent run's params: what the sweep varied, with its values in job order."""
    values = [varied.override_values(r) for r in sorted(records, key=lambda r: view(r).sweep.job)]
    return {"jobs": str(len(records)),
            **{f"swept.{k}": ",".join(dict.fromkeys(v[k] for v in values if k in v)) for k in varied.swept_keys(records)}}


def add_parser(sub, common) -> None:
    p = sub.add_parser("report", help="a sweep's report (markdown, CSV, plots) from the ledger alone", parents=[common])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--sweep", help="a sweep id (or a unique prefix of one)")
    which.add_argument("--experiment", help="the newest recorded sweep of this experiment")
    p.add_argument("--out", help="the folder to write (default: <ledger>/.reports/<sweep id>)")
    p.set_defaults(func=run)


def run(args) -> int:
    ledger = Ledger(args.ledger)
    try:
        records = compare.sweep_runs(ledger, args.sweep) if args.sweep else compare.newest_sweep(ledger, args.experiment)
    except LedgerError as e:
        print(f"repro report: {e}", file=sys.stderr)
        return 2
    if changed := compare.changed_lines(ledger, records):  # a report publishes: never an edited figure
        print("repro report: not written: " + "; ".join(changed), file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else default_dir(records, args.ledger)
    try:
        files = write(records, out, ledger_dir=ledger.root)  # in the foreground: the path printed below exists
    except OSError as e:
        print(f"repro report: cannot write {out} ({e.strerror or e}); name another folder with --out DIR",
              file=sys.stderr)
        return 2
    print(f"report: {out / PAGE} ({len(records)} runs of sweep {records[0]['sweep']['id']}, {len(files)} files)")
    return 0
