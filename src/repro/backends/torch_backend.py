"""PyTorch eager and torch.compile: a plain zero_grad / forward / backward / step loop.

Precision knobs are set from the policy and read back. Images arrive NHWC from the shared
NumPy batches and are made NCHW here, once, before the timed loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import contextlib
import hashlib
import os
import resource

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from repro.backends import determinism, precision, torch_distributed
from repro.backends.base import BuildContext, memory_limit_bytes
from repro.models import canonical, hf

if TYPE_CHECKING:
    from repro.config.schema import Config

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def deterministic_algorithms(compiled: bool) -> None:
    """Deterministic kernels only. `torch.use_deterministic_algorithms(True)` also sets inductor's
    `config.deterministic`, and for that imports torch._inductor, which pulls in dynamo, sympy and
    FSDP: 1.4 s on the 2-core machine, for a setting only a compiled run reads. An eager run sets
    the same process-wide flag through its other public switch, `set_deterministic_debug_mode("error")`
    (both call `_C._set_deterministic_algorithms`). A forward-only run then never imports dynamo; a
    training run still does, from torch.optim's constructor (`torch._disable_dynamo`)."""
    if compiled:
        torch.use_deterministic_algorithms(True)
    else:
        torch.set_deterministic_debug_mode("error")


def configure(ctx: BuildContext) -> None:
    """Process-wide settings, applied before the model is built."""
    cfg = ctx.config
    torch.manual_seed(ctx.seeds["torch"])
    torch.set_num_threads(ctx.threads)
    if cfg.run.deterministic:
        deterministic_algorithms(compiled=cfg.framework.compile)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        if cfg.run.fill_uninitialized_memory is not None:  # None: torch's own default (on)
            torch.utils.deterministic.fill_uninitialized_memory = cfg.run.fill_uninitialized_memory
    elif cfg.hardware.platform == "gpu":  # free to autotune, as XLA is: cuDNN times its algorithms per shape
        torch.backends.cudnn.benchmark = True
    matmul = cfg.precision.matmul
    if matmul != "default":  # "default": leave PyTorch's own defaults (and say what they are)
        torch.set_float32_matmul_precision(matmul)
        torch.backends.cudnn.allow_tf32 = matmul != "highest"
    if cfg.framework.compile:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = ctx.cache_dir
    cap_memory(cfg)


def cap_memory(cfg: Config) -> None:
    """run.memory_limit_gb: a device-memory fraction on CUDA; on CPU an address-space limit of
    what the process holds now (framework imported) plus the cap, so allocations past it fail
    with torch's own "can't allocate memory: you tried to allocate N bytes"."""
    limit = memory_limit_bytes(cfg)
    if limit is None:
        return
    if cfg.hardware.platform == "gpu" and torch.cuda.is_available():
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total))
        return
    import resource

    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + limit, resource.RLIM_INFINITY))


