"""run.profile=true: real traces from every framework (tiny models), reduced to one vocabulary.

The unit tests profile tiny steps in this process (torch eager, torch.compile, JAX with
optax) through repro.profile.capture, reduce the real traces and load the kept files back in
their viewers' formats (Chrome-trace JSON for Perfetto, XSpace for TensorBoard/XProf). The
end-to-end test runs the CLI and reads the record, the ledger's store, MLflow and the report.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from conftest import shipped_ledger
from repro.config import config_hash
from repro.profile import capture, categories, hlo, reduce, store
from repro.profile.categories import (ELEMENTWISE, HOST, MATMUL, MOVEMENT, OPTIMIZER, OTHER, REDUCTION,
                                      categorize)


# (family, op name, what the trace or HLO says besides, category): one row per kind of name.
NAMES = [
    ("torch", "aten::addmm", {}, MATMUL),
    ("torch", "aten::mkldnn_convolution", {}, MATMUL),
    ("torch", "aten::native_layer_norm", {}, REDUCTION),
    ("torch", "aten::copy_", {}, MOVEMENT),
    ("torch", "aten::gelu", {}, ELEMENTWISE),
    ("torch", "aten::_foreach_add_", {}, OPTIMIZER),
    ("torch", "triton_red_fused_native_layer_norm_0", {}, REDUCTION),
    ("torch", "## Call CompiledFxGraph abc123 ##", {}, ELEMENTWISE),
    ("torch", "autograd::engine::evaluate_function: AddmmBackward0", {}, OTHER),
    # CUDA kernels (the test marked gpu profiles real ones)
    ("torch", "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", {}, MATMUL),
    ("torch", "void at::native::reduce_kernel<512, 1>(...)", {}, REDUCTION),
    ("torch", "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...>", {}, OPTIMIZER),
    # XLA: by the ops inside a fusion where known, else by its name
    ("xla", "ynn_fusion.1", {"inside": {"reduce"}}, REDUCTION),
    ("xla", "ynn_fusion.2", {"inside": {"dot"}}, MATMUL),
    ("xla", "transpose_copy_fusion", {"inside": {"transpose", "copy"}}, MOVEMENT),
    ("xla", "multiply_add_fusion", {"inside": {"multiply", "add"}}, ELEMENTWISE),
    ("xla", "input_reduce_fusion", {}, REDUCTION),
    ("xla", "all-reduce.3", {}, categories.COLLECTIVES),
    ("xla", "loop_fusion", {"optimizer": True}, OPTIMIZER),
]


@pytest.mark.parametrize("family, name, known, category", NAMES, ids=[n for _, n, _, _ in NAMES])
def test_the_table_maps_each_frameworks_names(family, name, known, category):
    assert categorize(family, name, **known) == category


def test_profile_off_keeps_every_config_hash():
    base = {"run": {"steps": 20, "seed": 0}, "model": {"name": "mlp"}}
    assert config_hash({**base, "run": {**base["run"], "profile": False}}) == config_hash(base)
    assert config_hash({**base, "run": {**base["run"], "profile": True}}) != config_hash(base)


def _check_sums(summary: dict) -> None:
    cats = summary["categories_ms"]
    assert set(cats) == set(categories.CATEGORIES)
    assert sum(cats.values()) == pytest.approx(summary["step_ms"], rel=1e-6)
    assert all(v >= 0 for v in cats.values())
    assert summary["steps"] == capture.STEPS and len(summary["step_ms_each"]) == capture.STEPS
    # the ops are the median step's, as the categories: per category, its ops add up to it (to 5 µs: each op rounded to 0.1 µs)
    assert summary["ops_of"] == "median step" and len(summary["ops"]) < 60  # every op kept at these sizes
    for cat in categories.CATEGORIES:
        if cat != categories.HOST:
            ops = sum(v["ms"] for v in summary["ops"].values() if v["category"] == cat)
            assert ops == pytest.approx(cats[cat], abs=5e-3), cat


def _chrome_trace(path: str) -> list[dict]:
    """What Perfetto / chrome://tracing open: gzipped JSON with complete ("X") events."""
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"]
    assert any(e.get("ph") == "X" and str(e.get("name")).startswith("repro_step_") for e in events)
    return events


