"""PyTorch/XLA: the torch backend's workload on an XLA device, lazy tensors cut per step.

Everything the torch backend decides (seeding, model, initial parameters, optimizer, loss,
batches, hashes, torch.compile wrapping) is reused from `TorchWorkload`; this module adds only
what XLA changes: the device, the per-step `torch_xla.sync()`, XLA's matmul precision, the
persistent compile cache, the IR of the step, and XLA's own read-backs.

The model is built on the CPU exactly as the torch backend builds it (same seed ⇒ the same
initial parameters) and then moved to the XLA device, with the optimizer rebuilt over the
moved parameters. `framework.compile` wraps it in torch.compile(backend="openxla"); the
optimizer step stays lazy either way. A sharded layout (`sharding=dp|fsdp|tp|dp_tp`) runs as
SPMD: `xr.use_spmd()` before any XLA tensor exists, then the parameters and batches are
annotated over one mesh (repro.backends.torch_xla_sharding) before the optimizer is built.

torch-xla 2.9 imports only beside torch 2.9, so this module runs in its own interpreter
(framework.python, created by `make xla-env`). torch_xla is imported in `build()`, after
PJRT_DEVICE is set from hardware.platform: the import's seconds are reported as
compile.torch_xla_import_s (setup.import_s covers torch only).
"""

from __future__ import annotations

import os
import time

import torch

from repro.backends import determinism, precision, torch_xla_sharding
from repro.backends.base import BuildContext
from repro.backends.torch_backend import TorchWorkload

# hardware.platform → PJRT_DEVICE (an explicit PJRT_DEVICE in the environment wins).
PJRT_DEVICES = {"cpu": "CPU", "gpu": "CUDA", "tpu": "TPU"}
# precision.matmul → XLA's mat-mul precision ('default' = fastest: one bf16 pass on TPU;
# 'high' = bf16_3x; 'highest' = fp32). precision.matmul=default leaves XLA's own default
# untouched. On the CPU, XLA does fp32 matmuls whatever it is set to.
MATMUL_PRECISIONS = {"highest": "highest", "high": "high", "medium": "default"}
# xr.device_type() → the platform names of repro.backends.precision.
PLATFORMS = {"CPU": "cpu", "CUDA": "gpu", "GPU": "gpu", "TPU": "tpu"}
ENV_HINT = "run `make xla-env` (scripts/make_xla_env.sh) to create the PyTorch/XLA environment"
# Environment variables that change what XLA computes, read back into `effective()`.
XLA_VARIABLES = ("PJRT_DEVICE", "XLA_USE_BF16", "XLA_DOWNCAST_BF16", "XLA_USE_32BIT_LONG", "XLA_FLAGS",
                 "XLA_IR_DEBUG", "XLA_HLO_DEBUG", "CPU_NUM_DEVICES", "XLA_PERSISTENT_CACHE_PATH")


def _import_torch_xla(platform: str):
    """Set PJRT_DEVICE, then import torch_xla; a clear error where this interpreter lacks it."""
    os.environ.setdefault("PJRT_DEVICE", PJRT_DEVICES.get(platform, "CPU"))
    try:
        import torch_xla
        import torch_xla.backends  # set/get_mat_mul_precision (not imported by torch_xla itself)
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr
    except ImportError as e:
        import sys

        raise ImportError(f"framework torch_xla: {sys.executable} cannot import torch_xla ({e}); {ENV_HINT}, "
                          "or point framework.python / $REPRO_XLA_PYTHON at an interpreter that has it") from e
    return torch_xla, xm, xr


def check_device(profile_name: str, profile_platform: str, device_type: str) -> None:
    """Refuse a run whose XLA device is not the kind its hardware profile names: an XLA runtime that
    came up on the CPU under a GPU or TPU profile (a PJRT_DEVICE=CPU in the environment, no TPU here)
    would otherwise be recorded as a run on that hardware."""
    got = PLATFORMS.get(device_type, device_type.lower())
    if got != profile_platform:
        raise RuntimeError(f"torch_xla's device is {device_type} (xr.device_type()) but hardware={profile_name} "
                           f"names a {profile_platform.upper()} (PJRT_DEVICE={os.environ.get('PJRT_DEVICE')}): "
                           f"run with hardware=cpu to measure on the CPU, or where XLA sees a {profile_platform.upper()}")


