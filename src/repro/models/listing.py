"""Every model as a table: the zoo's and your packages', each preset with its size, FLOPs and source.

Framework-free (entries only; a package's model module is imported, never a framework);
`repro models [--json] [--config-dir DIR]` prints it. A model of your own without `param_count` /
`flops_per_example` shows none: each run records what its framework counted."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ModelRow:
    """One line of `repro models`: a model's preset with its sizes (a model that cannot load: one
    row, preset "", its error as the description)."""

    model: str
    preset: str
    params: int | None
    flops_per_example: float | None  # None: measured by each run
    task: str
    description: str
    source: str
    published_params: float | None = None  # the published figure, for a preset that reproduces one

    def as_json(self) -> dict[str, Any]:
        """The row as `repro models --json` prints it: published_params only where there is one."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None or k != "published_params"}


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


def model_table(config_dirs: Sequence[str | Path] = ()) -> list[ModelRow]:
    rows = []
    for name, entry, source in found(config_dirs):
        if isinstance(entry, Exception):
            rows.append(ModelRow(model=name, preset="", params=None, flops_per_example=None, task="",
                                 description=f"cannot load: {entry}", source=source))
            continue
        for preset in entry.presets:
            dims = entry.dims(preset)
            params, flops = entry.param_count(dims), entry.flops_per_example(dims)
            rows.append(ModelRow(model=name, preset=preset, params=None if params is None else int(params),
                                 flops_per_example=None if flops is None else float(flops), task=entry.task,
                                 description=entry.description, source=source,
                                 published_params=PUBLISHED_PARAMS.get((entry.name, preset))))
    return rows

