"""The model zoo: one folder per model, each the same function in Flax NNX and PyTorch."""

from __future__ import annotations

import importlib

from repro.models.base import ModelEntry

# Names of the model folders. Importing an entry imports only NumPy, never a framework.
MODEL_NAMES = (
    "mlp", "vit", "gemm", "ffn", "mha", "resnet50", "gpt2_small", "gpt_neo_1_3b",
    "bert_base", "llama3_8b",
)


def get(name: str) -> ModelEntry:
    if name not in MODEL_NAMES:
        raise KeyError(f"unknown model {name!r}; valid models: {', '.join(MODEL_NAMES)}")
    return importlib.import_module(f"repro.models.{name}").ENTRY


def dims_of(model_cfg) -> dict:
    """A resolved, typed `model` group's dimensions: everything but its name, preset and impl."""
    from repro.config.schema import dims

    return dims(model_cfg)


def all_entries() -> list[ModelEntry]:
    return [get(n) for n in MODEL_NAMES]


__all__ = ["ModelEntry", "MODEL_NAMES", "get", "all_entries", "dims_of"]
