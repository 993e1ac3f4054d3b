"""The zoo as a table: every model and preset with its analytic size and forward FLOPs.

Framework-free (entries only); `repro models [--json]` prints it."""

from __future__ import annotations

from typing import Any

from repro.models import all_entries

# Published parameter counts, for the presets that reproduce a published model.
PUBLISHED_PARAMS = {
    ("vit", "b16"): 86.6e6,  # ViT-B/16, Dosovitskiy et al. 2021
    ("resnet50", "r50"): 25.6e6,  # He et al. 2016 / torchvision
    ("bert_base", "base"): 110e6,  # Devlin et al. 2019
    ("gpt2_small", "small"): 124e6,  # Radford et al. 2019 (117M in the paper; 124M as released)
    ("gpt_neo_1_3b", "1_3b"): 1.3e9,  # EleutherAI GPT-Neo 1.3B
    ("llama3_8b", "8b"): 8.03e9,  # Meta LLaMA-3.1 8B
}


def model_table() -> list[dict[str, Any]]:
    rows = []
    for entry in all_entries():
        for preset in entry.presets:
            dims = entry.dims(preset)
            row = dict(model=entry.name, preset=preset, params=int(entry.param_count(dims)),
                       flops_per_example=float(entry.flops_per_example(dims)), task=entry.task,
                       description=entry.description)
            if (entry.name, preset) in PUBLISHED_PARAMS:
                row["published_params"] = PUBLISHED_PARAMS[entry.name, preset]
            rows.append(row)
    return rows


def _si(x: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def format_table(rows: list[dict[str, Any]]):
    """A rich Table of `model_table()` rows (rich is imported only here)."""
    from rich.table import Table

    table = Table(title="repro model zoo")
    for col, justify in (("model", "left"), ("preset", "left"), ("task", "left"), ("params", "right"),
                         ("published", "right"), ("fwd FLOPs/example", "right"), ("description", "left")):
        table.add_column(col, justify=justify)
    for r in rows:
        pub = r.get("published_params")
        table.add_row(r["model"], r["preset"], r["task"], f"{r['params']:,}", _si(pub) if pub else "",
                      _si(r["flops_per_example"]), r["description"])
    return table
