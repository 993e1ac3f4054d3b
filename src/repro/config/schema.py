"""The structured schema of a run's config: one dataclass per config group.

`preflight.check()` returns a `Config`; read the live config of a run by attribute: `config.run.steps`, `config.model.name`, `config.tracking.uri`.
The dict for hashing, the ledger's `config` and `spec.json` is `as_dict(config)`, and a dict
from spec.json or a record becomes a `Config` again with `from_dict(d)`. Ledger records are stored
as dicts; a reader reads one typed through `repro.ledger.record.view(record)` (its config tolerantly:
keys a record lacks at these defaults, keys the schema does not know kept aside and named). Defaults live here and nowhere else; a field's allowed values
are its metadata (`choice(...)`, `positive(...)`, `non_negative(...)`), read by the checker.
A field's meaning is the comment on its line or right above it (or `metadata["doc"]`): the generated
config reference (docs/reference/config.md, `make docs`) prints it, and a field without one fails that build.

conf/ holds the yaml choices; these dataclasses type and check them. They are applied by
`preflight.check()` right after Hydra composes a job, not through a ConfigStore schema in
the defaults list, because DVC's Hydra integration (`dvc exp run -S ...`) composes conf/ in
its own process, where our ConfigStore entries would not exist. Misspelt keys are already
refused by Hydra's struct mode during composition; types and values are refused here.

Field metadata rather than `Literal[...]` types: OmegaConf 2.3 (capped by Hydra 1.3) refuses
`Literal` in a structured config.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from repro.config.errors import ConfigError  # noqa: F401 - raised here, and imported from here by most

PLATFORMS = ("cpu", "gpu", "tpu")
MATMUL_PRECISIONS = ("highest", "high", "medium", "default")
DTYPES = ("float32", "bfloat16", "float16")
TASKS = ("train", "forward")
OPTIMIZERS = ("sgd", "adamw")
CACHE_STATES = ("cold", "warm", "repeats")  # backends/compile_cache.py
STARTS = ("fresh", "fork")  # run.start: how a worker process starts (job/launch.py)
PROGRESS_MODES = ("auto", "rich", "plain", "none")
INIT_MODES = ("native", "shared")
MODEL_IMPLS = ("native", "hf")  # ours | transformers' classes (repro.models.hf)
DATASETS = ("synthetic", "digits")
LAYOUTS = ("none", "dp", "fsdp", "tp", "dp_tp")
CLUSTERS = ("local", "slurm")


def choice(default: str, allowed: tuple[str, ...]) -> Any:
    """A field whose value must be one of `allowed` (`preflight.check` refuses others, naming them)."""
    return field(default=default, metadata={"choices": allowed})


def positive(default: float) -> Any:
    """A field that must be > 0."""
    return field(default=default, metadata={"bound": "> 0"})


def non_negative(default: float) -> Any:
    """A field that must be >= 0."""
    return field(default=default, metadata={"bound": ">= 0"})


@dataclass
class FrameworkConfig:
    name: str = "jax"  # the framework option this run is named by (conf/framework/: jax, torch, torch_compile, ...)
    # which backend module runs it; the choices and what each can do: backends/capabilities.py (the preflight checks it)
    backend: str = "jax"
    compile: bool = False  # torch: wrap the model in torch.compile
    compile_backend: str = "inductor"  # with compile=true: torch.compile's backend (inductor, openxla)
    compile_mode: str = "default"  # with compile=true: torch.compile's mode (default, reduce-overhead, max-autotune)
    python: Optional[str] = None  # the worker's interpreter; None = the parent's own


@dataclass
class PrecisionConfig:
    name: str = "fp32"  # the precision option this run is named by (conf/precision/)
    # highest = full fp32, high = tf32, medium/default = bf16 passes
    matmul: str = choice("highest", MATMUL_PRECISIONS)
    param_dtype: str = choice("float32", DTYPES)  # the dtype the weights are kept in
    compute_dtype: str = choice("float32", DTYPES)  # the dtype activations and matmuls run in
    autocast: bool = False  # torch autocast / mixed compute with fp32 params
    loss_scaling: bool = False  # scale the loss against fp16 underflow (torch: GradScaler; JAX: a fixed scale)
    gpu_only: bool = False  # the precision exists only on a GPU: refused on hardware.platform=cpu


@dataclass
class ShardingConfig:
    name: str = choice("none", LAYOUTS)  # the layout: none, data parallel, FSDP, tensor parallel, or both
    mesh: Dict[str, int] = field(default_factory=dict)  # axis name (data, model) -> devices along it
    # framework name -> layout -> mesh, replacing `mesh` for that framework's runs of that
    # layout (JAX's simulated CPU devices are cheap where torch's ranks are processes).
    # Read by `preflight.check` (which sets `mesh`), so no part of the run's record (`record: False`).
    mesh_by_framework: Dict[str, Dict[str, Dict[str, int]]] = field(default_factory=dict, metadata={"record": False})


@dataclass
class ClusterConfig:
    """Where the processes of one run live: this host (local) or several (nodes > 1)."""

    # local: the values below | slurm: nodes, node_rank, host from SLURM's variables
    name: str = choice("local", CLUSTERS)
    nodes: int = positive(1)  # how many hosts the run spans
    node_rank: int = non_negative(0)  # this host's index; node 0 alone records the run
    coordinator: str = ""  # host[:port] of node 0's rendezvous; "" on one node: 127.0.0.1, a free port
    port: int = positive(29500)  # the rendezvous port where `coordinator` names none
    jax_processes: int = positive(1)  # JAX processes per node (torch always runs one process per rank)
    join_timeout_s: float = positive(120.0)  # how long a process waits for the others to join


@dataclass
class HardwareConfig:
    name: str = "cpu"  # the hardware profile this run is named by (conf/hardware/)
    platform: str = choice("cpu", PLATFORMS)  # the device kind the run runs on
    device_match: str = ""  # substring of the device name the profile expects ("L4", "H100")
    device_count: int = positive(1)  # how many devices the profile expects
    memory_gb: float = 0.0  # each device's memory in GB as the profile states it (recorded, not checked)
    peak_tflops: Dict[str, float] = field(default_factory=dict)  # per precision name
    check: bool = True  # refuse to run when the machine does not match


@dataclass
class DataConfig:
    name: str = choice("synthetic", DATASETS)  # synthetic batches from the seed, or a real DVC-tracked dataset
    batches: int = positive(4)  # synthetic: distinct batches made from the seed, cycled through the steps
    path: str = ""  # real datasets: the DVC-tracked folder, relative to the repo root


@dataclass
class RunConfig:
    """How one run is measured. Its step count is either fixed or adaptive (worker/window.py):
    `run.steps=N` takes exactly N timed steps, as it always did; `run.steps=auto` (the default)
    measures until the steady window is long enough (the min_/max_ keys below); an exp or a
    command line that names a number keeps its fixed count."""

    seed: int = non_negative(0)  # the seed of weights, data and every RNG the run draws from
    # How many timed steps (worker/window.py): a whole number N is exactly N steps, the first
    # (compile) and second included; "auto" (the default) measures until the steady steps number at
    # least min_steady_steps AND took at least min_steady_s together (whichever is later), at most
    # max_steps steps in all. Checked by preflight/checks.py.
    steps: Any = "auto"
    warmup: int = non_negative(5)  # leading steps left out of the steady state, the first two included
    min_steady_steps: int = 200  # steps=auto: at least this many steady steps (>= 10)
    min_steady_s: float = 1.0  # steps=auto: at least this many seconds of steady steps (> 0)
    max_steps: int = 10000  # steps=auto: at most this many steps in all (>= warmup + min_steady_steps)
    batch_size: Optional[int] = None  # None: the model's suggested batch for its preset, else 32
    task: str = choice("train", TASKS)  # what a step is: forward, backward and update, or forward alone
    optimizer: str = choice("sgd", OPTIMIZERS)  # the update rule of a train step
    lr: float = positive(1e-3)  # the optimizer's learning rate
    threads: Optional[int] = None  # None: one per core, resolved and recorded
    deterministic: bool = True  # deterministic kernels (bit-identical reruns, at a price); false: the library's defaults
    # torch's deterministic mode only: fill new tensors' uninitialised memory with NaN (or the largest
    # integer) as `torch.utils.deterministic.fill_uninitialized_memory` does. None: torch's own default
    # (on under deterministic algorithms). Elsewhere it does not apply, and the preflight drops it (None).
    fill_uninitialized_memory: Optional[bool] = None
    compile_cache: str = choice("cold", CACHE_STATES)  # cold: an empty compile cache per run; warm: one shared on this machine; repeats: a config's later repeats reuse its first's
    # How each worker process starts: fresh (a new interpreter imports its framework, as a bare script
    # does) or fork (forked by a server that imported the framework once for the sweep's workers of its
    # kind: job/forked.py); a condition every verdict states (report/comparison.py)
    start: str = choice("fresh", STARTS)
    capture_ir: bool = False  # keep the lowered step's IR with the run (`repro ir diff` compares op counts)
    # after the timed loop, a few more steps under the framework's own profiler: the trace is
    # kept and reduced to one vocabulary of categories (repro.profile); never inside the timed steps
    profile: bool = False
    timeout_s: float = positive(3600.0)  # a run still going after this long is killed and recorded failed
    memory_limit_gb: Optional[float] = None  # a cap the run must fit in, else it ends "oom"
    resume: bool = False  # skip a job already recorded ok with this config hash on this environment
    # fresh workers per config, interleaved across the sweep's configs (A B, A B, ...); "auto": rounds
    # until every pair is decided (repro/repeats.py, verdict.*); checked by preflight/verdict.py
    repeats: Any = 1
    # native: each framework's own initialisers and RNG | shared: drawn once in NumPy from the
    # seed and loaded into every framework (bit-identical start; repro.models.canonical)
    init: str = choice("native", INIT_MODES)


@dataclass
class VerdictConfig:
    """How the verdict engine (report/verdict.py) decides; checked by preflight/verdict.py."""

    band: float = 0.02  # "equivalent" means within ±band (a fraction: 0.02 is ±2 %)
    max_repeats: int = 10  # run.repeats=auto: at most this many rounds
    budget_s: Optional[float] = None  # run.repeats=auto: no new round once this much wall time is spent
    # a round whose telemetry flags a run (loop/rerun.py) runs again, at most this often per sweep
    max_reruns: int = 2
    # the share of rounds dropped from each end of the trimmed paired t, the most the adaptive statistic
    # drops (0: the plain paired t)
    trim: float = 0.2
    # how a pair's rounds are judged: a registered statistic (report/statistic.py): adaptive (the trim chosen
    # from the rounds' tail weight), trimmed (verdict.trim always), paired-t; checked by preflight/verdict.py
    statistic: str = "adaptive"
    # the process canary (job/canary.py): a run whose canary is slower than this host's median by
    # more than this share is recorded slow; canary=false: no canary runs. canary_reruns=true also runs
    # its round again (off: on the 2-core VM it caught 2 of 5 slow processes and flagged 10 of 35 others)
    canary: bool = True
    canary_margin: float = 0.25  # the share slower than the host's median canary that marks a run slow
    canary_reruns: bool = False  # a run whose canary is slow also runs its round again (within verdict.max_reruns)


@dataclass
class BisectConfig:
    """What `repro bisect` (bisect/cli.py) may spend; its --budget-s and --max-rounds override these for one
    command. Checked by preflight/verdict.py for a sweep and by bisect/cli.py for a bisection."""

    budget_s: Optional[float] = None  # a bisection starts no round that would pass this many seconds (null: no budget)
    # the most paired rounds one probe (or the confirmation) runs before it is called unknown (null: verdict.max_repeats)
    max_rounds: Optional[int] = None


@dataclass
class TrackingConfig:
    uri: str = ""  # the MLflow tracking URI; "": sqlite mlflow.db at the repo root
    experiment: str = "repro"  # the MLflow experiment runs are logged to (an exp sets its own)
    # a run's measured steps wait at most this long for an MLflow projector at work on the machine
    # (for it to finish, then again for its current write's turn: job/launch.py open_window)
    projector_wait_s: float = positive(30.0)
    # a job run in a launcher's own process (submitit, SLURM) projects its run for at most this long
    inline_drain_s: float = non_negative(120.0)
    # how long this machine's MLflow writer (tracking/writer.py) stays up with nothing to write, keeping
    # MLflow imported for the next command; 0: a projector process per command (each imports MLflow).
    # Ten minutes: a working session's next command, after its table is read, finds it up. At 60 s, one
    # test suite's writers of one code started 51 times or more, each importing MLflow again (4-5 s of
    # CPU); idle, a writer sleeps (no CPU; ~220 MB resident)
    writer_idle_s: float = non_negative(600.0)


@dataclass
class LedgerConfig:
    dir: str = ""  # the ledger folder; "": the repo's ledger/


@dataclass
class ProgressConfig:
    mode: str = choice("auto", PROGRESS_MODES)  # progress display: auto (rich on a terminal, plain in logs), rich, plain, none
    interval_s: float = positive(10.0)  # plain mode (logs): at most one progress line per interval


@dataclass
class EnvConfig:
    # pins that replace versions of the worker's environment, e.g. [flax==0.12.7]: the job runs
    # in a cached venv built with uv (repro.envs); [] runs in the worker's interpreter as it is
    packages: list[str] = field(default_factory=list)
    # a pin may name a distribution the worker's environment lacks only with allow_new=true (the preflight refuses it else)
    allow_new: bool = False
    # a pack (`repro env pack`): the job runs in a venv of its environment (pins on top), built offline from it
    wheelhouse: str = ""


@dataclass
class Config:
    framework: FrameworkConfig = field(default_factory=FrameworkConfig)
    model: Any = None  # typed per model by `model_schema()`
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    sharding: ShardingConfig = field(default_factory=ShardingConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    data: DataConfig = field(default_factory=DataConfig)
    run: RunConfig = field(default_factory=RunConfig)
    verdict: VerdictConfig = field(default_factory=VerdictConfig)
    bisect: BisectConfig = field(default_factory=BisectConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    ledger: LedgerConfig = field(default_factory=LedgerConfig)
    progress: ProgressConfig = field(default_factory=ProgressConfig)
    env: EnvConfig = field(default_factory=EnvConfig)


# Keys that do not change a run's results: left out of the config hash.
NON_SEMANTIC_KEYS = (
    "tracking",
    "ledger",
    "progress",
    "run.timeout_s",
    "run.resume",  # whether to skip, not what runs
    "run.repeats",  # repeats are the same config: each one hashes as its config
    "verdict",  # how runs are judged, not what runs
    "bisect",  # what a bisection may spend, not what runs
    "framework.python",
    "env.allow_new",  # a permission the preflight reads, not what runs
    "env.wheelhouse",  # where the packages come from: the record's env_hash names what they are
    "hardware.check",
    "cluster.name",  # how the hosts were found, not what ran
    "cluster.node_rank",
    "cluster.coordinator",
    "cluster.port",
    "cluster.join_timeout_s",
)

# The mesh axes each layout needs (axis names: data, model).
SHARDING_AXES = {"none": (), "dp": ("data",), "fsdp": ("data",), "tp": ("model",), "dp_tp": ("data", "model")}

MODEL_KEYS = ("name", "preset", "impl", "_target_")  # every model's; the rest of `model.*` are its dimensions


def model_schema(entry) -> type:
    """A dataclass for `model.*` of one model: its name, preset, implementation and every dimension
    (plus `_target_`, the class, for a model outside the zoo: `repro.models.api`).

    Dimensions default to None, meaning "take it from the preset"; their types come from
    the presets, so `model.width=abc` is refused as not an int. `entry` is any object with the
    protocol's `name`, `presets` and `resolve_preset` (this module imports no model).
    """
    types: dict[str, type] = {}
    for dims in entry.presets.values():
        for key, value in dims.items():
            types.setdefault(key, type(value))
    fields = [("name", str, dataclasses.field(default=entry.name, metadata={"doc": "the model (conf/model/, or your own)"})),
              ("preset", str, dataclasses.field(default=entry.resolve_preset(None), metadata={
                  "doc": "a named size of the model (tiny, small, ...: `repro models` lists them)"})),
              ("impl", str, dataclasses.field(default="native", metadata={
                  "choices": MODEL_IMPLS, "doc": "native: repro's own classes; hf: transformers' classes of the same model"}))]
    if target := getattr(entry, "target", None):  # recorded, so the worker and a replay find the class
        fields.append(("_target_", str, dataclasses.field(default=target)))
    fields += [(k, Optional[t], dataclasses.field(default=None)) for k, t in types.items()]
    return dataclasses.make_dataclass(f"{entry.name.title().replace('-', '_')}ModelConfig", fields)


@functools.lru_cache(maxsize=None)
def _recorded_model_type(keys: tuple[str, ...]) -> type:
    return dataclasses.make_dataclass("RecordedModelConfig", [(k, Any, dataclasses.field(default=None)) for k in keys])


# Keys of the `model` group added after records were published, at the value every earlier run had
# (config/spec.py ADDED_AT_DEFAULT names them too: at this value they leave a config's hash as it was).
MODEL_ADDED_AT = {"impl": "native"}


def model_from_dict(d: dict):
    """The `model` group of a canonical dict (spec.json, a record) as a dataclass of its own keys: its
    values were typed and checked by the preflight that made the dict, so no model is imported here.
    A record older than a key of the group gets the value that key had before it existed."""
    d = {**d, **{k: v for k, v in MODEL_ADDED_AT.items() if k not in d}}  # the dict's own order kept
    return _recorded_model_type(tuple(d))(**d)


def dims(model) -> dict:
    """A typed `model` group's dimensions: every field but its name, preset, impl and class."""
    return {f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.name not in MODEL_KEYS}


