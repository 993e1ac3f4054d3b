"""The worker: one fresh process per run. `python -m repro.worker.worker_main SPEC.json` (worker/worker_main.py).

It reads its spec once, as a `WorkerSpec` (config/workerspec.py: the typed config, the rendezvous,
its folders), and hands that object on, to its ranks and JAX processes too.

It seeds everything, imports one framework, builds the workload, measures it and streams
events to the parent. It never imports MLflow or Hydra, and it writes nothing but events
and the IR files the parent asked for.
"""

from __future__ import annotations

import os
import shutil
import socket
import dataclasses
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from repro import backends, models
from repro.backends import capabilities, compile_cache
from repro.backends.capabilities import PER_NODE, PER_RANK
from repro.backends.base import BuildContext, is_oom, requested_bytes
from repro.backends.layouts import process_count
from repro.config import schema
from repro.config.schema import Config
from repro.config.workerspec import WorkerSpec
from repro.data import make_batches
from repro.worker import envcapture, flops, lifeline, machine, measure, pinning, rank_progress, seeding
from repro.blocks import typed
from repro.worker.events import EVENTS_FD_ENV, EXIT, READY_LINE, EnvironmentPayload, EventWriter, Gate, ResultPayload, Series, Setup
from repro.worker.window import SERIES_STEPS, StepPlan, adaptive, shared_count

TRACEBACK_LINES = 30
IMPORTED_AHEAD: dict[str, float] = {}  # a worker started ahead (--warm BACKEND): backend -> its import's seconds
WAITED_AHEAD: list[float] = []  # a worker started ahead: the seconds it waited, ready, for its spec


@dataclass(frozen=True)
class Output:
    """One process's measured run: its "environment" and "result" payloads (rank 0's are the record's)."""

    environment: EnvironmentPayload
    result: ResultPayload

    def with_ranks(self, ranks: list) -> "Output":
        """Rank 0's output with every rank's summary in its results (`results.ranks`)."""
        return dataclasses.replace(self, result=dataclasses.replace(self.result,
                                                                    results={**self.result.results, "ranks": ranks}))


@dataclass(frozen=True)
class _RankFigures:
    """What a rank's summary reads of its `results`."""

    steady_median_s: float | None = None
    first_step_s: float | None = None
    second_step_s: float | None = None
    peak_memory: dict | None = None
    sharding: dict | None = None  # a sharded run's layout: param_bytes_per_device, ...


@dataclass(frozen=True)
class _Fingerprinted:
    fingerprint: str | None = None


@dataclass(frozen=True)
class _Layout:
    param_bytes_per_device: int | None = None


