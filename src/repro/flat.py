"""Nested dicts as flat dotted keys (MLflow params, record diffs, config keys): a pure helper on
the lowest floor, beside hashing.py."""

from __future__ import annotations

from typing import Any


def flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in tree.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{key}."))
        else:
            out[key] = v
    return out
