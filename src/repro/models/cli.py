"""`repro models [--json]`: every model and preset with its parameter count and FLOPs."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from repro.console import console


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    # No `common` parent: this command reads no ledger.
    p = sub.add_parser("models", help="list the model zoo with parameter counts and FLOPs")
    p.add_argument("--json", action="store_true", help="the same rows as one JSON array")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repro.models.listing import model_table

    rows = model_table()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    t = Table(title="repro models (sizes computed without allocating weights)", title_justify="left")
    for col in ("model", "preset", "task", "params", "published", "fwd GFLOPs/example"):
        t.add_column(col, justify="right" if col not in ("model", "preset", "task") else "left")
    for r in rows:
        pub = r.get("published_params")
        t.add_row(r["model"], r["preset"], r["task"], f"{r['params']:,}", f"{pub:,.0f}" if pub else "",
                  f"{r['flops_per_example'] / 1e9:,.3f}")
    console().print(t)
    return 0
