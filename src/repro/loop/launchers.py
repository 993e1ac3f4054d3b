"""The launchers repro knows, each registered once, beside its adapter (loop/rounds.py's protocol).

A launcher is chosen as Hydra chooses one, `hydra/launcher=NAME`, and Hydra's compose gives its
node (`hydra.launcher`, with `_target_`). Hydra only composes: repro's sweep loop (loop/sweep.py)
runs every sweep and hands each round to the chosen launcher's adapter. So a launcher is one
`Registration`, made where its adapter lives (`@launcher(...)` on the adapter's factory):

    @launcher("ray", target="repro.loop.ray_rounds.Ray", where=CLUSTER, needs=("ray",), extra="ray")
    def _make(launch: Launch) -> Adapter: ...

- `name`: its `hydra/launcher=` choice; `target`: the `_target_` its Hydra node carries, by which
  the preflight knows it (`parse`); an unknown `_target_` is refused, naming the registered ones.
- `where` its rounds run: HERE (this process: the default, `basic`), HOST (other processes of this
  host: joblib, submitit_local) or CLUSTER (other nodes: submitit_slurm, ray; the ledger and the
  store must be reachable from there, and a config's `cluster=slurm` variables exist there, not where
  the sweep starts, when the launcher's `scheduler` is SLURM).
- `needs`: the modules it imports (the preflight refuses a missing one by name, with `extra`, the
  `pip install 'repro[EXTRA]'` that brings it).

The registry is filled by importing this package's adapter modules (`rounds`, `*_rounds`): no list
of launchers is written anywhere else. A name or target registered twice is refused at import.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from repro.config.schema import ConfigError

HERE, HOST, CLUSTER = "here", "host", "cluster"


@dataclass(frozen=True)
class Launch:
    """What an adapter is made from: the composed `hydra.launcher` node (without `_target_`), the sweep's
    folder (`hydra.sweep.dir`), `attach(config)` (a host of this sweep where the round runs:
    repro.session `attached`), the command line, and `estimate()`, the plan's estimate from the
    ledger (preflight/estimate.py `Estimate`: a scheduler's time limit is checked against it; None
    where there is no plan, `repro bisect`)."""

    node: dict
    sweep_dir: Path
    attach: Callable
    args: tuple[str, ...] = ()
    estimate: Callable[[], Any] | None = None

    def asked(self, key: str) -> bool:
        """Whether the command line set `hydra.launcher.KEY` (a plugin's default is no wish)."""
        return any(a.lstrip("+").startswith(f"hydra.launcher.{key}=") for a in self.args)


@dataclass(frozen=True)
class Registration:
    name: str
    target: str
    where: str
    make: Callable[[Launch], Any]
    needs: tuple[str, ...] = ()
    extra: str | None = None
    scheduler: str | None = None  # whose variables its rounds run under (SLURM's, for submitit_slurm)

    @property
    def in_process(self) -> bool:
        """The rounds run in the command's own process (its first worker may start before the session)."""
        return self.where == HERE

    @property
    def remote(self) -> bool:
        """The rounds may run on other nodes: the ledger and the store must be reachable from there."""
        return self.where == CLUSTER

    def missing(self) -> str | None:
        """Why this launcher cannot run here (a module it imports is not installed), or None."""
        absent = [m for m in self.needs if importlib.util.find_spec(m) is None]
        if not absent:
            return None
        how = f"pip install 'repro[{self.extra}]'" if self.extra else f"pip install {' '.join(absent)}"
        return f"hydra/launcher={self.name} needs {', '.join(absent)}, which is not installed here; {how}"


_REGISTRY: dict[str, Registration] = {}


def launcher(name: str, *, target: str, where: str, needs: tuple[str, ...] = (), extra: str | None = None,
             scheduler: str | None = None):
    """Register the decorated factory (`Launch` -> adapter) as launcher `name` (module docstring)."""
    if where not in (HERE, HOST, CLUSTER):
        raise ValueError(f"launcher {name!r}: where={where!r} is none of {HERE}, {HOST}, {CLUSTER}")

    def add(make: Callable[[Launch], Any]) -> Callable[[Launch], Any]:
        for known in _REGISTRY.values():
            if name == known.name or target == known.target:
                raise ValueError(f"launcher {name!r} ({target}) is registered already as {known.name!r} "
                                 f"({known.target}); a launcher is registered once, beside its adapter")
        _REGISTRY[name] = Registration(name, target, where, make, tuple(needs), extra, scheduler)
        return make

    return add


@functools.lru_cache(maxsize=1)
def _imported() -> None:
    """Every adapter module of this package imported once: each registers its launchers."""
    here = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name == "rounds" or info.name.endswith("_rounds"):
            importlib.import_module(f"{__package__}.{info.name}")


def registered() -> list[Registration]:
    """Every registered launcher, the default (`basic`) first, then by name."""
    _imported()
    return sorted(_REGISTRY.values(), key=lambda r: (not r.in_process, r.name))


def named(name: str) -> Registration:
    """The launcher whose `hydra/launcher=` choice is `name`."""
    _imported()
    if name not in _REGISTRY:
        raise ConfigError(f"hydra/launcher={name} is a launcher repro does not know; choose "
                          f"hydra/launcher={', '.join(r.name for r in registered())}")
    return _REGISTRY[name]


def parse(target: str | None) -> Registration:
    """The launcher of a composed `hydra.launcher._target_` ("" or None: no Hydra node, this process).
    The default, registered in loop/rounds.py, is found without importing the other adapters (every
    single run's preflight asks for it)."""
    importlib.import_module(f"{__package__}.rounds")  # registers the default, as `_imported` imports every adapter
    found = [r for r in _REGISTRY.values() if (r.target == target if target else r.in_process)]
    if not found:
        found = [r for r in registered() if (r.target == target if target else r.in_process)]
    if not found:
        raise ConfigError(f"hydra.launcher._target_={target!r} is a launcher repro does not know; choose "
                          f"hydra/launcher={', '.join(r.name for r in registered())} (a new one is registered "
                          "beside its adapter in src/repro/loop/: docs/architecture.md, 'A launcher')")
    return found[0]


def default() -> Registration:
    """The in-process launcher (`hydra/launcher=basic`)."""
    return parse(None)
