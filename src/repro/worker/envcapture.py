"""The environment of a run: what could change its numbers or its speed.

Captured in the worker (it knows its framework's devices). Variables whose names look like
secrets are never read into the record; `redact()` (repro.redaction's) scrubs their values, and
credentials inside URLs, from free text (error tails) before it is stored.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import sys
from dataclasses import dataclass

from repro import hardware, kept, paths
from repro.hashing import sha256_json
from repro.redaction import is_secret, redact
from repro.blocks import typed

__all__ = ["is_secret", "redact", "result_variables", "package_versions", "capture", "fingerprint", "Captured"]
# Variables that change results or speed. Prefixes match whole families (XLA_FLAGS, JAX_*).
RESULT_VARS = re.compile(
    r"^(XLA_|JAX_|TF_CPP_|TF_XLA_|TF_FORCE_|TF_GPU_|TORCH|PYTORCH_|CUDA_|CUBLAS_|CUDNN_|NCCL_|NVIDIA_|PJRT_|TPU_|LIBTPU|"
    r"OMP_|MKL_|OPENBLAS_|KMP_|GOMP_|PYTHONHASHSEED$|REPRO_THREADS$|LD_PRELOAD$|TRITON_|CPU_NUM_DEVICES$)"
)
PACKAGES = (
    "numpy", "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin", "flax", "optax",
    "torch", "torch-xla", "triton", "hydra-core", "omegaconf", "mlflow", "dvc",
    "scikit-learn", "repro",
)


def result_variables(environ: dict[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    return {k: v for k, v in sorted(environ.items()) if RESULT_VARS.match(k) and not is_secret(k)}


WANTED = frozenset(map(paths.distribution_name, PACKAGES))


def package_versions() -> dict[str, str]:
    """The installed versions of PACKAGES, from their metadata as importlib.metadata reads it, kept
    on disk (repro.kept) under the import path's metadata folders of those names and their METADATA
    files' mtimes: an install, an upgrade, a removal or an edit changes that stamp. Parsing them was
    ~12 ms of every worker's start, before its measured steps; the stamp is a listing and a stat each."""
    stamp = [[str(p), kept.mtime_ns(p / "METADATA"), kept.mtime_ns(p / "PKG-INFO")]
             for p in paths.distribution_metadata() if paths.distribution_name(p.name.rsplit(".", 1)[0].split("-")[0]) in WANTED]
    known = kept.load("package-versions", stamp)
    if isinstance(known, dict) and all(isinstance(v, str) for v in known.values()):
        return known
    from importlib import metadata

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    kept.keep("package-versions", stamp, versions)
    return versions


@dataclass(frozen=True)
class _Python:
    version: str | None = None
    implementation: str | None = None
    executable: str | None = None


@dataclass(frozen=True)
class _Os:
    system: str | None = None
    release: str | None = None
    machine: str | None = None


@dataclass(frozen=True)
class _Cpu:
    """What the fingerprint reads of hardware's CPU description (repro.hardware: its own keys)."""

    model: str | None = None
    isa: str | None = None  # the model string alone hid an AVX-512 / AVX2-only pair
    affinity: list | None = None


@dataclass(frozen=True)
class _Gpu:
    name: str | None = None
    driver: str | None = None


@dataclass(frozen=True)
class _Framework:
    devices: list | None = None


@dataclass(frozen=True)
class Captured:
    """A run's environment as the record's `environment` block holds it (its `fingerprint` added)."""

    python: dict
    os: dict
    cpu: dict  # model, cores, affinity, isa
    gpus: list
    packages: dict
    variables: dict
    framework: dict  # what the backend reports: versions, devices, threads, build flags

    @classmethod
    def here(cls, framework: dict) -> "Captured":
        return cls(python=dataclasses.asdict(_Python(platform.python_version(), platform.python_implementation(),
                                                     sys.executable)),
                   os=dataclasses.asdict(_Os(platform.system(), platform.release(), platform.machine())),
                   cpu=dict(hardware.host_cpu().devices()[0]), gpus=list(hardware.accelerators()),
                   packages=package_versions(), variables=result_variables(), framework=framework)

    @classmethod
    def of(cls, env: dict) -> "Captured":
        """A stored block (its fingerprint is made again, not read)."""
        return cls(**{f.name: env[f.name] for f in dataclasses.fields(cls)})

    @property
    def fingerprint(self) -> str:
        """A short hash of what decides bitwise results: versions, processors, threads, variables."""
        cpu = typed(_Cpu, self.cpu)
        keyed = {
            "python": typed(_Python, self.python).version,
            "machine": typed(_Os, self.os).machine,
            "cpu": cpu.model,
            "isa": cpu.isa,
            "cores": cpu.affinity,
            "gpus": [(gpu.name, gpu.driver) for gpu in (typed(_Gpu, g) for g in self.gpus)],
            "packages": {k: v for k, v in self.packages.items() if k != "repro"},
            # Per-run values (fresh cache folders, the seed-derived hash seed) are not environment.
            "variables": {k: v for k, v in self.variables.items()
                          if not k.endswith("_CACHE_DIR") and not k.startswith("XLA_PERSISTENT_CACHE_")
                          and k != "PYTHONHASHSEED"},
            "devices": typed(_Framework, self.framework).devices,
        }
        return sha256_json(keyed)[:16]

    def as_dict(self) -> dict:
        return {**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, "fingerprint": self.fingerprint}


def capture(framework: dict) -> dict:
    """`framework` is what the backend reports: versions, devices, threads, build flags."""
    return Captured.here(framework).as_dict()


def fingerprint(env: dict) -> str:
    """A short hash of what decides bitwise results: versions, processors, threads, variables."""
    return Captured.of(env).fingerprint
