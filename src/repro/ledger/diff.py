"""Differences between two records (or two parts of records), as flat dotted keys."""

from __future__ import annotations

from typing import Any

from repro.flat import flatten

SECTIONS = ("config", "environment", "data", "git", "code", "effective", "results")
# Keys that differ between any two runs and say nothing about them.
VOLATILE = ("environment.python.executable", "effective.inductor_cache_dir", "effective.compilation_cache_dir")


def diff(a: Any, b: Any) -> list[tuple[str, Any, Any]]:
    """(key, a's value, b's value) for every flat key whose values differ."""
    fa = flatten(a) if isinstance(a, dict) else {"": a}
    fb = flatten(b) if isinstance(b, dict) else {"": b}
    return [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]


def record_diff(a: dict, b: dict, sections=SECTIONS) -> dict[str, list[tuple[str, Any, Any]]]:
    out = {}
    for section in sections:
        rows = [(f"{section}.{k}".rstrip("."), x, y) for k, x, y in diff(a.get(section) or {}, b.get(section) or {})]
        rows = [r for r in rows if not r[0].startswith(VOLATILE)]
        if rows:
            out[section] = rows
    return out
