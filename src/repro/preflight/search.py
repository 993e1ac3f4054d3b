"""Where configs come from beyond repro's conf/: your config folders and installed packages' models.

Hydra's own conventions, the same for `repro` as for any Hydra app:
- `--config-dir DIR` (`-cd DIR`, `--config-dir=DIR`): DIR joins the search path, so
  `DIR/model/mymodel.yaml` is `model=mymodel`. It is rewritten here, once, into the equivalent
  `hydra.searchpath=[file:///abs/DIR]` override, so the preflight's compose, its cache and
  Hydra's own run (launchers) all see the same folder, whatever the current directory;
- `hydra.searchpath=[pkg://mypkg.conf]`: a package's config folder;
- the entry-point group `repro.models` (`name = "pkg.module:Class"`): each becomes the config
  `model=name` (Hydra's ConfigStore), with no yaml at all.
The compose cache's key holds every searched folder's files and the site folders' mtimes (an
install changes them), so editing `mymodel.yaml` or installing another model composes again.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Sequence

from repro.config.errors import ConfigError

CONFIG_DIR_FLAGS = ("--config-dir", "-cd")
SEARCHPATH = "hydra.searchpath"
CONFIG_SUFFIXES = (".yaml", ".yml")  # what Hydra reads from a config folder (and so what a compose depends on)


def normalise(argv: Sequence[str]) -> list[str]:
    """`argv` with every `--config-dir DIR` turned into (or merged with) one `hydra.searchpath` override."""
    dirs, rest, it = [], [], iter(argv)
    for arg in it:
        flag, eq, value = arg.partition("=")
        if flag in CONFIG_DIR_FLAGS:
            value = value if eq else next(it, None)
            if not value:
                raise ConfigError(f"{flag} needs a folder: {flag} ./myconf (holding model/mymodel.yaml)")
            path = Path(value).expanduser().resolve()
            if not path.is_dir():
                raise ConfigError(f"{flag} {value}: no such folder ({path}); give the folder that holds "
                                  "model/<name>.yaml")
            dirs.append(f"file://{path}")
        else:
            rest.append(arg)
    if not dirs:
        return rest
    given = [a for a in rest if a.split("=", 1)[0] == SEARCHPATH]
    entries = dirs + [e for a in given for e in _entries(a)]
    return [a for a in rest if a not in given] + [f"{SEARCHPATH}=[{','.join(map(_quoted, entries))}]"]


def _quoted(entry: str) -> str:
    """A search path entry as a quoted string of Hydra's override grammar: any folder name (a comma, a
    quote, a bracket) stays one entry."""
    return "'" + entry.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _entries(override: str) -> list[str]:
    """The entries of a `hydra.searchpath=[...]` override: quoted ones (`_quoted`, or a user's) whole,
    bare ones split at commas. (Hydra's own override parser would cost its import on every command.)"""
    value = override.split("=", 1)[1].strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    out, current, quote, escaped = [], "", None, False
    for ch in value:
        if escaped:
            current, escaped = current + ch, False
        elif quote and ch == "\\":
            escaped = True
        elif quote:
            quote = None if ch == quote else quote
            current += ch if quote else ""
        elif ch in "'\"":
            quote = ch
        elif ch == ",":
            out.append(current.strip())
            current = ""
        else:
            current += ch
    out.append(current.strip())
    return [e for e in out if e]


def searched(args: Sequence[str]) -> list[str]:
    """The extra search path entries a command line names."""
    return [e for a in args if a.split("=", 1)[0] == SEARCHPATH for e in _entries(a)]


def folder_of(entry: str) -> Path | None:
    """The folder of a search path entry (pkg:// located on sys.path without importing it)."""
    if entry.startswith("file://"):
        return Path(entry[len("file://"):])
    if entry.startswith("pkg://"):
        rel = Path(*entry[len("pkg://"):].split("."))
        for base in sys.path:
            if (Path(base or ".") / rel).is_dir():
                return Path(base or ".") / rel
        return None
    return Path(entry) if entry else None


def fingerprint(args: Sequence[str]) -> bytes:
    """What besides conf/ decides a compose: the searched folders' files and the entry-point models."""
    h = hashlib.sha256()
    for entry in searched(args):
        folder = folder_of(entry)
        h.update(f"{entry}->{folder}\0".encode())
        if folder is not None and folder.is_dir():  # its config files only: Hydra composes nothing else
            for path in sorted(p for suffix in CONFIG_SUFFIXES for p in folder.rglob(f"*{suffix}")):
                if path.is_file() and "__pycache__" not in path.parts:
                    h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    # Installed entry points change only when a distribution is installed or removed, which changes
    # the mtime of the sys.path folder that holds its metadata: stat'ing those folders costs
    # microseconds, reading every distribution's entry points ~0.2 s (done only when Hydra composes).
    for folder in filter(_holds_distributions, sys.path):
        try:
            h.update(f"{folder}:{os.stat(folder or '.').st_mtime_ns}\0".encode())
        except OSError:
            pass
    return h.digest()


def _holds_distributions(folder: str) -> bool:
    """A sys.path folder where an installed distribution's metadata (and so its entry points) can
    live: site- or dist-packages, or any other folder holding a *.dist-info or *.egg-info (PYTHONPATH,
    a wheel unpacked by hand): a model removed from one of those must not run from a stale cache."""
    if folder.rstrip("/").endswith(("site-packages", "dist-packages")):
        return True
    try:
        with os.scandir(folder or ".") as entries:
            return any(e.name.endswith((".dist-info", ".egg-info")) for e in entries)
    except OSError:
        return False


def shadowing(args: Sequence[str]) -> dict[str, Path]:
    """{zoo model name: the searched folder's model/NAME.yaml} for each zoo name a folder of yours
    declares again: which of the two Hydra composes is not yours to see, so a job naming it is refused."""
    from repro import models

    out = {}
    for folder in (f for f in map(folder_of, searched(args)) if f is not None):
        for name in models.MODEL_NAMES:
            if (path := folder / "model" / f"{name}.yaml").is_file():
                out.setdefault(name, path)
    return out


def refuse_shadowing(args: Sequence[str], names) -> None:
    """A job's model that a --config-dir yaml and the zoo both declare: refused, as an entry point's is."""
    shadows = shadowing(args)
    for name in dict.fromkeys(names):
        if name in shadows:
            raise ConfigError(f"model={name} is ambiguous: your {shadows[name]} and the zoo both declare a model "
                              f"{name!r}, and one of them would run silently. Rename your file (model/my_{name}.yaml, "
                              f"with name: my_{name}) and run model=my_{name}")


def _entry_points() -> dict[str, tuple[str, str]]:
    from repro import models

    return models.entry_points()


def register_entry_points(args: Sequence[str] = ()) -> None:
    """Each `repro.models` entry point as the config `model=NAME`, unless a searched folder has a
    `model/NAME.yaml` (that yaml is the model then; Hydra would also warn of a schema of that name)."""
    from hydra.core.config_store import ConfigStore

    from repro import models, paths

    folders = [paths.conf_dir()] + [f for f in map(folder_of, searched(args)) if f is not None]
    store = ConfigStore.instance()
    for name, (value, _) in _entry_points().items():
        if name not in models.MODEL_NAMES and not any((f / "model" / f"{name}.yaml").is_file() for f in folders):
            store.store(group="model", name=name, node=_node(name, value.replace(":", ".")))


def _node(name: str, target: str) -> dict:
    """An entry point's config, as a zoo yaml reads: its preset and every dimension (null: the
    preset's), so `model.preset=...` and `model.width=...` override it without a `+`. The class is
    imported (its module, no framework); one that does not load is left to the preflight to name."""
    from repro import models

    node = {"name": name, models.TARGET_KEY: target}
    try:
        entry = models.load(target)
    except models.ModelLoadError:
        return node
    node["preset"] = entry.resolve_preset(None)
    for dims in entry.presets.values():
        node.update({k: None for k in dims})
    return node

