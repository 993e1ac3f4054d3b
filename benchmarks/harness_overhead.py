"""What the repro harness costs: per step in the steady state, and once per run.

    .venv/bin/python benchmarks/harness_overhead.py [--steps N] [--warmup W] [--repeats R]
        [--models mlp,vit] [--frameworks jax,torch] [--json PATH] [--no-fixed] [--fixed-runs N]
        [--no-steady] [--sweep N]

1. Harness vs bare loop (steady state). For each (framework, model) — tiny preset, batch 32,
   fp32, CPU — the real CLI (`python -m repro ...`: Hydra parent, fresh worker process, a ledger
   of its own and a sqlite MLflow store in a temp folder) is run and `results.steady_median_s`
   read from its ledger record.
   Beside it a bare, hand-written loop runs in a fresh subprocess on the same model, the same
   NumPy batches (same seed), the same step (SGD 1e-3, JAX: one jitted train step over nnx-split
   state with the state donated; torch eager: zero_grad/forward/cross_entropy/backward/step)
   and the same synchronisation (JAX: `block_until_ready` on every step; torch CPU eager is
   synchronous), timed per step with perf_counter, median after the same warm-up. The bare
   loop reads nothing back between steps; the harness reads the loss after its clock stops.
   Like for like:
   - both processes start with `repro.worker.seeding.worker_env(config)` (thread variables,
     hash seed, JAX_PLATFORMS) and apply the same process-wide settings the config asks for
     (torch threads, deterministic algorithms, fp32 matmul precision), so only the harness
     differs, not the configuration;
   - harness and bare runs are interleaved, pair by pair, `--repeats` times (A B, B A, A B ...:
     each side goes first as often as the other) and the median over repeats is reported: on a
     shared 2-core machine the speed drifts over minutes (other processes, thermal state), and
     interleaving spreads that drift over both sides instead of charging it to whichever ran
     later;
   - the ratio harness/bare is held against 1.02 (PASS/FAIL, exit status 0 either way).
2. Fixed cost per run. One small job (jax mlp tiny, 10 steps) runs through the CLI, and each
   piece of the per-run work is timed apart, in fresh processes where a real run pays it cold:
   interpreter start, parent imports, config compose+check (`repro.config.plan`), git state,
   MLflow store open (fresh and existing), run create/log/artifacts/end, ledger appends, worker
   spawn + repro import, framework import and build (the worker's own `results.setup`),
   environment capture, and the steps themselves. The table sets their sum against the CLI's
   measured wall time and reports the fixed cost beyond framework import and compile:
   CLI wall − (steps, compile included) − framework import − build, each run's own, the median
   over `--fixed-runs` runs (default 5) on an existing store (one sample moved by ~0.1 s).
3. Per job inside a sweep (`--sweep N`, default 10): the fixed job swept over N seeds on an
   existing store, against what the framework itself needs for N fresh processes, each timed
   with nothing beside it: N × (import + build), the import and build of the single run of 2.,
   plus every job's steps: (sweep wall − N × (import + build) − Σ steps) / N. A sweep starts each
   job's worker (and its framework import) while the job before it starts, so the runs' own
   recorded imports and builds overlap and run slower beside each other: the figure is negative
   where the overlap hides more than repro adds. Printed beside it: the same against a bare loop
   over the N jobs in one process (one import, then each build and steps), which no fresh
   process per run can reach, and against the runs' own recorded import, build and steps.

Before/after on one machine (the issue 23 figures), back to back, load beside each. The script
measures whichever tree PYTHONPATH names, so this tree's script measures an older tree too:
    B=benchmarks/harness_overhead.py; A="--models mlp --repeats 3 --sweep 10"
    uptime; (cd $BEFORE && PYTHONPATH=$PWD/src .venv/bin/python $AFTER/$B $A --json before.json)
    uptime; PYTHONPATH=$PWD/src .venv/bin/python $B $A --json after.json

Child modes (used by the script itself): `--bare` (reads a JSON spec on stdin) and `--probe DIR`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
TARGET = 1.02
DEFAULT_STEPS = {"mlp": 200, "vit": 60}
FIXED_JOB = ["framework=jax", "model=mlp", "model.preset=tiny", "run.steps=10", "run.warmup=2"]


def _plan_fn():
    """The tree's config compose+check: `repro.preflight.plan` (today), `repro.config.plan` (older
    trees, which this script also measures)."""
    try:
        from repro.preflight import plan
    except ImportError:
        from repro.config import plan
    return plan


def plain(config) -> dict:
    """A planned config as a dict: trees with the typed config (schema.Config) and trees before it."""
    if isinstance(config, dict):
        return config
    from repro.config.schema import as_dict

    return as_dict(config)


def typed(config: dict):
    """The config as this tree's code reads it (schema.Config where the tree has one)."""
    try:
        from repro.config.schema import from_dict
    except ImportError:  # a tree before the typed config reads dicts
        return config
    return from_dict(config)