def _loss(entry, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Labels arrive int64 (converted once, off the clock); fp32 outputs are used as they are.
    The workload's own `torch_loss` where it has one, else its task's."""
    if own := getattr(entry, "torch_loss", None):
        return own(out, y)
    task = entry.task
    out = out if out.dtype == torch.float32 else out.float()
    if task == "lm":
        return F.cross_entropy(out.flatten(0, -2), y.flatten())
    if task == "classify":
        return F.cross_entropy(out, y)
    return F.mse_loss(out, y)


def _initial_model(ctx: BuildContext, build_model) -> torch.nn.Module:
    """run.init=native: torch's own initialisers (seeded in `configure`). shared: overwritten,
    before any cast, move or sharding, with the canonical NumPy draw every framework loads."""
    model = build_model(ctx.dims)
    if canonical.init_mode(ctx.config) == "shared":
        ctx.entry.load_torch_state(model, canonical.draw(ctx.entry.torch_shapes(model), ctx.config.run.seed))
    return model


class TorchWorkload:
    def __init__(self, ctx: BuildContext):
        configure(ctx)
        self.ctx = ctx
        cfg = ctx.config
        on_gpu = cfg.hardware.platform == "gpu" and torch.cuda.is_available()
        self.device = torch.device("cuda" if on_gpu else "cpu")
        build = hf.build_fn(ctx.entry, cfg.model.impl, "torch")  # model.impl
        self.model = _initial_model(ctx, build).to(self.device, dtype=DTYPES[cfg.precision.param_dtype])
        # In the canonical layout (torch state_dict keys), for native models and the hf ones with a converter.
        self.init_sha256 = canonical.sha256(ctx.entry.torch_state(self.model)) if hf.hashes_init(cfg) else None
        self.model.train(cfg.run.task == "train")
        self.base_model = self.model  # the unwrapped module (DDP wraps it; FSDP2/TP change it in place)
        self.distributed = cfg.sharding.name != "none" and dist.is_available() and dist.is_initialized()
        if self.distributed:
            self.model = torch_distributed.parallelize(self.model, cfg)
        self.train = cfg.run.task == "train"
        self.opt = self._optimizer(cfg.run) if self.train else None
        self.autocast = cfg.precision.autocast
        # Entering even a disabled torch.autocast costs a few % of a tiny step: skip it then.
        self._autocast = ((lambda: torch.autocast(self.device.type, dtype=self.compute_dtype))
                          if self.autocast else contextlib.nullcontext)
        self.compute_dtype = DTYPES[cfg.precision.compute_dtype]
        self.forward = self.model
        if cfg.framework.compile:
            self.forward = torch.compile(self.model, backend=cfg.framework.compile_backend,
                                         mode=None if cfg.framework.compile_mode == "default" else cfg.framework.compile_mode)
        self.batches = [self._to_device(x, y) for x, y in ctx.batches]
        self.scaler = torch.amp.GradScaler(self.device.type) if cfg.precision.loss_scaling else None
        if on_gpu:
            torch.cuda.reset_peak_memory_stats()

    def _optimizer(self, run: dict) -> torch.optim.Optimizer:
        if run.optimizer == "adamw":
            return torch.optim.AdamW(self.model.parameters(), lr=run.lr)
        return torch.optim.SGD(self.model.parameters(), lr=run.lr)

    def _to_device(self, x: np.ndarray, y: np.ndarray):
        if self.distributed:  # this rank's slice of the batch (tensor-parallel ranks share one)
            rank, ranks = torch_distributed.data_rank_and_size(self.ctx.config)
            per = len(x) // ranks
            x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]
        tx = torch.from_numpy(np.ascontiguousarray(x))
        if self.ctx.entry.image_input:
            tx = tx.permute(0, 3, 1, 2).contiguous()  # NHWC → NCHW
        if tx.is_floating_point():
            tx = tx.to(DTYPES[self.ctx.config.precision.param_dtype])
        ty = torch.from_numpy(np.ascontiguousarray(y))
        ty = ty.long() if not ty.is_floating_point() else ty  # cross_entropy wants int64 labels
        return tx.to(self.device), ty.to(self.device)

    def step(self, i: int):
        x, y = self.batches[i % len(self.batches)]
        with self._autocast():
            if not self.train:
                with torch.no_grad():
                    return _loss(self.ctx.entry, self.forward(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss = _loss(self.ctx.entry, self.forward(x), y)
        if self.scaler is None:
            loss.backward()
            self.opt.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        return loss

    def measured_flops(self) -> tuple[float, str] | None:
        """FLOPs of one step of the eager module under `FlopCounterMode` (a workload with no formula),
        after the timed loop; its buffers (BatchNorm statistics) and gradients are put back."""
        if self.distributed:
            return None
        from torch.utils.flop_counter import FlopCounterMode

        x, y = self.batches[0]
        buffers = {k: v.clone() for k, v in self.base_model.named_buffers()}
        with FlopCounterMode(display=False) as counter, self._autocast():
            if self.train:
                _loss(self.ctx.entry, self.base_model(x), y).backward()
            else:
                with torch.no_grad():
                    _loss(self.ctx.entry, self.base_model(x), y)
        if self.opt is not None:
            self.opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for k, v in self.base_model.named_buffers():
                v.copy_(buffers[k])
        return float(counter.get_total_flops()), "torch_flop_counter"

    def sync(self, out) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def loss(self, out) -> float:
        if self.distributed:  # the whole batch's loss: the mean over ranks (after the clock)
            out = torch_distributed.mean_over_ranks(out)
        return float(np.float32(out.detach().float().item()))

    def compile_info(self) -> dict:
        info = self._lazy_state()
        if not self.ctx.config.framework.compile:
            return info
        from torch._dynamo.utils import counters

        return {**info, **self._compile_times(), "graph_breaks": int(sum(counters["graph_break"].values())),
                "compile_backend": self.ctx.config.framework.compile_backend}

    def _lazy_state(self) -> dict:
        """The optimizer state torch created lazily in the first step (empty until then), which
        makes the second step's graph differ from the first's under a tracing compiler."""
        if self.opt is None:
            return {}
        names: dict[str, int] = {}
        for state in self.opt.state.values():
            for key in state:
                names[key] = names.get(key, 0) + 1
        return {"lazy_optimizer_state": {"tensors": sum(names.values()), "names": names}}

    def _compile_times(self) -> dict:
        """torch.compile's first step split by its own counters (torch._dynamo.utils):
        dynamo's tracing and AOT autograd's (trace_lower_s), inductor's code generation and
        C++/Triton compilation (compile_s), over every graph compiled so far."""
        try:
            from torch._dynamo.utils import compilation_time_metrics as m
        except ImportError:
            return {}
        total = sum(m.get("_compile.compile_inner", ())) + sum(m.get("compile_fx.<locals>.bw_compiler", ()))
        inductor = sum(m.get("compile_fx_inner", ()))
        return {"trace_lower_s": max(0.0, total - inductor), "compile_s": inductor,
                "dynamo_compiles": len(m.get("_compile.compile_inner", ()))}

    def profile(self, first: int, steps: int, out_dir: str):
        """`steps` more steps under torch.profiler (run.profile=true, after the timed loop): a
        profile.capture.Captured."""
        from repro.profile import capture

        return capture.torch_trace(self._step_synced, first, steps, out_dir, self.device.type == "cuda")

    def _step_synced(self, i: int) -> None:
        self.sync(self.step(i))

    def evaluate(self, x, y) -> float:
        tx, ty = self._to_device(x, y)
        self.model.eval()
        with torch.no_grad():
            pred = self.model(tx).argmax(-1)
        self.model.train(self.train)
        return float((pred == ty).float().mean().item())

    def init_params_sha256(self) -> str:
        return self.init_sha256

    def params_sha256(self) -> str:
        h = hashlib.sha256()
        for name, t in sorted(self.base_model.state_dict().items()):
            a = torch_distributed.full(t.detach()).cpu().contiguous() if self.distributed else t.detach().cpu().contiguous()
            h.update(f"{name}:{a.dtype}:{tuple(a.shape)}".encode())
            h.update(a.reshape(-1).view(torch.uint8).numpy().tobytes())  # 0-dim buffers too
        return h.hexdigest()

    def peak_memory(self) -> dict:
        if self.device.type == "cuda":
            return {"bytes": int(torch.cuda.max_memory_allocated()), "kind": "device",
                    "reserved": int(torch.cuda.max_memory_reserved())}
        return {"bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "kind": "host_rss"}

    def effective(self) -> dict:
        tf32 = self.device.type == "cuda" and torch.cuda.get_device_capability(self.device)[0] >= 8
        return {
            "matmul_precision": torch.get_float32_matmul_precision(),
            "fp32_matmul": precision.torch_fp32_matmul(torch.get_float32_matmul_precision(), self.device.type, tf32),
            "loss_scale": "dynamic (GradScaler)" if self.scaler is not None else None,
            "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
            "param_dtypes": sorted({str(p.dtype).replace("torch.", "") for p in self.model.parameters()}),
            "param_count": sum(p.numel() for p in self.base_model.parameters()),
            "model_impl": self.ctx.config.model.impl,
            "autocast": str(self.compute_dtype).replace("torch.", "") if self.autocast else None,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "determinism": determinism.torch_effective(torch, self.device.type == "cuda", os.environ),
            "threads": torch.get_num_threads(),
            "platform": self.device.type,
            "compiled": bool(self.ctx.config.framework.compile),
            "init": canonical.init_mode(self.ctx.config),
            "compile_cache": self.ctx.config.run.compile_cache,
            "inductor_cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
        }

    def framework_info(self) -> dict:
        info = {
            "name": "torch",
            "versions": {"torch": torch.__version__, "cuda": torch.version.cuda,
                         "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None},
            "devices": [str(self.device)] + ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
                                              if torch.cuda.is_available() else []),
            "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
        }
        return info

    def ir(self) -> dict[str, str]:
        return {}

    def sharding_info(self) -> dict:
        if not self.distributed:
            return {}
        return {
            "layout": self.ctx.config.sharding.name, "mesh": self.ctx.config.sharding.mesh,
            "devices": dist.get_world_size(), "rank": dist.get_rank(),
            "param_bytes_total": sum(torch_distributed.full(p.detach()).nbytes for p in self.base_model.parameters()),
            "param_bytes_per_device": torch_distributed.local_bytes(self.base_model),
        }


def build(ctx: BuildContext) -> TorchWorkload:
    return TorchWorkload(ctx)