def _torch_step(compile_: bool):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.GELU(),
                                torch.nn.Linear(64, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    forward = torch.compile(model) if compile_ else model
    x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))

    def step(i: int) -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(forward(x), y).backward()
        opt.step()

    step(0)  # compiled (and optimizer state created) before profiling, as after the timed loop
    return step


@pytest.mark.slow
@pytest.mark.parametrize("compile_", [False, True], ids=["eager", "compile"])
def test_torch_profile_reduces_a_real_trace(tmp_path, compile_):
    info = capture.torch_trace(_torch_step(compile_), 1, capture.STEPS, str(tmp_path), device=False)
    summary = reduce.reduce(info.trace, info.family)
    _check_sums(summary)
    assert info.unprofiled_ms > 0  # the same steps without the profiler: its overhead, measured
    cats = summary["categories_ms"]
    assert cats[MATMUL] > 0 and cats[OPTIMIZER] > 0 and cats[HOST] > 0
    ops = summary["ops"]
    assert any(k in ops for k in ("addmm", "mm")), list(ops)
    if compile_:  # inductor's CPU kernels: the compiled graph's own time is fused element-wise work
        assert cats[ELEMENTWISE] > 0 and "inductor graph (CPU kernels)" in ops
        assert "native_layer_norm" not in ops  # fused away
    else:
        assert ops["native_layer_norm"]["category"] == REDUCTION and ops["native_layer_norm"]["count"] >= 1
    assert cats[OTHER] <= 0.2 * summary["step_ms"]
    top = summary["top_ops"][0]
    assert top["ms"] > 0 and top["count"] >= 1 and "category" in top
    events = _chrome_trace(info.trace)
    assert any(str(e.get("name")).startswith("aten::") for e in events)


def test_jax_profile_reduces_a_real_trace(tmp_path):
    import jax
    import jax.numpy as jnp
    import optax
    from jax.profiler import ProfileData

    tx = optax.adamw(1e-3)

    def loss(w, x):
        h = jnp.tanh(x @ w["a"])
        h = (h - h.mean(-1, keepdims=True)) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-5)
        return jnp.sum(h @ w["b"]) ** 2

    def train(state, x):
        w, s = state
        grads = jax.grad(loss)(w, x)
        updates, s = tx.update(grads, s, w)
        return optax.apply_updates(w, updates), s

    w = {"a": jnp.ones((64, 128)) * 0.01, "b": jnp.ones((128, 8)) * 0.01}
    x = jnp.ones((32, 64))
    compiled = jax.jit(train).lower((w, tx.init(w)), x).compile()
    box = {"state": (w, tx.init(w))}

    def step(i: int) -> None:
        box["state"] = compiled(box["state"], x)
        jax.block_until_ready(box["state"])

    info = capture.jax_trace(step, 0, capture.STEPS, str(tmp_path))
    instructions = hlo.instructions(compiled.as_text())
    assert any(v.optimizer for v in instructions.values())  # optax's ops, by their source files
    summary = reduce.reduce(info.trace, info.family, instructions)
    _check_sums(summary)
    cats = summary["categories_ms"]
    assert cats[MATMUL] > 0 and cats[OPTIMIZER] > 0 and cats[REDUCTION] > 0
    assert cats[OTHER] == 0  # every XLA thunk has a category
    _chrome_trace(info.files[0])
    planes = [p.name for p in ProfileData.from_file(info.files[1]).planes]  # TensorBoard/XProf's format
    assert "/host:CPU" in planes


def test_the_store_keeps_files_by_content(tmp_path):
    f = tmp_path / "t.json.gz"
    f.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    from repro.profile import sha256_file

    entry = {"name": f.name, "sha256": sha256_file(f)}
    kept = store.keep(tmp_path / "ledger", [str(f)], [entry])
    assert kept == [tmp_path / "ledger" / ".profiles" / entry["sha256"] / "t.json.gz"]
    record = {"config": {"ledger": {"dir": str(tmp_path / "ledger")}}, "results": {"profile": {"files": [entry]}}}
    assert store.paths(record) == kept and sha256_file(kept[0]) == entry["sha256"]


