"""What `run.deterministic` sets in each framework, what it leaves free, and what a worker ran with.

run.deterministic=true
- PyTorch (eager, torch.compile): `torch.use_deterministic_algorithms(True)`, `cudnn.deterministic=True`,
  `cudnn.benchmark=False` (backends/torch_backend.py) and `CUBLAS_WORKSPACE_CONFIG=:4096:8` (cuBLAS's
  reproducible workspace, set before torch starts).
- XLA (JAX, PyTorch/XLA) on a GPU: `--xla_gpu_deterministic_ops=true` in the worker's XLA_FLAGS,
  after the user's own flags. XLA: "Guarantees run-to-run determinism on GPU": it implies
  `--xla_gpu_exclude_nondeterministic_ops` (deterministic scatter, GEMM, convolution and attention
  kernels, no atomics in reductions) and turns XLA's autotuning off (the kernels are picked by
  heuristics, not timed).
- XLA on CPU and TPU: nothing to set; their kernels are deterministic run to run (the same
  threads, the same numbers), and neither autotunes by timing.
run.deterministic=false: both free to autotune. PyTorch: `cudnn.benchmark=True` (cuDNN times its
algorithms for each new input shape, in the first step) and nondeterministic kernels allowed; XLA on
a GPU: its default autotuning at compile time (`--xla_gpu_autotune_level`, default 4: cuBLAS/cuDNN
and Triton GEMM configurations timed on the device), whose picks can differ from run to run.

The worker reports what it ran with (`effective.determinism`): two properties that mean the same
in every framework (`deterministic_kernels`, `autotuning`), which the fairness audit compares, and
the raw settings they were read from.
"""

from __future__ import annotations

import shlex

DETERMINISTIC_OPS = "xla_gpu_deterministic_ops"
EXCLUDE_NONDETERMINISTIC = "xla_gpu_exclude_nondeterministic_ops"
AUTOTUNE_LEVEL = "xla_gpu_autotune_level"
CUBLAS_WORKSPACE = ":4096:8"
FALSE = ("false", "0", "no")


def parse(flags: str) -> dict[str, str]:
    """XLA_FLAGS as {name: value}: `--name=value`, a bare `--name` is "true"; the last one wins
    (as XLA's own parser reads them)."""
    out = {}
    for token in shlex.split(flags or ""):
        name, _, value = token.lstrip("-").partition("=")
        if name:
            out[name] = value if "=" in token else "true"
    return out


def _on(parsed: dict[str, str], name: str) -> bool:
    return name in parsed and parsed[name].lower() not in FALSE


def contradiction(deterministic: bool, user_flags: str) -> str | None:
    """Why the user's XLA_FLAGS contradict run.deterministic=true (a flag that turns XLA's
    deterministic kernels off), or None."""
    if not deterministic:
        return None
    parsed = parse(user_flags)
    off = [f"--{n}={parsed[n]}" for n in (DETERMINISTIC_OPS, EXCLUDE_NONDETERMINISTIC) if n in parsed and not _on(parsed, n)]
    if not off:
        return None
    return (f"run.deterministic=true contradicts XLA_FLAGS {' '.join(off)} (from the environment): XLA's "
            f"deterministic kernels cannot be both on and off; remove it from XLA_FLAGS, or set run.deterministic=false")


def xla_flags(deterministic: bool, platform: str, user_flags: str, extra: list[str] = ()) -> str:
    """The worker's XLA_FLAGS: the user's, then `extra` (e.g. the CPU device count), then XLA's
    deterministic ops on a GPU under run.deterministic=true."""
    flags = [user_flags.strip(), *extra]
    if deterministic and platform == "gpu" and not _on(parse(user_flags), DETERMINISTIC_OPS):
        flags.append(f"--{DETERMINISTIC_OPS}=true")
    return " ".join(f for f in flags if f)


def xla_effective(platform: str, flags: str, default_matmul_precision: str | None) -> dict:
    """What an XLA worker (JAX, PyTorch/XLA) ran with, from its own XLA_FLAGS and device platform."""
    parsed = parse(flags)
    if platform == "gpu":
        kernels = _on(parsed, DETERMINISTIC_OPS) or _on(parsed, EXCLUDE_NONDETERMINISTIC)
        autotuning = not _on(parsed, DETERMINISTIC_OPS) and parsed.get(AUTOTUNE_LEVEL, "4") != "0"
    else:  # XLA:CPU and XLA:TPU: deterministic kernels, no timed autotuning, nothing to set
        kernels, autotuning = True, False
    return {"deterministic_kernels": kernels, "autotuning": autotuning, "xla_flags": flags or "",
            "default_matmul_precision": default_matmul_precision}


def torch_effective(torch, on_gpu: bool, environ) -> dict:
    """What a PyTorch worker ran with: torch's own switches, read back."""
    cudnn = torch.backends.cudnn
    algorithms = torch.are_deterministic_algorithms_enabled()
    return {"deterministic_kernels": bool(algorithms and (cudnn.deterministic or not on_gpu)),
            "autotuning": bool(on_gpu and cudnn.benchmark),
            "torch_deterministic_algorithms": algorithms,
            "cudnn_deterministic": bool(cudnn.deterministic), "cudnn_benchmark": bool(cudnn.benchmark),
            "cublas_workspace_config": environ.get("CUBLAS_WORKSPACE_CONFIG"),
            # NaN-fills new tensors' memory; read only under deterministic algorithms (torch's docs)
            "fill_uninitialized_memory": bool(torch.utils.deterministic.fill_uninitialized_memory),
            "float32_matmul_precision": torch.get_float32_matmul_precision()}


def planned(xla: bool, deterministic: bool, platform: str, env: dict[str, str]) -> str:
    """What a worker of this config will run with, in words (`repro --dry-run`): its XLA_FLAGS, or
    torch's switches, and whether it autotunes."""
    if xla:
        flags = env.get("XLA_FLAGS") or "(none)"
        if platform != "gpu":
            return f"XLA_FLAGS={flags}; XLA:{platform.upper()} kernels are deterministic, nothing to set, no autotuning"
        tunes = "no autotuning" if _on(parse(env.get("XLA_FLAGS", "")), DETERMINISTIC_OPS) else "XLA autotunes at compile"
        return f"XLA_FLAGS={flags}; {tunes}"
    if deterministic:
        return (f"torch.use_deterministic_algorithms(True), cudnn.deterministic=True, cudnn.benchmark=False, "
                f"CUBLAS_WORKSPACE_CONFIG={env.get('CUBLAS_WORKSPACE_CONFIG', '(none)')}")
    return "nondeterministic kernels allowed, " + ("cudnn.benchmark=True (cuDNN autotunes per shape)" if platform == "gpu"
                                                   else "no autotuning on CPU")
