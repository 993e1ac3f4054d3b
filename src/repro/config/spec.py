"""A run's identity: the resolved config and the hash over the keys that change results."""

from __future__ import annotations

import copy

from repro.config.schema import NON_SEMANTIC_KEYS
from repro.hashing import sha256_json


def semantic(config: dict) -> dict:
    """The config without the keys that do not change results (output places, display...)."""
    out = copy.deepcopy(config)
    for dotted in NON_SEMANTIC_KEYS:
        *parents, leaf = dotted.split(".")
        node = out
        for p in parents:
            node = node.get(p, {})
        node.pop(leaf, None)
    return out


def config_hash(config: dict) -> str:
    return sha256_json(semantic(config))