@pytest.mark.slow
def test_profiled_sweep_end_to_end_and_the_second_step(sandbox):
    """`repro -m framework=jax,torch_xla,torch model=ffn run.optimizer=adamw run.profile=true`: every
    record holds its breakdown and names trace files the ledger's store and MLflow hold; the report
    has the section and its PNG; torch_xla's second step compiled a new graph (the optimizer state
    AdamW created in step 1), JAX's could not."""
    from test_torch_xla import XLA_PYTHON, _unavailable

    if reason := _unavailable(XLA_PYTHON):
        pytest.fail(reason)
    proc = sandbox.run("-m", "framework=jax,torch_xla,torch", "model=ffn", "run.optimizer=adamw", "run.steps=6",
                       "run.warmup=2", "run.profile=true", "tracking.experiment=prof",
                       REPRO_XLA_PYTHON=str(XLA_PYTHON))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    heads = {h["config"]["framework"]["name"]: h for h in sandbox.heads()}
    for fw in ("jax", "torch"):
        prof = heads[fw]["results"]["profile"]
        assert sum(prof["categories_ms"].values()) == pytest.approx(prof["step_ms"], rel=1e-6)
        kept = store.paths(heads[fw])
        assert [p.name for p in kept] == [f["name"] for f in prof["files"]] and kept
    xla = heads["torch_xla"]["results"]
    assert xla["profile"]["categories_ms"] is None and xla["profile"]["step_ms"] > 0
    assert xla["compile"]["xla_compiles_per_step"][0] >= 1 and xla["compile"]["xla_compiles_per_step"][1] >= 1
    assert xla["compile"]["lazy_optimizer_state"]["names"].keys() >= {"exp_avg", "exp_avg_sq"}
    assert heads["jax"]["results"]["compile"]["recompiles_possible"] is False
    sandbox.projected()  # before a client of our own opens the store the projector may be creating
    artifacts = {fw: [f.path for f in __import__("mlflow").tracking.MlflowClient(sandbox.uri).list_artifacts(
        next(r.info.run_id for r in sandbox.mlflow_runs("prof") if r.data.tags.get("repro.framework") == fw),
        "profile")] for fw in ("jax", "torch")}
    assert artifacts["torch"] == ["profile/torch_trace.json.gz"]
    assert sorted(artifacts["jax"]) == ["profile/jax.xplane.pb", "profile/jax_perfetto_trace.json.gz"]
    report = next(sandbox.ledger.glob(".reports/*/report.md"))
    text = report.read_text()
    assert "## Where the time goes" in text and (report.parent / "where_time_goes.png").exists()
    assert "recompiled (" in text and "exp_avg" in text and "no recompilation: the compiled executable" in text
    compare = subprocess.run([sys.executable, "-m", "repro", "compare", "--experiment", "prof", "--ledger",
                              str(sandbox.ledger)], capture_output=True, text=True, env=sandbox.env()).stdout
    assert "## Where the time goes" in compare and "## First step" in compare and "recompiled (" in compare


def _cuda_shaped_trace(path, steps: int) -> None:
    """A trace laid out as torch's profiler writes one on CUDA (read off an H100, torch 2.11): each
    `record_function` range on the host thread, and its copy (cat gpu_user_annotation) on the GPU
    stream around that range's kernels."""
    events, t = [], 0.0
    for i in range(steps):
        host = {"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1}
        gpu = {"ph": "X", "cat": "gpu_user_annotation", "pid": 0, "tid": 7}
        kernel = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7}
        events += [
            {**host, "name": f"{reduce.STEP_PREFIX}{i}", "ts": t, "dur": 1000.0},
            {**gpu, "name": f"{reduce.STEP_PREFIX}{i}", "ts": t + 100, "dur": 800.0},
            {**kernel, "name": "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", "ts": t + 100, "dur": 400.0},
            {**host, "name": "Optimizer.step#AdamW.step", "ts": t + 500, "dur": 450.0},
            {**gpu, "name": "Optimizer.step#AdamW.step", "ts": t + 600, "dur": 300.0},  # 200 us of it is a gap
            {**kernel, "name": "void at::native::(anonymous namespace)::elementwise_kernel<128, 4>", "ts": t + 600,
             "dur": 100.0},
        ]
        t += 2000.0
    path.write_text(json.dumps({"traceEvents": events}))


