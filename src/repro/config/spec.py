"""A run's identity: the resolved config and the hash over the keys that change results."""

from __future__ import annotations

import copy
import dataclasses

from repro.config.schema import MODEL_ADDED_AT, NON_SEMANTIC_KEYS, as_dict
from repro.hashing import sha256_json
from repro.redaction import redact_data

# Sections added after records were published: at these values they leave a config's hash
# as it was before they existed, so a run's identity survives the upgrade.
# Dotted keys name one key inside a section.
ADDED_AT_DEFAULT = {"cluster": {"nodes": 1, "jax_processes": 1},
                    **{f"model.{k}": v for k, v in MODEL_ADDED_AT.items()},
                    "run.init": "native", "env": {"packages": []}, "run.profile": False,
                    "run.min_steady_steps": 200, "run.min_steady_s": 1.0, "run.max_steps": 10000,
                    "run.fill_uninitialized_memory": None, "run.start": "fresh"}
# The adaptive window's bounds (worker/window.py): they change nothing of a run of a fixed count.
WINDOW_KEYS = ("min_steady_steps", "min_steady_s", "max_steps")


def _parent(tree: dict, dotted: str) -> tuple[dict, str]:
    """The dict holding a dotted key's leaf, and the leaf's name."""
    *parents, leaf = dotted.split(".")
    for p in parents:
        tree = tree.get(p, {})
    return tree, leaf


def semantic(config) -> dict:
    """The config (its canonical dict, or a typed `Config` made into it by `as_dict`) without the
    keys that do not change results (output places, display...)."""
    out = as_dict(config) if dataclasses.is_dataclass(config) else copy.deepcopy(config)
    for dotted in NON_SEMANTIC_KEYS:
        node, leaf = _parent(out, dotted)
        node.pop(leaf, None)
    run = out.get("run") or {}
    if run.get("steps") != "auto":
        for key in WINDOW_KEYS:
            run.pop(key, None)
    for dotted, default in ADDED_AT_DEFAULT.items():
        node, leaf = _parent(out, dotted)
        if leaf in node and node[leaf] == default:
            del node[leaf]
    return out


def config_hash(config) -> str:
    """The run's identity: a hash of `semantic(config)`, computed from the canonical dict, with
    credentials masked as the ledger records them (repro.redaction): the config a record holds
    hashes to the record's hash, and a password or token changes no run's identity. (URLs only:
    the environment's secret values would make the hash depend on the shell it runs in.)"""
    return sha256_json(redact_data(semantic(config), environ={}))