def execute(spec: WorkerSpec, emit, gate: Gate | None = None, rank: int = 0, run_root: int | None = None) -> Output:
    """The measured pipeline of one process (`rank` of a run of several: 0 is the one recorded;
    `run_root`: then the worker that launched them, whose tree is the run's own processes);
    returns its "environment" and "result" payloads. Before the measured steps it waits at `gate`
    (the parent's tracking work is done by then) and says when they start and end, so that the
    parent runs nothing beside them."""
    config = spec.config
    run_cfg = config.run
    parent_pid = lifeline.parent_pid() if gate else None
    early = machine.early(parent_pid, run_root)  # a short loop's CPU-share window starts here (worker/machine.py)
    # The framework first: NumPy, which repro's worker modules import only where they use it, is
    # then imported by the framework (JAX and torch import it), inside `import_s`, as it would be
    # in a bare script; nothing of the run has drawn a number before it.
    t0 = time.perf_counter()
    backend = backends.load(config.framework.backend)
    t1 = time.perf_counter()
    import_s = IMPORTED_AHEAD.get(config.framework.backend, t1 - t0)
    seeds = seeding.derive(run_cfg.seed)
    seeding.seed_python_numpy(seeds)
    entry = models.entry_of(config.model)
    dims = entry.dims_of(schema.dims(config.model))  # as the model's methods take them (a zoo model's dataclass)
    t_data = time.perf_counter()
    batches, eval_set, data_record = make_batches(config, entry, dims, seeds["data"])
    t_built = time.perf_counter()
    threads = seeding.resolve_threads(run_cfg.threads)
    if parallel(spec) == PER_RANK:  # ranks on one host share its cores (oversubscribed OpenMP threads spin)
        threads = max(1, threads // local_processes(spec))
    ctx = BuildContext(config=config, entry=entry, dims=dims, seeds=seeds, batches=batches,
                       threads=threads, cache_dir=spec.cache_dir)
    cache_state = compile_cache.start(config.framework.backend, spec.cache_dir)  # before anything compiles
    workload = backend.build(ctx)
    if spec.injected_gap:  # repro calibrate --gap: a known extra share of each measured step
        from repro.worker.injected import WithGap

        workload = WithGap(workload, spec.injected_gap, run_cfg.warmup)
    t2 = time.perf_counter()
    environment = EnvironmentPayload(envcapture.capture(workload.framework_info()), seeds, data_record)
    emit("environment", **environment.payload())

    if gate:
        gate.wait()
    # the process canary: after the parent's side is done and before the window opens (job/canary.py)
    emit("canary", **(canary_block := canary_of(config, threads, local_processes(spec) if run_root else 1)))
    emit("measure_start", at=time.time())  # wall clock: comparable with the parent's
    # The machine's state is read outside the timed region; its window goes on while this process
    # reads its results (machine.MIN_WINDOW_S at least: a shorter loop's began at `early`).
    state = machine.before(parent_pid, early, run_root)
    times, losses = measure.timed_loop(workload, StepPlan.of(run_cfg, spec.steps), emit)
    emit("measure_end", at=time.time())
    t_end = time.perf_counter()

    summary = measure.summarise(times, losses, run_cfg.warmup, run_cfg.batch_size)
    # Read in this order (the peak memory before the evaluation, the settings after the IR): one block, built once.
    results = {**summary, "params_sha256": workload.params_sha256(), "init_params_sha256": workload.init_params_sha256(),
               "peak_memory": workload.peak_memory(), "compile": workload.compile_info(),
               "compile_cache": {"mode": run_cfg.compile_cache, "state": cache_state,
                                 **compile_cache.counts(config.framework.backend)},
               **({"injected_gap": workload.record()} if spec.injected_gap else {}),
               "setup": None,  # its place in the block: measured last (below)
               "param_count": entry.param_count(dims) or workload.effective().get("param_count")}
    if sharding := workload.sharding_info():
        results = {**results, "sharding": sharding}
    if eval_set is not None:
        results = {**results, "test_accuracy": workload.evaluate(*eval_set)}
    results = {**results, **flops.per_step(config, entry, dims, workload, summary["steady_median_s"])}
    ir_texts = workload.ir()
    if ir_texts:
        from repro.ir import histograms  # only where IR was captured: it imports the ledger and report

        results = {**results, "ir_ops": histograms(ir_texts)}
    ir_files = []
    for name, text in ir_texts.items():
        path = Path(spec.out_dir) / name
        path.write_text(text, encoding="utf-8")
        ir_files.append(str(path))
    effective = workload.effective()
    machine_state = machine.after(state, threads, local_processes(spec) if run_root else 1)
    setup = Setup(import_s=import_s, build_s=t2 - t_built, data_s=t_built - t_data,
                  imported_ahead=config.framework.backend in IMPORTED_AHEAD,
                  waited_ahead_s=WAITED_AHEAD[0] if WAITED_AHEAD else None, forked_by=lifeline.forked_by(),
                  results_s=time.perf_counter() - t_end)  # hashes, evaluation, FLOPs, IR, settings
    emit("window_end", at=time.time())  # this machine's projectors may write again
    profile_files = []
    if run_cfg.profile:  # after everything above is read: the profiled steps change the state
        from repro import profile

        t_profile = time.perf_counter()
        profiled, profile_files = profile.run(workload, len(times), _profile_dir(spec.out_dir, rank))
        setup = dataclasses.replace(setup, profile_s=time.perf_counter() - t_profile)
        results = {**results, "profile": profiled}
    # the record keeps the first SERIES_STEPS steps (worker/window.py); every statistic is of all
    result = ResultPayload({**results, "setup": setup.as_dict()}, Series(losses[:SERIES_STEPS], times[:SERIES_STEPS]),
                           effective, ir_files, profile_files, machine_state, canary_block)
    return Output(environment, result)


def canary_of(config: Config, threads: int, processes: int) -> dict:
    """The record's `canary` as the worker measures it (backends/canary.py); job/canary.py judges it.
    `processes`: the run's processes on this host, each running its own canary at the same time.
    A canary that cannot run costs the run nothing but its reason."""
    block = {"seconds": None, "framework": config.framework.backend, "threads": threads, "processes": processes}
    if not config.verdict.canary:
        return {**block, "slow": None, "reason": "verdict.canary=false: no canary ran"}
    from repro.backends import canary

    t0 = time.perf_counter()
    try:
        measured = canary.run(config.framework.backend)
        return {**measured, "threads": threads, "processes": processes, "wall_s": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - the run goes on without it
        return {**block, "slow": None, "reason": f"the canary failed: {type(e).__name__}: {envcapture.redact(str(e))[:300]}"}


def _profile_dir(out_dir: str, rank: int) -> str:
    """Where a process's profiler writes: the run's folder for rank 0 (its trace is the record's),
    a folder of its own for every other rank. The ranks share the run's folder, and two profilers
    writing one torch_trace.json crashed torch's (Kineto's) trace export with SIGSEGV."""
    if rank == 0:
        return out_dir
    path = Path(out_dir) / f"rank{rank}"
    path.mkdir(exist_ok=True)
    return str(path)


def parallel(spec: WorkerSpec) -> str | None:
    """How the run's processes start, from its backend's `processes` capability: PER_RANK (torch's
    elastic launcher, one process per rank), PER_NODE (jax.distributed processes, worker/processes.py)
    or None (all in this process)."""
    config, rdzv = spec.config, spec.rendezvous
    processes = capabilities.of(config.framework.backend).processes
    if processes == PER_RANK and config.sharding.name != "none":
        return PER_RANK
    if processes == PER_NODE and process_count(config, rdzv.nodes, rdzv.jax_processes) > 1:
        return PER_NODE
    return None


def local_processes(spec: WorkerSpec) -> int:
    rdzv = spec.rendezvous
    return process_count(spec.config, rdzv.nodes, rdzv.jax_processes) // rdzv.nodes


def _rank_summary(rank: int, out: Output, node: int) -> dict:
    res = typed(_RankFigures, out.result.results)
    return {"rank": rank, "node": node, "host": socket.gethostname(),
            "fingerprint": typed(_Fingerprinted, out.environment.environment).fingerprint,
            **({"slurm_node": name} if (name := os.environ.get("SLURMD_NODENAME")) else {}),  # a node's SLURM name
            "steady_median_s": res.steady_median_s, "first_step_s": res.first_step_s,
            "second_step_s": res.second_step_s,
            "param_bytes_per_device": (typed(_Layout, res.sharding) or _Layout()).param_bytes_per_device,
            "peak_memory": res.peak_memory}


def torch_rank_main(spec: WorkerSpec) -> Output:
    """One rank of a sharded torch run (started by torch's elastic launcher)."""
    import torch.distributed as dist

    from repro.backends import torch_distributed

    torch_distributed.init(spec.config)
    try:
        rank = dist.get_rank()
        out = execute(spec, rank_progress.emitter(spec, rank == 0), rank=rank, run_root=os.getppid())
        ranks = [None] * dist.get_world_size()  # every node's ranks, so that rank 0 records them all
        dist.all_gather_object(ranks, _rank_summary(rank, out, spec.rendezvous.node_rank))
        return out.with_ranks(ranks)
    finally:
        dist.destroy_process_group()


def jax_process_main(spec: WorkerSpec, local_index: int, joined) -> Output:
    """One process of a multi-process JAX run (started by repro.worker.processes)."""
    from repro.backends import jax_distributed

    rdzv = spec.rendezvous
    jax_distributed.init(spec.config, rdzv, local_index)
    joined()
    rank = jax_distributed.process_id(rdzv, local_index)
    out = execute(spec, rank_progress.emitter(spec, rank == 0), rank=rank, run_root=os.getppid())
    summary = _rank_summary(rank, out, rdzv.node_rank)
    return out.with_ranks(jax_distributed.allgather_json(summary))


def _launch(spec: WorkerSpec) -> dict[int, Output]:
    """{global rank: its output} for this node's processes of a parallel run."""
    if parallel(spec) == PER_RANK:
        from repro.backends import torch_distributed

        return torch_distributed.launch(spec, torch_rank_main, local_processes(spec))
    from repro.backends.jax_distributed import process_id
    from repro.worker import processes
    from repro.config.workerspec import JOIN_HINT

    rdzv = spec.rendezvous
    total = rdzv.nodes * rdzv.jax_processes
    local = processes.launch(jax_process_main, spec, local_processes(spec),
                             lambda i: f"jax process {process_id(rdzv, i)} (node {rdzv.node_rank})",
                             f"before all {total} processes joined at {rdzv.endpoint} within "
                             f"cluster.join_timeout_s={rdzv.join_timeout_s:g} ({JOIN_HINT})")
    return {process_id(rdzv, i): out for i, out in local.items()}


def check_code_origin() -> None:
    """A worker told to run a sweep's snapshot (the first folder of its PYTHONPATH, inside
    REPRO_SNAPSHOT) runs it or nothing: where that folder is gone, Python imports repro from wherever
    else it is installed (the checkout), code the run's record would not name."""
    snap = os.environ.get("REPRO_SNAPSHOT")
    given = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    if not snap or not given or not Path(given).resolve().is_relative_to(Path(snap).resolve()):
        return
    here = Path(__file__).resolve().parents[2]  # the folder repro was imported from
    if here != Path(given).resolve():
        raise RuntimeError(f"the sweep's code snapshot {given} is missing: this worker imported repro from {here} "
                           "instead, code its record would not name; nothing was run (run the sweep again)")


def run(spec: WorkerSpec, events: EventWriter, gate: Gate) -> None:
    check_code_origin()
    if parallel(spec) is None:
        out = execute(spec, events.emit, gate)
    else:
        gate.wait()  # ranks measure in their own processes: the parent's work is done before they start
        if spec.steps is None and adaptive(spec.config.run.steps):  # ranks must agree on their count unasked
            spec = dataclasses.replace(spec, steps=shared_count(spec.config.run))
        relay = rank_progress.Relay(spec.out_dir, events.emit) if spec.rendezvous.node_rank == 0 else None
        if relay:  # global rank 0 runs on node 0: its step lines reach the parent's progress
            spec = dataclasses.replace(spec, progress_fifo=relay.start())
        try:
            ranks = _launch(spec)
        finally:
            if relay:
                relay.stop()
        if 0 not in ranks:  # a node other than node 0: its ranks ran; node 0 records the run
            events.emit("result", follower=True, ranks=sorted(ranks))
            return
        out = ranks[0]
        events.emit("environment", **out.environment.payload())
    events.emit("result", **out.result.payload())


def _spec_path(framework_first_s: float | None = None) -> str:
    """The spec path: the last argument. A worker started ahead of its job (`--warm BACKEND
    [PACKAGE ...] SPEC`, see launch.warm_start; worker/worker_main.py imported the PACKAGEs in
    `framework_first_s`) first imports the backend, says so and waits for the line its parent
    writes on stdin once the job is due (read unbuffered: the lifeline reads the same pipe for EOF
    afterwards); EOF first: the job never came (its parent ended), and its run folder is removed."""
    spec = sys.argv[-1]
    if sys.argv[1] != "--warm":
        return spec
    lifeline.die_with_parent(str(Path(spec).parent), watch_stdin=False)  # its parent gone while it waits: its folder too
    if len(sys.argv) > 3:  # the job's backend, imported while the job before it starts
        name = sys.argv[2]
        t0 = time.perf_counter()
        try:
            backends.load(name)
            IMPORTED_AHEAD[name] = (framework_first_s or 0.0) + time.perf_counter() - t0
        except Exception:  # noqa: BLE001 - the job's own import raises it again, as a recorded error
            pass
    try:
        os.write(int(os.environ[EVENTS_FD_ENV]), READY_LINE)  # the parent opens the running job's gate after this
    except OSError:  # its parent is gone (the pipe has no reader)
        _end_unused(spec)
    ready = time.perf_counter()
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(0, 1)
        if not chunk:
            _end_unused(spec)
        line += chunk
    WAITED_AHEAD.append(time.perf_counter() - ready)
    return spec


def _end_unused(spec: str) -> None:
    """A worker started ahead whose parent went before its job came: its run folder goes with it."""
    shutil.rmtree(Path(spec).parent, ignore_errors=True)
    exit_now(0)


def main(framework_first_s: float | None = None) -> None:
    """The worker (worker/worker_main.py starts it: `framework_first_s`, the seconds a worker started
    ahead took to import its framework's own packages before this module)."""
    pinning.pin_worker()  # before a framework's thread pools exist (a worker started ahead imports one next)
    spec = WorkerSpec.read(_spec_path(framework_first_s))
    lifeline.die_with_parent(spec.out_dir)
    events = EventWriter.from_env()
    gate = Gate.from_env()
    events.emit("hello", pid=os.getpid())
    try:
        run(spec, events, gate)
    except BaseException as e:  # noqa: BLE001 - every failure becomes a recorded result
        tb = traceback.format_exc().splitlines()[-TRACEBACK_LINES:]
        tb += getattr(e, "traceback_tail", "").splitlines()  # a failed process's own traceback
        oom = is_oom(e)
        events.emit("error", status="oom" if oom else "failed", type=type(e).__name__,
                    message=envcapture.redact(str(e))[:2000], requested_bytes=requested_bytes(str(e)) if oom else None,
                    traceback=[envcapture.redact(line) for line in tb])
        exit_now(1, events)
    exit_now(0, events)


def exit_now(code: int, events: EventWriter | None = None) -> None:
    """End without the interpreter's teardown: the result is already with the parent, and tearing
    down a framework (XLA's and torch's atexit hooks, module cleanup) took 0.4-0.9 s. Nothing is
    left to write: every event was flushed when emitted and the IR files are closed; compile helpers
    this process forked are killed with its process group by the parent (job/launch.py).
    `events`: the parent is told the exit code last (EXIT), so that it goes on while the kernel
    frees this process's memory (28 ms for a JAX worker on the 2-core reference machine) and
    waits for that only before its next worker starts or it ends itself (launch.settle)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if events is not None:
        try:
            events.emit(EXIT, code=code)
        except OSError:  # the parent is gone: nothing reads it
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
