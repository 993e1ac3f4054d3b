"""The environment of a run: what could change its numbers or its speed.

Captured in the worker (it knows its framework's devices). Variables whose names look like
secrets are never read into the record; `redact()` (repro.redaction's) scrubs their values, and
credentials inside URLs, from free text (error tails) before it is stored.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from importlib import metadata

from repro import hardware
from repro.hashing import sha256_json
from repro.redaction import is_secret, redact

__all__ = ["is_secret", "redact", "result_variables", "package_versions", "capture", "fingerprint"]
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


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def capture(framework: dict) -> dict:
    """`framework` is what the backend reports: versions, devices, threads, build flags."""
    env = {
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "os": {"system": platform.system(), "release": platform.release(), "machine": platform.machine()},
        "cpu": dict(hardware.host_cpu().devices()[0]),  # model, cores, affinity, isa
        "gpus": list(hardware.accelerators()),
        "packages": package_versions(),
        "variables": result_variables(),
        "framework": framework,
    }
    env["fingerprint"] = fingerprint(env)
    return env


def fingerprint(env: dict) -> str:
    """A short hash of what decides bitwise results: versions, processors, threads, variables."""
    keyed = {
        "python": env["python"]["version"],
        "machine": env["os"]["machine"],
        "cpu": env["cpu"]["model"],
        "isa": env["cpu"].get("isa"),  # the model string alone hid an AVX-512 / AVX2-only pair
        "cores": env["cpu"]["affinity"],
        "gpus": [(g["name"], g["driver"]) for g in env["gpus"]],
        "packages": {k: v for k, v in env["packages"].items() if k != "repro"},
        # Per-run values (fresh cache folders, the seed-derived hash seed) are not environment.
        "variables": {k: v for k, v in env["variables"].items()
                      if not k.endswith("_CACHE_DIR") and not k.startswith("XLA_PERSISTENT_CACHE_")
                      and k != "PYTHONHASHSEED"},
        "devices": env["framework"].get("devices"),
    }
    return sha256_json(keyed)[:16]
