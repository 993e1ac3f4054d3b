"""Hydra's compose of a command line, kept on disk: the next identical command skips Hydra.

Importing Hydra and composing one job costs ~1.3 s cold on the 2-core reference machine, the
largest piece of a small run's fixed cost after MLflow. What Hydra returns for a command line
depends only on the config files (conf/ and the installed Hydra plugins' configs), the
command line and the versions of Hydra, OmegaConf and repro's composing code, so its output
(each job's composed config, unresolved, and the launcher and mode the top-level config names)
is kept under that key in `$XDG_CACHE_HOME/repro/compose/`. Interpolations (`${oc.env:...}`)
are resolved afterwards, by `preflight.check`, on every run, as are all checks that depend on
the machine. A cache entry that cannot be read is a miss; one that cannot be written is skipped.

Each entry also keeps what the schema made of each job (`typed`: the typed config as a plain dict,
`preflight.checks._apply_schema`), where that is a function of the entry alone: no job holds an
interpolation (resolved on every run) and every model is one of the zoo's, whose code is in the
snapshot the entry names (`typed_code`: a model of your own package may change under the same
key). A hit in the same snapshot then builds each job's `Config` from its dict, with no OmegaConf
at all (its import and merge were ~0.1 s of a single run's start, before its worker could); every
other check runs on it as on a freshly typed one.
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

from typing import TYPE_CHECKING

from repro import paths

if TYPE_CHECKING:
    from omegaconf import DictConfig

KEEP = 500  # entries; the oldest beyond it are removed when one is written
FORMAT = 3  # bump when what preflight.checks._compose returns, or `typed`, changes shape or meaning
# What Hydra composes from: hydra-core, omegaconf and every installed Hydra plugin (hydra_*: a launcher's
# config group), by their metadata folders' names (name and version), so an install composes again.
PREFIXES = ("hydra_", "omegaconf-")


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
    configs: list  # each job's composed config, unresolved: a DictConfig (`dict_configs`), or its container as stored
    launcher: str  # hydra.launcher._target_
    typed: list[dict] | None = None  # each job's typed config as a dict (`preflight.checks.typed_dicts`), where kept
    typed_code: str | None = None  # the snapshot that typed it (`typed` None there: it cannot be kept)


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


def dict_configs(composed: Composed) -> list[DictConfig]:
    """Each job's composed config as Hydra's compose returns it (a DictConfig in struct mode)."""
    from omegaconf import DictConfig, OmegaConf

    configs = []
    for c in composed.configs:
        cfg = c if isinstance(c, DictConfig) else OmegaConf.create(c)
        OmegaConf.set_struct(cfg, True)
        configs.append(cfg)
    return configs


def put_back(composed: Composed, values: dict[str, tuple[str, str]]) -> Composed:
    """The placed values where their placeholders are, in the configs (DictConfigs) and the override lists."""
    from omegaconf import OmegaConf

    composed.configs = dict_configs(composed)
    for mark, (key, value) in values.items():
        for cfg in composed.configs:
            if OmegaConf.select(cfg, key) == mark:
                OmegaConf.update(cfg, key, value, merge=True)
    composed.overrides = overrides_put_back(composed.overrides, values)
    return composed


def overrides_put_back(overrides: list[tuple[str, ...]], values: dict[str, tuple[str, str]]) -> list[tuple[str, ...]]:
    for mark, (_, value) in values.items():
        overrides = [tuple(o.replace(mark, value) for o in job) for job in overrides]
    return overrides


def typed_put_back(typed: dict, values: dict[str, tuple[str, str]]) -> dict:
    """A kept typed dict with the placed values where their placeholders are (each a plain string field)."""
    for mark, (key, value) in values.items():
        group, name = key.split(".")
        if typed[group][name] == mark:
            typed[group][name] = value
    return typed


def current_code() -> str | None:
    """The snapshot this process runs (its content-addressed folder's name), or None outside one."""
    root = paths.snapshot_root()
    return root.name if root else None


def key(args: Sequence[str], extra: bytes = b"") -> str:
    """`extra`: what else decides the compose (the searched config folders' files, entry-point models)."""
    h = hashlib.sha256(json.dumps([FORMAT, list(args), sys.prefix, _distributions()]).encode() + extra)
    conf = paths.conf_dir()
    for path in sorted(conf.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(conf)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _distributions() -> list[str]:
    """The installed PREFIXES' distributions as their metadata folders' paths (name and version in each)."""
    return [str(p) for p in paths.distribution_metadata() if p.name.lower().startswith(PREFIXES)]


def load(args: Sequence[str], extra: bytes = b"") -> tuple[str, Composed | None]:
    """The cache key of `args` and what it holds (None: not there, or unreadable). Its configs are
    the stored containers (`dict_configs` makes them DictConfigs); `typed` only where it was kept
    in the snapshot this process runs."""
    k = key(args, extra)
    try:
        data = json.loads((folder() / f"{k}.json").read_text())
        if data.get("check") != _check(data) or not data["configs"] or len(data["configs"]) != len(data["overrides"]):
            return k, None  # edited, truncated or emptied since it was written: composed again
        code = current_code()
        typed = data.get("typed") if code is not None and data.get("typed_code") == code else None
        return k, Composed(data["multirun"], [tuple(o) for o in data["overrides"]], list(data["configs"]),
                           data["launcher"], typed, data.get("typed_code"))
    except (OSError, ValueError, KeyError, TypeError):
        return k, None


def _check(data: dict) -> str:
    """The hash an entry carries of its own content: a hit is trusted only while they agree."""
    body = {k: v for k, v in data.items() if k != "check"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def store(k: str, composed: Composed, args: Sequence[str] = ()) -> None:
    """Keep the compose under `k`; never one whose command line holds a credential (a password in a
    URL, a secret variable's value): the cache is a file, and a credential reaches no file."""
    from omegaconf import OmegaConf

    from repro.redaction import redact

    if any(redact(a) != a for a in args):
        return
    data = {"multirun": composed.multirun, "overrides": [list(o) for o in composed.overrides],
            "configs": [c if isinstance(c, dict) else OmegaConf.to_container(c, resolve=False) for c in composed.configs],
            "launcher": composed.launcher, "typed": composed.typed, "typed_code": composed.typed_code}
    data["check"] = _check(data)
    try:
        folder().mkdir(parents=True, exist_ok=True)
        tmp = folder() / f".{k}.{os.getpid()}.tmp"
        tmp.touch(mode=0o600)  # the user's command lines: readable by the user alone
        tmp.write_text(json.dumps(data))
        os.replace(tmp, folder() / f"{k}.json")
        entries = sorted(folder().glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in entries[:-KEEP]:
            old.unlink(missing_ok=True)
    except (OSError, ValueError, TypeError):
        pass  # a cache: the next command composes again
