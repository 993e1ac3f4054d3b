"""What this machine is, found without importing a framework, checked against a profile."""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess


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
def cpu_flags() -> tuple[str, tuple[str, ...]]:
    """("flags" or "Features", every feature the first CPU of /proc/cpuinfo reports, sorted); ("", ())
    where it is missing. All of them: what a compiler targeting the host may use."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ISA_PREFIXES:
                    return key.strip(), tuple(sorted(value.split()))
    except OSError:
        pass
    return "", ()


def cpu_isa() -> tuple[str, ...]:
    """The vector extensions this CPU reports, sorted (empty where /proc/cpuinfo is missing)."""
    key, flags = cpu_flags()
    return tuple(x for x in flags if x.startswith(ISA_PREFIXES[key])) if key else ()


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


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


class Vendor:
    """One maker's processors, queried without importing a framework: the seam a new GPU vendor
    is added at (docs/architecture.md, "a GPU vendor"). A member names itself, the
    `hardware.platform` its devices serve, and answers two queries; `register` adds it once.

    - `devices()`: each device as records keep it (an accelerator's in `environment.gpus`: {"name",
      "memory_mib", "driver"}), empty where the machine has none (its tool missing or failing);
    - `telemetry(own)`: each device's state around a timed loop (worker/machine.py): an accelerator's
      utilisation %, clocks (MHz), temperature, and `other_processes` ({"pid", "memory_mib"}) not in `own`.
    Peak FLOPs are a profile's (`hardware.peak_tflops`), not a query: a vendor's tool does not report them.
    NVIDIA's is the first member, the host's CPU (`Cpu`: platform `cpu`, the one every run has) the
    second; `accelerators()` and `telemetry()` read every member that is not the CPU."""

    name = ""
    platform = ""
    title = ""  # how a message names the maker ("NVIDIA"); its `name` where empty

    def devices(self) -> tuple[dict, ...]:
        return ()

    def telemetry(self, own: set[int]) -> list[dict]:
        return []


VENDORS: dict[str, Vendor] = {}


def register(member: type[Vendor]) -> type[Vendor]:
    """Register a vendor under its `name`, once: a name taken, or none, is refused."""
    if not member.name or not member.platform:
        raise ValueError(f"{member.__name__} needs a `name` and the `platform` its devices serve (e.g. gpu)")
    if member.name in VENDORS:
        raise ValueError(f"hardware vendor {member.name!r} is registered already; give {member.__name__} a name of its own")
    VENDORS[member.name] = member()
    accelerators.cache_clear()
    return member


@functools.lru_cache(maxsize=1)
def accelerators() -> tuple[dict, ...]:
    """Every registered accelerator vendor's devices, in registration order (the record's `environment.gpus`)."""
    return tuple(d for vendor in VENDORS.values() if vendor.platform != "cpu" for d in vendor.devices())


def telemetry(own: set[int]) -> list[dict]:
    """Every registered accelerator vendor's device state (worker/machine.py, before and after a timed loop)."""
    return [d for vendor in VENDORS.values() if vendor.platform != "cpu" for d in vendor.telemetry(own)]


def host_cpu() -> "Cpu":
    """The CPU member: the host every run has (`environment.cpu`, `machine.cpu_frequency`)."""
    return VENDORS["cpu"]


@register
class Nvidia(Vendor):
    """NVIDIA GPUs, through nvidia-smi."""

    name, platform, title = "nvidia", "gpu", "NVIDIA"
    STATE = "index,utilization.gpu,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu"

    def devices(self) -> tuple[dict, ...]:
        return tuple({"name": name, "memory_mib": int(float(mem)), "driver": driver}
                     for name, mem, driver in nvidia_smi("--query-gpu=name,memory.total,driver_version"))

    def telemetry(self, own: set[int]) -> list[dict]:
        if not shutil.which("nvidia-smi"):
            return []
        keys = self.STATE.split(",")
        devices = [{k.replace(".", "_"): _number(v) for k, v in zip(keys, row)}
                   for row in nvidia_smi(f"--query-gpu={self.STATE}")]
        uuids = {row[0]: i for i, row in enumerate(nvidia_smi("--query-gpu=uuid"))}
        for d in devices:
            d["other_processes"] = []
        for pid, uuid, mib in nvidia_smi("--query-compute-apps=pid,gpu_uuid,used_memory"):
            if pid.isdigit() and int(pid) not in own and uuid in uuids and uuids[uuid] < len(devices):
                devices[uuids[uuid]]["other_processes"].append({"pid": int(pid), "memory_mib": _number(mib)})
        return devices


@register
class Cpu(Vendor):
    """The host's CPU: `devices()` gives the record's `environment.cpu` (model, cores, the cores this
    process may use, the vector extensions), `telemetry()` its clock and governor around a timed loop
    (`machine.cpu_frequency`: psutil and the kernel's cpufreq)."""

    name, platform, title = "cpu", "cpu", "CPU"
    CPUFREQ = "/sys/devices/system/cpu/cpu0/cpufreq"

    def devices(self) -> tuple[dict, ...]:
        return ({"model": cpu_model(), "cores": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
                 "isa": list(cpu_isa())},)

    def telemetry(self, own: set[int]) -> list[dict]:
        """[current/min/max MHz (psutil) and the scaling governor where the kernel exposes it]."""
        import psutil

        try:
            with open(os.path.join(self.CPUFREQ, "scaling_governor")) as f:
                out: dict = {"governor": f.read().strip()}
        except OSError:
            out = {"governor": None}
        try:
            freq = psutil.cpu_freq()
        except (OSError, NotImplementedError):
            freq = None
        if freq:
            out.update({f"{k}_mhz": round(v, 1) for k, v in freq._asdict().items() if v})
        return [out]


def tpu_type() -> str | None:
    """The TPU type where the machine says (Cloud TPU VMs set TPU_ACCELERATOR_TYPE)."""
    if kind := os.environ.get("TPU_ACCELERATOR_TYPE"):
        return kind
    return "tpu" if os.path.exists("/dev/accel0") or os.path.exists("/dev/vfio/0") else None


def detect() -> dict:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "gpus": [g["name"] for g in accelerators()],
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
        makers = "/".join(v.title or v.name for v in VENDORS.values() if v.platform == "gpu") or "GPU"
        want = f"{profile.device_count}× {makers} {profile.device_match}"
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
            from repro.config.schema import ConfigError  # here: the worker imports this module, not the config

            raise ConfigError(reason)
