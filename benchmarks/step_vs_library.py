"""repro's step against the bare library, side by side in one process: GEMM, an attention block, the ViT.

    .venv/bin/python benchmarks/step_vs_library.py [--frameworks jax,torch] [--workloads gemm,attention,vit]
        [--pairs N] [--warmup W] [--json PATH]

For each (workload, framework) one fresh process, started with the environment a repro worker
gets (`seeding.worker_env`: threads, hash seed, XLA flags), builds:
- **repro**: the workload exactly as a repro worker builds it (`backend.build(BuildContext)` from
  the composed config), stepped through its `step` and `sync`;
- **bare**: the same computation written against the library alone, on the same NumPy batches:
  - `gemm` (`model=gemm model.preset=large run.task=forward run.batch_size=2048`: 68.7 GFLOP a
    step): `op` is the library's matmul alone (`jax.jit(jnp.dot)`, `torch.mm`); `step` is the
    matmul and the same mean-squared-error loss, jitted by hand (JAX) or under `no_grad` (torch);
  - `attention` (forward, [8, 256, 512], 8 heads): the library's own multi-head attention
    (`flax.nnx.MultiHeadAttention`, `torch.nn.MultiheadAttention`) and the same loss;
  - `vit` (train, SGD 1e-3, batch 32, image 64, patch 8, width 192, depth 6, 3 heads, MLP 768):
    the zoo's own module in a hand-written train step (JAX: `value_and_grad` + optax, state
    donated, jitted; torch: zero_grad, forward, cross-entropy, backward, step).
Both run in the one process, so thread pools, allocator and process-wide settings (matmul
precision, deterministic algorithms) are identical by construction. After `--warmup` steps of
each (compile included) it times `--pairs` pairs, one step of each, alternating which goes first
(A B, B A, ...): the ratio of neighbours cancels the drift of a shared machine. Printed per row:
each side's median step and the median of the per-pair ratio bare/repro (1.00: repro as fast as
the library; below 1: repro slower), with its p10–p90 over the pairs. A benchmark, not a test: it
exits 0 whatever the ratios (speed targets live here, never in timed unit tests).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import _workload  # benchmarks/_workload.py: this script's folder is on sys.path when it runs

WORKLOADS = {
    "gemm": ["model=gemm", "model.preset=large", "run.task=forward", "run.batch_size=2048"],
    "attention": ["model=mha", "model.dim=512", "model.heads=8", "model.seq=256", "run.task=forward",
                  "run.batch_size=8"],
    "vit": ["model=vit", "model.image=64", "model.patch=8", "model.width=192", "model.depth=6", "model.heads=3",
            "model.mlp=768", "model.classes=10", "run.batch_size=32"],
}
COMMON = ["precision=fp32", "hardware=cpu", "run.optimizer=sgd", "run.lr=0.001"]
DEFAULT_PAIRS = {"gemm": 12, "attention": 20, "vit": 20}


# ---------------------------------------------------------------- child: bare JAX

def _jax_bare(workload: str, entry, dims, batches, seeds, lr) -> dict:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    data = [tuple(jax.device_put(a) for a in b) for b in batches]
    if workload == "gemm":
        w = jax.device_put(jax.random.normal(jax.random.key(seeds["jax"]), (dims.d_out, dims.d_in)) * 0.02)
        dot = jax.jit(lambda x, w: jnp.dot(x, w.T))
        loss = jax.jit(lambda x, y, w: jnp.mean((jnp.dot(x, w.T) - y) ** 2))
        return {"op": lambda i: dot(data[i % len(data)][0], w).block_until_ready(),
                "step": lambda i: loss(*data[i % len(data)], w).block_until_ready()}
    if workload == "attention":
        mha = nnx.MultiHeadAttention(num_heads=dims.heads, in_features=dims.dim, decode=False,
                                     rngs=nnx.Rngs(seeds["jax"]))
        graphdef, state = nnx.split(mha)
        fwd = jax.jit(lambda s, x, y: jnp.mean((nnx.merge(graphdef, s)(x) - y) ** 2))
        return {"library MHA": lambda i: fwd(state, *data[i % len(data)]).block_until_ready()}
    from harness_overhead import _bare_jax  # the same module in a hand-written, donated train step

    step, sync = _bare_jax(entry, dims, batches, seeds, lr)
    return {"hand-written step": lambda i: sync(step(i))}


# ---------------------------------------------------------------- child: bare torch

def _torch_bare(workload: str, entry, dims, batches, seeds, lr) -> dict:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seeds["torch"])
    if workload == "gemm":
        data = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
        w = torch.randn(dims.d_out, dims.d_in) * 0.02

        def op(i):
            with torch.no_grad():
                return torch.mm(data[i % len(data)][0], w.t())

        def mse(i):
            x, y = data[i % len(data)]
            with torch.no_grad():
                return F.mse_loss(torch.mm(x, w.t()), y)

        return {"op": op, "step": mse}
    if workload == "attention":
        data = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
        mha = torch.nn.MultiheadAttention(dims.dim, dims.heads, batch_first=True)

        def fwd(i):
            x, y = data[i % len(data)]
            with torch.no_grad():
                return F.mse_loss(mha(x, x, x, need_weights=False)[0], y)

        return {"library MHA": fwd}
    from harness_overhead import _bare_torch  # the hand-written train step, shared

    step, sync = _bare_torch(entry, dims, batches, seeds, lr)
    return {"hand-written step": lambda i: sync(step(i))}


def child_main() -> None:
    spec = json.loads(sys.stdin.read())
    # repro's workload first: it sets what the config asks (matmul precision, threads) process-wide
    work, config, entry, dims, batches, seeds = _workload.build(spec["config"], spec["cache_dir"])

    def repro_step(i):
        work.sync(work.step(i))

    bare = (_jax_bare if config.framework.backend == "jax" else _torch_bare)(
        spec["workload"], entry, dims, batches, seeds, config.run.lr)
    sides = {"repro": repro_step, **bare}
    clock, n = time.perf_counter, {k: 0 for k in sides}

    def timed(name: str) -> float:
        t0 = clock()
        sides[name](n[name])
        n[name] += 1
        return clock() - t0

    for _ in range(spec["warmup"]):  # compile included
        for name in sides:
            timed(name)
    times = {name: [] for name in sides}
    for pair in range(spec["pairs"]):
        for name in (list(sides) if pair % 2 == 0 else list(sides)[::-1]):
            times[name].append(timed(name))
    passes = 3 if config.run.task == "train" else 1  # a train step taken as 3 forward passes
    print(json.dumps({"times": times, "flops": passes * config.run.batch_size * entry.flops_per_example(dims)}))


# ---------------------------------------------------------------- parent

def measure(framework: str, workload: str, pairs: int, warmup: int, cache_dir: str) -> dict:
    from repro import paths, preflight
    from repro.config.schema import as_dict
    from repro.worker.seeding import worker_env

    config = preflight.plan([f"framework={framework}", *WORKLOADS[workload], *COMMON]).jobs[0]
    env = {**os.environ, **worker_env(config)}  # what a repro worker starts with
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(paths.src_dir()), os.environ.get("PYTHONPATH")]))
    spec = {"config": as_dict(config), "workload": workload, "pairs": pairs, "warmup": warmup, "cache_dir": cache_dir}
    proc = subprocess.run([sys.executable, __file__, "--child"], input=json.dumps(spec), env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    repro = out["times"]["repro"]
    rows = {}
    for name, ts in out["times"].items():
        if name == "repro":
            continue
        ratios = [b / r for b, r in zip(ts, repro)]  # bare / repro: 1.00 is repro at the library's speed
        rows[name] = {"bare_ms": 1e3 * statistics.median(ts), "ratio": statistics.median(ratios),
                      "p10": _workload.quantile(ratios, 0.1), "p90": _workload.quantile(ratios, 0.9)}
    return {"repro_ms": 1e3 * statistics.median(repro), "flops": out["flops"], "bare": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frameworks", default="jax,torch")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--pairs", type=int, default=None, help=f"pairs per row (default {DEFAULT_PAIRS})")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child_main()
    import tempfile

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit or '?'}; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} cores)")
    print(f"{'workload':<10} {'framework':<9} {'repro ms':>9} {'GFLOP/s':>8}  {'bare':<18} {'bare ms':>8} "
          f"{'bare/repro':>10}  p10–p90")
    rows = []
    with tempfile.TemporaryDirectory() as cache_dir:
        for workload in args.workloads.split(","):
            for framework in args.frameworks.split(","):
                r = measure(framework, workload, args.pairs or DEFAULT_PAIRS[workload], args.warmup, cache_dir)
                rows.append({"workload": workload, "framework": framework, **r})
                if "error" in r:
                    print(f"{workload:<10} {framework:<9} failed: {r['error']}")
                    continue
                rate = r["flops"] / (r["repro_ms"] / 1e3) / 1e9
                for name, b in r["bare"].items():
                    print(f"{workload:<10} {framework:<9} {r['repro_ms']:>9.2f} {rate:>8.1f}  {name:<18} "
                          f"{b['bare_ms']:>8.2f} {b['ratio']:>10.3f}  {b['p10']:.3f}–{b['p90']:.3f}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; bare/repro ≥ 1.00: repro's "
          "step as fast as the library's; below: slower")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
