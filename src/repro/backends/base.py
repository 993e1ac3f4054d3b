"""The one small protocol every framework backend implements.

A backend module exposes `build(ctx: BuildContext) -> Workload`. The worker imports exactly
one backend module, so a run pays for (and is perturbed by) one framework only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TYPE_CHECKING

from repro.models.api import Batch, Model

if TYPE_CHECKING:
    from repro.config.schema import Config


@dataclass(frozen=True)
class BuildContext:
    config: Config  # the resolved, typed config
    entry: Model  # repro.models.api: the zoo's and a package's alike
    dims: Any  # as the model's methods take them: `entry.dims_of` (a zoo model's frozen dataclass)
    seeds: dict[str, int]
    batches: list[Batch]  # NumPy, JAX layout
    threads: int
    cache_dir: str  # compile cache for this run (fresh when run.compile_cache=cold)


class Workload(Protocol):
    def step(self, i: int) -> Any:
        """Run step i (train or forward) on batch i mod n; return the loss, not yet synced."""

    def sync(self, out: Any) -> None:
        """Block until `out` (and the step that made it) is computed."""

    def loss(self, out: Any) -> float:
        """The loss as a Python float (exactly the framework's fp32 value)."""

    def compile_info(self) -> dict:
        """Seconds spent tracing/lowering/compiling, where the framework exposes them."""

    def evaluate(self, x, y) -> float:
        """Accuracy of the current parameters on (x, y), outside the timed loop."""

    def params_sha256(self) -> str:
        """sha256 over the parameters (and other state) in a fixed order."""

    def init_params_sha256(self) -> str:
        """sha256 of the initial parameters and statistics in the canonical layout
        (`repro.models.canonical.sha256`): equal across frameworks under run.init=shared."""

    def peak_memory(self) -> dict:
        """{'bytes': peak, 'kind': 'device' | 'host_rss', ...}."""

    def effective(self) -> dict:
        """The settings that really took effect, read back from the framework."""

    def sharding_info(self) -> dict:
        """Layout, mesh, parameter bytes per device and the step's collectives ({} unsharded)."""

    def framework_info(self) -> dict:
        """Versions, devices, thread counts, build facts for the environment record."""

    def ir(self) -> dict[str, str]:
        """Lowered IR of the step by name ('stablehlo', 'hlo'), where the framework can."""


def memory_limit_bytes(config: Config) -> int | None:
    gb = config.run.memory_limit_gb
    return int(gb * 2**30) if gb else None


def requested_bytes(text: str) -> int | None:
    """The allocation size a framework's out-of-memory message names, if it names one."""
    import re

    sizes = [int(m) for m in re.findall(r"(\d+) bytes", text)]
    return max(sizes) if sizes else None


def is_oom(exc: BaseException) -> bool:
    """Whether an exception means the workload did not fit in memory."""
    text = f"{type(exc).__name__}: {exc}"
    return isinstance(exc, MemoryError) or any(
        s in text for s in ("RESOURCE_EXHAUSTED", "OutOfMemoryError", "out of memory", "Out of memory",
                            "Failed to allocate", "CUDA error: out of memory", "can't allocate memory")
    )
