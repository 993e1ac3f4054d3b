"""A config asks its backend only for what the backend declares (backends/capabilities.py).

Each refusal names the key that asks, the framework and its backend, the capability it lacks, and
the frameworks that have it. The mesh's own shape (axes, sizes, devices) is checked in checks.py.
"""

from __future__ import annotations

from typing import Callable

from repro import paths
from repro.backends import capabilities
from repro.config import schema
from repro.config.schema import ConfigError

WHERE = "src/repro/backends/capabilities.py"


def frameworks_where(ok: Callable[[capabilities.Capabilities, bool], bool]) -> list[str]:
    """The conf/framework choices whose backend's capabilities and `compile` flag satisfy `ok`."""
    import yaml

    out = []
    for path in sorted((paths.conf_dir() / "framework").glob("*.yaml")):
        fw = yaml.safe_load(path.read_text()) or {}
        caps = capabilities.BACKENDS.get(fw.get("backend", path.stem))
        if caps is not None and ok(caps, bool(fw.get("compile", False))):
            out.append(path.stem)
    return out


def _lacks(key: str, fw: schema.FrameworkConfig, capability: str, ok, fix: str, why: str = "") -> ConfigError:
    others = ", ".join(frameworks_where(ok)) or "none"
    return ConfigError(f"{key}: framework={fw.name} {why or 'cannot'} (backend {fw.backend} lacks the capability "
                       f"{capability!r}, {WHERE}); choose a framework that has it ({others}) or {fix}")


def check(cfg: schema.Config) -> None:
    """Refuse, naming backend and capability, a config its backend cannot run."""
    fw, precision, sharding, run = cfg.framework, cfg.precision, cfg.sharding, cfg.run
    if fw.backend not in capabilities.BACKENDS:
        raise ConfigError(f"framework.backend={fw.backend!r} is not valid; choose one of: "
                          f"{', '.join(capabilities.BACKENDS)}")
    caps = capabilities.of(fw.backend)
    if run.capture_ir and not caps.ir:
        raise _lacks("run.capture_ir=true", fw, "ir", lambda c, _: c.ir, "set run.capture_ir=false",
                     why="produces no IR")
    if run.profile and not caps.profile:
        raise _lacks("run.profile=true", fw, "profile", lambda c, _: c.profile, "set run.profile=false")
    if fw.compile and not caps.compile:
        raise _lacks("framework.compile=true", fw, "compile", lambda c, comp: comp and c.compile,
                     "set framework.compile=false", why="has no compile wrapper (torch.compile)")
    for key in ("param_dtype", "compute_dtype"):
        dtype = getattr(precision, key)
        if dtype not in caps.dtypes:
            raise _lacks(f"precision.{key}={dtype}", fw, f"dtypes: {dtype}", lambda c, _: dtype in c.dtypes,
                         "choose another precision")
    for key in ("autocast", "loss_scaling"):
        if getattr(precision, key) and not getattr(caps, key):
            raise _lacks(f"precision={precision.name} (precision.{key}=true)", fw, key,
                         lambda c, _: getattr(c, key), "choose another precision")
    field = "compiled_layouts" if fw.compile else "layouts"
    if sharding.name not in getattr(caps, field):
        raise _lacks(f"sharding={sharding.name}", fw, f"{field}: {sharding.name}",
                     lambda c, comp: sharding.name in (c.compiled_layouts if comp else c.layouts),
                     "sharding=none", why="runs unsharded")
    if sharding.name in ("tp", "dp_tp") and caps.tp_needs_plan and not _declares_torch_tp(cfg):
        from repro import models

        planned = [m.name for m in models.all_entries() if m.partitioning.get("torch_tp")]
        raise ConfigError(f"sharding={sharding.name} with framework={fw.name} splits a model that declares "
                          f"partitioning['torch_tp'] (model {', '.join(planned)}; backend {fw.backend}'s capability "
                          f"'tp_needs_plan', {WHERE}: attention needs per-rank head counts); use framework=jax "
                          f"or sharding=dp/fsdp for model={cfg.model.name}")
    if caps.own_interpreter and not fw.python:
        raise ConfigError(f"framework={fw.name}: backend {fw.backend} runs in an interpreter of its own (capability "
                          f"'own_interpreter', {WHERE}), but framework.python is empty; set framework.python=PATH "
                          "(`make xla-env` makes .venv-xla/bin/python) or $REPRO_XLA_PYTHON (docs/how-to/torch-xla.md)")


def _declares_torch_tp(cfg) -> bool:
    """Whether the run's model declares a torch tensor-parallel plan (`partitioning` on the model)."""
    from repro import models

    try:
        return bool((models.entry_of(cfg.model).partitioning or {}).get("torch_tp"))
    except (KeyError, ValueError):  # a model that does not load is refused by its own check
        return False