def dims_of(cfg) -> dict:
    """The model's dims as this tree computes them (config.schema.dims; older trees: models.dims_of)."""
    try:
        from repro.config.schema import dims
    except ImportError:
        from repro.models import dims_of as dims
    return dims(cfg.model if not isinstance(cfg, dict) else cfg["model"])


def overrides(framework: str, model: str, steps: int, warmup: int) -> list[str]:
    return [f"framework={framework}", f"model={model}", "model.preset=tiny", "precision=fp32",
            "hardware=cpu", "run.batch_size=32", f"run.steps={steps}", f"run.warmup={warmup}"]


# ---------------------------------------------------------------- child: the bare loop

def _bare_jax(entry, dims, batches, seeds, lr):
    import jax
    import optax
    from flax import nnx

    jax.config.update("jax_default_matmul_precision", "highest")  # what precision=fp32 sets
    model = entry.module("flax").build(dims, nnx.Rngs(seeds["jax"]))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    tx = optax.sgd(lr)

    def train_step(state, x, y):
        params, rest, opt_state = state

        def loss_fn(p):
            logits = nnx.merge(graphdef, p, rest)(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), rest, opt_state), loss

    fn = jax.jit(train_step, donate_argnums=(0,))
    data = [jax.device_put(b) for b in batches]
    state = [(params, rest, tx.init(params))]

    def step(i):
        x, y = data[i % len(data)]
        state[0], loss = fn(state[0], x, y)
        return loss

    return step, lambda loss: loss.block_until_ready()


def _bare_torch(entry, dims, batches, seeds, lr):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seeds["torch"])
    torch.set_num_threads(os.cpu_count())
    torch.use_deterministic_algorithms(True)  # run.deterministic=true
    torch.set_float32_matmul_precision("highest")  # precision=fp32
    model = entry.module("torch").build(dims).train()
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def tensors(x, y):
        tx = torch.from_numpy(x)
        tx = tx.permute(0, 3, 1, 2).contiguous() if entry.image_input else tx  # NHWC → NCHW
        return tx, torch.from_numpy(y).long()

    data = [tensors(*b) for b in batches]

    def step(i):
        x, y = data[i % len(data)]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step, lambda loss: None  # CPU eager: the step has finished when it returns


def bare_main() -> None:
    spec = json.loads(sys.stdin.read())
    config = spec["config"]
    from repro import models
    from repro.data import make_batches
    from repro.worker import seeding

    seeds = seeding.derive(config["run"]["seed"])
    entry = models.get(config["model"]["name"])
    assert entry.task == "classify", "the bare loops use a cross-entropy loss"
    cfg = typed(config)
    dims = dims_of(cfg)
    if hasattr(entry, "dims_of"):  # a tree whose zoo models take their dims as a frozen dataclass
        dims = entry.dims_of(dims)
    batches = make_batches(cfg, entry, dims, seeds["data"])[0]  # (batches, [eval set,] record)
    build = _bare_jax if config["framework"]["backend"] == "jax" else _bare_torch
    step, sync = build(entry, dims, batches, seeds, config["run"]["lr"])
    clock, times = time.perf_counter, []
    for i in range(config["run"]["steps"]):
        t0 = clock()
        sync(step(i))
        times.append(clock() - t0)
    print(json.dumps({"steady_median_s": statistics.median(times[config["run"]["warmup"]:]),
                      "first_step_s": times[0]}))  # first: compile included, as in the harness


