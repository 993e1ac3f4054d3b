"""Hydra's compose of a command line, kept on disk: the next identical command skips Hydra.

Importing Hydra and composing one job costs ~1.3 s cold on the 2-core reference machine, the
largest piece of a small run's fixed cost after MLflow. What Hydra returns for a command line
depends only on the config files (conf/ and the installed Hydra plugins' configs), the
command line and the versions of Hydra, OmegaConf and repro's composing code, so its output
(each job's composed config, unresolved, and the launcher and mode the top-level config names)
is kept under that key in `$XDG_CACHE_HOME/repro/compose/`. Interpolations (`${oc.env:...}`)
are resolved afterwards, by `preflight.check`, on every run, as are all checks that depend on
the machine. A cache entry that cannot be read is a miss; one that cannot be written is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from repro import paths

KEEP = 500  # entries; the oldest beyond it are removed when one is written
FORMAT = 1  # bump when what preflight.checks._compose returns changes shape or meaning
PACKAGES = ("hydra-core", "omegaconf", "hydra-submitit-launcher", "hydra-joblib-launcher")


# Where a run is recorded changes with every test and benchmark folder, not what Hydra composes:
# these keys' plain values (Hydra parses them as the same string) are keyed as placeholders and
# put back after, so `ledger.dir=/tmp/a` and `ledger.dir=/tmp/b` share one compose.
PLACED = re.compile(r"^(ledger\.dir|tracking\.uri|tracking\.experiment)=([A-Za-z0-9_./:@%+-]+)$")
NOT_A_STRING = {"true", "false", "null", "nan", "inf", "+inf", "-inf"}
PLACEHOLDER = "repro-compose-placeholder-{}"


def _placed(arg: str) -> tuple[str, str] | None:
    """(key, value) of an override `preflight.plan` may compose with a placeholder for its value."""
    found = PLACED.match(arg)
    if not found or found[2].lower() in NOT_A_STRING:
        return None
    try:
        float(found[2])
        return None  # Hydra parses it as a number
    except ValueError:
        return found[1], found[2]


@dataclass
class Composed:
    """What Hydra composed for a command line, before any check."""

    multirun: bool
    overrides: list[tuple[str, ...]]  # each job's override list, in sweep order (before repeats)
    configs: list[DictConfig]  # each job's composed config, unresolved
    launcher: str  # hydra.launcher._target_


def folder() -> Path:
    return paths.cache_root() / "compose"


def with_placeholders(args: Sequence[str]) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """`args` with each placed value replaced by a placeholder, and placeholder → (key, value)."""
    out, values = [], {}
    for arg in args:
        if (kv := _placed(arg)) and kv[0] not in {k for k, _ in values.values()}:
            mark = PLACEHOLDER.format(len(values))
            values[mark] = kv
            out.append(f"{kv[0]}={mark}")
        else:
            out.append(arg)
    return out, values


def put_back(composed: Composed, values: dict[str, tuple[str, str]]) -> Composed:
    """The placed values where their placeholders are, in the configs and the override lists."""
    for mark, (key, value) in values.items():
        for cfg in composed.configs:
            if OmegaConf.select(cfg, key) == mark:
                OmegaConf.update(cfg, key, value, merge=True)
        composed.overrides = [tuple(o.replace(mark, value) for o in job) for job in composed.overrides]
    return composed


def key(args: Sequence[str], extra: bytes = b"") -> str:
    """`extra`: what else decides the compose (the searched config folders' files, entry-point models)."""
    from importlib import metadata

    h = hashlib.sha256(json.dumps([FORMAT, list(args), sys.prefix]).encode() + extra)
    for name in PACKAGES:
        try:
            h.update(f"{name}=={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{name} absent".encode())
    conf = paths.conf_dir()
    for path in sorted(conf.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(conf)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def load(args: Sequence[str], extra: bytes = b"") -> tuple[str, Composed | None]:
    """The cache key of `args` and what it holds (None: not there, or unreadable)."""
    k = key(args, extra)
    try:
        data = json.loads((folder() / f"{k}.json").read_text())
        configs = []
        for c in data["configs"]:
            cfg = OmegaConf.create(c)
            OmegaConf.set_struct(cfg, True)  # as Hydra's compose returns it
            configs.append(cfg)
        return k, Composed(data["multirun"], [tuple(o) for o in data["overrides"]], configs, data["launcher"])
    except (OSError, ValueError, KeyError, TypeError):
        return k, None


def store(k: str, composed: Composed) -> None:
    data = {"multirun": composed.multirun, "overrides": [list(o) for o in composed.overrides],
            "configs": [OmegaConf.to_container(c, resolve=False) for c in composed.configs],
            "launcher": composed.launcher}
    try:
        folder().mkdir(parents=True, exist_ok=True)
        tmp = folder() / f".{k}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data))
        os.replace(tmp, folder() / f"{k}.json")
        entries = sorted(folder().glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in entries[:-KEEP]:
            old.unlink(missing_ok=True)
    except (OSError, ValueError, TypeError):
        pass  # a cache: the next command composes again
