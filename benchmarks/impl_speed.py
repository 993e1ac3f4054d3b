"""Our models against the canonical ones: native vs transformers (model.impl=hf), per framework.

    .venv/bin/python benchmarks/impl_speed.py [--frameworks jax,torch] [--models vit,...]
        [--sizes tiny,small] [--pairs N] [--warmup 3] [--json PATH]

For each (size, model, framework) one fresh process builds BOTH workloads through the real
backend (`backend.build(BuildContext)`, exactly what a repro worker builds: same config apart
from model.impl, same seed, same NumPy batches, fp32, SGD 1e-3, the JAX step jitted with its
state donated, torch eager), runs `--warmup` steps of each (compile included), then times
`--pairs` pairs (default: 40 at tiny, 10 at small): one step of each, alternating which goes first (A B, B A, ...), every step
synchronised. Per pair the ratio native/hf; reported: the median ratio with its p10–p90 spread
over the pairs, and each side's median step.

Why in-process and step by step, not fresh workers per sample: on this shared 2-core machine the
speed drifts within seconds (other engineers' jobs), while a fresh worker costs seconds of import
and compile per sample. Adjacent steps of the two implementations see the same machine; the
ratio of neighbours cancels the drift that separate processes minutes apart would charge to
whichever ran later. Both sides share one process, so thread pools, allocator and process-wide
settings (matmul precision, thread counts, deterministic algorithms) are identical by
construction. Each framework runs in its own process (a JAX process never imports torch).

Sizes: `tiny` is every model's tiny preset; `small` is a CPU-sized step up (for ViT the issue's
measurement: image 64, patch 8, width 192, depth 6, 3 heads, MLP 768, 10 classes, batch 32:
2,721,226 parameters, as HF's ViTForImageClassification counts them). A benchmark, not a test:
it exits 0 whatever the ratios.
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

MODELS = ("vit", "resnet50", "bert_base", "gpt2_small", "gpt_neo_1_3b", "llama3_8b")
LM_SMALL = ["model.vocab=1024", "model.seq=64", "model.dim=128", "model.depth=4", "model.heads=4"]
SIZES = {
    "tiny": {m: ["model.preset=tiny"] for m in MODELS},
    "small": {
        "vit": ["model.image=64", "model.patch=8", "model.width=192", "model.depth=6", "model.heads=3",
                "model.mlp=768", "model.classes=10"],
        "resnet50": ["model.width=16"],
        "bert_base": [*LM_SMALL, "model.max_pos=64", "model.mlp=512"],
        "gpt2_small": [*LM_SMALL, "model.ctx=64"],
        "gpt_neo_1_3b": [*LM_SMALL, "model.ctx=64", "model.window=16"],
        "llama3_8b": [*LM_SMALL, "model.kv_heads=2", "model.hidden=344"],
    },
}


DEFAULT_PAIRS = {"tiny": 40, "small": 10}  # tiny steps are ~100x shorter: more pairs for the same spread


def overrides(framework: str, model: str, size: str, impl: str) -> list[str]:
    return [f"framework={framework}", f"model={model}", *SIZES[size][model], f"model.impl={impl}",
            "precision=fp32", "hardware=cpu", "run.batch_size=32", "run.optimizer=sgd", "run.lr=0.001"]


# ---------------------------------------------------------------- child: both workloads, interleaved

def child_main() -> None:
    spec = json.loads(sys.stdin.read())
    from _workload import build

    workloads = {impl: build(raw, spec["cache_dir"])[0] for impl, raw in spec["configs"].items()}
    clock, step = time.perf_counter, {impl: 0 for impl in workloads}

    def timed(impl: str) -> float:
        w = workloads[impl]
        t0 = clock()
        w.sync(w.step(step[impl]))
        step[impl] += 1
        return clock() - t0

    first = {impl: timed(impl) for impl in workloads}  # compile included
    for _ in range(spec["warmup"]):
        for impl in workloads:
            timed(impl)
    times = {impl: [] for impl in workloads}
    for pair in range(spec["pairs"]):
        order = ("native", "hf") if pair % 2 == 0 else ("hf", "native")
        for impl in order:
            times[impl].append(timed(impl))
    params = {impl: w.effective()["param_count"] for impl, w in workloads.items()}
    print(json.dumps({"times": times, "first": first, "params": params}))


# ---------------------------------------------------------------- parent

def measure(framework: str, model: str, size: str, pairs: int, warmup: int, cache_dir: str) -> dict:
    from repro import paths, preflight
    from repro.config.schema import as_dict
    from repro.worker.seeding import worker_env

    typed = {impl: preflight.plan(overrides(framework, model, size, impl)).jobs[0] for impl in ("native", "hf")}
    configs = {impl: as_dict(c) for impl, c in typed.items()}
    env = {**os.environ, **worker_env(typed["native"])}  # what a repro worker starts with
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(paths.src_dir()), os.environ.get("PYTHONPATH")]))
    spec = {"configs": configs, "pairs": pairs, "warmup": warmup, "cache_dir": cache_dir}
    proc = subprocess.run([sys.executable, __file__, "--child"], input=json.dumps(spec), env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    ratios = [n / h for n, h in zip(out["times"]["native"], out["times"]["hf"])]
    return {**out, "ratios": ratios, "ratio": statistics.median(ratios),
            "ratio_p10": _workload.quantile(ratios, 0.1), "ratio_p90": _workload.quantile(ratios, 0.9),
            "native_ms": 1e3 * statistics.median(out["times"]["native"]),
            "hf_ms": 1e3 * statistics.median(out["times"]["hf"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frameworks", default="jax,torch")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--pairs", type=int, default=None, help="pairs per row (default: 40 at tiny, 10 at small)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child_main()
    import tempfile

    rows = []
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    print(f"{'size':<6} {'model':<13} {'framework':<9} {'native ms':>10} {'hf ms':>10} {'native/hf':>9}  p10–p90 over pairs"
          f"   params (native = hf)")
    with tempfile.TemporaryDirectory() as cache_dir:
        for size in args.sizes.split(","):
            for model in args.models.split(","):
                for framework in args.frameworks.split(","):
                    pairs = args.pairs or DEFAULT_PAIRS[size]
                    r = measure(framework, model, size, pairs, args.warmup, cache_dir)
                    rows.append({"size": size, "model": model, "framework": framework, **r})
                    if "error" in r:
                        print(f"{size:<6} {model:<13} {framework:<9} failed: {r['error']}")
                        continue
                    print(f"{size:<6} {model:<13} {framework:<9} {r['native_ms']:>10.2f} {r['hf_ms']:>10.2f} "
                          f"{r['ratio']:>9.3f}  {r['ratio_p10']:.3f}–{r['ratio_p90']:.3f}"
                          f"   {r['params']['native']:,} {'=' if r['params']['native'] == r['params']['hf'] else '≠'}"
                          f" {r['params']['hf']:,}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; pairs per row "
          f"{args.pairs or DEFAULT_PAIRS}, warm-up {args.warmup} steps each; ratios < 1: ours faster")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
