"""A command's timeline as its parent sees it: when each job and worker starts and ends, each
worker event (hello, environment, measure_start/end, result) and each worker started ahead.

    .venv/bin/python benchmarks/sweep_timeline.py -m framework=jax model=mlp model.preset=tiny \
        run.steps=10 run.seed=0,1,2,3 progress.mode=none

Runs `repro ARGS` in this process with the parent's functions wrapped (monkeypatched: a probe
for reading, not a code path of repro's) and prints `TL <seconds since start> <what>` lines on
stderr; step events are left out.
"""

from __future__ import annotations

import sys
import time

T0 = time.perf_counter()


def log(what: str) -> None:
    print(f"TL {time.perf_counter() - T0:7.3f} {what}", file=sys.stderr, flush=True)


def wrap(module, name: str, before=None) -> None:
    original = getattr(module, name)

    def wrapped(*args, **kwargs):
        log(f"{name} enter" + (f" {before(*args, **kwargs)}" if before else ""))
        try:
            return original(*args, **kwargs)
        finally:
            log(f"{name} exit")

    setattr(module, name, wrapped)


def main() -> None:
    from repro import cli
    from repro.job import job, launch

    run_worker = launch.run_worker

    def traced_run_worker(spec_path, log_path, python, env, timeout_s, on_event, *args, **kwargs):
        def on(ev: dict) -> None:
            if ev["event"] != "step":
                log(f"event {ev['event']}")
            on_event(ev)

        warm = kwargs.get("warm", args[2] if len(args) > 2 else None)  # after src, beside_start
        log(f"run_worker enter (started ahead: {warm is not None})")
        try:
            return run_worker(spec_path, log_path, python, env, timeout_s, on, *args, **kwargs)
        finally:
            log("run_worker exit")

    launch.run_worker = traced_run_worker
    wrap(job, "run_job")
    wrap(launch, "warm_start")
    sys.argv = ["repro", *sys.argv[1:]]
    log("main")
    cli.main()


if __name__ == "__main__":
    main()
