"""`repro models [--json]`: every model and preset with its parameter count and FLOPs."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from repro.console import console


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    # No `common` parent: this command reads no ledger.
    p = sub.add_parser("models", help="list the model zoo and your packages' models: sizes, FLOPs, where each comes from")
    p.add_argument("--json", action="store_true", help="the same rows as one JSON array")
    p.add_argument("--config-dir", "-cd", action="append", default=[], metavar="DIR",
                   help="also list the models that `DIR/model/*.yaml` name with _target_ (as `repro --config-dir DIR`)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repro.models.listing import model_table

    rows = model_table(args.config_dir)
    if args.json:
        print(json.dumps([r.as_json() for r in rows], indent=1))
        return 0
    t = Table(title="repro models (sizes computed without allocating weights)", title_justify="left")
    for col in ("model", "preset", "task", "params", "published", "fwd GFLOPs/example", "source"):
        t.add_column(col, justify="right" if col not in ("model", "preset", "task", "source") else "left")
    for r in rows:
        pub = r.published_params
        t.add_row(r.model, r.preset, r.task, "—" if r.params is None else f"{r.params:,}",
                  f"{pub:,.0f}" if pub else "",
                  "measured per run" if r.flops_per_example is None else f"{r.flops_per_example / 1e9:,.3f}",
                  r.source if r.source == "zoo" else f"{r.source}\n{r.description}"
                  if r.preset == "" else r.source)
    console().print(t)
    return 0