def checked_fields(config: Config):
    """(dotted key, value, field) of every field with allowed values or a bound, group by group."""
    for group in dataclasses.fields(config):
        node = getattr(config, group.name)
        for f in dataclasses.fields(node):
            if "choices" in f.metadata or "bound" in f.metadata:
                yield f"{group.name}.{f.name}", getattr(node, f.name), f


def as_dict(config: Any) -> Any:
    """The canonical dict of a config (or of one group): what is hashed, recorded and sent to the
    worker. Field order as declared; fields marked `record: False` are left out."""
    if dataclasses.is_dataclass(config):
        return {f.name: as_dict(getattr(config, f.name)) for f in dataclasses.fields(config)
                if f.metadata.get("record", True)}
    if isinstance(config, dict):
        return {k: as_dict(v) for k, v in config.items()}
    if isinstance(config, list):
        return [as_dict(v) for v in config]
    return config


_GROUPS = {f.name: f for f in dataclasses.fields(Config)}


def from_dict(d: dict) -> Config:
    """A `Config` from its canonical dict (spec.json, a record's `config`): plain dataclass
    construction, no OmegaConf (the worker rebuilds its config with it). Keys a dict lacks (a
    record older than the key) take the schema's default."""
    groups = {name: _group_type(name)(**d[name]) for name in _GROUPS if name != "model" and name in d}
    return Config(model=model_from_dict(d["model"]), **groups)


def from_typed_dict(d: dict, model_type: type) -> Config:
    """A `Config` from `dataclasses.asdict` of one (every field, recorded or not), its `model`
    group as `model_type`: the schema's typed config again (config/compose_cache.py keeps it)."""
    groups = {name: _group_type(name)(**d[name]) for name in _GROUPS if name != "model"}
    return Config(model=model_type(**d["model"]), **groups)


def _group_type(name: str) -> type:
    return _GROUPS[name].default_factory  # type: ignore[return-value]
