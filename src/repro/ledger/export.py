"""`repro ledger export --format csv|json|parquet [--out FILE]`: the ledger as one table.

One row per run (the head record of each run's chain: its current state), columns flattened
with dots: `config.*`, `results.*`, `machine.*`, `environment.*`, `git.*`, `sweep.*`, ...
(pandas does the flattening and the writing; lists such as the loss series stay lists in
JSON and become JSON strings in CSV and parquet).

A record changed after it was written (its content no longer hashes to its id: Ledger.changed) is
still a row, so the table stays the whole ledger, but its `verified` column is false and the
command names it on stderr: its figures are not the ones measured (`repro report` refuses it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from repro.ledger.store import Ledger

FORMATS = ("csv", "json", "parquet")
# Per-run artefacts that are not columns: the package list (hundreds of names) stays in the record.
LEFT_OUT = ("environment.packages",)


def frame(ledger: Ledger):
    """A pandas DataFrame: one row per run, in the order the runs were recorded."""
    import pandas as pd

    runs = [r for r in ledger.heads() if r.get("kind") == "run"]
    changed = ledger.changed()
    df = pd.json_normalize(runs, sep=".")
    df["verified"] = [r["id"] not in changed for r in runs]
    df = df[[c for c in df.columns if not c.startswith(LEFT_OUT)]]
    return df.reindex(columns=sorted(df.columns, key=lambda c: (c.split(".")[0] != "id", c)))


def _flat_cells(df):
    """Lists and dicts as JSON text, other mixed-type columns as text (CSV, parquet need one type)."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object:
            cells = out[col].map(lambda v: json.dumps(v) if isinstance(v, (list, dict)) else v)
            kinds = {type(v) for v in cells if v is not None and v == v}
            out[col] = cells.map(lambda v: None if v is None or v != v else str(v)) if len(kinds) > 1 else cells
    return out


def write(df, fmt: str, out) -> None:
    if fmt == "json":
        df.to_json(out, orient="records", indent=1, force_ascii=False)
    elif fmt == "csv":
        _flat_cells(df).to_csv(out, index=False)
    else:
        _flat_cells(df).to_parquet(out, index=False)


def add_parser(sub, common) -> None:
    p = sub.add_parser("export", help="one row per run (flattened config, results, machine, environment) "
                                      "as CSV, JSON or parquet", parents=[common])
    p.add_argument("--format", choices=FORMATS, default="csv", help="the file format: one row per run, flattened columns")
    p.add_argument("--out", help="the file to write (default: standard output; parquet needs --out)")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.format == "parquet" and not args.out:
        print("repro ledger export: parquet is binary: give --out FILE.parquet", file=sys.stderr)
        return 2
    ledger = Ledger(args.ledger)
    df = frame(ledger)
    if len(df) and not df["verified"].all():
        edited = list(df.loc[~df["verified"], "id"])
        print(f"repro ledger export: warning: {len(edited)} record(s) changed after they were written, exported with "
              f"verified=false: {', '.join(edited[:5])}{' …' if len(edited) > 5 else ''} (repro ledger verify names "
              "the files; their figures cannot be trusted)", file=sys.stderr)
    if args.out:
        write(df, args.format, args.out)
        print(f"ledger export: {len(df)} runs × {len(df.columns)} columns → {Path(args.out)}", file=sys.stderr)
    else:
        write(df, args.format, sys.stdout)
        if args.format == "json":
            sys.stdout.write("\n")
    return 0
