"""A checked plan lists each config `run.repeats` times (`interleave`): the count of jobs a sweep
runs and what `--dry-run` shows. The order they run in is the sweep loop's (runner/sweep.py: each
round in a fresh random order); `run.repeats=auto` is not a count: its plan lists each config
once, and repro/repeats.py runs the rounds until the verdicts are decided.
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")


def interleave(configs: Sequence[T], repeats: int) -> list[T]:
    """Every config once per round, `repeats` rounds: A B C, A B C, ..."""
    return [c for _ in range(repeats) for c in configs]
