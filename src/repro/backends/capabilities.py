"""What each backend can do, declared in one table: the preflight refuses a config that asks a
backend for more (preflight/capabilities.py) and the run path reads the same entries (the worker's
process layout, the simulated CPU devices, the schema's choice of `framework.backend`).

Plain data, no framework import: the preflight and the parent read it without torch or jax.
Adding a backend: its module (a `build(ctx)` returning a `Workload`, backends/base.py), one entry
here, and a conf/framework/*.yaml naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

# How a sharded run spans processes.
ONE_PROCESS = "one"  # every device in this process (JAX on one host, PyTorch/XLA's SPMD)
PER_RANK = "per_rank"  # one process per rank of the mesh (torch's DDP/FSDP2/DTensor, torch's elastic launcher)
PER_NODE = "per_node"  # cluster.jax_processes processes per node (jax.distributed)

# How a CPU run makes the devices its mesh needs (None: it needs none, its ranks are processes).
XLA_FLAGS = "XLA_FLAGS"  # --xla_force_host_platform_device_count
CPU_NUM_DEVICES = "CPU_NUM_DEVICES"  # PJRT's CPU client (PyTorch/XLA)

ALL_LAYOUTS = ("none", "dp", "fsdp", "tp", "dp_tp")


@dataclass(frozen=True)
class Capabilities:
    module: str  # imported by name, in the worker only
    dtypes: tuple[str, ...]  # precision.param_dtype / compute_dtype it runs in
    autocast: bool  # precision.autocast: mixed compute over fp32 parameters
    loss_scaling: bool  # precision.loss_scaling
    layouts: tuple[str, ...]  # sharding.name it runs (eager)
    compile: bool  # framework.compile=true: the model wrapped in torch.compile
    compiled_layouts: tuple[str, ...]  # sharding.name it runs with framework.compile=true
    # its tensor-parallel layouts (tp, dp_tp) split only a model that declares a plan for them
    # (partitioning["torch_tp"] on the model: column/row-parallel Linear pairs); False: every model
    tp_needs_plan: bool
    processes: str  # ONE_PROCESS | PER_RANK | PER_NODE: how a sharded run spans processes
    cpu_devices: str | None  # XLA_FLAGS | CPU_NUM_DEVICES | None: how a CPU run simulates its mesh's devices
    profile: bool  # run.profile=true: a few steps under the framework's profiler
    ir: bool  # run.capture_ir=true: its step's lowered IR (StableHLO/HLO)
    own_interpreter: bool  # its worker needs framework.python (an interpreter of its own)
    xla: bool = False  # it compiles through XLA: XLA_FLAGS set its determinism (backends/determinism.py)
    # the framework's own packages, as a bare script of it imports them: a worker started ahead
    # imports these before any module of repro's (worker/worker_main.py)
    packages: tuple[str, ...] = ()

    @property
    def multi_node(self) -> bool:
        """Whether a run can span several hosts (cluster.nodes > 1)."""
        return self.processes != ONE_PROCESS


DTYPES = ("float32", "bfloat16", "float16")

BACKENDS: dict[str, Capabilities] = {
    # JAX + Flax NNX + Optax: jit always compiles (framework.compile is torch's wrapper, not JAX's).
    "jax": Capabilities(module="repro.backends.jax_backend", dtypes=DTYPES, autocast=True, loss_scaling=True,
                        layouts=ALL_LAYOUTS, compile=False, compiled_layouts=(), tp_needs_plan=False,
                        processes=PER_NODE, cpu_devices=XLA_FLAGS, profile=True, ir=True, own_interpreter=False,
                        xla=True, packages=("jax", "optax", "flax.nnx")),
    # PyTorch eager or torch.compile; eager and inductor lower to no StableHLO/HLO. Tensor parallel
    # splits the models that declare a torch TP plan (MLP-only so far: attention needs per-rank head counts).
    "torch": Capabilities(module="repro.backends.torch_backend", dtypes=DTYPES, autocast=True, loss_scaling=True,
                          layouts=ALL_LAYOUTS, compile=True, compiled_layouts=("none",), tp_needs_plan=True,
                          processes=PER_RANK, cpu_devices=None, profile=True, ir=False, own_interpreter=False,
                          packages=("torch",)),
    # PyTorch/XLA: SPMD annotations split by XLA's partitioner in one process, so any model's attention
    # works; torch-xla 2.9 needs torch 2.9, hence an interpreter of its own (conf/framework/torch_xla.yaml).
    "torch_xla": Capabilities(module="repro.backends.torch_xla_backend", dtypes=DTYPES, autocast=True,
                              loss_scaling=True, layouts=ALL_LAYOUTS, compile=True, compiled_layouts=("none",),
                              tp_needs_plan=False, processes=ONE_PROCESS, cpu_devices=CPU_NUM_DEVICES, profile=True,
                              ir=True, own_interpreter=True, xla=True, packages=("torch",)),
}


def of(backend: str) -> Capabilities:
    """The capabilities of `backend`; KeyError naming the known ones."""
    if backend not in BACKENDS:
        raise KeyError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    return BACKENDS[backend]
