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
    handover     the result to the parent and the worker's word that it exits (its EXIT event: the
                 kernel frees its memory after, beside the parent's close: job/launch.py settle)

A part whose stamps never came (a worker that failed or was killed) is missing; the wall the
parts do not cover is `rest_s`, and where it exceeds REST_SHARE of the wall, `rest` says where it
lies: between which two things the worker last said and the end. How the parts read to a person
is the read side's (ledger/render.py `WALL_PARTS`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from repro.blocks import typed
from repro.worker.events import Events, Setup

REST_SHARE = 0.10


@dataclass(frozen=True)
class _Compiled:
    """What the first step's split reads of `results.compile` (JAX's AOT lower and compile, its build's compiles)."""

    trace_lower_s: float = 0.0
    compile_s: float | None = None  # None: the framework does not say (no first-step split)
    build: dict | list | None = None


def _present(block) -> dict:
    """A block's fields that were measured (None: not), in its order."""
    return {f.name: v for f in dataclasses.fields(block) if (v := getattr(block, f.name)) is not None}


@dataclass(frozen=True)
class Parts:
    """The job's wall by part, in seconds (the module's docstring); None: its stamps never came."""

    start: float | None = None
    data: float | None = None
    build: float | None = None
    setup: float | None = None
    first_step: float | None = None
    steady: float | None = None
    results: float | None = None
    profile: float | None = None
    handover: float | None = None

    def rounded(self) -> "Parts":
        return Parts(**{k: round(max(0.0, v), 4) for k, v in _present(self).items()})


@dataclass(frozen=True)
class Split:
    """A record's `wall_split`: its parts, their sum, the rest and where it lies, the measured steps' window."""

    parts: Parts
    measured_s: float
    rest_s: float
    window: list | None = None  # the measured steps on the host's clock (epoch s): another run's must not overlap
    first_step: dict | None = None  # trace_lower_s, compile_s, execute_s
    build: dict | list | None = None  # JAX: what its build compiled, and where (XLA's clock)
    rest: str | None = None  # where the rest lies, when it exceeds REST_SHARE of the wall

    def as_dict(self) -> dict:
        return {**_present(self), "parts": _present(self.parts)}


def split(events: dict | Events, started_at: float | None, wall_s: float) -> dict | None:
    """{"parts": {part: seconds}, "first_step": its trace/compile/execute, "measured_s", "rest_s",
    "rest"?} from a worker's last event of each kind; None for a worker that never started."""
    ev = events if isinstance(events, Events) else Events.of(events)
    hello = ev.hello_at
    if started_at is None or hello is None:
        return None
    res = ev.result.results if ev.result else {}
    setup = ev.result.setup if ev.result else None
    env_at, start_at, end_at, result_at = ev.environment_at, ev.measure_start_at, ev.measure_end_at, ev.result_at
    first_step_s = typed(_Timed, res).first_step_s
    steps_ended = start_at is not None and end_at is not None
    import_s = 0.0 if setup is None or setup.imported_ahead else setup.import_s
    parts = Parts(start=hello - started_at + import_s, data=setup and setup.data_s, build=setup and setup.build_s)
    if env_at is not None and start_at is not None:
        before = env_at - hello - (import_s + setup.data_s + setup.build_s) if setup is not None else 0.0
        parts = dataclasses.replace(parts, setup=max(0.0, before) + (start_at - env_at))
    if steps_ended and first_step_s is not None:
        parts = dataclasses.replace(parts, first_step=first_step_s, steady=max(0.0, end_at - start_at - first_step_s))
    if result_at is not None and end_at is not None:
        profile_s = setup.profile_s if setup is not None else None
        parts = dataclasses.replace(parts, results=max(0.0, result_at - end_at - (profile_s or 0.0)), profile=profile_s,
                                    handover=max(0.0, started_at + wall_s - result_at))
    parts = parts.rounded()
    measured = sum(_present(parts).values())
    rest_s = round(wall_s - measured, 4)
    compiled = typed(_Compiled, res.get("compile") or {})
    first_step = None
    if parts.first_step is not None and compiled.compile_s is not None:
        trace, comp = compiled.trace_lower_s, compiled.compile_s
        first_step = {"trace_lower_s": round(trace, 4), "compile_s": round(comp, 4),
                      "execute_s": round(max(0.0, first_step_s - trace - comp), 4)}
    return Split(parts, round(measured, 4), rest_s,
                 window=[round(start_at, 3), round(end_at, 3)] if steps_ended else None, first_step=first_step,
                 build=compiled.build if setup is not None and compiled.build else None,
                 rest=_rest(ev, parts, started_at, wall_s) if wall_s > 0 and rest_s > REST_SHARE * wall_s else None
                 ).as_dict()


@dataclass(frozen=True)
class _Timed:
    first_step_s: float | None = None


def _rest(ev: Events, parts: Parts, started_at: float, wall_s: float) -> str:
    """Where the wall the parts do not cover lies: the stretches the worker stamped but never
    itemised (it ended before its result), and the time after the last thing it said."""
    hello, env_at, start_at = ev.hello_at, ev.environment_at, ev.measure_start_at
    gaps = []
    if env_at is not None and parts.data is None:
        gaps.append(f"{env_at - hello:.1f} s of data, framework import and build (not itemised: no result came)")
    steps_end = ev.measure_end_at or ev.step_at
    if start_at is not None and steps_end is not None and parts.first_step is None:
        said = ev.last_step
        gaps.append(f"{steps_end - start_at:.1f} s of steps" + (f" (up to step {said})" if said else ""))
    last, at = max(ev.stamps(), key=lambda kv: kv[1])
    ended = "an error" if ev.error is not None else "no further event"
    gaps.append(f"{started_at + wall_s - at:.1f} s after the worker's last '{last}' event until it ended ({ended})")
    return "; ".join(gaps)
