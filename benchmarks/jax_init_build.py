"""The JAX build of a model: its seconds, what XLA compiled in it, and where.

    .venv/bin/python benchmarks/jax_init_build.py [--models vit] [--preset b16] [--impls hf,native]
        [--inits native,shared] [--repeats 1] [--hlo] [--json PATH]

Each row is one fresh process that does what a repro worker does before its steps: imports the
JAX backend, makes the batches, then `backend.build(BuildContext)` (timed: the record's
`setup.build_s`, the wall split's `build` part). Beside it, from `results.compile.build`: the XLA
compiles the build made (count and seconds, XLA's own clock) and, where the tree records it, the
device each ran on, and the initial parameters' hash (canonical layout: the same start gives the
same hash). Config: `framework=jax model=vit model.preset=b16 run.batch_size=2 precision=fp32
hardware=cpu` (`--hardware h200`: on a GPU host, the GPU as the run's device), `model.impl` and
`run.init` as the row says. The script measures the tree PYTHONPATH names (set it to an older
checkout's `src` to measure that tree).

`--hlo` adds what the initialiser gives XLA to compile, for each impl, without running it: the
StableHLO of the jitted `run.init=native` build lowered for `cpu` and for `cuda` (`jax.export`
lowers for a platform this machine lacks), its operations once every call is inlined (what the
backend compiler sees: XLA inlines them), and its threefry2x32 call sites. On `cuda` JAX lowers
each threefry as 20 unrolled rounds (`jax_threefry_gpu_kernel_lowering` is off by default), on
`cpu` as a rolled loop. A benchmark, not a test: it exits 0 whatever it finds.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter

import _workload  # noqa: F401  benchmarks/_workload.py: this script's folder is on sys.path when it runs


def overrides(model: str, preset: str, impl: str, init: str, hardware: str = "cpu") -> list[str]:
    return ["framework=jax", f"model={model}", f"model.preset={preset}", f"model.impl={impl}",
            f"run.init={init}", "run.batch_size=2", "precision=fp32", f"hardware={hardware}"]


# ---------------------------------------------------------------- child: one build, as the worker does it

def child_main() -> None:
    spec = json.loads(sys.stdin.read())
    from repro import backends, models
    from repro.backends.base import BuildContext
    from repro.config import schema
    from repro.data import make_batches
    from repro.worker import seeding

    backend = backends.load("jax")  # the worker's import_s, outside the build
    config = schema.from_dict(spec["config"])
    seeds = seeding.derive(config.run.seed)
    entry = models.entry_of(config.model)
    dims = entry.dims_of(schema.dims(config.model))  # as worker/worker.py hands them
    batches = make_batches(config, entry, dims, seeds["data"])[0]
    ctx = BuildContext(config=config, entry=entry, dims=dims, seeds=seeds, batches=batches,
                       threads=seeding.resolve_threads(config.run.threads), cache_dir=spec["cache_dir"])
    t0 = time.perf_counter()
    workload = backend.build(ctx)
    build_s = time.perf_counter() - t0
    print(json.dumps({"build_s": build_s, "compile": workload.compile_info().get("build", {}),
                      "init_sha256": workload.init_params_sha256()}))


def measure(raw: dict, env: dict, cache_dir: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child"], input=json.dumps({"config": raw, "cache_dir": cache_dir}),
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def where(build: dict) -> str:
    """The devices the build's compiles ran on (a tree that records them), else '?'."""
    compiled = build.get("compiled")
    if compiled is None:
        return "?"
    return ", ".join(f"{n}× {d}" for d, n in Counter(c["device"] for c in compiled).items()) or "-"


# ---------------------------------------------------------------- --hlo: what the initialiser gives XLA

