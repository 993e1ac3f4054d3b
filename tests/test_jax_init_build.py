"""What a JAX build compiles, and where: run.init=native draws Flax's initial parameters in one
jitted initialiser on the host's CPU device (XLA:CPU compiles it, whatever the run's device; on an
H200 XLA:GPU took 185 s over transformers' ViT-B/16 initialiser) and then places them on the run's
device; the record lists each compile of the build with its seconds and device; run.init=shared
compiles no initialiser; and the initial parameters are the numbers the jitted init gave before.

Bookkeeping only: the seconds are benchmarks/jax_init_build.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from repro import backends, models, preflight
from repro.backends.base import BuildContext
from repro.config import schema
from repro.data import make_batches
from repro.models import hf
from repro.worker import seeding

IMPLS = ("native", "hf")


def config(impl: str, init: str, *more: str) -> schema.Config:
    return preflight.plan(["framework=jax", "model=vit", "model.preset=tiny", f"model.impl={impl}",
                           f"run.init={init}", "run.batch_size=2", "precision=fp32", "run.optimizer=sgd",
                           *more]).jobs[0]


def workload(cfg: schema.Config, tmp_path):
    """The workload as worker/worker.py builds it."""
    entry, seeds = models.entry_of(cfg.model), seeding.derive(cfg.run.seed)
    dims = entry.dims_of(schema.dims(cfg.model))
    batches = make_batches(cfg, entry, dims, seeds["data"])[0]
    ctx = BuildContext(config=cfg, entry=entry, dims=dims, seeds=seeds, batches=batches, threads=1,
                       cache_dir=str(tmp_path))
    return backends.load("jax").build(ctx)


def jitted_init(cfg: schema.Config) -> nnx.State:
    """The initial state as the build drew it before it moved to the host: one nnx.jit, nowhere named."""
    entry, seeds = models.entry_of(cfg.model), seeding.derive(cfg.run.seed)
    dims = entry.dims_of(schema.dims(cfg.model))
    build = hf.build_fn(entry, cfg.model.impl, "flax")
    return nnx.state(nnx.jit(lambda: build(dims, nnx.Rngs(seeds["jax"]), dtype=jnp.float32,
                                            param_dtype=jnp.float32))())


def leaves(tree) -> list[np.ndarray]:
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(tree)]


@pytest.fixture(scope="module", params=IMPLS)
def native_init(request, tmp_path_factory):
    cfg = config(request.param, "native")
    return cfg, workload(cfg, tmp_path_factory.mktemp(request.param))


def test_native_init_compiles_once_on_the_host_cpu_and_says_so(native_init):
    cfg, w = native_init
    build = w.compile_info()["build"]
    init = [c for c in build["compiled"] if c["what"] == "init"]
    host = jax.local_devices(backend="cpu")[0]
    assert len(init) == 1 and init[0]["device"] == f"cpu:{host.id}" and init[0]["compile_s"] > 0
    assert build["compiles"] == len(build["compiled"])  # every compile of the build is listed
    assert build["compile_s"] == pytest.approx(sum(c["compile_s"] for c in build["compiled"]), abs=1e-3)
    params = jax.tree_util.tree_leaves(w.state[0])  # the run's device is this host's only one
    assert {d for a in params for d in a.devices()} == {jax.devices()[0]}


def test_native_init_draws_the_numbers_it_drew_before(native_init):
    """The initial parameters (and other state) are bit for bit those of the jitted init."""
    cfg, w = native_init
    before = leaves(jitted_init(cfg))
    entry = models.entry_of(cfg.model)
    graphdef, params, rest = w.graphdef, *w.state[:2]
    if w.init_sha256 is not None:  # vit: both impls hash their start in the canonical layout
        from repro.models import canonical

        model = nnx.merge(graphdef, params, rest)
        assert w.init_sha256 == canonical.sha256(entry.flax_state(model))
    now = leaves(nnx.state(nnx.merge(graphdef, params, rest)))
    assert len(now) == len(before)
    assert all(a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b) for a, b in zip(now, before))


@pytest.mark.parametrize("impl", IMPLS)
def test_shared_init_compiles_no_initialiser(impl, tmp_path):
    w = workload(config(impl, "shared"), tmp_path)
    build = w.compile_info()["build"]
    assert build["compiles"] == 0 and build["compiled"] == []


# Two CPU devices, the second standing for the accelerator: JAX's default device is not the host's
# first CPU device, as on a GPU. Runs in a process of its own (the device count is fixed at start).
ELSEWHERE = """
import json, sys, tempfile
import jax, numpy as np
from flax import nnx
jax.config.update("jax_default_device", jax.devices("cpu")[1])
sys.path.insert(0, sys.argv[1])
from test_jax_init_build import config, jitted_init, leaves, workload
out = {}
for impl in ("native", "hf"):
    cfg = config(impl, "native")
    w = workload(cfg, tempfile.mkdtemp())
    state = jax.tree_util.tree_leaves(nnx.state(nnx.merge(w.graphdef, *w.state[:2])))
    with jax.default_device(jax.devices("cpu")[1]):  # before: the jitted init ran on the run's device
        before = leaves(jitted_init(cfg))
    out[impl] = {"build": w.compile_info()["build"],
                 "devices": sorted({f"{d.platform}:{d.id}" for a in state for d in a.devices()}),
                 "same": len(before) == len(state) and all(np.array_equal(np.asarray(a), b) for a, b in zip(state, before))}
    loss = w.step(0)
    w.sync(loss)
    out[impl]["loss"] = w.loss(loss)
print(json.dumps(out))
"""


@pytest.mark.slow  # starts a process
def test_the_init_compiles_on_the_host_when_the_run_is_elsewhere():
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    proc = subprocess.run([sys.executable, "-c", ELSEWHERE, str(Path(__file__).parent)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for impl in IMPLS:
        build, init = out[impl]["build"], [c for c in out[impl]["build"]["compiled"] if c["what"] == "init"]
        assert [c["device"] for c in init] == ["cpu:0"], build  # compiled for the host, not the run's device
        assert out[impl]["devices"] == ["cpu:1"]  # then placed on the run's device
        assert out[impl]["same"]  # the same numbers as the init run on the run's device (both XLA:CPU here)
        assert np.isfinite(out[impl]["loss"])


def test_the_wall_split_says_what_the_build_compiled_and_where():
    from repro.job import wall_split

    t0 = 1_000.0
    build = {"trace_s": 0.5, "lower_s": 0.2, "compile_s": 6.0, "compiles": 1,
             "compiled": [{"what": "init", "fun": "build", "compile_s": 6.0, "device": "cpu:0"}]}
    events = {"hello": {"at": t0 + 1.0}, "environment": {"at": t0 + 9.0},
              "result": {"at": t0 + 9.5, "results": {"setup": {"import_s": 1.0, "data_s": 0.1, "build_s": 7.5},
                                                      "compile": {"build": build}}}}
    wall = wall_split.split(events, t0, 10.0)
    assert wall["parts"]["build"] == 7.5 and wall["build"]["compiled"] == build["compiled"]
