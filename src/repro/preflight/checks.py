"""Check configs before anything runs.

`check(cfg)` turns one composed Hydra config into the resolved, typed, checked `schema.Config` a
run uses. `plan(args)` composes every job of the sweep the command line asks for (expanding it
the way Hydra's BasicSweeper will) and checks each one, plus the declared hardware against
this machine, so that a bad value in job 5 stops the sweep before job 1 writes anything.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from repro import data, models, paths
from repro.config import schema
from repro.backends import capabilities as backend_capabilities, determinism
from repro.backends.layouts import mesh_size
from repro.config.schema import ConfigError
from repro.loop import launchers
from repro.worker.window import AUTO, adaptive
from repro.models import hf
from repro.preflight import capabilities, search, verdict, workload
from repro.preflight.packages import check as check_packages
from repro.preflight.xla_hardware import check as check_xla_hardware

if TYPE_CHECKING:  # OmegaConf is imported where a config is composed or typed from one: a cached plan needs none
    from omegaconf import DictConfig


DEFAULT_BATCH = 32


_MODEL_TYPES: dict[int, tuple[Any, type]] = {}


def model_type(entry) -> type:
    """`schema.model_schema` of one model, made once per process (keyed by the entry itself: the zoo's
    are module globals, a package's are cached by `models.load`)."""
    if id(entry) not in _MODEL_TYPES:
        _MODEL_TYPES[id(entry)] = (entry, schema.model_schema(entry))
    return _MODEL_TYPES[id(entry)][1]


def _model_entry(name: str, target: str | None):
    """The model a config names (`model.name`, `model._target_` for one of your own), or ConfigError."""
    try:
        if not target:
            models.refuse_shadowing(name)
        return models.get(name, target)
    except KeyError as e:
        raise ConfigError(f"model.name: {e.args[0]}") from None
    except models.ModelLoadError as e:
        raise ConfigError(f"model: {e}") from None


def _apply_schema(cfg: DictConfig) -> schema.Config:
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    node = cfg.get("model") if isinstance(cfg.get("model"), DictConfig) else {}
    entry = _model_entry(str(node.get("name")), node.get(models.TARGET_KEY))
    typed = OmegaConf.structured(schema.Config)
    typed.model = OmegaConf.structured(model_type(entry))
    try:
        merged = OmegaConf.merge(typed, cfg)
        _check_bools(merged, cfg)
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as e:
        raise ConfigError(_omegaconf_message(e)) from None


_BOOL_TEXT = {"true", "false", "yes", "no", "on", "off"}


def _check_bools(typed, raw, prefix: str = "") -> None:
    """A boolean key given a number other than 0 and 1 (`run.fill_uninitialized_memory=2`, `=-1`) is refused:
    OmegaConf's BooleanNode reads any non-zero number as true, which hides a typo or a misread key."""
    from omegaconf import DictConfig
    from omegaconf.nodes import BooleanNode

    for key in typed.keys() if isinstance(typed, DictConfig) else ():
        node = typed._get_node(key)
        given = raw._get_node(key) if isinstance(raw, DictConfig) and key in raw else None
        if given is None:
            continue
        if isinstance(node, DictConfig):
            _check_bools(node, given, f"{prefix}{key}.")
        elif isinstance(node, BooleanNode):
            value = given._value() if hasattr(given, "_value") else given
            if value is None or isinstance(value, bool) or (isinstance(value, str) and (
                    value.lower() in _BOOL_TEXT or value.startswith("${"))):
                continue
            if isinstance(value, int) and value in (0, 1):
                continue
            raise ConfigError(f"{prefix}{key}: {value!r} is not a boolean: give true or false"
                              + (" (or null for torch's own default)" if node._is_optional() else ""))


def typed_dicts(configs: Sequence[DictConfig]) -> list[dict] | None:
    """Each composed job as the schema types it, as a plain dict (config/compose_cache.py keeps it
    with the compose); None where that is not a function of the compose alone: a job holds an
    interpolation (resolved on every run), names a model of your own (its code is not in the
    snapshot), or the schema refuses it (`check` says why, every time)."""
    import dataclasses
    import json

    from omegaconf import OmegaConf

    out = []
    for cfg in configs:
        container = OmegaConf.to_container(cfg, resolve=False)
        if "${" in json.dumps(container) or models.TARGET_KEY in (container.get("model") or {}):
            return None
        try:
            out.append(dataclasses.asdict(_apply_schema(cfg)))
        except ConfigError:
            return None
    return out


def _from_typed_dict(typed: dict) -> schema.Config:
    """A job's typed config from its kept dict (`typed_dicts`), as `_apply_schema` made it."""
    return schema.from_typed_dict(typed, model_type(_model_entry(str(typed["model"]["name"]), None)))


def _omegaconf_message(e) -> str:
    key = getattr(e, "full_key", None)
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    return f"{key}: {first}" if key else first


def _check_values(cfg: schema.Config) -> None:
    checked = list(schema.checked_fields(cfg))
    for key, value, f in checked:  # the allowed values first, then the bounds (as the checks always ran)
        if "choices" in f.metadata and value not in f.metadata["choices"]:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of: {', '.join(f.metadata['choices'])}")
    for group in dataclasses.fields(cfg):  # a number past what a run can hold (inf, nan) is refused at the edge
        node = getattr(cfg, group.name)
        for f in dataclasses.fields(node) if dataclasses.is_dataclass(node) else ():
            value = getattr(node, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{group.name}.{f.name}={value!r} must be a finite number")
    for key, value, f in checked:
        if f.metadata.get("bound") == "> 0" and not value > 0 or f.metadata.get("bound") == ">= 0" and value < 0:
            raise ConfigError(f"{key}={value!r} must be {f.metadata['bound']}")
    run = cfg.run
    _check_window(run)
    if adaptive(run.steps) and run.warmup < 2:
        raise ConfigError(f"run.warmup={run.warmup} must be at least 2 (the first and second steps are measured "
                          "apart): set run.warmup=2 or more")
    if not adaptive(run.steps) and not 2 <= run.warmup < run.steps:
        raise ConfigError(
            f"run.warmup={run.warmup} must be at least 2 (the first and second steps are "
            f"measured apart) and below run.steps={run.steps}, leaving steady-state steps: "
            + _window_fix(run.warmup, run.steps))
    for key in ("batch_size", "memory_limit_gb"):
        if getattr(run, key) is not None and not getattr(run, key) > 0:
            raise ConfigError(f"run.{key}={getattr(run, key)!r} must be > 0 (or null)")
    if run.threads is not None and run.threads < 1:
        raise ConfigError(f"run.threads={run.threads} must be >= 1 (or null for one per core)")
    precision, hardware = cfg.precision, cfg.hardware
    if precision.gpu_only and hardware.platform != "gpu":
        raise ConfigError(
            f"precision={precision.name} needs a GPU, but hardware={hardware.name} is a "
            f"{hardware.platform} profile; choose another precision (fp32, tf32, bf16, amp_bf16)"
        )


def _window_fix(warmup: int, steps: int) -> str:
    """The change that makes 2 <= run.warmup < run.steps hold."""
    if warmup < 2:  # too few warm-up steps: raise it (and the steps above it)
        return "set run.warmup=2" + (" and run.steps=3 or more" if steps < 3 else "")
    if steps > 2:  # too many: lower it, or raise the steps
        return f"set run.warmup={steps - 1} or fewer, or run.steps={warmup + 1} or more"
    return f"set run.steps={warmup + 1} or more"


def _check_window(run: schema.RunConfig) -> None:
    """run.steps (a count or auto) and the adaptive window's bounds (worker/window.py)."""
    if not adaptive(run.steps) and (isinstance(run.steps, bool) or not isinstance(run.steps, int) or run.steps < 1):
        raise ConfigError(f"run.steps={run.steps!r} must be a whole number of timed steps > 0 (run.steps=20) or {AUTO} "
                          "(measure until the steady window is long enough: run.min_steady_steps, run.min_steady_s)")
    if isinstance(run.min_steady_steps, bool) or not isinstance(run.min_steady_steps, int) or run.min_steady_steps < 10:
        raise ConfigError(f"run.min_steady_steps={run.min_steady_steps!r} must be a whole number >= 10 (a median "
                          "and its bootstrap need steps): set run.min_steady_steps=200, the default")
    if isinstance(run.min_steady_s, bool) or not isinstance(run.min_steady_s, (int, float)) or not run.min_steady_s > 0:
        raise ConfigError(f"run.min_steady_s={run.min_steady_s!r} must be > 0 seconds: set run.min_steady_s=1.0, "
                          "the default (or a fixed count: run.steps=N)")
    if adaptive(run.steps) and run.min_steady_s >= run.timeout_s:
        raise ConfigError(f"run.min_steady_s={run.min_steady_s!r} is not below run.timeout_s={run.timeout_s:g}: the "
                          "steady window could never end; set run.min_steady_s=1.0, the default")
    least = run.warmup + run.min_steady_steps
    if isinstance(run.max_steps, bool) or not isinstance(run.max_steps, int) or run.max_steps < least:
        raise ConfigError(f"run.max_steps={run.max_steps!r} is below run.warmup + run.min_steady_steps = {least}: "
                          f"set run.max_steps={least} or more (or lower run.min_steady_steps)")


def _check_sharding(cfg: schema.Config) -> None:
    sharding, run = cfg.sharding, cfg.run
    # The mesh this run uses is the one its record shows: a per-framework one replaces it.
    override = sharding.mesh_by_framework.get(cfg.framework.name, {}).get(sharding.name)
    if override is not None:
        sharding.mesh = dict(override)
    mesh = sharding.mesh
    need = schema.SHARDING_AXES[sharding.name]
    if set(mesh) != set(need):
        want = ", ".join(f"{a}: N" for a in need) or "nothing"
        raise ConfigError(f"sharding={sharding.name} needs mesh axes {{{want}}}, got sharding.mesh={mesh}")
    for axis, size in mesh.items():
        if size < 1:
            raise ConfigError(f"sharding.mesh.{axis}={size} must be >= 1")
    data = mesh.get("data", 1)
    if run.batch_size % data:
        raise ConfigError(f"run.batch_size={run.batch_size} does not split over sharding.mesh.data={data} "
                          f"({run.batch_size} % {data} = {run.batch_size % data}); choose a multiple of {data}")
    devices = mesh_size(mesh)
    if cfg.hardware.platform != "cpu" and devices > cfg.hardware.device_count:
        raise ConfigError(f"sharding.mesh {mesh} needs {devices} devices, but hardware={cfg.hardware.name} "
                          f"has {cfg.hardware.device_count}; shrink the mesh or choose a larger profile")


def _check_cluster(cfg: schema.Config) -> None:
    from repro.job import cluster

    c = cfg.cluster
    if c.name == "slurm":  # nodes and ranks are known where the job runs; checked again there
        cluster.check_layout(cfg, 1, c.jax_processes)
        return
    cluster.check_nodes(c.nodes, c.node_rank, c.coordinator)
    if c.coordinator:
        cluster.split_endpoint(c.coordinator, c.port)
    cluster.check_layout(cfg, c.nodes, c.jax_processes)


def _resolve_model(cfg: schema.Config) -> None:
    entry = models.entry_of(cfg.model)
    given = schema.dims(cfg.model)
    try:
        dims = entry.preset_values(cfg.model.preset, **given)
    except KeyError as e:
        raise ConfigError(f"model.preset: {e.args[0]}") from None
    for key, value in dims.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            raise ConfigError(f"model.{key}={value!r} must be > 0 (model {entry.name})")
    target = {models.TARGET_KEY: entry.target} if getattr(entry, "target", None) else {}
    cfg.model = model_type(entry)(name=cfg.model.name, preset=cfg.model.preset, impl=cfg.model.impl, **target, **dims)
    if cfg.run.batch_size is None:
        suggested = entry.extra.get("batch_size", {})
        cfg.run.batch_size = suggested.get(entry.resolve_preset(cfg.model.preset), DEFAULT_BATCH)
    if reason := data.model_mismatch(cfg.data, entry, dims):
        raise ConfigError(reason)


# Schemes MLflow 3 has tracking stores for (a SQLAlchemy URI may name its driver: postgresql+psycopg2).
TRACKING_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "file", "databricks",
                    "databricks-uc", "uc")
# MLflow keeps experiment names in a 256-character column, and a sqlite store's artifacts
# live in a folder named after the experiment (255 bytes at most): one limit below both.
EXPERIMENT_NAME_MAX = 200


def check_tracking_uri(uri: str) -> None:
    if "://" not in uri and ":" not in uri.split("/")[0]:
        return  # a plain path: MLflow's file store
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme not in TRACKING_SCHEMES:
        raise ConfigError(f"tracking.uri={uri!r}: MLflow has no store for the scheme {scheme!r}; use one of "
                          f"{', '.join(s + '://' for s in TRACKING_SCHEMES[:6])} (or leave it empty for the "
                          "repo's sqlite store)")


def check_experiment_name(name: str) -> None:
    """A plain name: it must never reach the filesystem as a path (`../x`, `a/b`)."""
    where = f"tracking.experiment={name[:40]!r}{'…' if len(name) > 40 else ''}"
    if not name.strip() or name != name.strip():
        raise ConfigError(f"{where}: give a name without leading or trailing blanks")
    if len(name.encode()) > EXPERIMENT_NAME_MAX:
        raise ConfigError(f"{where} is {len(name.encode())} bytes long; MLflow and the artifact folder named "
                          f"after it take at most {EXPERIMENT_NAME_MAX}: choose a shorter name")
    if any(c in name for c in "/\\") or ".." in name or any(ord(c) < 32 for c in name):
        raise ConfigError(f"{where} is not a plain name (path separators, '..' or control characters); "
                          "use letters, digits, '-', '_', '.' and spaces")


def check_ledger_dir(path: str) -> None:
    """The ledger folder can take records (ledger/place.py: the one check, `Ledger.check_writable`'s too)."""
    from repro.ledger import place

    if (why := place.unusable(path)) is not None:
        raise ConfigError(f"ledger.dir={path!r} {why}")


def check_machine_dir() -> None:
    """REPRO_MACHINE_DIR (where this machine's measured windows and projectors meet) can take its locks."""
    from repro.ledger import place

    if (env := os.environ.get("REPRO_MACHINE_DIR")) and (why := place.unusable(env, key="REPRO_MACHINE_DIR")):
        raise ConfigError(f"REPRO_MACHINE_DIR={env!r} {why} (or unset it: the cache folder is the default)")


def check(cfg: DictConfig) -> schema.Config:
    """The composed config → a resolved, typed `schema.Config`, every value checked and defaults filled."""
    return check_typed(_apply_schema(cfg))


# Keys that apply to some jobs only: dropped (None) where they do not, so that a sweep over them runs
# such a job once (`_once`), e.g. `framework=jax,torch run.fill_uninitialized_memory=null,false`.
NOT_APPLICABLE = "run.fill_uninitialized_memory applies to torch's deterministic mode only"


def _drop_inapplicable(cfg: schema.Config) -> None:
    if cfg.run.fill_uninitialized_memory is not None and not (cfg.framework.backend == "torch" and cfg.run.deterministic):
        cfg.run.fill_uninitialized_memory = None


def _once(jobs: list, job_overrides: list) -> tuple[list, list]:
    """The jobs that `_drop_inapplicable` made equal to an earlier one (the same config hash, and
    overrides that differ only in a dropped key) left out, said on stderr: such a sweep runs each
    config once. Jobs equal for any other reason (a key swept over values that hash alike) stay."""
    from repro.config import config_hash
    from repro.config.schema import as_dict

    dropped = "run.fill_uninitialized_memory="
    seen = {}
    for job, overrides in zip(jobs, job_overrides):
        rest = tuple(o for o in overrides if not o.lstrip("+~").startswith(dropped))
        seen.setdefault((config_hash(as_dict(job)), rest) if rest != tuple(overrides) else id(job), (job, overrides))
    if len(seen) < len(jobs):
        print(f"repro: {len(jobs) - len(seen)} of {len(jobs)} jobs are the same config as another once keys that "
              f"do not apply are dropped ({NOT_APPLICABLE}): each config runs once", file=sys.stderr)
        kept = list(seen.values())
        return [j for j, _ in kept], [o for _, o in kept]
    return jobs, job_overrides


def _say_nothing_to_reuse(jobs) -> None:
    """A warm compile cache asked for where the framework compiles nothing: said, not silently cold."""
    from repro.backends import compile_cache

    said = set()
    for job in jobs:
        why = job.run.compile_cache != "cold" and compile_cache.nothing_to_reuse(job.framework.backend, job.framework.compile)
        if why and job.framework.name not in said:
            said.add(job.framework.name)
            print(f"repro: run.compile_cache={job.run.compile_cache} with framework={job.framework.name}: {why}",
                  file=sys.stderr)


def check_typed(resolved: schema.Config) -> schema.Config:
    """Every check after the schema's, on a config it typed (now, or kept by the compose cache)."""
    _check_values(resolved)
    capabilities.check(resolved)  # what the backend declares it can do (backends/capabilities.py)
    _resolve_model(resolved)
    _check_sharding(resolved)
    _check_cluster(resolved)
    workload.check(resolved)  # a model of your own package: builds, agrees and converts (preflight/workload.py)
    check_xla_hardware(resolved)  # PyTorch/XLA only on CPU and TPU profiles (preflight/xla_hardware.py)
    if resolved.model.impl == "hf" and (reason := hf.refusal(resolved)):
        raise ConfigError(reason)
    _drop_inapplicable(resolved)
    if backend_capabilities.of(resolved.framework.backend).xla and (
            why := determinism.contradiction(resolved.run.deterministic, os.environ.get("XLA_FLAGS", ""))):
        raise ConfigError(why)
    resolved.tracking.uri = resolved.tracking.uri or paths.default_tracking_uri()
    resolved.ledger.dir = os.path.abspath(resolved.ledger.dir or paths.default_ledger_dir())
    check_tracking_uri(resolved.tracking.uri)
    check_experiment_name(resolved.tracking.experiment)
    return resolved


@dataclass(frozen=True)
class Plan:
    multirun: bool
    """A checked sweep: each config once, in the plan's order, and how many rounds of them the sweep
    loop runs (loop/sweep.py). `run.repeats` is held here alone: the loop's policies read
    `repeats`, and nothing lists a config once per round."""

    multirun: bool
    jobs: tuple[schema.Config, ...]  # resolved configs, each once, in the plan's order
    overrides: tuple[tuple[str, ...], ...]  # each config's override list
    launcher: launchers.Registration = field(default_factory=launchers.default)  # hydra.launcher._target_'s: where the loop's rounds run
    repeats: int = 1  # rounds of `jobs` (run.repeats=N); 1 for run.repeats=auto, whose rounds repro/repeats.py decides

    @property
    def configs(self) -> list[tuple[schema.Config, tuple[str, ...]]]:
        """Each config once, with its overrides, in the plan's order."""
        return list(zip(self.jobs, self.overrides))

    @property
    def runs(self) -> int:
        """The runs a fixed count plans (configs × rounds; auto: one round's)."""
        return len(self.jobs) * self.repeats


def check_data(jobs: Sequence[schema.Config]) -> None:
    from repro.data import DataError, dvc_check

    seen = set()
    for job in jobs:
        key = (job.data.name, job.data.path)
        if key in seen:
            continue
        seen.add(key)
        try:
            dvc_check.check(job.data)
        except DataError as e:
            raise ConfigError(f"data={job.data.name}: {e}") from None


def _is_flag(arg: str) -> bool:
    return arg.startswith("-")


def _config_keys() -> list[str]:
    """Every dotted key of the default config (what a misspelt key is matched against)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(paths.conf_dir()), version_base="1.3"):
        tree = OmegaConf.to_container(compose("config"), resolve=False)

    def walk(node, prefix: str):
        for key, value in node.items():
            yield from walk(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"]
    return list(walk(tree, ""))


def _hydra_message(text: str) -> str:
    """Hydra's advice for a key the config lacks is to add it (`+run.stpes=3`); a misspelt key
    needs the key it meant."""
    import difflib
    import re

    if not (found := re.match(r"Could not override '([^']+)'", text)):
        return text
    key = found.group(1)
    near = difflib.get_close_matches(key, _config_keys(), n=1)
    hint = f"did you mean {near[0]}?" if near else "`repro --cfg job` prints every key"
    return f"{key} is not a config key: {hint} (a new key is added with +{key}=...)"


def top_job(top: DictConfig) -> DictConfig:
    """A single run's job config: the top-level compose without its `hydra` node (Hydra's own
    `compose` of the same overrides differs from it only there)."""
    from omegaconf import OmegaConf

    return OmegaConf.masked_copy(top, [k for k in top.keys() if k != "hydra"])


class JobComposer:
    """Each job of a sweep composed as Hydra's `compose` would, at one compose per distinct set
    of config-group choices: jobs that differ only in values (`run.seed=0,1,2`) copy that
    compose and apply their value overrides with Hydra's own step (`_apply_overrides_to_config`,
    what `compose` runs after the defaults list). A compose costs ~140 ms on the 2-core
    reference machine, the copy and overrides ~10 ms. Anything else (+/~ overrides, groups,
    packages, `hydra.` keys), or an override that fails, goes through Hydra's full compose,
    which also gives its exact error."""

    def __init__(self, compose, parser):
        self._compose, self._parser, self._bases = compose, parser, {}

    def compose(self, job: list[str]) -> DictConfig:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl

        parsed = self._parser.parse_overrides(job)
        values = [o for o in parsed if _value_override(o)]
        groups = tuple(o.input_line for o in parsed if not _value_override(o))
        if not values:
            return self._compose("config", overrides=job)
        if groups not in self._bases:
            self._bases[groups] = self._compose("config", overrides=list(groups))
        cfg = copy.deepcopy(self._bases[groups])  # DictConfig.copy() shares nested nodes
        try:
            ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
        except Exception:  # noqa: BLE001 - Hydra's full compose raises its own message for it
            return self._compose("config", overrides=job)
        return cfg


def _value_override(o) -> bool:
    """`key=value` on a config value (not a config group, not +/~, not hydra's own)."""
    key = o.key_or_group
    return (not (o.is_add() or o.is_force_add() or o.is_delete()) and o.package is None
            and not key.startswith("hydra") and not (paths.conf_dir() / key.replace(".", "/")).is_dir())


def _compose(args: Sequence[str]):
    """Hydra's compose of every job of the command line (compose_cache.Composed), unchecked."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from repro.config.compose_cache import Composed

    multirun_flag = any(a in ("-m", "--multirun") for a in args)
    overrides = [a for a in args if not _is_flag(a)]
    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(overrides)
        plain = [o.input_line for o in parsed if not o.is_sweep_override()]
        GlobalHydra.instance().clear()
        search.register_entry_points(overrides)
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
            swept = parser.parse_overrides(params + overrides)
            if any(o.get_key_element().lstrip("+~") == "run.repeats" and o.is_sweep_override() for o in swept):
                raise ConfigError("run.repeats cannot be swept: it says how often every job of the sweep runs; "
                                  "give one value (run.repeats=3)")
            batches = BasicSweeper.split_arguments(swept, None)
            job_overrides = [tuple(job) for job in batches[0]]
            composer = JobComposer(compose, parser)
            configs = [top_job(top) if not multirun else composer.compose(list(job)) for job in job_overrides]
            return Composed(multirun, job_overrides, configs, str(top.hydra.launcher.get("_target_", "")))
    except HydraException as e:  # Hydra's search path says nothing to a user: left out
        raise ConfigError(_hydra_message(str(e).split("\nConfig search path:")[0])) from None
    finally:
        GlobalHydra.instance().clear()


def plan(args: Sequence[str]) -> Plan:
    """Compose and check every job the command line asks for; raise ConfigError if any fails.
    Hydra composes a command line once; the same command line later reads its compose from
    config/compose_cache.py (no Hydra import) and, in the same code snapshot, the schema's typed
    jobs (no OmegaConf import: `typed_dicts`). Every other check runs every time."""
    from repro.config import compose_cache

    args = search.normalise(args)  # --config-dir DIR -> hydra.searchpath (abs): one key for any cwd
    keyed, placed = compose_cache.with_placeholders(args)
    cache_key, composed = compose_cache.load(keyed, search.fingerprint(keyed))
    code = compose_cache.current_code()
    if composed is None or code is not None and composed.typed_code != code:  # composed now, or first in this snapshot
        composed = composed or _compose(keyed)
        composed.typed = typed_dicts(compose_cache.dict_configs(composed)) if code else None
        composed.typed_code = code
        compose_cache.store(cache_key, composed, keyed)
    if composed.typed is not None:  # the schema's output kept with the compose: no OmegaConf
        configs = [(_from_typed_dict, compose_cache.typed_put_back(t, placed)) for t in composed.typed]
        job_overrides = compose_cache.overrides_put_back(composed.overrides, placed)
    else:
        composed = compose_cache.put_back(composed, placed)
        configs, job_overrides = [(_apply_schema, c) for c in composed.configs], composed.overrides
    jobs, multirun = [], composed.multirun
    launcher = launchers.parse(composed.launcher)  # an unknown one is refused before any job is checked
    for (typed_config, cfg), job in zip(configs, job_overrides):
        try:
            jobs.append(check_typed(typed_config(cfg)))
        except ConfigError as e:
            where = f" (in job {' '.join(job)})" if len(job_overrides) > 1 else ""
            raise ConfigError(f"{e}{where}") from None
    search.refuse_shadowing(args, [j.model.name for j in jobs])
    _say_nothing_to_reuse(jobs)
    jobs, job_overrides = _once(jobs, list(job_overrides))  # the loop runs each config's rounds, whatever the launcher
    repeats = verdict.check_plan(jobs)  # run.repeats (a count or auto), verdict.*

    from repro import hardware
    from repro.job import cluster, scheduler

    if launcher.scheduler != "slurm":  # the jobs run where SLURM's variables are not given them: so must they be
        for slurm in [j.cluster for j in jobs if j.cluster.name == "slurm"][:1]:
            cluster.check_reachable(cluster.resolve(slurm))  # raises, naming what is missing and what to do

    if launcher.remote and (warning := scheduler.shared_store_warning([j.tracking.uri for j in jobs], launcher.name)):
        print(f"repro: {warning}", file=sys.stderr)
    hardware.check_all([j.hardware for j in jobs])
    check_packages(jobs)  # env.packages: syntax, what a pin may replace, served here (preflight/packages.py)
    check_data(jobs)
    for ledger_dir in sorted({j.ledger.dir for j in jobs}):
        check_ledger_dir(ledger_dir)
    check_machine_dir()
    return Plan(multirun=multirun, jobs=tuple(jobs), overrides=tuple(job_overrides), launcher=launcher,
                repeats=repeats)