def test_a_cuda_trace_counts_each_step_once_and_its_kernels_not_their_annotations(tmp_path):
    """The GPU copy of a step's range is not a step of its own, and the GPU copy of the optimizer's
    scope lends its kernels the optimizer category without adding its own gaps as optimizer time."""
    _cuda_shaped_trace(tmp_path / "t.json", capture.STEPS)
    summary = reduce.reduce(tmp_path / "t.json", "torch")
    _check_sums(summary)
    assert summary["step_ms_each"] == [1.0] * capture.STEPS
    cats = summary["categories_ms"]
    assert cats[MATMUL] == pytest.approx(0.4) and cats[OPTIMIZER] == pytest.approx(0.1)
    assert cats[HOST] == pytest.approx(0.5)


@pytest.mark.gpu
def test_torch_profile_on_a_gpu_counts_device_kernels(tmp_path):
    """On CUDA the categories are the device's kernels (cuBLAS/CUTLASS matmuls, the optimizer's
    multi-tensor kernels); the step window, set on the host, holds them (each step is synced)."""
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256, device="cuda"), torch.randint(0, 10, (64,), device="cuda")

    def step(i: int) -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        torch.cuda.synchronize()

    step(0)
    info = capture.torch_trace(step, 1, capture.STEPS, str(tmp_path), device=True)
    summary = reduce.reduce(info.trace, info.family)
    _check_sums(summary)
    assert summary["categories_ms"][MATMUL] > 0 and summary["categories_ms"][OPTIMIZER] > 0


def test_a_profiled_run_prints_its_top_categories_and_traces(tmp_path):
    """The close of one profiled run: its median profiled step, its top categories, its traces' paths."""
    import copy
    import io

    from rich.console import Console

    from repro import paths
    from repro.ledger import Ledger
    from repro.report import comparison, compare
    from repro.report.table import print_comparison

    record = copy.deepcopy(compare.newest_sweep(Ledger(shipped_ledger()), "quickstart")[0])
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    from repro.profile import sha256_file

    entry = {"name": trace.name, "sha256": sha256_file(trace)}
    store.keep(tmp_path / "ledger", [str(trace)], [entry])
    record["config"]["ledger"]["dir"] = str(tmp_path / "ledger")
    record["results"]["profile"] = {"step_ms": 10.0, "files": [entry], "categories_ms": {
        MATMUL: 6.0, ELEMENTWISE: 3.0, HOST: 1.0}}
    out = io.StringIO()
    print_comparison(Console(file=out, width=200), comparison.build([record]))
    line = out.getvalue().split("profile of ", 1)[1].split("machine: ")[0].replace("\n", "")  # wrapped at the width
    assert f"median profiled step 10 ms: {MATMUL} 6 ms (60%), {ELEMENTWISE} 3 ms (30%)" in line
    assert str(store.path_of(tmp_path / "ledger", entry)) in line


@pytest.mark.slow
def test_a_sharded_torch_run_profiles_each_rank_into_its_own_folder(sandbox):
    """`framework=torch sharding=dp run.profile=true`: every rank runs the profiled steps (their
    collectives need each other), rank 0's trace is the record's. All ranks once wrote one
    torch_trace.json in the run's folder, and torch's trace export died with SIGSEGV."""
    proc = sandbox.run("framework=torch", "sharding=dp", "model=mlp", "run.steps=6", "run.warmup=2",
                       "run.profile=true", "tracking.experiment=dp_prof")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (head,) = sandbox.heads()
    prof = head["results"]["profile"]
    assert head["status"] == "ok" and len(head["results"]["ranks"]) == 4
    assert sum(prof["categories_ms"].values()) == pytest.approx(prof["step_ms"], rel=1e-6)
    assert [p.name for p in store.paths(head)] == ["torch_trace.json.gz"]
