"""The model zoo, and the models of your own packages, behind one protocol (`repro.models.api`).

A model is found three ways: the zoo's folders (`MODEL_NAMES`), a Hydra yaml whose `_target_`
names a `Model` subclass (`repro --config-dir ./myconf model=mymodel`), or the entry-point group
`repro.models` of an installed distribution. Importing an entry imports only NumPy (and the
package's own module), never a framework. This package imports nothing of repro.config: a model's
dims come in as arguments.
"""

from __future__ import annotations

import functools
import importlib
import sys
from pathlib import Path

from repro.models.api import Model



def _zoo_folders() -> tuple[str, ...]:
    """The zoo: every folder here with both twins (`flax_model.py`, `torch_model.py`), by name. A new
    zoo model is its folder and its `conf/model/<name>.yaml`, nothing listed elsewhere."""
    here = Path(__file__).parent
    return tuple(sorted(p.name for p in here.iterdir()
                        if (p / "__init__.py").is_file() and (p / "flax_model.py").is_file()
                        and (p / "torch_model.py").is_file()))


# Names of the model folders. Importing one imports only NumPy, never a framework.
MODEL_NAMES = _zoo_folders()
ENTRY_POINT_GROUP = "repro.models"
TARGET_KEY = "_target_"  # the model group's key naming a class: Hydra's own convention
KEPT_ENTRY_POINTS = 16  # scans kept on disk (`_entry_points_on`): one per set of installed distributions


class ModelLoadError(ValueError):
    """A workload outside the zoo that cannot be loaded: the message names the file and the piece."""


def entry_points() -> dict[str, tuple[str, str]]:
    """name -> ("module:Class", "distribution version") of every `repro.models` entry point."""
    from importlib import metadata

    out = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist else "?"
        out.setdefault(ep.name, (ep.value, dist))
    return out


def target_of(name: str) -> str | None:
    """The `_target_` an entry-point model's config carries (None: a zoo model or unknown)."""
    if name in MODEL_NAMES:
        return None
    found = entry_points().get(name)
    return found[0].replace(":", ".") if found else None


def get(name: str, target: str | None = None):
    """The model `name`: a zoo entry, or (with `target`, or an entry point of that name) a `Model`."""
    if target:
        return load(target)
    if name in MODEL_NAMES:
        return _zoo(name)
    if found := target_of(name):
        return load(found, f"entry point {name} ({entry_points()[name][1]})")
    raise KeyError(f"unknown model {name!r}; valid models: {', '.join(MODEL_NAMES + tuple(entry_points()))} "
                   f"(or a model/{name}.yaml of your own with _target_: yourpackage.YourModel, "
                   f"found with --config-dir)")


def refuse_shadowing(name: str) -> None:
    """A zoo model's name that an installed package also declares (entry point `repro.models`) is
    ambiguous: refused naming both and how to pick one, never silently the zoo's."""
    if name in MODEL_NAMES and (shadowed := _entry_points_on(tuple(sys.path)).get(name)):
        raise ModelLoadError(
            f"model={name} is ambiguous: the installed package {shadowed[1]} declares a model {name!r} "
            f"(entry point {shadowed[0]}) and the zoo has its own {name!r}. To run the package's, name its class "
            f"in a model yaml of your own (`_target_: {shadowed[0].replace(':', '.')}`, found with --config-dir) "
            f"or give its entry point another name; to run the zoo's, uninstall that package or rename its entry point")


@functools.lru_cache(maxsize=4)
def _entry_points_on(path: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """`entry_points()` once per process and import path, and kept on disk between processes under
    the path's distributions (each metadata folder's name and its entry_points.txt's mtime: an
    install, a removal or an edit changes them). The scan reads every installed distribution's
    metadata (~35 ms, and importlib.metadata's import ~15 ms, on every run's way to its worker);
    the key is a listing and a stat per distribution (~2 ms). An unreadable entry is a miss."""
    from repro import kept, paths

    stamp = [[str(p), kept.mtime_ns(p / "entry_points.txt")] for p in paths.distribution_metadata(list(path))]
    known = kept.load("entry-points", stamp)
    if isinstance(known, dict) and all(isinstance(value, list) for value in known.values()):
        return {name: tuple(value) for name, value in known.items()}
    found = entry_points()
    kept.keep("entry-points", stamp, found, newest=KEPT_ENTRY_POINTS)
    return found


def entry_of(model_cfg):
    """The model a typed `model` group names (its `_target_` where it has one)."""
    return get(model_cfg.name, getattr(model_cfg, TARGET_KEY, None))


@functools.lru_cache(maxsize=None)
def load(target: str, source: str | None = None):
    """The `Model` instance `target` ("package.module.Class" or "package.module:Class") names."""
    from repro.models import api

    module_name, _, cls_name = target.replace(":", ".").rpartition(".")
    if not module_name:
        raise ModelLoadError(f"_target_: {target!r} is not a dotted path 'package.module.Class'")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - whatever the user's module raises, named with its file
        where = _file_of(e) or module_name
        raise ModelLoadError(f"_target_: {target}: importing {module_name} failed in {where}: "
                             f"{type(e).__name__}: {e}") from None
    cls = getattr(module, cls_name, None)
    where = getattr(module, "__file__", module_name)
    if cls is None:
        raise ModelLoadError(f"_target_: {target}: {where} defines no {cls_name!r}")
    model = cls() if isinstance(cls, type) else cls
    missing = [a for a in api.REQUIRED_ATTRIBUTES if not getattr(model, a, None)]
    missing += [f"{m}()" for m in api.REQUIRED_METHODS
                if not callable(getattr(model, m, None)) or getattr(type(model), m, None) is getattr(api.Model, m)]
    if missing:
        raise ModelLoadError(f"_target_: {target}: {cls_name} in {where} lacks {', '.join(missing)} "
                             "(the workload protocol: repro.models.api.Model)")
    if getattr(model, "task", "classify") not in api.TASKS:
        raise ModelLoadError(f"_target_: {target}: {cls_name}.task={model.task!r} in {where}; choose one of "
                             f"{', '.join(api.TASKS)} (or define jax_loss and torch_loss)")
    model.source = source or f"_target_ {target}"
    model.target = target.replace(":", ".")
    model.file = where
    return model


def _file_of(e: BaseException) -> str | None:
    """The user's file where an import failed: the innermost frame outside importlib."""
    tb, where = e.__traceback__, None
    while tb is not None:
        fname = tb.tb_frame.f_code.co_filename
        if "importlib" not in fname and not fname.startswith("<"):
            where = f"{fname}:{tb.tb_lineno}"
        tb = tb.tb_next
    if isinstance(e, SyntaxError) and e.filename:
        where = f"{e.filename}:{e.lineno}"
    return where


@functools.lru_cache(maxsize=None)
def _zoo(name: str) -> Model:
    """The zoo model `name`: the one `Model` class its folder's `__init__.py` declares."""
    module = importlib.import_module(f"repro.models.{name}")
    (cls,) = [v for v in vars(module).values()
              if isinstance(v, type) and issubclass(v, Model) and v.__module__ == module.__name__]
    return cls()


def all_entries() -> list[Model]:
    """The zoo's models (a package's model of the same name is listed as its own)."""
    return [_zoo(n) for n in MODEL_NAMES]


__all__ = ["Model", "MODEL_NAMES", "ENTRY_POINT_GROUP", "ModelLoadError", "get", "entry_of", "load",
           "entry_points", "target_of", "all_entries"]
