"""Repeats, interleaved: Hydra's basic sweeper with every job run `run.repeats` times.

Hydra's BasicSweeper orders the cartesian product with the last parameter varying fastest
and runs each combination once. `RepeatSweeper` (hydra_plugins/repro_sweeper: Hydra loads
sweepers only from its plugin namespace; conf/hydra/sweeper/repeat.yaml, chosen in
conf/config.yaml's defaults) keeps that order and runs the whole list `run.repeats` times,
A B C, A B C, ..., so slow drift of the machine hits every config alike. A repeat is the
same config: the job composes identically, and its repeat index follows from its job number
(`repeat_of`). `preflight.plan()` orders its preflight jobs with the same `interleave`.
`run.repeats=auto` is not a count: its plan lists each config once, and repro/repeats.py runs
the rounds (A B, B A, ...) until the verdicts are decided.
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")


def interleave(configs: Sequence[T], repeats: int) -> list[T]:
    """Every config once per round, `repeats` rounds: A B C, A B C, ..."""
    return [c for _ in range(repeats) for c in configs]


def repeat_of(job: int, jobs: int, repeats: int, sweep_id: str) -> dict:
    """The `repeat` field of job number `job` of `jobs` (= configs × repeats, interleaved)."""
    configs = jobs // repeats
    index, config = divmod(job, configs)
    return {"index": index, "count": repeats, "group": f"{sweep_id}/{config}"}
