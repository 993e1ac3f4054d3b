"""The structured schema of a run's config: one dataclass per config group.

conf/ holds the yaml choices; these dataclasses type and check them. They are applied by
`validate.check()` right after Hydra composes a job, not through a ConfigStore schema in
the defaults list, because DVC's Hydra integration (`dvc exp run -S ...`) composes conf/ in
its own process, where our ConfigStore entries would not exist. Misspelt keys are already
refused by Hydra's struct mode during composition; types and values are refused here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

FRAMEWORK_BACKENDS = ("jax", "torch", "torch_xla")
PLATFORMS = ("cpu", "gpu", "tpu")
MATMUL_PRECISIONS = ("highest", "high", "medium", "default")
DTYPES = ("float32", "bfloat16", "float16")
TASKS = ("train", "forward")
OPTIMIZERS = ("sgd", "adamw")
CACHE_STATES = ("cold", "warm")
PROGRESS_MODES = ("auto", "rich", "plain", "none")
INIT_MODES = ("native", "shared")
MODEL_IMPLS = ("native", "hf")  # ours | transformers' classes (repro.models.hf)


class ConfigError(ValueError):
    """A config that cannot run: names the key, the bad value and what would be valid."""


@dataclass
class FrameworkConfig:
    name: str = "jax"
    backend: str = "jax"  # which backend module runs it
    compile: bool = False  # torch: wrap the model in torch.compile
    compile_backend: str = "inductor"
    compile_mode: str = "default"
    python: Optional[str] = None  # the worker's interpreter; None = the parent's own


@dataclass
class PrecisionConfig:
    name: str = "fp32"
    matmul: str = "highest"  # highest = full fp32, high = tf32, medium/default = bf16 passes
    param_dtype: str = "float32"
    compute_dtype: str = "float32"
    autocast: bool = False  # torch autocast / mixed compute with fp32 params
    loss_scaling: bool = False
    gpu_only: bool = False


@dataclass
class ShardingConfig:
    name: str = "none"
    mesh: Dict[str, int] = field(default_factory=dict)
    # framework name -> layout -> mesh, replacing `mesh` for that framework's runs of that
    # layout (JAX's simulated CPU devices are cheap where torch's ranks are processes).
    mesh_by_framework: Dict[str, Dict[str, Dict[str, int]]] = field(default_factory=dict)


@dataclass
class ClusterConfig:
    """Where the processes of one run live: this host (local) or several (nodes > 1)."""

    name: str = "local"  # local: the values below | slurm: nodes, node_rank, host from SLURM's variables
    nodes: int = 1
    node_rank: int = 0  # this host's index; node 0 alone records the run
    coordinator: str = ""  # host[:port] of node 0's rendezvous; "" on one node: 127.0.0.1, a free port
    port: int = 29500  # the rendezvous port where `coordinator` names none
    jax_processes: int = 1  # JAX processes per node (torch always runs one process per rank)
    join_timeout_s: float = 120.0  # how long a process waits for the others to join


@dataclass
class HardwareConfig:
    name: str = "cpu"
    platform: str = "cpu"
    device_match: str = ""  # substring of the device name the profile expects ("L4", "H100")
    device_count: int = 1
    memory_gb: float = 0.0
    peak_tflops: Dict[str, float] = field(default_factory=dict)  # per precision name
    check: bool = True  # refuse to run when the machine does not match


@dataclass
class DataConfig:
    name: str = "synthetic"
    batches: int = 4  # synthetic: distinct batches made from the seed, cycled through the steps
    path: str = ""  # real datasets: the DVC-tracked folder, relative to the repo root


@dataclass
class RunConfig:
    seed: int = 0
    steps: int = 20
    warmup: int = 5  # steps (after the first two) left out of the steady state
    batch_size: Optional[int] = None  # None: the model's suggested batch for its preset, else 32
    task: str = "train"
    optimizer: str = "sgd"
    lr: float = 1e-3
    threads: Optional[int] = None  # None: one per core, resolved and recorded
    deterministic: bool = True
    compile_cache: str = "cold"
    capture_ir: bool = False
    # after the timed loop, a few more steps under the framework's own profiler: the trace is
    # kept and reduced to one vocabulary of categories (repro.profile); never inside the timed steps
    profile: bool = False
    timeout_s: float = 3600.0
    memory_limit_gb: Optional[float] = None  # a cap the run must fit in, else it ends "oom"
    resume: bool = False  # skip a job already recorded ok with this config hash on this environment
    repeats: int = 1  # fresh workers per config, interleaved across the sweep's configs (A B, A B, ...)
    # native: each framework's own initialisers and RNG | shared: drawn once in NumPy from the
    # seed and loaded into every framework (bit-identical start; repro.models.canonical)
    init: str = "native"


@dataclass
class TrackingConfig:
    uri: str = ""
    experiment: str = "repro"


@dataclass
class LedgerConfig:
    dir: str = ""


@dataclass
class ProgressConfig:
    mode: str = "auto"
    interval_s: float = 10.0  # plain mode (logs): at most one progress line per interval


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
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    ledger: LedgerConfig = field(default_factory=LedgerConfig)
    progress: ProgressConfig = field(default_factory=ProgressConfig)


# Keys that do not change a run's results: left out of the config hash.
NON_SEMANTIC_KEYS = (
    "tracking",
    "ledger",
    "progress",
    "run.timeout_s",
    "run.resume",  # whether to skip, not what runs
    "run.repeats",  # repeats are the same config: each one hashes as its config
    "framework.python",
    "hardware.check",
    "cluster.name",  # how the hosts were found, not what ran
    "cluster.node_rank",
    "cluster.coordinator",
    "cluster.port",
    "cluster.join_timeout_s",
)

# (key, allowed values) checked by `validate.check()`.
CHOICES = {
    "framework.backend": FRAMEWORK_BACKENDS,
    "hardware.platform": PLATFORMS,
    "precision.matmul": MATMUL_PRECISIONS,
    "precision.param_dtype": DTYPES,
    "precision.compute_dtype": DTYPES,
    "run.task": TASKS,
    "run.optimizer": OPTIMIZERS,
    "run.compile_cache": CACHE_STATES,
    "run.init": INIT_MODES,
    "progress.mode": PROGRESS_MODES,
    "model.impl": MODEL_IMPLS,
    "data.name": ("synthetic", "digits"),
    "sharding.name": ("none", "dp", "fsdp", "tp", "dp_tp"),
    "cluster.name": ("local", "slurm"),
}

# The mesh axes each layout needs (axis names: data, model).
SHARDING_AXES = {"none": (), "dp": ("data",), "fsdp": ("data",), "tp": ("model",), "dp_tp": ("data", "model")}

# Keys that must be > 0 (>= 0 for those in NON_NEGATIVE).
POSITIVE = ("run.steps", "run.repeats", "run.lr", "run.timeout_s", "data.batches", "progress.interval_s", "hardware.device_count",
            "cluster.nodes", "cluster.port", "cluster.jax_processes", "cluster.join_timeout_s")
NON_NEGATIVE = ("run.warmup", "run.seed", "cluster.node_rank")


def model_schema(entry) -> type:
    """A dataclass for `model.*` of one model: its name, preset, implementation and every dimension.

    Dimensions default to None, meaning "take it from the preset"; their types come from
    the presets, so `model.width=abc` is refused as not an int.
    """
    types: dict[str, type] = {}
    for dims in entry.presets.values():
        for key, value in dims.items():
            types.setdefault(key, type(value))
    fields = [("name", str, dataclasses.field(default=entry.name)),
              ("preset", str, dataclasses.field(default=entry.default_preset)),
              ("impl", str, dataclasses.field(default="native"))]
    fields += [(k, Optional[t], dataclasses.field(default=None)) for k, t in types.items()]
    return dataclasses.make_dataclass(f"{entry.name.title()}ModelConfig", fields)
