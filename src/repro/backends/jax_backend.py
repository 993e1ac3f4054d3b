"""JAX + Flax NNX + Optax: the whole train step is one jitted function over split state.

The step is lowered and compiled ahead of time on the first call, so the first step's time
splits into trace+lower, compile and execution. Parameters, other state and optimizer state
are donated, as a production training loop would.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from repro.backends import determinism, jax_sharding, precision
from repro.backends.base import BuildContext, memory_limit_bytes
from repro.models import canonical, hf

MATMUL = {"highest": "highest", "high": "tensorfloat32", "medium": "bfloat16"}
LOSS_SCALE = 2.0**12  # fp16_amp: a static loss scale (fp16 gradients underflow without one)


def _loss_fn(entry):
    """The workload's own `jax_loss` where it has one, else its task's."""
    if own := getattr(entry, "jax_loss", None):
        return own
    task = entry.task
    if task == "classify":
        return lambda out, y: optax.softmax_cross_entropy_with_integer_labels(out.astype(jnp.float32), y).mean()
    if task == "lm":
        return lambda out, y: optax.softmax_cross_entropy_with_integer_labels(out.astype(jnp.float32), y).mean()
    return lambda out, y: jnp.mean((out.astype(jnp.float32) - y) ** 2)


def _optimizer(run: dict) -> optax.GradientTransformation:
    if run.optimizer == "adamw":
        return optax.adamw(run.lr)
    return optax.sgd(run.lr)


def configure(ctx: BuildContext) -> None:
    """Process-wide settings, applied before anything is traced."""
    matmul = ctx.config.precision.matmul
    if matmul != "default":  # "default": leave JAX's own default in place (and say what it is)
        jax.config.update("jax_default_matmul_precision", MATMUL[matmul])
    if ctx.config.run.compile_cache != "cold":  # warm, repeats: a cache kept beyond the run (job/job.py)
        jax.config.update("jax_compilation_cache_dir", ctx.cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


def _initial_model(ctx: BuildContext, build_model, dtype, param_dtype, clock: _CompileClock) -> nnx.Module:
    """run.init=native: Flax's own initialisers from the JAX seed, drawn on the host's CPU device and
    then placed on the run's device. shared: the model built abstractly (nothing drawn, nothing
    compiled) and filled with the canonical NumPy draw."""
    def build():
        return build_model(ctx.dims, nnx.Rngs(ctx.seeds["jax"]), dtype=dtype, param_dtype=param_dtype)

    if canonical.init_mode(ctx.config) == "shared":
        model = nnx.eval_shape(build)
        return ctx.entry.load_flax_state(model, canonical.draw(ctx.entry.flax_shapes(model), ctx.config.run.seed))
    # Built under one jit: eager Flax init compiles every parameter shape on its own (about 1 s
    # each on a small CPU); one traced init compiles once, for the host's CPU, and its state then
    # moves to the run's device. On an H200 XLA:GPU took 185 s over transformers' ViT-B/16
    # initialiser, a program of random draws (154 threefry hashes, each lowered for a GPU as 20
    # unrolled rounds: 44k operations; benchmarks/jax_init_build.py --hlo); XLA:CPU compiles it in
    # seconds. On a CPU run the host is the run's device: the same program, the same numbers.
    host, target = _host_device(), _default_device()
    with jax.default_device(host), clock.phase("init") as compiled:
        model = nnx.jit(build)()
    state = nnx.state(model)
    ran_on = ", ".join(sorted({_device_name(d) for a in jax.tree_util.tree_leaves(state) for d in a.devices()}))
    for c in compiled:  # where it ran: where its output lies
        c["device"] = ran_on
    if target != host:
        nnx.update(model, jax.device_put(state, target))
    return model


def _device_name(device) -> str:
    return f"{device.platform}:{device.id}"


def _default_device():
    """Where JAX runs a computation with no placed inputs: jax_default_device, else the first local device."""
    device = jax.config.jax_default_device
    if isinstance(device, str):  # a platform name
        return jax.local_devices(backend=device)[0]
    return device or jax.local_devices()[0]


def _host_device():
    """The host's first CPU device; the run's device where JAX was started without its CPU backend."""
    try:
        return jax.local_devices(backend="cpu")[0]
    except RuntimeError:  # JAX_PLATFORMS names no cpu
        return _default_device()


class _CompileClock:
    """XLA's own trace / lower / compile durations while it is open (jax.monitoring's events): the
    part of a build spent compiling (the jitted parameter init, optimizer init, placement), and
    each compile on its own: the part of the build it belongs to (`what`), JAX's name of what it
    compiled (`fun`), its seconds and the device it compiled for (the phase's, where it says one;
    else the run's default device)."""

    EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace_s",
              "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
              "/jax/core/compile/backend_compile_duration": "compile_s"}

    def __enter__(self) -> _CompileClock:
        self.spent = {"trace_s": 0.0, "lower_s": 0.0, "compile_s": 0.0, "compiles": 0}
        self.compiled: list[dict] = []
        self._phase: tuple[str, str | None, list] | None = None
        jax.monitoring.register_event_duration_secs_listener(self._add)
        return self

    @contextlib.contextmanager
    def phase(self, what: str, device: str | None = None):
        """The compiles in this block belong to `what` and compile for `device` (in words; None: the
        run's default device, or what the caller writes into the entries this yields)."""
        saved, self._phase = self._phase, (what, device, [])
        try:
            yield self._phase[2]
        finally:
            self._phase = saved

    def _add(self, event: str, duration: float, fun_name: str = "?", **_) -> None:
        if (key := self.EVENTS.get(event)) is not None:
            self.spent[key] += duration
            if key == "compile_s":
                self.spent["compiles"] += 1
                what, device, entries = self._phase or ("build", None, [])
                entry = {"what": what, "fun": fun_name, "compile_s": round(duration, 4),
                         "device": device or _device_name(_default_device())}
                self.compiled.append(entry)
                entries.append(entry)

    def __exit__(self, *exc) -> None:
        jax.monitoring.unregister_event_duration_listener(self._add)

    def record(self) -> dict:
        """results.compile.build: the totals, and each compile with its seconds and device."""
        return {**{k: round(v, 4) for k, v in self.spent.items()}, "compiled": self.compiled}


