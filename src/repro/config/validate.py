"""Check configs before anything runs.

`check(cfg)` turns one composed Hydra config into the resolved, typed, checked dict a run
uses. `plan(args)` composes every job of the sweep the command line asks for (expanding it
the way Hydra's BasicSweeper will) and checks each one, plus the declared hardware against
this machine, so that a bad value in job 5 stops the sweep before job 1 writes anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from repro import data, models, paths
from repro.config import schema
from repro.backends.layouts import mesh_size
from repro.config.schema import ConfigError
from repro.models import hf


DEFAULT_BATCH = 32
TORCH_TP_MODELS = ("mlp", "ffn")  # torch tensor parallel: MLP-only models so far
# Backends with parallel layouts: JAX (one mesh), torch (DDP/FSDP2/DTensor), torch_xla (SPMD).
# torch_xla's SPMD annotations are split by XLA's partitioner, so any model's attention works.
SHARDED_BACKENDS = ("jax", "torch", "torch_xla")


def _get(cfg: dict, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        node = node[part]
    return node


def _apply_schema(cfg: DictConfig) -> dict:
    name = cfg.model.get("name") if isinstance(cfg.get("model"), DictConfig) else None
    try:
        entry = models.get(str(name))
    except KeyError as e:
        raise ConfigError(f"model.name: {e.args[0]}") from None
    typed = OmegaConf.structured(schema.Config)
    typed.model = OmegaConf.structured(schema.model_schema(entry))
    try:
        merged = OmegaConf.merge(typed, cfg)
        return OmegaConf.to_container(merged, resolve=True)  # type: ignore[return-value]
    except OmegaConfBaseException as e:
        raise ConfigError(_omegaconf_message(e)) from None


def _omegaconf_message(e: OmegaConfBaseException) -> str:
    key = getattr(e, "full_key", None)
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    return f"{key}: {first}" if key else first


def _check_values(cfg: dict) -> None:
    for key, allowed in schema.CHOICES.items():
        value = _get(cfg, key)
        if value not in allowed:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of: {', '.join(allowed)}")
    for key in schema.POSITIVE:
        if not _get(cfg, key) > 0:
            raise ConfigError(f"{key}={_get(cfg, key)!r} must be > 0")
    for key in schema.NON_NEGATIVE:
        if _get(cfg, key) < 0:
            raise ConfigError(f"{key}={_get(cfg, key)!r} must be >= 0")
    run = cfg["run"]
    if not 2 <= run["warmup"] < run["steps"]:
        raise ConfigError(
            f"run.warmup={run['warmup']} must be at least 2 (the first and second steps are "
            f"measured apart) and below run.steps={run['steps']}, leaving steady-state steps"
        )
    for key in ("batch_size", "memory_limit_gb"):
        if run[key] is not None and not run[key] > 0:
            raise ConfigError(f"run.{key}={run[key]!r} must be > 0 (or null)")
    if run["threads"] is not None and run["threads"] < 1:
        raise ConfigError(f"run.threads={run['threads']} must be >= 1 (or null for one per core)")
    precision, hardware = cfg["precision"], cfg["hardware"]
    if precision["gpu_only"] and hardware["platform"] != "gpu":
        raise ConfigError(
            f"precision={precision['name']} needs a GPU, but hardware={hardware['name']} is a "
            f"{hardware['platform']} profile; choose another precision (fp32, tf32, bf16, amp_bf16)"
        )


def _check_sharding(cfg: dict) -> None:
    sharding, run = cfg["sharding"], cfg["run"]
    # The mesh this run uses is the one its record shows: a per-framework one replaces it.
    override = sharding.pop("mesh_by_framework").get(cfg["framework"]["name"], {}).get(sharding["name"])
    if override is not None:
        sharding["mesh"] = dict(override)
    mesh = sharding["mesh"]
    need = schema.SHARDING_AXES[sharding["name"]]
    if set(mesh) != set(need):
        want = ", ".join(f"{a}: N" for a in need) or "nothing"
        raise ConfigError(f"sharding={sharding['name']} needs mesh axes {{{want}}}, got sharding.mesh={mesh}")
    for axis, size in mesh.items():
        if size < 1:
            raise ConfigError(f"sharding.mesh.{axis}={size} must be >= 1")
    data = mesh.get("data", 1)
    if run["batch_size"] % data:
        raise ConfigError(f"run.batch_size={run['batch_size']} does not split over sharding.mesh.data={data} "
                          f"({run['batch_size']} % {data} = {run['batch_size'] % data}); choose a multiple of {data}")
    framework = cfg["framework"]
    if sharding["name"] != "none" and (framework["backend"] not in SHARDED_BACKENDS or framework["compile"]):
        raise ConfigError(f"sharding={sharding['name']} is built for framework=jax, torch (eager) and torch_xla "
                          f"(SPMD); framework={framework['name']} runs unsharded (sharding=none)")
    if (sharding["name"] in ("tp", "dp_tp") and framework["backend"] == "torch"
            and cfg["model"]["name"] not in TORCH_TP_MODELS):
        raise ConfigError(f"sharding={sharding['name']} with framework=torch supports model "
                          f"{', '.join(TORCH_TP_MODELS)} (attention needs per-rank head counts); "
                          f"use framework=jax or sharding=dp/fsdp for model={cfg['model']['name']}")
    devices = mesh_size(mesh)
    if cfg["hardware"]["platform"] != "cpu" and devices > cfg["hardware"]["device_count"]:
        raise ConfigError(f"sharding.mesh {mesh} needs {devices} devices, but hardware={cfg['hardware']['name']} "
                          f"has {cfg['hardware']['device_count']}; shrink the mesh or choose a larger profile")


def _check_cluster(cfg: dict) -> None:
    from repro.runner import cluster

    c = cfg["cluster"]
    if c["name"] == "slurm":  # nodes and ranks are known where the job runs; checked again there
        cluster.check_layout(cfg, 1, c["jax_processes"])
        return
    cluster.check_nodes(c["nodes"], c["node_rank"], c["coordinator"])
    if c["coordinator"]:
        cluster.split_endpoint(c["coordinator"], c["port"])
    cluster.check_layout(cfg, c["nodes"], c["jax_processes"])


def _resolve_model(cfg: dict) -> None:
    entry = models.get(cfg["model"]["name"])
    given = models.dims_of(cfg["model"])
    try:
        dims = entry.dims(cfg["model"]["preset"], **given)
    except KeyError as e:
        raise ConfigError(f"model.preset: {e.args[0]}") from None
    for key, value in dims.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            raise ConfigError(f"model.{key}={value!r} must be > 0 (model {entry.name})")
    cfg["model"] = {"name": entry.name, "preset": cfg["model"]["preset"], "impl": cfg["model"]["impl"], **dims}
    if cfg["run"]["batch_size"] is None:
        suggested = entry.extra.get("batch_size", {})
        cfg["run"]["batch_size"] = suggested.get(entry.resolve_preset(cfg["model"]["preset"]), DEFAULT_BATCH)
    if reason := data.model_mismatch(cfg["data"], entry, dims):
        raise ConfigError(reason)


def check(cfg: DictConfig) -> dict:
    """The composed config → a resolved dict with every value checked and defaults filled."""
    resolved = _apply_schema(cfg)
    _check_values(resolved)
    _resolve_model(resolved)
    _check_sharding(resolved)
    _check_cluster(resolved)
    if resolved["model"]["impl"] == "hf" and (reason := hf.refusal(resolved)):
        raise ConfigError(reason)
    resolved["tracking"]["uri"] = resolved["tracking"]["uri"] or paths.default_tracking_uri()
    resolved["ledger"]["dir"] = os.path.abspath(resolved["ledger"]["dir"] or paths.default_ledger_dir())
    return resolved


@dataclass(frozen=True)
class Plan:
    multirun: bool
    jobs: tuple[dict, ...]  # resolved configs, in launch order
    overrides: tuple[tuple[str, ...], ...]  # each job's override list


def check_data(jobs: Sequence[dict]) -> None:
    from repro.data import DataError, dvc_check

    seen = set()
    for job in jobs:
        key = (job["data"]["name"], job["data"]["path"])
        if key in seen:
            continue
        seen.add(key)
        try:
            dvc_check.check(job["data"])
        except DataError as e:
            raise ConfigError(f"data={job['data']['name']}: {e}") from None


def _is_flag(arg: str) -> bool:
    return arg.startswith("-")


def plan(args: Sequence[str]) -> Plan:
    """Compose and check every job the command line asks for; raise ConfigError if any fails."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    multirun_flag = any(a in ("-m", "--multirun") for a in args)
    overrides = [a for a in args if not _is_flag(a)]
    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(overrides)
        plain = [o.input_line for o in parsed if not o.is_sweep_override()]
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(paths.conf_dir()), version_base="1.3"):
            top = compose("config", overrides=plain, return_hydra_config=True)
            multirun = multirun_flag or str(top.hydra.mode) == "RunMode.MULTIRUN"
            if any(o.is_sweep_override() for o in parsed) and not multirun:
                raise ConfigError(
                    "a sweep (a=x,y) was given for a single run; add -m (or use an exp that "
                    "sets hydra.mode: MULTIRUN)"
                )
            params = [f"{k}={v}" for k, v in (top.hydra.sweeper.get("params") or {}).items()]
            params = params if multirun else []
            batches = BasicSweeper.split_arguments(parser.parse_overrides(params + overrides), None)
            job_overrides = [tuple(job) for job in batches[0]]
            jobs = []
            for job in job_overrides:
                try:
                    jobs.append(check(compose("config", overrides=list(job))))
                except ConfigError as e:
                    where = f" (in job {' '.join(job)})" if len(job_overrides) > 1 else ""
                    raise ConfigError(f"{e}{where}") from None
            launcher = str(top.hydra.launcher.get("_target_", ""))
    except HydraException as e:
        raise ConfigError(str(e)) from None
    finally:
        GlobalHydra.instance().clear()

    from repro import hardware
    from repro.runner import cluster

    if "SlurmLauncher" not in launcher:  # the jobs run here: so must SLURM's variables be
        for slurm in [j["cluster"] for j in jobs if j["cluster"]["name"] == "slurm"][:1]:
            cluster.resolve(slurm)  # raises, naming what is missing and what to do

    hardware.check_all([j["hardware"] for j in jobs])
    check_data(jobs)
    return Plan(multirun=multirun, jobs=tuple(jobs), overrides=tuple(job_overrides))
