"""What an fp32 matmul really computes in, per framework, setting and device.

Backends report this beside their raw knobs so that a comparison can see through defaults:
JAX's default on NVIDIA Ampere+ is TF32 (on TPUs one bf16 pass), PyTorch's is full fp32.
"""

from __future__ import annotations


def jax_fp32_matmul(setting: str | None, platform: str, tf32_capable: bool) -> str:
    setting = (setting or "default").lower()
    if setting in ("highest", "float32", "fp32"):
        return "fp32"
    if platform == "cpu":
        return "fp32"  # XLA:CPU has no reduced-precision fp32 matmul
    if setting in ("bfloat16", "bf16", "fastest") or (platform == "tpu" and setting == "default"):
        return "bf16"
    if setting in ("tensorfloat32", "high", "default") and platform == "gpu":
        return "tf32" if tf32_capable else "fp32"
    if platform == "tpu":
        return "bf16_3x"  # 'high' on TPU: three bf16 passes
    return setting


def torch_fp32_matmul(setting: str, device_type: str, tf32_capable: bool) -> str:
    if device_type != "cuda" or setting == "highest" or not tf32_capable:
        return "fp32"
    return "tf32" if setting == "high" else "bf16"