class JaxWorkload:
    def __init__(self, ctx: BuildContext):
        with _CompileClock() as self._clock:  # results.compile.build: what the build compiled, and where
            self._build(ctx)

    def _build(self, ctx: BuildContext):
        configure(ctx)
        self.ctx = ctx
        cfg = ctx.config
        dtype = jnp.dtype(cfg.precision.compute_dtype)
        param_dtype = jnp.dtype(cfg.precision.param_dtype)
        build = hf.build_fn(ctx.entry, cfg.model.impl, "flax")  # model.impl
        model = _initial_model(ctx, build, dtype, param_dtype, self._clock)
        # In the canonical layout (torch state_dict keys), for native models and the hf ones with a converter.
        self.init_sha256 = canonical.sha256(ctx.entry.flax_state(model)) if hf.hashes_init(cfg) else None
        self.graphdef, params, rest = nnx.split(model, nnx.Param, ...)
        self.tx = _optimizer(cfg.run)
        self.loss_scale = LOSS_SCALE if cfg.precision.loss_scaling else 1.0
        self.train = cfg.run.task == "train"
        step_fn = self._train_step if self.train else self._forward_step
        donate = (0,) if self.train else ()
        batches = [_cast_inputs(b, param_dtype) for b in ctx.batches]
        self.mesh = jax_sharding.make_mesh(cfg.sharding.mesh)
        if self.mesh is None:
            self.state = (params, rest, self.tx.init(params))
            self.batches = [jax.device_put(b) for b in batches]
            self._fn = jax.jit(step_fn, donate_argnums=donate)
        else:  # parameters placed per the layout; optimizer state follows them through jit
            layout = cfg.sharding.name
            rep = jax_sharding.replicated(self.mesh)
            with self._clock.phase("placement"):  # slices of each array cut where it lies (XLA compiles them)
                params = jax_sharding.place(params, jax_sharding.shardings_for(layout, self.mesh, params))
                rest = jax_sharding.place(rest, jax.tree_util.tree_map(lambda _: rep, rest))
            with self._clock.phase("optimizer", f"mesh of {self.mesh.devices.size} {self.mesh.devices.flat[0].platform}"):
                opt_state = jax.jit(self.tx.init)(params)  # moments follow their parameters
            opt_state = jax.tree_util.tree_map(  # scalars (the step count) are replicated over the mesh
                lambda a: a if len(a.sharding.device_set) > 1 else jax_sharding.place(a, rep), opt_state)
            self.state = (params, rest, opt_state)
            state_sh = jax.tree_util.tree_map(lambda a: a.sharding, self.state)
            batch_sh = jax_sharding.batch_sharding(self.mesh)
            self.batches = [tuple(jax_sharding.place_batch(a, batch_sh) for a in b) for b in batches]
            loss_sh = jax_sharding.replicated(self.mesh)
            self._fn = jax.jit(step_fn, donate_argnums=donate, in_shardings=(state_sh, batch_sh, batch_sh),
                               out_shardings=(state_sh, loss_sh) if self.train else (loss_sh, batch_sh))
        self._compiled = None
        self._compile_info: dict = {}
        self._lowered = None

    def _build_compile_info(self) -> dict:
        return {"build": self._clock.record()}

    # The step functions are pure: state in, state out. The module is rebuilt from the state
    # inside the trace; nnx.value_and_grad differentiates its nnx.Param leaves and carries
    # the updates of other state (BatchNorm statistics) out of the grad trace.
    def _train_step(self, state, x, y):
        params, rest, opt_state = state
        model = nnx.merge(self.graphdef, params, rest)
        loss_of = _loss_fn(self.ctx.entry)

        def loss_fn(m):
            loss = loss_of(m(x), y)
            return loss * self.loss_scale, loss

        (_, loss), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model)
        if self.loss_scale != 1.0:
            grads = jax.tree_util.tree_map(lambda g: g / self.loss_scale, grads)
        _, _, new_rest = nnx.split(model, nnx.Param, ...)
        updates, opt_state = self.tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), new_rest, opt_state), loss

    def _forward_step(self, state, x, y):
        # the loss alone: returning the (undonated) state made XLA copy every parameter each step
        # (a 64 MB copy per GEMM step, ~8 % of it)
        params, rest, _ = state
        out = nnx.merge(self.graphdef, params, rest)(x)
        # The output too, as an inference step gives it: left unreturned, XLA:CPU fuses the loss
        # into the model's last dot (its YNN dot+reduce fusion), a kernel that ran at 0.78 of the
        # dot alone (GEMM, 2 cores: benchmarks/step_vs_library.py; an optimization barrier does
        # not stop it, the CPU pipeline drops barriers before fusing). torch's step has it anyway.
        return _loss_fn(self.ctx.entry)(out, y), out

    def step(self, i: int):
        x, y = self.batches[i % len(self.batches)]
        if self._compiled is None:
            t0 = time.perf_counter()
            lowered = self._fn.lower(self.state, x, y)
            t1 = time.perf_counter()
            self._compiled = lowered.compile()
            t2 = time.perf_counter()
            self._compile_info = {"trace_lower_s": t1 - t0, "compile_s": t2 - t1}
            self._lowered = lowered  # IR text and cost analysis are read after the timed loop
            limit = memory_limit_bytes(self.ctx.config)
            if limit is not None:  # the cap must refuse before the step runs
                _check_fits(_memory(self._compiled), limit)
        if not self.train:
            loss, _ = self._compiled(self.state, x, y)  # the output is dropped (freed) at once
            return loss
        self.state, loss = self._compiled(self.state, x, y)
        return loss

    def sharding_info(self) -> dict:
        if self.mesh is None:
            return {}
        params = self.state[0]
        per_device = [jax_sharding.bytes_on(params, d) for d in jax_sharding.local_devices(self.mesh)]
        return {
            "layout": self.ctx.config.sharding.name, "mesh": dict(self.mesh.shape),
            "devices": self.mesh.devices.size, "processes": jax.process_count(),
            "param_bytes_total": jax_sharding.total_bytes(params),
            "param_bytes_per_device": max(per_device), "param_bytes_per_device_min": min(per_device),
            "collectives": jax_sharding.count_collectives(self._compiled.as_text()) if self._compiled else {},
        }

    def sync(self, out) -> None:
        out.block_until_ready()

    def loss(self, out) -> float:
        return float(np.asarray(jax_sharding.host_value(out), dtype=np.float32))

    def compile_info(self) -> dict:
        if self._compiled is not None and "xla_argument_bytes" not in self._compile_info:
            self._compile_info.update(_cost(self._compiled))
            self._compile_info.update(_memory(self._compiled))
            # The step's executable is called directly: it cannot recompile. Its optimizer state
            # (optax init) existed before it was compiled, with the structure it has now.
            self._compile_info.update({"recompiles_possible": False,
                                       "optimizer_state_at_compile": len(jax.tree_util.tree_leaves(self.state[2]))})
        return {**self._compile_info, **self._build_compile_info()}

    def measured_flops(self) -> tuple[float, str] | None:
        """FLOPs of the compiled step as XLA's cost analysis counts them (a workload with no formula)."""
        flops = self.compile_info().get("xla_flops")
        return (flops, "xla_cost_analysis") if flops else None

    def evaluate(self, x, y) -> float:
        params, rest, _ = self.state
        model = nnx.merge(self.graphdef, params, rest)
        model.eval()
        if self.mesh is not None:  # the inputs join the parameters' mesh, replicated
            x = jax_sharding.place(np.asarray(x), jax_sharding.replicated(self.mesh))
        logits = jax.jit(lambda m, x: m(x))(model, jnp.asarray(x))
        return float(np.mean(jax_sharding.host_value(jnp.argmax(logits, -1)) == y))

    def init_params_sha256(self) -> str:
        return self.init_sha256

    def params_sha256(self) -> str:
        h = hashlib.sha256()
        params, rest, _ = self.state
        for tree in (params, rest):
            for path, leaf in sorted(jax.tree_util.tree_leaves_with_path(tree), key=lambda kv: jax.tree_util.keystr(kv[0])):
                a = jax_sharding.host_value(leaf)
                h.update(f"{jax.tree_util.keystr(path)}:{a.dtype}:{a.shape}".encode())
                h.update(a.tobytes())
        return h.hexdigest()

    def peak_memory(self) -> dict:
        device = jax.devices()[0]
        stats = device.memory_stats() if device.platform != "cpu" else None
        if stats and "peak_bytes_in_use" in stats:
            return {"bytes": int(stats["peak_bytes_in_use"]), "kind": "device", "limit": stats.get("bytes_limit")}
        return {"bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "kind": "host_rss"}

    def effective(self) -> dict:
        params = self.state[0]
        dtypes = sorted({str(np.dtype(l.dtype)) for l in jax.tree_util.tree_leaves(params)})
        device = jax.devices()[0]
        setting = jax.config.jax_default_matmul_precision
        tf32 = float(getattr(device, "compute_capability", 0) or 0) >= 8.0
        return {
            "matmul_precision": str(setting),
            "fp32_matmul": precision.jax_fp32_matmul(setting, device.platform, tf32),
            "determinism": determinism.xla_effective(device.platform, os.environ.get("XLA_FLAGS", ""),
                                                     None if setting is None else str(setting)),
            "loss_scale": self.loss_scale if self.loss_scale != 1.0 else None,
            "param_dtypes": dtypes,
            "param_count": int(sum(np.prod(l.shape) for l in jax.tree_util.tree_leaves(params))),
            "model_impl": self.ctx.config.model.impl,
            "compute_dtype": self.ctx.config.precision.compute_dtype,
            "x64": bool(jax.config.jax_enable_x64),
            "platform": jax.devices()[0].platform,
            "donated": self.train,
            "init": canonical.init_mode(self.ctx.config),
            "compile_cache": self.ctx.config.run.compile_cache,
            "compilation_cache_dir": jax.config.jax_compilation_cache_dir,
            # what XLA compiled for the step, as one hash: two configs that ran the same program under the same
            # settings measured no difference in kind (report/determinism_price.py: no price to measure)
            "program_sha256": self.program_sha256(),
        }

    def program_sha256(self) -> str | None:
        """The sha256 of the compiled step's optimized HLO (None before the first step compiled it)."""
        if self._compiled is None:
            return None
        if getattr(self, "_program_sha256", None) is None:
            self._program_sha256 = hashlib.sha256(self._compiled.as_text().encode()).hexdigest()
        return self._program_sha256

    def framework_info(self) -> dict:
        return {
            "name": "jax",
            "versions": {"jax": jax.__version__, "jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else None},
            "devices": [str(d) for d in jax.devices()],
            **({"process": {"index": jax.process_index(), "count": jax.process_count()}}
               if jax.process_count() > 1 else {}),
            "device_kinds": sorted({d.device_kind for d in jax.devices()}),
            "backend": jax.default_backend(),
        }

    def profile(self, first: int, steps: int, out_dir: str):
        """`steps` more steps under jax.profiler (run.profile=true, after the timed loop), with
        the compiled module's HLO, which says what each fusion the trace names holds (a
        profile.capture.Captured)."""
        import dataclasses

        from repro.profile import capture

        def run_step(i: int) -> None:
            self.sync(self.step(i))

        return dataclasses.replace(capture.jax_trace(run_step, first, steps, out_dir), hlo=self._compiled.as_text())

    def ir(self) -> dict[str, str]:
        if self.ctx.config.run.capture_ir and self._compiled is not None:
            return {"stablehlo.mlir": self._lowered.as_text(), "hlo_optimized.txt": self._compiled.as_text()}
        return {}


def _cast_inputs(batch, dtype):
    """Float inputs in the parameters' dtype (bf16 policy); labels and tokens untouched."""
    x, y = batch
    return (x.astype(dtype) if np.issubdtype(x.dtype, np.floating) else x), y


def _check_fits(info: dict, limit: int | None) -> None:
    """run.memory_limit_gb for JAX: XLA's own compile-time accounting of the step (state,
    batch, outputs and temporaries) against the cap — the check XLA makes on a TPU's HBM.
    (A process address-space limit makes XLA abort instead of raising.)"""
    if limit is None:
        return
    need = info.get("xla_argument_bytes", 0) + info.get("xla_output_bytes", 0) + info.get("xla_temp_bytes", 0)
    if need > limit:
        raise MemoryError(
            f"RESOURCE_EXHAUSTED: the compiled step needs {need} bytes (XLA memory analysis: arguments "
            f"{info.get('xla_argument_bytes')}, outputs {info.get('xla_output_bytes')}, temporaries "
            f"{info.get('xla_temp_bytes')}), over run.memory_limit_gb = {limit} bytes")


def _cost(compiled) -> dict:
    """FLOPs of the compiled step, as XLA counts them (where it can)."""
    try:
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        return {"xla_flops": float(cost["flops"])} if cost and "flops" in cost else {}
    except Exception:  # noqa: BLE001 - cost analysis is optional and backend-dependent
        return {}


def _memory(compiled) -> dict:
    """Bytes of the compiled step's arguments, outputs and temporaries (XLA's accounting)."""
    out = {}
    try:
        mem = compiled.memory_analysis()
        if mem is not None:
            out["xla_temp_bytes"] = int(mem.temp_size_in_bytes)
            out["xla_argument_bytes"] = int(mem.argument_size_in_bytes)
            out["xla_output_bytes"] = int(mem.output_size_in_bytes)
    except Exception:  # noqa: BLE001
        pass
    return out


def build(ctx: BuildContext) -> JaxWorkload:
    return JaxWorkload(ctx)