def init_module(model: str, preset: str, impl: str, platform: str) -> str:
    """The StableHLO text of the jitted run.init=native build of `impl`, lowered for `platform`."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from repro import models, preflight
    from repro.config import schema
    from repro.models import hf
    from repro.worker import seeding

    config = preflight.plan(overrides(model, preset, impl, "native")).jobs[0]
    entry, seeds = models.entry_of(config.model), seeding.derive(config.run.seed)
    dims = entry.dims_of(schema.dims(config.model))
    build = hf.build_fn(entry, impl, "flax")
    init = jax.jit(lambda: nnx.state(build(dims, nnx.Rngs(seeds["jax"]), dtype=jnp.float32, param_dtype=jnp.float32)))
    return jax.export.export(init, platforms=[platform])().mlir_module()


def inlined(text: str) -> dict:
    """Operations of `main` with every call inlined, and the call sites of each threefry function."""
    funcs, cur = {}, None
    for line in text.splitlines():
        if m := re.match(r"\s*func\.func (?:public |private )?@(\w+)", line):
            cur = funcs.setdefault(m.group(1), {"ops": 0, "calls": Counter()})
            continue
        if cur is not None:
            cur["calls"].update(re.findall(r"call @(\w+)", line))
            cur["ops"] += len(re.findall(r"stablehlo\.\w+", line))

    @functools.lru_cache(None)
    def size(f: str) -> int:
        return funcs[f]["ops"] + sum(n * size(c) for c, n in funcs[f]["calls"].items())

    @functools.lru_cache(None)
    def sites(f: str) -> int:
        return sum(n * (1 if c.startswith("threefry2x32") else sites(c)) for c, n in funcs[f]["calls"].items())

    return {"chars": len(text), "ops_inlined": size("main"), "threefry_sites": sites("main"),
            "unrolled": "while" not in text}


def hlo_table(model: str, preset: str, impls: list[str]) -> list[dict]:
    print(f"\nWhat the run.init=native initialiser gives XLA ({model} {preset}), lowered for each platform:")
    print(f"{'impl':<8} {'platform':<8} {'StableHLO chars':>15} {'ops, calls inlined':>18} {'threefry sites':>14}  threefry")
    rows = []
    for impl in impls:
        for platform in ("cpu", "cuda"):
            r = {"impl": impl, "platform": platform, **inlined(init_module(model, preset, impl, platform))}
            rows.append(r)
            print(f"{impl:<8} {platform:<8} {r['chars']:>15,} {r['ops_inlined']:>18,} {r['threefry_sites']:>14}  "
                  f"{'20 rounds unrolled' if r['unrolled'] else 'rolled loop'}", flush=True)
    return rows


# ---------------------------------------------------------------- parent

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="vit")
    ap.add_argument("--preset", default="b16")
    ap.add_argument("--impls", default="hf,native")
    ap.add_argument("--inits", default="native,shared")
    ap.add_argument("--repeats", type=int, default=1, help="fresh processes per row (the median is shown)")
    ap.add_argument("--hardware", default="cpu", help="the hardware profile (h200: the run's device is the GPU)")
    ap.add_argument("--hlo", action="store_true", help="also the initialiser's StableHLO per platform")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child_main()
    import tempfile

    from repro import paths, preflight
    from repro.config.schema import as_dict
    from repro.worker.seeding import worker_env

    rows = []
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    print(f"{'model':<6} {'impl':<7} {'run.init':<8} {'build s':>8} {'compiles':>8} {'compile s':>9} "
          f"{'trace+lower s':>13} {'init sha256':>12}  where they ran")
    with tempfile.TemporaryDirectory() as cache_dir:
        for model in args.models.split(","):
            for init in args.inits.split(","):
                for impl in args.impls.split(","):
                    config = preflight.plan(overrides(model, args.preset, impl, init, args.hardware)).jobs[0]
                    env = {**os.environ, **worker_env(config)}  # what a repro worker starts with
                    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(paths.src_dir()), os.environ.get("PYTHONPATH")]))
                    runs = [measure(as_dict(config), env, cache_dir) for _ in range(args.repeats)]
                    if errors := [r["error"] for r in runs if "error" in r]:
                        print(f"{model:<6} {impl:<7} {init:<8} failed: {errors[0]}")
                        continue
                    build = runs[-1]["compile"]
                    row = {"model": model, "preset": args.preset, "impl": impl, "init": init,
                           "build_s": [r["build_s"] for r in runs], "compile": [r["compile"] for r in runs],
                           "init_sha256": sorted({r["init_sha256"] for r in runs if r["init_sha256"]})}
                    rows.append(row)
                    print(f"{model:<6} {impl:<7} {init:<8} {statistics.median(row['build_s']):>8.2f} "
                          f"{build.get('compiles', 0):>8} {statistics.median(r['compile'].get('compile_s', 0) for r in runs):>9.2f} "
                          f"{statistics.median(r['compile'].get('trace_s', 0) + r['compile'].get('lower_s', 0) for r in runs):>13.2f}"
                          f" {','.join(h[:12] for h in row['init_sha256']) or '-':>12}  {where(build)}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.repeats} fresh process(es) "
          f"per row, medians; PYTHONPATH tree: {paths.src_dir()}")
    hlo = hlo_table(args.models.split(",")[0], args.preset, args.impls.split(",")) if args.hlo else []
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"builds": rows, "hlo": hlo}, f, indent=1)


if __name__ == "__main__":
    main()
