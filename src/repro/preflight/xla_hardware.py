"""PyTorch/XLA on an NVIDIA GPU profile: refused before anything runs, with the reason.

PyTorch/XLA deprecated its CUDA backend in 2.8 and publishes no CUDA wheels on the package
index (pytorch/xla PRs #9295 and #9533): the torch-xla 2.9 wheel `make xla-env` installs runs
on the CPU and on TPUs only. On a GPU profile its run could only fail, or worse, run on the CPU
and be recorded as a GPU run (the worker also checks its XLA device against the profile:
backends/torch_xla_backend.check_device).
"""

from __future__ import annotations

from repro.config.schema import Config, ConfigError

XLA_BACKENDS = ("torch_xla",)  # framework.backend of framework=torch_xla and torch_xla_compile
RUNS_ON = ("cpu", "tpu")  # hardware.platform values the published torch-xla wheels run on

WHY = ("PyTorch/XLA deprecated its CUDA backend in 2.8 and publishes no CUDA wheels (pytorch/xla PRs #9295, "
       "#9533): the torch-xla wheel `make xla-env` installs runs on the CPU and on TPUs only")


def check(cfg: Config) -> None:
    """ConfigError when a PyTorch/XLA framework is asked to run on a hardware profile it cannot run on."""
    if cfg.framework.backend in XLA_BACKENDS and cfg.hardware.platform not in RUNS_ON:
        raise ConfigError(f"framework={cfg.framework.name} on hardware={cfg.hardware.name} "
                          f"(platform {cfg.hardware.platform}): {WHY}. Run it with hardware=cpu or a TPU profile "
                          f"(hardware=tpu_v6e), or compare jax, torch and torch_compile on {cfg.hardware.name}")


def left_out(records: list[dict]) -> str | None:
    """The line a sweep's close prints where the study it reproduces ran PyTorch/XLA but this
    sweep's hardware cannot (conf/exp/vit_l4.yaml on an NVIDIA profile); None elsewhere."""
    from repro.report.published import PUBLISHED

    experiment = ((records[0].get("sweep") or {}).get("experiment") if records else None)
    platforms = {r["config"]["hardware"].get("platform") for r in records}
    if experiment not in PUBLISHED or not platforms or platforms & set(RUNS_ON) or \
            any(r["config"]["framework"]["backend"] in XLA_BACKENDS for r in records):
        return None
    names = ", ".join(sorted({r["config"]["hardware"]["name"] for r in records}))
    return (f"PyTorch/XLA (torch_xla, torch_xla_compile), which the published {experiment} study ran, is left out "
            f"on {names}: {WHY}")