class TorchXLAWorkload(TorchWorkload):
    def __init__(self, ctx: BuildContext):
        cfg = ctx.config
        t0 = time.perf_counter()
        self.torch_xla, self.xm, self.xr = _import_torch_xla(cfg.hardware.platform)
        self.import_s = time.perf_counter() - t0
        check_device(cfg.hardware.name, cfg.hardware.platform, self.xr.device_type())
        self.cache_dir = self._init_cache(ctx)  # before the runtime starts (first device use)
        self.layout = cfg.sharding.name
        if self.layout != "none":  # SPMD: one virtual device over the mesh's (before any XLA tensor)
            torch_xla_sharding.enable()
        self.matmul_precision = self._set_matmul_precision(cfg.precision.matmul)
        super().__init__(ctx)  # seeds, builds the model, optimizer and batches on the CPU
        self.device = self.torch_xla.device()
        self.model.to(self.device)
        self.mesh = None
        if self.layout != "none":  # parameters annotated before the optimizer sees them
            self.mesh = torch_xla_sharding.make_mesh(cfg.sharding.mesh)
            torch_xla_sharding.mark_parameters(self.model, self.mesh, self.layout, cfg.sharding.mesh)
        if self.opt is not None:
            self.opt = self._optimizer(cfg.run)  # over the XLA parameters (`.to` made new ones)
        if self.scaler is not None:
            self.scaler = torch.amp.GradScaler(self.device.type)
        self.batches = [(x.to(self.device), y.to(self.device)) for x, y in self.batches]
        if self.mesh is not None:
            for batch in self.batches:
                for t in batch:
                    torch_xla_sharding.mark_batch(t, self.mesh, cfg.sharding.mesh)
        self.torch_xla.sync()
        self.xm.wait_device_ops()
        self.capture_ir = bool(cfg.run.capture_ir)
        self._ir: dict[str, str] = {}
        self.ir_capture_s = 0.0
        self._compiles_before: list[int] = []  # XLA compilations before steps 0, 1 and 2

    # -- settings ----------------------------------------------------------------------------
    def _init_cache(self, ctx: BuildContext) -> str | None:
        """run.compile_cache=warm: XLA's persistent compile cache in the shared folder.

        Cold runs use none (a fresh, empty cache changes nothing but adds its writes), as the
        JAX backend does. It is set through XLA_PERSISTENT_CACHE_PATH, which the environment
        record then lists."""
        if ctx.config.run.compile_cache == "cold":
            return None
        self.xr.initialize_cache(ctx.cache_dir, readonly=False)
        return ctx.cache_dir

    def _set_matmul_precision(self, matmul: str) -> str | None:
        wanted = MATMUL_PRECISIONS.get(matmul)
        if wanted is not None:  # None: precision.matmul=default, XLA's own default stays
            self.torch_xla.backends.set_mat_mul_precision(wanted)  # once per process (it warns)
        return wanted

    def _get_matmul_precision(self) -> str:
        return str(self.torch_xla.backends.get_mat_mul_precision())

    # -- the step ----------------------------------------------------------------------------
    def step(self, i: int):
        if i < 3 and len(self._compiles_before) == i:  # first steps only: one counter read (µs) each
            self._compiles_before.append(self._compile_count())
        loss = super().step(i)
        if self.capture_ir and not self._ir:
            t0 = time.perf_counter()
            self._ir = self._lower([loss, *self.model.parameters()])
            self.ir_capture_s = time.perf_counter() - t0
        return loss

    def _compile_count(self) -> int:
        import torch_xla.debug.metrics as met

        data = met.metric_data("CompileTime")
        return int(data[0]) if data else 0

    def profile(self, first: int, steps: int, out_dir: str):
        """`steps` more steps with PyTorch/XLA's metrics (run.profile=true, after the timed loop):
        its compilations and executions per step; the metrics report is kept as the trace (a
        profile.capture.Captured with no trace to reduce)."""
        from pathlib import Path

        import torch_xla.debug.metrics as met

        from repro.profile.capture import Captured

        self.sync(self.step(first))
        met.clear_metrics()
        walls = []
        for k in range(1, steps + 1):
            t0 = time.perf_counter()
            self.sync(self.step(first + k))
            walls.append(time.perf_counter() - t0)
        path = Path(out_dir) / "torch_xla_metrics.txt"
        path.write_text(met.metrics_report())
        execute = met.metric_data("ExecuteTime")
        return Captured(profiler=f"torch_xla.debug.metrics (torch_xla {self.torch_xla.__version__})", family=None,
                        files=[str(path)], trace=None, viewer="text (torch_xla.debug.metrics.metrics_report)",
                        step_ms_each=[w * 1e3 for w in walls],
                        executions_per_step=(int(execute[0]) / steps) if execute else None,
                        compiles_during=self._compile_count())

    def sync(self, out) -> None:
        self.torch_xla.sync()  # cut the lazy graph: compile (first time) and launch the step
        self.xm.wait_device_ops()  # and wait for it

    def _lower(self, tensors: list) -> dict[str, str]:
        """The pending graph that computes `tensors` (the loss and the updated parameters)."""
        return {"stablehlo.mlir": self.xm.get_stablehlo(tensors),
                "hlo.txt": self.torch_xla._XLAC._get_xla_tensors_hlo(tensors)}

    def ir(self) -> dict[str, str]:
        return dict(self._ir)

    # -- read-backs --------------------------------------------------------------------------
    def compile_info(self) -> dict:
        import torch_xla.debug.metrics as met

        info = super().compile_info()
        data = met.metric_data("CompileTime")
        info.update({"torch_xla_import_s": self.import_s,
                     "xla_compiles": int(data[0]) if data else 0,
                     "xla_compile_s": data[1] / 1e9 if data else 0.0,
                     "ir_capture_s": self.ir_capture_s})
        execute = met.metric_data("ExecuteTime")
        if execute:
            info["xla_executions"] = int(execute[0])
        counts = self._compiles_before + [self._compile_count()] * (4 - len(self._compiles_before))
        info["xla_compiles_per_step"] = [counts[k + 1] - counts[k] for k in range(2)]  # steps 1 and 2
        uncached = met.counter_value("UncachedCompile")
        if uncached is not None:
            info["xla_uncached_compiles"] = int(uncached)
        return info

    def peak_memory(self) -> dict:
        if self.xr.device_type() != "CPU":
            try:
                mem = self.xm.get_memory_info(self.device)
                peak = mem.get("peak_bytes_used", mem.get("bytes_used"))
                if peak is not None:
                    return {"bytes": int(peak), "kind": "device", "limit": int(mem.get("bytes_limit", 0))}
            except Exception:  # noqa: BLE001 - fall back to host RSS below
                pass
        return super().peak_memory()  # host RSS: the device is this process's memory

    def effective(self) -> dict:
        eff = super().effective()
        platform = PLATFORMS.get(self.xr.device_type(), self.xr.device_type().lower())
        setting = self._get_matmul_precision()
        eff.update({
            "platform": "xla",
            # What an fp32 matmul computes in: XLA's precision setting on this device kind,
            # the same rule as JAX's (both are XLA); torch's own knob does not reach XLA.
            "fp32_matmul": precision.jax_fp32_matmul(setting, platform, self._tf32_capable()),
            "xla_device_type": self.xr.device_type(),
            "xla_device": str(self.device),
            "xla_device_hw": self.xm.xla_device_hw(self.device),
            "xla_mat_mul_precision": setting,
            "xla_mat_mul_precision_requested": self.matmul_precision,
            "xla_variables": {k: os.environ.get(k) for k in XLA_VARIABLES},
            "xla_persistent_cache_dir": self.cache_dir,
            "determinism": determinism.xla_effective(platform, os.environ.get("XLA_FLAGS", ""), setting),
            "compile_backend": self.ctx.config.framework.compile_backend if self.ctx.config.framework.compile else None,
            "lazy_tensors": True,
        })
        return eff

    def sharding_info(self) -> dict:
        if self.mesh is None:
            return {}
        params = list(self.model.parameters())
        per_device = torch_xla_sharding.bytes_per_device(params)
        return {
            "layout": self.layout, "mesh": self.ctx.config.sharding.mesh, "devices": len(per_device),
            "spmd": True, "param_bytes_total": sum(p.numel() * p.element_size() for p in params),
            "param_bytes_per_device": max(per_device.values()),
            "param_bytes_per_device_min": min(per_device.values()),
        }

    def _tf32_capable(self) -> bool:
        return (self.xr.device_type() in ("CUDA", "GPU") and torch.cuda.is_available()
                and torch.cuda.get_device_capability(0)[0] >= 8)

    def framework_info(self) -> dict:
        info = super().framework_info()
        info.update({
            "name": "torch_xla",
            "versions": {**info["versions"], "torch_xla": self.torch_xla.__version__},
            "device_type": self.xr.device_type(),
            "devices": [str(d) for d in self.xm.get_xla_supported_devices()] or [str(self.device)],
            "device_hw": self.xm.xla_device_hw(self.device),
            "global_device_count": self.xr.global_runtime_device_count(),
            "threads": torch.get_num_threads(),
        })
        return info


def build(ctx: BuildContext) -> TorchXLAWorkload:
    return TorchXLAWorkload(ctx)
