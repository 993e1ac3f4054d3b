"""Where a job's wall goes: the worker's wall (`wall_s`) split into its parts, in the parent.

The worker stamps every event with the wall clock (worker/events.py) and times what it does
between them (`results.setup`: data, framework import, build, results); the parent knows when it
started the worker and when the worker ended. Each part is one of those:

    start        worker start and imports: the interpreter, repro, the framework (a worker started
                 ahead imported it before the job: then only its share after the hand-off)
    data         the batches (NumPy, from the data seed or the DVC dataset)
    build        model build and weight placement (initial parameters, optimizer state, batches on the device);
                 for JAX, `build` beside the parts says how much of it XLA spent tracing and compiling,
                 and each compile (`compiled`: what it was for, its seconds, the device it ran on)
    setup        the rest before the measured steps: environment capture, waiting for the parent's
                 side (MLflow's, and the next job's worker getting ready: job/warm.py)
    first_step   the first step: trace, compile, execute (`first_step_s`, as the closing table's "first")
    steady       every step after the first
    results      hashes, evaluation, FLOPs, IR, settings read back (and run.profile's steps)
    handover     the result to the parent and the worker's exit

A part whose stamps never came (a worker that failed or was killed) is missing; the wall the
parts do not cover is `rest_s`, and where it exceeds REST_SHARE of the wall, `rest` says where it
lies: between which two things the worker last said and the end. How the parts read to a person
is the read side's (ledger/render.py `WALL_PARTS`).
"""

from __future__ import annotations

REST_SHARE = 0.10


def _at(events: dict, kind: str) -> float | None:
    return (events.get(kind) or {}).get("at")


def split(events: dict, started_at: float | None, wall_s: float) -> dict | None:
    """{"parts": {part: seconds}, "first_step": its trace/compile/execute, "measured_s", "rest_s",
    "rest"?} from a worker's last event of each kind; None for a worker that never started."""
    hello = _at(events, "hello")
    if started_at is None or hello is None:
        return None
    res = ((events.get("result") or {}).get("results")) or {}
    setup = res.get("setup") or {}
    env_at, start_at, end_at, result_at = (_at(events, k) for k in ("environment", "measure_start", "measure_end", "result"))
    parts: dict[str, float] = {}
    import_s = 0.0 if setup.get("imported_ahead") else setup.get("import_s", 0.0)
    parts["start"] = hello - started_at + import_s
    if setup:
        parts["data"] = setup.get("data_s", 0.0)
        parts["build"] = setup.get("build_s", 0.0)
    if env_at is not None and start_at is not None:
        before = env_at - hello - (import_s + parts.get("data", 0.0) + parts.get("build", 0.0)) if setup else 0.0
        parts["setup"] = max(0.0, before) + (start_at - env_at)
    if start_at is not None and end_at is not None and "first_step_s" in res:
        parts["first_step"] = res["first_step_s"]
        parts["steady"] = max(0.0, end_at - start_at - res["first_step_s"])
    if result_at is not None and end_at is not None:
        parts["results"] = max(0.0, result_at - end_at - setup.get("profile_s", 0.0))
        if "profile_s" in setup:
            parts["profile"] = setup["profile_s"]
        parts["handover"] = max(0.0, started_at + wall_s - result_at)
    parts = {k: round(max(0.0, v), 4) for k, v in parts.items()}
    measured = sum(parts.values())
    out = {"parts": parts, "measured_s": round(measured, 4), "rest_s": round(wall_s - measured, 4)}
    if start_at is not None and end_at is not None:  # the measured steps on the host's clock (epoch s): what
        out["window"] = [round(start_at, 3), round(end_at, 3)]  # another run's steps must not overlap
    compile_info = res.get("compile") or {}
    if "first_step" in parts and "compile_s" in compile_info:
        trace, comp = compile_info.get("trace_lower_s", 0.0), compile_info["compile_s"]
        out["first_step"] = {"trace_lower_s": round(trace, 4), "compile_s": round(comp, 4),
                             "execute_s": round(max(0.0, res["first_step_s"] - trace - comp), 4)}
    if "build" in parts and (build := compile_info.get("build")):  # JAX: what its build compiled, and where (XLA's clock)
        out["build"] = build
    if wall_s > 0 and out["rest_s"] > REST_SHARE * wall_s:
        out["rest"] = _rest(events, parts, started_at, wall_s)
    return out


def _rest(events: dict, parts: dict, started_at: float, wall_s: float) -> str:
    """Where the wall the parts do not cover lies: the stretches the worker stamped but never
    itemised (it ended before its result), and the time after the last thing it said."""
    hello, env_at, start_at = (_at(events, k) for k in ("hello", "environment", "measure_start"))
    gaps = []
    if env_at is not None and "data" not in parts:
        gaps.append(f"{env_at - hello:.1f} s of data, framework import and build (not itemised: no result came)")
    steps_end = _at(events, "measure_end") or _at(events, "step")
    if start_at is not None and steps_end is not None and "first_step" not in parts:
        said = (events.get("step") or {}).get("step")
        gaps.append(f"{steps_end - start_at:.1f} s of steps" + (f" (up to step {said})" if said else ""))
    said = [(k, events[k]["at"]) for k in ("hello", "environment", "measure_start", "step", "measure_end", "result")
            if _at(events, k) is not None]
    last, at = max(said, key=lambda kv: kv[1])
    ended = "an error" if "error" in events else "no further event"
    gaps.append(f"{started_at + wall_s - at:.1f} s after the worker's last '{last}' event until it ended ({ended})")
    return "; ".join(gaps)
