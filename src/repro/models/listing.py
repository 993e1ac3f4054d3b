"""Every model as a table: the zoo's and your packages', each preset with its size, FLOPs and source.

Framework-free (entries only; a package's model module is imported, never a framework);
`repro models [--json] [--config-dir DIR]` prints it. A model of your own without `param_count` /
`flops_per_example` shows none: each run records what its framework counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from repro.models import TARGET_KEY, ModelLoadError, all_entries, entry_points, load

# Published parameter counts, for the presets that reproduce a published model.
PUBLISHED_PARAMS = {
    ("vit", "b16"): 86.6e6,  # ViT-B/16, Dosovitskiy et al. 2021
    ("resnet50", "r50"): 25.6e6,  # He et al. 2016 / torchvision
    ("bert_base", "base"): 110e6,  # Devlin et al. 2019
    ("gpt2_small", "small"): 124e6,  # Radford et al. 2019 (117M in the paper; 124M as released)
    ("gpt_neo_1_3b", "1_3b"): 1.3e9,  # EleutherAI GPT-Neo 1.3B
    ("llama3_8b", "8b"): 8.03e9,  # Meta LLaMA-3.1 8B
}


def found(config_dirs: Sequence[str | Path] = ()) -> list[tuple[str, Any, str]]:
    """(name, entry or the error that stops it loading, where it comes from) of every model: the
    zoo, the `repro.models` entry points and the `model/*.yaml` with a `_target_` in `config_dirs`."""
    import yaml

    out: list[tuple[str, Any, str]] = [(e.name, e, "zoo") for e in all_entries()]
    for name, (value, dist) in sorted(entry_points().items()):
        out.append((name, _load(value, f"entry point {name} ({dist})"), f"entry point {value} ({dist})"))
    for folder in config_dirs:
        for path in sorted((Path(folder) / "model").glob("*.yaml")):
            target = (yaml.safe_load(path.read_text()) or {}).get(TARGET_KEY)
            if target:
                out.append((path.stem, _load(target, str(path)), f"{path} ({TARGET_KEY}: {target})"))
    return out


def _load(target: str, source: str):
    try:
        return load(target, source)
    except ModelLoadError as e:
        return e


def model_table(config_dirs: Sequence[str | Path] = ()) -> list[dict[str, Any]]:
    rows = []
    for name, entry, source in found(config_dirs):
        if isinstance(entry, Exception):
            rows.append(dict(model=name, preset="", params=None, flops_per_example=None, task="", source=source,
                             description=f"cannot load: {entry}"))
            continue
        for preset in entry.presets:
            dims = entry.dims(preset)
            params, flops = entry.param_count(dims), entry.flops_per_example(dims)
            row = dict(model=name, preset=preset, params=None if params is None else int(params),
                       flops_per_example=None if flops is None else float(flops), task=entry.task,
                       description=entry.description, source=source)
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
