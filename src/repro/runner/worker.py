"""The worker: one fresh process per run. `python -m repro.runner.worker SPEC.json`.

It seeds everything, imports one framework, builds the workload, measures it and streams
events to the parent. It never imports MLflow or Hydra, and it writes nothing but events
and the IR files the parent asked for.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from repro import backends, models
from repro.backends.base import BuildContext, is_oom, requested_bytes
from repro.data import make_batches
from repro.ir import histograms
from repro.runner import envcapture, measure, seeding
from repro.runner.events import EventWriter

TRACEBACK_LINES = 30


def _flops(config: dict, entry, dims: dict, median_s: float) -> dict:
    batch = config["run"]["batch_size"]
    per_step = entry.train_flops(dims, batch) if config["run"]["task"] == "train" else batch * entry.flops_per_example(dims)
    out = {"flops_per_step": per_step, "achieved_tflops": per_step / median_s / 1e12}
    peak = config["hardware"]["peak_tflops"].get(config["precision"]["name"])
    if peak:
        out["mfu"] = out["achieved_tflops"] / peak
    return out


def execute(spec: dict, emit) -> dict:
    """The measured pipeline of one process; returns its "environment" and "result" payloads."""
    config = spec["config"]
    run_cfg = config["run"]
    seeds = seeding.derive(run_cfg["seed"])
    seeding.seed_python_numpy(seeds)
    entry = models.get(config["model"]["name"])
    dims = {k: v for k, v in config["model"].items() if k not in ("name", "preset")}
    batches, eval_set, data_record = make_batches(config, entry, dims, seeds["data"])

    t0 = time.perf_counter()
    backend = backends.load(config["framework"]["backend"])
    t1 = time.perf_counter()
    threads = seeding.resolve_threads(run_cfg["threads"])
    if distributed(config):  # ranks on one host share its cores (oversubscribed OpenMP threads spin)
        from repro.backends.torch_distributed import world_size

        threads = max(1, threads // world_size(config))
    ctx = BuildContext(config=config, entry=entry, dims=dims, seeds=seeds, batches=batches,
                       threads=threads, cache_dir=spec["cache_dir"])
    workload = backend.build(ctx)
    t2 = time.perf_counter()
    environment = {"environment": envcapture.capture(workload.framework_info()), "seeds": seeds, "data": data_record}
    emit("environment", **environment)

    times, losses = measure.timed_loop(workload, run_cfg["steps"], emit)

    results = measure.summarise(times, losses, run_cfg["warmup"], run_cfg["batch_size"])
    results["params_sha256"] = workload.params_sha256()
    results["peak_memory"] = workload.peak_memory()
    results["compile"] = workload.compile_info()
    results["setup"] = {"import_s": t1 - t0, "build_s": t2 - t1}
    results["param_count"] = entry.param_count(dims)
    if sharding := workload.sharding_info():
        results["sharding"] = sharding
    if eval_set is not None:
        results["test_accuracy"] = workload.evaluate(*eval_set)
    results.update(_flops(config, entry, dims, results["steady_median_s"]))
    ir_texts = workload.ir()
    if ir_texts:
        results["ir_ops"] = histograms(ir_texts)
    ir_files = []
    for name, text in ir_texts.items():
        path = Path(spec["out_dir"]) / name
        path.write_text(text)
        ir_files.append(str(path))
    result = {"results": results, "series": {"loss": losses, "step_time_s": times},
              "effective": workload.effective(), "ir_files": ir_files}
    return {"environment": environment, "result": result}


def distributed(config: dict) -> bool:
    return config["sharding"]["name"] != "none" and config["framework"]["backend"] == "torch"


def rank_main(spec: dict) -> dict:
    """One rank of a sharded torch run (started by torch's elastic launcher)."""
    from repro.backends import torch_distributed

    torch_distributed.init(spec["config"])
    try:
        return execute(spec, lambda *args, **kwargs: None)
    finally:
        import torch.distributed as dist

        dist.destroy_process_group()


def _rank_summary(rank: int, out: dict) -> dict:
    res, env = out["result"]["results"], out["environment"]["environment"]
    return {"rank": rank, "fingerprint": env["fingerprint"], "steady_median_s": res["steady_median_s"],
            "first_step_s": res["first_step_s"], "second_step_s": res["second_step_s"],
            "param_bytes_per_device": (res.get("sharding") or {}).get("param_bytes_per_device"),
            "peak_memory": res["peak_memory"]}


def run(spec: dict, events: EventWriter) -> None:
    if distributed(spec["config"]):
        from repro.backends import torch_distributed

        ranks = torch_distributed.launch(spec, rank_main)
        out = ranks[0]
        out["result"]["results"]["ranks"] = [_rank_summary(r, ranks[r]) for r in sorted(ranks)]
        events.emit("environment", **out["environment"])
    else:
        out = execute(spec, events.emit)
    events.emit("result", **out["result"])


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    events = EventWriter.from_env()
    events.emit("hello", pid=os.getpid())
    try:
        run(spec, events)
    except BaseException as e:  # noqa: BLE001 - every failure becomes a recorded result
        tb = traceback.format_exc().splitlines()[-TRACEBACK_LINES:]
        oom = is_oom(e)
        events.emit("error", status="oom" if oom else "failed", type=type(e).__name__,
                    message=envcapture.redact(str(e))[:2000], requested_bytes=requested_bytes(str(e)) if oom else None,
                    traceback=[envcapture.redact(line) for line in tb])
        sys.exit(1)


if __name__ == "__main__":
    main()