# ---------------------------------------------------------------- child: per-run costs, cold

def flatten(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        out.update(flatten(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
    return out


def probe_main(folder: str) -> None:
    """Time the parent's and the worker's per-run work in this fresh process; print JSON."""
    folder = Path(folder)
    out, clock = {}, time.perf_counter

    def timed(name, fn):
        t0 = clock()
        value = fn()
        out[name] = clock() - t0
        return value

    timed("import_config", lambda: __import__("repro.preflight.checks"))
    from repro import paths
    plan = _plan_fn()

    config = plain(timed("plan_cold", lambda: plan(FIXED_JOB).jobs[0]))
    timed("plan_warm", lambda: plan(FIXED_JOB))
    from repro import gitinfo
    from repro.worker import envcapture

    timed("git_state", lambda: gitinfo.state(paths.repo_root(), Path(config["ledger"]["dir"])))
    if hasattr(gitinfo, "source_sha256"):  # the session's hash of repro's own source files
        timed("source_sha256", lambda: gitinfo.source_sha256(paths.src_dir() / "repro"))
    timed("envcapture", lambda: envcapture.capture({}))
    timed("import_mlflow", lambda: __import__("repro.tracking.mlflow_tracker"))
    from repro.ledger import Ledger
    from repro.tracking.mlflow_tracker import Tracker

    tracker = timed("mlflow_open", lambda: Tracker(f"sqlite:///{folder / 'mlflow.db'}", "bench"))
    run_id = timed("mlflow_create", lambda: tracker.start_run("probe", tags={"repro.status": "started"}))
    timed("mlflow_params", lambda: tracker.log(run_id, params=flatten(config)))
    record = {"kind": "run", "status": "ok", "config": config, "results": {"loss": [2.3] * 10}}

    def finish():
        tracker.log(run_id, tags={"repro.status": "ok"}, metrics={f"m{i}": 1.0 for i in range(25)},
                    series={"loss": [2.3] * 10, "step_time_s": [1e-3] * 10})
        tracker.log_text(run_id, "config.yaml", json.dumps(config))
        tracker.log_json(run_id, "ledger_record.json", record)
        tracker.log_json(run_id, "environment.json", {"x": 1})
        tracker.end(run_id, "ok")

    timed("mlflow_finish", finish)
    ledger = Ledger(folder / "ledger")
    timed("ledger_append", lambda: ledger.append(record))
    print(json.dumps(out))


# ---------------------------------------------------------------- parent side

def _run(cmd: list[str], **kw) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return proc, time.perf_counter() - t0


def _check(proc: subprocess.CompletedProcess, what: str) -> None:
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def newest_ok(ledger: Path) -> dict:
    records = [json.loads(p.read_text()) for p in ledger.glob("*/*.json")]
    ok = [r for r in records if r.get("status") == "ok"]
    if not ok:
        raise RuntimeError(f"no ok record in {ledger}")
    return max(ok, key=lambda r: r["created"])


def run_cli(args: list[str], work: Path, tag: str) -> tuple[dict, float]:
    """The real CLI against an isolated ledger and the work folder's sqlite store."""
    ledger = work / f"ledger-{tag}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{work / 'mlflow.db'}"}
    began = time.time()
    proc, wall = _run([PY, "-m", "repro", *args, f"ledger.dir={ledger}", "progress.mode=none"],
                      cwd=work, env=env)  # cwd: Hydra's outputs/ land in the work folder
    _check(proc, f"repro {' '.join(args)}")
    SPANS.append((began, began + wall, ledger))
    BACKGROUND.append(wait_for_background())
    return newest_ok(ledger), wall


SPANS: list[tuple[float, float, Path]] = []  # each CLI command's start and end (wall clock) and its ledger


def _epoch(created: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()


def where_it_lies(record: dict, span: tuple[float, float, Path]) -> dict:
    """A single run's fixed cost placed by its records' own stamps (ms resolution): the parent before
    the run's `started` record, between it and the end record less the worker's wall (the worker's
    start until its go, the end record made), after the end record (the closing table, the sweep's
    close, the exit); the worker's parts beside its import, build and steps (job/wall_split.py), the
    canary's share of `setup` (job/canary.py)."""
    began, ended, ledger = span
    started = next((r for r in map(lambda q: json.loads(q.read_text()), ledger.glob("*/*.json"))
                    if r.get("id") == record.get("prev")), None)
    parts = (record.get("wall_split") or {}).get("parts") or {}
    out = {}
    if started:
        out["parent, to the started record (compose+check, session)"] = _epoch(started["created"]) - began
        out["parent, started to end record, beyond the worker's wall"] = \
            _epoch(record["created"]) - _epoch(started["created"]) - record["wall_s"]
    out["parent, after the end record (table, close, exit)"] = ended - _epoch(record["created"])
    canary = (record.get("canary") or {}).get("wall_s")
    for name in ("data", "setup", "results", "handover"):
        if name in parts:
            out[f"worker {name}"] = parts[name]
        if name == "setup" and canary is not None:
            out["worker   of which the canary"] = canary
    return out


def projector_tree() -> bool:
    """Whether the measured tree hands MLflow to a background projector (issue 23 onwards)."""
    import importlib.util

    return importlib.util.find_spec("repro.tracking.handoff") is not None


BACKGROUND: list[float] = []  # seconds each command's MLflow projector went on after it returned


def wait_for_background() -> float:
    """Wait for the MLflow projector a command left at work (trees since issue 23), so that it
    runs beside nothing this script measures next; how long it went on after the command."""
    try:
        from repro.tracking import handoff
    except ImportError:  # an older tree: MLflow was written before the command returned
        return 0.0
    t0 = time.perf_counter()
    try:
        handoff.wait_for_projectors(600, lambda _line: None)  # today's: a bound, and what it would say
    except TypeError:  # trees before the bound
        handoff.wait_for_projectors()
    return time.perf_counter() - t0


def child_env(config: dict) -> dict[str, str]:  # config: a dict (plain)
    """The environment a repro worker starts with (repro.job.launch.run_worker)."""
    from repro import paths
    from repro.worker.seeding import worker_env

    env = {**os.environ, **worker_env(typed(config))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(paths.src_dir()), os.environ.get("PYTHONPATH")]))
    return env


def run_bare(config: dict) -> dict:
    proc, _ = _run([PY, __file__, "--bare"], input=json.dumps({"config": config}), env=child_env(config))
    _check(proc, f"bare loop {config['framework']['name']} {config['model']['name']}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def steady_state(frameworks, model_names, steps_arg, warmup, repeats, work, log) -> list[dict]:
    plan = _plan_fn()

    pairs = [(f, m, steps_arg or DEFAULT_STEPS.get(m, 100)) for m in model_names for f in frameworks]
    runs = {(f, m): {"harness": [], "bare": [], "harness_first": [], "bare_first": []} for f, m, _ in pairs}
    configs = {(f, m): plain(plan(overrides(f, m, steps, warmup)).jobs[0]) for f, m, steps in pairs}
    for r in range(repeats):
        for f, m, steps in pairs:
            # A B, then B A: each side runs first as often as the other (a linear drift cancels).
            for side in ("harness", "bare") if r % 2 == 0 else ("bare", "harness"):
                if side == "harness":
                    results = run_cli(overrides(f, m, steps, warmup), work, f"{f}-{m}-{r}")[0]["results"]
                else:
                    bare_out = run_bare(configs[(f, m)])
            harness, bare = results["steady_median_s"], bare_out["steady_median_s"]
            for key, value in (("harness", harness), ("bare", bare), ("harness_first", results["first_step_s"]),
                               ("bare_first", bare_out["first_step_s"])):
                runs[(f, m)][key].append(value)
            log(f"repeat {r + 1}/{repeats} {f:5} {m:4}: harness {harness * 1e3:8.3f} ms  "
                f"bare {bare * 1e3:8.3f} ms  ratio {harness / bare:.3f}")
    rows = []
    for f, m, steps in pairs:
        h, b = runs[(f, m)]["harness"], runs[(f, m)]["bare"]
        ratio = statistics.median(h) / statistics.median(b)
        rows.append({"framework": f, "model": m, "preset": "tiny", "steps": steps, "warmup": warmup,
                     "harness_s": h, "bare_s": b, "harness_median_s": statistics.median(h),
                     "bare_median_s": statistics.median(b), "ratio": ratio,
                     "pair_ratios": [x / y for x, y in zip(h, b)], "pass": ratio <= TARGET,
                     "harness_first_step_s": runs[(f, m)]["harness_first"],
                     "bare_first_step_s": runs[(f, m)]["bare_first"]})
    return rows


def _median_wall(cmd: list[str], env: dict, n: int = 3) -> float:
    walls = []
    for _ in range(n):
        proc, wall = _run(cmd, env=env)
        _check(proc, " ".join(cmd))
        walls.append(wall)
    return statistics.median(walls)


def _worker_start(env: dict) -> float:
    """A worker's Python start and repro's worker import, as the tree starts one: where a worker
    started ahead imports its framework's packages first (worker/worker_main.py), the interpreter's
    start plus what repro's import takes after them (timed inside one process, median of 5); else
    the wall of `import repro.worker.worker` alone."""
    try:
        from repro.backends.capabilities import BACKENDS
        import repro.worker.worker_main  # noqa: F401 - the tree starts its workers framework first
        packages = ", ".join(BACKENDS["jax"].packages)
    except (ImportError, AttributeError):
        return _median_wall([PY, "-c", "import repro.worker.worker"], env)
    timed = (f"import time; import {packages}; t = time.perf_counter(); import repro.worker.worker; "
             "print(time.perf_counter() - t)")
    after = []
    for _ in range(5):
        proc, _ = _run([PY, "-c", timed], env=env)
        _check(proc, "worker import")
        after.append(float(proc.stdout.strip().splitlines()[-1]))
    return _median_wall([PY, "-c", "pass"], env) + statistics.median(after)


def _beyond_framework(wall: float, record: dict) -> float:
    """A single run's fixed cost: its CLI wall − its steps (compile included) − framework import − build."""
    res = record["results"]
    steps_sum = res["first_step_s"] + res["second_step_s"] + res["steady_mean_s"] * res["steady_steps"]
    return wall - steps_sum - res["setup"]["import_s"] - res["setup"]["build_s"]


def fixed_cost(work: Path, runs: int = 5) -> dict:
    """Each per-run piece, timed apart; and the small CLI job it adds up to, run `runs` times on an
    existing store (after one that creates it): the run with the median fixed cost is broken down."""
    plan = _plan_fn()

    config = plain(plan(FIXED_JOB).jobs[0])
    env = child_env(config)
    store = work / "probe"
    store.mkdir()
    probes = []
    for _ in range(2):  # the first creates the MLflow store, the second opens it as it exists
        proc, _ = _run([PY, __file__, "--probe", str(store)], env=env)
        _check(proc, "probe")
        probes.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    probe = probes[1]
    python_start = _median_wall([PY, "-c", "pass"], env)
    worker_import = _worker_start(env)
    walls, records = [], []
    job_dir = work / "fixed-job"
    job_dir.mkdir()
    for i in range(1 + runs):  # the first creates the MLflow store
        record, wall = run_cli(FIXED_JOB, job_dir, f"fixed-{i}")
        walls.append(wall)
        records.append(record)
    beyond = [_beyond_framework(w, r) for w, r in zip(walls[1:], records[1:])]
    median_at = 1 + sorted(range(runs), key=beyond.__getitem__)[(runs - 1) // 2]
    rec = records[median_at]
    res = rec["results"]
    steps_sum = res["first_step_s"] + res["second_step_s"] + res["steady_mean_s"] * res["steady_steps"]
    compile_s = sum(v for k, v in res["compile"].items() if k in ("trace_lower_s", "compile_s"))
    wall, worker_wall = walls[median_at], rec["wall_s"]
    parent = [
        ("interpreter start (python -c pass)", python_start),
        ("import the preflight (repro.preflight.checks)", probe["import_config"]),
        ("config compose+check (plan, first in its process)", probe["plan_cold"]),
        ("git state (rev-parse, status, diff)", probe["git_state"]),
        ("hash of repro's source (session code id)", probe.get("source_sha256", 0.0)),
        ("import MLflow", probe["import_mlflow"]),
        ("MLflow store open, existing store (imports SQLAlchemy)", probe["mlflow_open"]),
        ("MLflow run create + params", probe["mlflow_create"] + probe["mlflow_params"]),
        ("ledger append ×2 (started, finished)", 2 * probe["ledger_append"]),
        ("MLflow metrics + series + 3 artifacts + end", probe["mlflow_finish"]),
    ]
    if projector_tree():  # MLflow is written by the projector after the command returns: not in its wall
        parent = [(f"background: {name}" if "MLflow" in name else name, v) for name, v in parent]
    worker = [
        ("spawn + Python start + repro's worker import", worker_import),
        ("framework import (setup.import_s)", res["setup"]["import_s"]),
        ("model build (setup.build_s)", res["setup"]["build_s"]),
        ("environment capture", probe["envcapture"]),
        (f"{rec['config']['run']['steps']} steps (incl. compile {compile_s * 1e3:.0f} ms)", steps_sum),
    ]
    # What the pieces leave of the measured walls: parent = CLI wall - worker wall.
    parent.append(("other: the session, the worker until its go, the closing table, exit",
                   wall - worker_wall - sum(v for name, v in parent if not name.startswith("background:"))))
    worker.append(("other: data, hashes, results, exit", worker_wall - sum(v for _, v in worker)))
    return {
        "job": FIXED_JOB,
        "parent": dict(parent),
        "worker": dict(worker),
        "cli_wall_s": wall,
        "cli_wall_fresh_store_s": walls[0],
        "background_after_return_s": BACKGROUND[-1] if BACKGROUND else 0.0,
        "worker_wall_s": worker_wall,
        "steps_sum_s": steps_sum,
        "compile_s": compile_s,
        "framework_import_s": res["setup"]["import_s"],
        "build_s": res["setup"]["build_s"],
        "fixed_beyond_framework_s": beyond[median_at - 1],
        "where_it_lies": where_it_lies(rec, SPANS[-1 - runs + median_at]),
        "fixed_beyond_framework_runs_s": beyond,
        "plan_warm_s": probe["plan_warm"],
        "mlflow_open_fresh_store_s": probes[0]["mlflow_open"],
        "probe_fresh_store": probes[0],
        "probe_existing_store": probes[1],
    }


def sweep_cost(work: Path, jobs: int, alone: dict | None = None) -> dict:
    """A `jobs`-job sweep of the fixed job (seeds 0..jobs-1) on an existing store: what the
    harness adds per job, beyond a bare in-process loop over the same jobs (one framework import,
    each job's build and steps; `alone`: the import and build of the single run, timed with
    nothing beside them; None: the sweep's own medians) and beyond each run's own recorded costs."""
    folder = work / "sweep-job"
    folder.mkdir()
    run_cli(FIXED_JOB, folder, "warm-store")  # the store exists, as in the single-run row
    ledger = folder / f"ledger-sweep{jobs}"
    seeds = ",".join(str(i) for i in range(jobs))
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}"}
    proc, wall = _run([PY, "-m", "repro", "-m", *FIXED_JOB, f"run.seed={seeds}", f"ledger.dir={ledger}",
                       "progress.mode=none"], cwd=folder, env=env)
    _check(proc, f"{jobs}-job sweep")
    background = wait_for_background()
    runs = [json.loads(p.read_text()) for p in ledger.glob("*/*.json")]
    runs = [r for r in runs if r.get("kind") == "run" and r.get("status") == "ok"]
    if len(runs) != jobs:
        raise RuntimeError(f"the {jobs}-job sweep recorded {len(runs)} ok runs")
    steps = [r["results"]["first_step_s"] + r["results"]["second_step_s"]
             + r["results"]["steady_mean_s"] * r["results"]["steady_steps"] for r in runs]
    imports, builds = ([r["results"]["setup"][k] for r in runs] for k in ("import_s", "build_s"))
    own = sum(imports) + sum(builds) + sum(steps)
    import_alone = alone["framework_import_s"] if alone else statistics.median(imports)
    build_alone = alone["build_s"] if alone else statistics.median(builds)
    bare_loop = import_alone + jobs * build_alone + sum(steps)
    fresh = jobs * (import_alone + build_alone) + sum(steps)
    workers = sum(r["wall_s"] for r in runs)
    return {"jobs": jobs, "wall_s": wall, "workers_wall_s": workers, "runs_own_s": own,
            "background_after_return_s": background, "bare_loop_s": bare_loop, "fresh_processes_s": fresh,
            "per_job_beyond_fresh_s": (wall - fresh) / jobs,
            "import_alone_s": import_alone, "build_alone_s": build_alone,
            "import_median_s": statistics.median(imports), "build_median_s": statistics.median(builds),
            "imported_ahead": sum(bool(r["results"]["setup"].get("imported_ahead")) for r in runs),
            "per_job_beyond_bare_loop_s": (wall - bare_loop) / jobs,
            "per_job_beyond_run_s": (wall - own) / jobs, "per_job_parent_s": (wall - workers) / jobs}


# ---------------------------------------------------------------- report

def print_report(console, rows, fixed, load, sweep=None) -> None:
    from rich.table import Table

    if rows:
        t = Table(title=f"Harness vs bare loop · steady-state median step (ms) · target ratio ≤ {TARGET}")
        for col in ("framework", "model", "steps/warmup", "harness", "bare", "ratio", "per-repeat ratios", "verdict"):
            t.add_column(col, justify="left" if col in ("framework", "model", "per-repeat ratios") else "right")
        for r in rows:
            t.add_row(r["framework"], f"{r['model']}/tiny", f"{r['steps']}/{r['warmup']}",
                      f"{r['harness_median_s'] * 1e3:.3f}", f"{r['bare_median_s'] * 1e3:.3f}", f"{r['ratio']:.3f}",
                      " ".join(f"{x:.3f}" for x in r["pair_ratios"]),
                      "[green]PASS[/]" if r["pass"] else "[red]FAIL[/]")
        console.print(t)
    if fixed:
        ms = lambda v: f"{v * 1e3:.1f}"  # noqa: E731
        t = Table(title=f"Fixed cost of one run · {' '.join(fixed['job'])} (ms)")
        t.add_column("component")
        t.add_column("ms", justify="right")
        for side, wall in (("parent", fixed["cli_wall_s"] - fixed["worker_wall_s"]), ("worker", fixed["worker_wall_s"])):
            for name, v in fixed[side].items():
                t.add_row(f"{side}: {name}", ms(v))
            t.add_row(f"[bold]{side} total (background rows not included)[/]" if side == "parent" else
                      f"[bold]{side} total[/]", f"[bold]{ms(wall)}[/]")
            t.add_section()
        t.add_row("[bold]CLI wall time (existing store)[/]", f"[bold]{ms(fixed['cli_wall_s'])}[/]")
        t.add_row("CLI wall time (fresh store)", ms(fixed["cli_wall_fresh_store_s"]))
        t.add_row("MLflow store open, fresh store (creates the tables)", ms(fixed["mlflow_open_fresh_store_s"]))
        t.add_row("config compose+check (plan, warm, in-process)", ms(fixed["plan_warm_s"]))
        t.add_section()
        runs_ = fixed.get("fixed_beyond_framework_runs_s") or [fixed["fixed_beyond_framework_s"]]
        t.add_row(f"[bold]fixed cost beyond framework import and compile[/] (median of {len(runs_)}: "
                  f"{ms(min(runs_))}–{ms(max(runs_))})", f"[bold]{ms(fixed['fixed_beyond_framework_s'])}[/]")
        t.add_row("  = CLI wall − steps (compile incl.) − framework import − build, the median run's", "")
        for name, v in (fixed.get("where_it_lies") or {}).items():
            t.add_row(f"  where: {name}", ms(v))
        if fixed.get("background_after_return_s"):
            t.add_row("MLflow projector after the command returned (background, not in the wall)",
                      ms(fixed["background_after_return_s"]))
        console.print(t)
    if sweep:
        t = Table(title=f"A {sweep['jobs']}-job sweep of the same job, existing store (s) · target ≤ 0.1 s per job (a single run: ≤ 0.3 s)")
        t.add_column("piece")
        t.add_column("s", justify="right")
        sw = sweep
        for label, value in (
            ("sweep CLI wall time", f"{sw['wall_s']:.2f}"),
            ("the framework's own need: N fresh processes, N × (import + build, alone) + Σ steps",
             f"{sw['fresh_processes_s']:.2f}"),
            ("[bold]per job beyond the framework's own need[/] (< 0: overlap hides more than repro adds)",
             f"[bold]{sw['per_job_beyond_fresh_s']:.3f}[/]"),
            ("a bare loop over the jobs in one process: one import + N × build (alone) + Σ steps", f"{sw['bare_loop_s']:.2f}"),
            ("per job beyond the bare loop", f"{sw['per_job_beyond_bare_loop_s']:.3f}"),
            ("Σ workers' wall (spec handed or spawn, to exit)", f"{sw['workers_wall_s']:.2f}"),
            (f"Σ runs' own recorded cost (import + build + steps; {sw['imported_ahead']} of {sw['jobs']} imported ahead)",
             f"{sw['runs_own_s']:.2f}"),
            ("per job beyond its run's own recorded cost (< 0: overlap hides more than repro adds)",
             f"{sw['per_job_beyond_run_s']:.3f}"),
            ("framework import: alone / median in the sweep", f"{sw['import_alone_s']:.3f} / {sw['import_median_s']:.3f}"),
            ("build: alone / median in the sweep", f"{sw['build_alone_s']:.3f} / {sw['build_median_s']:.3f}"),
            ("per job in the parent (wall − Σ workers) / jobs", f"{sw['per_job_parent_s']:.3f}"),
            ("MLflow projector after the command returned (background)", f"{sw['background_after_return_s']:.2f}"),
        ):
            t.add_row(label, value)
        console.print(t)
    console.print(f"load average (1 min) before {load[0]:.2f}, after {load[1]:.2f}; "
                  f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=None, help="steps per run (default: mlp 200, vit 60)")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--models", default="mlp,vit")
    p.add_argument("--frameworks", default="jax,torch")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--no-fixed", action="store_true", help="skip the fixed-cost breakdown")
    p.add_argument("--no-steady", action="store_true", help="skip the harness-vs-bare steady state")
    p.add_argument("--fixed-runs", type=int, default=5, metavar="N",
                   help="single runs whose fixed cost is measured, after one that creates the store (median; default 5)")
    p.add_argument("--sweep", type=int, default=10, metavar="N",
                   help="jobs of the sweep whose per-job cost is measured (0: none; default 10)")
    args = p.parse_args()

    from rich.console import Console

    console = Console() if Console().is_terminal else Console(width=130)
    load0 = os.getloadavg()[0]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="repro-bench-") as tmp:
        work = Path(tmp)
        rows = [] if args.no_steady else steady_state(args.frameworks.split(","), args.models.split(","), args.steps,
                                                      args.warmup, args.repeats, work,
                                                      lambda s: console.print(s, highlight=False))
        fixed = None if args.no_fixed else fixed_cost(work, args.fixed_runs)
        sweep = sweep_cost(work, args.sweep, fixed) if args.sweep else None
    load = (load0, os.getloadavg()[0])
    print_report(console, rows, fixed, load, sweep)
    console.print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"target_ratio": TARGET, "steady_state": rows, "fixed_cost": fixed, "sweep": sweep,
                                         "load_avg_1min": load, "cpus": os.cpu_count(),
                                         "total_s": time.perf_counter() - started}, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--bare"]:
        bare_main()
    elif sys.argv[1:2] == ["--probe"]:
        probe_main(sys.argv[2])
    else:
        main()
