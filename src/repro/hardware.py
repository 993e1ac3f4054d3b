"""What this machine is, found without importing a framework, checked against a profile."""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess

from repro.config.schema import ConfigError


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# Instruction-set extensions a compiler may target (XLA and inductor build for the host CPU):
# the same model string can hide machines with and without AVX-512, whose reductions differ
# in the last bits. x86 "flags" and Arm "Features" of /proc/cpuinfo.
ISA_PREFIXES = {"flags": ("sse4", "avx", "fma", "f16c", "amx"), "Features": ("asimd", "sve", "sme", "bf16", "i8mm")}


@functools.lru_cache(maxsize=1)
def cpu_isa() -> tuple[str, ...]:
    """The vector extensions this CPU reports, sorted (empty where /proc/cpuinfo is missing)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ISA_PREFIXES:
                    return tuple(sorted(x for x in value.split() if x.startswith(ISA_PREFIXES[key.strip()])))
    except OSError:
        pass
    return ()


def nvidia_smi(*args: str) -> list[list[str]]:
    """The rows of one nvidia-smi CSV query (`--query-gpu=...`), cells stripped; [] without one."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", *args, "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [[c.strip() for c in line.split(",")] for line in out.strip().splitlines() if line.strip()]


@functools.lru_cache(maxsize=1)
def nvidia_gpus() -> tuple[dict, ...]:
    """Name, memory and driver of each NVIDIA GPU, from nvidia-smi (empty if none)."""
    return tuple({"name": name, "memory_mib": int(float(mem)), "driver": driver}
                 for name, mem, driver in nvidia_smi("--query-gpu=name,memory.total,driver_version"))


def tpu_type() -> str | None:
    """The TPU type where the machine says (Cloud TPU VMs set TPU_ACCELERATOR_TYPE)."""
    if kind := os.environ.get("TPU_ACCELERATOR_TYPE"):
        return kind
    return "tpu" if os.path.exists("/dev/accel0") or os.path.exists("/dev/vfio/0") else None


def detect() -> dict:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "gpus": [g["name"] for g in nvidia_gpus()],
        "tpu": tpu_type(),
    }


def describe(found: dict) -> str:
    if found["gpus"]:
        return f"{len(found['gpus'])} GPU(s): {', '.join(found['gpus'])}"
    if found["tpu"]:
        return f"a TPU ({found['tpu']})"
    return f"CPU only ({found['cpu']}, {found['cores']} cores)"


def mismatch(profile, found: dict) -> str | None:
    """Why this machine is not the profile's, or None when it is."""
    platform_ = profile.platform
    if platform_ == "cpu":
        return None  # every machine has a CPU; frameworks are told to use it
    if platform_ == "gpu":
        matching = [g for g in found["gpus"] if profile.device_match.lower() in g.lower()]
        if len(matching) >= profile.device_count:
            return None
        want = f"{profile.device_count}× NVIDIA {profile.device_match}"
    else:
        kind = (found["tpu"] or "").lower().replace("-", "_")
        if found["tpu"] and (not profile.device_match or profile.device_match.lower() in kind):
            return None
        want = f"a TPU {profile.device_match}".strip()
    return (
        f"hardware={profile.name} declares {want}, but this machine has {describe(found)}. "
        f"Run with the profile of this machine (e.g. hardware=cpu), or set "
        f"hardware.check=false to run anyway and record the mismatch."
    )


def check_all(profiles: list) -> None:
    found = None
    seen = set()
    for profile in profiles:
        if not profile.check or profile.name in seen:
            continue
        seen.add(profile.name)
        found = found or detect()
        if reason := mismatch(profile, found):
            raise ConfigError(reason)
