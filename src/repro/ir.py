"""Lowered IR: op histograms of StableHLO and HLO text, and `repro ir diff A B`.

The histograms go into the ledger (the texts themselves are MLflow artifacts), so two runs'
lowerings can be compared op by op: the analysis the Stack Wars study did by hand (layer
norm as explicit reduces in JAX vs batch_norm_training in PyTorch/XLA, fusion counts,
collectives...).
"""

from __future__ import annotations

import re
import sys
from collections import Counter

from repro.console import console as terminal
from repro.ledger import Ledger, LedgerError

STABLEHLO_OP = re.compile(r"\b(?:stablehlo|mhlo|chlo)\.([a-z_][a-z0-9_]*)")
# An HLO instruction: `%name = type[shape] opcode(` or `name = f32[2]{0} opcode(`.
HLO_OP = re.compile(r"=\s*(?:\([^)]*\)|[a-z0-9]+\[[^\]]*\](?:\{[^}]*\})?|[a-z0-9]+\[\])\s+([a-z][a-z0-9-]*)\(")


def stablehlo_ops(text: str) -> dict[str, int]:
    return dict(Counter(STABLEHLO_OP.findall(text)).most_common())


def hlo_ops(text: str) -> dict[str, int]:
    return dict(Counter(HLO_OP.findall(text)).most_common())


def histograms(ir: dict[str, str]) -> dict[str, dict[str, int]]:
    """{artifact name: op histogram} for each captured text that is StableHLO or HLO."""
    out = {}
    for name, text in ir.items():
        if "stablehlo" in name:
            out[name] = stablehlo_ops(text)
        elif "hlo" in name:
            out[name] = hlo_ops(text)
    return out


def add_parser(sub, common) -> None:
    p = sub.add_parser("ir", help="compare the lowered IR of runs (run.capture_ir=true)", parents=[common])
    isub = p.add_subparsers(dest="action", required=True)
    d = isub.add_parser("diff", help="op counts of two runs' lowerings, side by side", parents=[common])
    d.add_argument("a", help="a run id (or a unique prefix) recorded with run.capture_ir=true")
    d.add_argument("b", help="the run to compare it with")
    d.add_argument("--all", action="store_true", help="also the ops whose counts are equal")
    p.set_defaults(func=run)


def _stablehlo(record: dict) -> dict[str, int]:
    hist = (record.get("results") or {}).get("ir_ops") or {}
    key = next((k for k in hist if "stablehlo" in k), None)
    if key is None:
        raise LedgerError(f"record {record['id']} has no StableHLO op histogram: run it with run.capture_ir=true")
    return hist[key]


def run(args) -> int:
    from rich.table import Table

    ledger = Ledger(args.ledger)
    try:
        a, b = ledger.get(args.a), ledger.get(args.b)
        ha, hb = _stablehlo(a), _stablehlo(b)
    except LedgerError as e:
        print(f"repro ir diff: {e}", file=sys.stderr)
        return 2
    name = lambda r: f"{r['config']['framework']['name']} {r['id'][:8]}"  # noqa: E731
    t = Table(title=f"StableHLO ops: {name(a)} vs {name(b)}", title_justify="left")
    for col in ("op", name(a), name(b), "difference"):
        t.add_column(col, justify="left" if col == "op" else "right")
    ops = sorted(set(ha) | set(hb), key=lambda op: (-abs(ha.get(op, 0) - hb.get(op, 0)), op))
    shown = 0
    for op in ops:
        x, y = ha.get(op, 0), hb.get(op, 0)
        if x != y or args.all:
            t.add_row(op, str(x), str(y), f"{y - x:+d}")
            shown += 1
    console = terminal()
    console.print(t)
    console.print(f"{sum(ha.values())} ops in {name(a)}, {sum(hb.values())} in {name(b)}; "
                  f"{sum(ha.get(o, 0) != hb.get(o, 0) for o in ops)} op kinds differ in count")
    return 0
