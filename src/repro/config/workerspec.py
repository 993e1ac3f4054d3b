"""What the parent hands its worker: one frozen `WorkerSpec`, written once as spec.json and read once.

The parent builds it from the typed config (`schema.Config`) and the resolved rendezvous and writes
it (`WorkerSpec.write`); the worker reads it back (`WorkerSpec.read`) and passes the same object to
every function and process of the run (ranks and JAX processes get it pickled), so nothing in the
worker path reads the spec as a dict. The file's layout is the dict the parent always wrote
(`config` as `schema.as_dict`, the rendezvous as its fields), so a worker of recorded code
(`repro replay --as-recorded`) reads today's spec.

Not in it: the gate (the pipe the worker's measured steps wait on) is a file descriptor the worker
inherits when it starts, before its spec exists for a worker started ahead of its job
(job/launch.py), so it comes through the environment (worker/events.Gate).

Cheap to import: the schema's dataclasses and the standard library only.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from repro.config.schema import Config, as_dict, from_dict

# Said wherever a run gives up waiting for its peers.
JOIN_HINT = "is every node started, with the same cluster.coordinator?"


@dataclass(frozen=True)
class Rendezvous:
    """Where a run's processes meet (job/cluster.resolve makes it where the job runs)."""

    nodes: int
    node_rank: int
    host: str
    port: int
    jax_processes: int  # per node
    join_timeout_s: float
    source: str  # "local" | "slurm"

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def leader(self) -> bool:
        """Node 0: hosts the rendezvous and alone writes the ledger and MLflow."""
        return self.node_rank == 0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class WorkerSpec:
    """One run, as its worker sees it."""

    config: Config
    config_hash: str
    out_dir: str  # the run's folder: IR and profile files go here
    cache_dir: str  # the compile cache (fresh per run unless run.compile_cache=warm)
    rendezvous: Rendezvous
    progress_fifo: str | None = None  # where global rank 0 writes its step lines (worker/rank_progress.py)
    # `repro calibrate --gap G` only: each measured step gets G times the step's own median added
    # (worker/injected.py); no config key reaches it, so no run outside calibrate can carry it
    injected_gap: float = 0.0
    # run.steps=auto taken as this fixed count: a replay of an adaptive run takes the steps it took
    # (worker/window.py), outside the config and its hash
    steps: int | None = None

    def as_dict(self) -> dict:
        return {"config": as_dict(self.config), "config_hash": self.config_hash, "out_dir": self.out_dir,
                "cache_dir": self.cache_dir, "rendezvous": self.rendezvous.as_dict(),
                **({"progress_fifo": self.progress_fifo} if self.progress_fifo else {}),
                **({"injected_gap": self.injected_gap} if self.injected_gap else {}),
                **({"steps": self.steps} if self.steps else {})}

    def __reduce__(self):
        """Pickled (to a rank or a JAX process) as its canonical dict: the model's config type is made
        at run time (schema.model_type) and pickle cannot find it by name."""
        return WorkerSpec.from_dict, (self.as_dict(),)

    @classmethod
    def from_dict(cls, d: dict) -> "WorkerSpec":
        return cls(config=from_dict(d["config"]), config_hash=d["config_hash"], out_dir=d["out_dir"],
                   cache_dir=d["cache_dir"], rendezvous=Rendezvous(**d["rendezvous"]),
                   progress_fifo=d.get("progress_fifo"), injected_gap=d.get("injected_gap", 0.0),
                   steps=d.get("steps"))

    def write(self, path: Path | str) -> Path:
        """spec.json at `path` (the parent's one writer); returns the path."""
        path = Path(path)
        path.write_text(json.dumps(self.as_dict()))
        return path

    @classmethod
    def read(cls, path: Path | str) -> "WorkerSpec":
        """The spec a parent wrote at `path` (the worker's one reader)."""
        return cls.from_dict(json.loads(Path(path).read_text()))
