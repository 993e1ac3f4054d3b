"""What a run imports, as distributions: the runtime selection of `repro env pack --runtime-only`.

A lock holds the whole development environment (test runners, DVC, uv, linters' dependencies...); a
machine that only runs sweeps needs what the parent and the worker import. That set is computed, not
listed by hand: the roots are repro's own requirements and the extras a run imports (RUNTIME_EXTRAS,
from the project's `pyproject.toml`), less the roots nothing at run time imports (NOT_RUNTIME, each
with its reason), closed over each installed distribution's `Requires-Dist` with its markers evaluated
for the target's Python (a wheel for 3.12 does not need 3.11's backports). What the lock has beyond
that set is left out of the pack and named in its manifest (`selection`), with the extra it came from.

`fits`: the pack's size against `--max-size`, said before anything is written: its total, the wheel
count and the largest wheels; over the limit the pack is refused naming its biggest contributors.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from repro.envs import lock
from repro.envs.venvs import EnvError

# The extras of pyproject.toml whose packages the parent or a worker imports during a run.
RUNTIME_EXTRAS = ("jax", "torch", "tracking", "launchers", "hf")
# Roots of those extras that no run imports, and why (they stay in the development environment).
NOT_RUNTIME = {
    "dvc": "imported only for data kept in DVC (data/dvc_check.py) and by `repro dvc` stages, not by a run of "
           "generated data",
}
# The extras left out as a whole, and why (named in the manifest).
NOT_RUNTIME_EXTRAS = {
    "test": "the test runner and what only tests use",
    "envs": "uv and packaging build replay venvs on the machine that replays, not in a run",
    "ray": "hydra/launcher=ray's driver and tasks run where a Ray cluster is installed; its wheel (79 MB) alone "
           "would pass a 64 MiB device carry",
    "all": "every extra",
}
SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(|b|k|kb|kib|m|mb|mib|g|gb|gib)", re.IGNORECASE)
UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 10**3, "kib": 2**10, "m": 2**20, "mb": 10**6, "mib": 2**20,
         "g": 2**30, "gb": 10**9, "gib": 2**30}
LARGEST = 8  # wheels named in the size line


class SelectionError(EnvError):
    """A runtime selection that cannot be computed (no pyproject, an unknown extra), a bad --max-size, or a
    pack over it."""


def parse_size(text: str) -> int:
    """`--max-size`: 60MiB, 60M (MiB), 51MB, 1.5GiB or a count of bytes."""
    m = SIZE.fullmatch((text or "").strip())
    if not m or float(m.group(1)) <= 0:
        raise SelectionError(f"--max-size {text!r} is not a size: give e.g. 60MiB, 51MB or a count of bytes")
    return int(float(m.group(1)) * UNITS[m.group(2).lower()])


def mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 / 10 else f"{n / 2**10:,.1f} KiB"


def _markers(python: str) -> dict[str, str]:
    """The marker environment of the target: its Python, Linux x86_64 CPython (the lent machines')."""
    import platform

    here = python == ".".join(platform.python_version_tuple()[:2])
    return {"python_version": python, "python_full_version": platform.python_version() if here else f"{python}.0",
            "sys_platform": sys.platform, "platform_system": platform.system(), "os_name": "posix",
            "platform_machine": platform.machine(), "implementation_name": "cpython",
            "platform_python_implementation": "CPython"}


def roots(pyproject: Path, extras=RUNTIME_EXTRAS) -> tuple[list[str], dict[str, list[str]]]:
    """(the requirement strings a run needs, {extra left out: its requirement names}) from pyproject.toml."""
    import tomllib

    try:
        project = tomllib.loads(Path(pyproject).read_text())["project"]
    except (OSError, KeyError, ValueError) as e:
        raise SelectionError(f"{pyproject}: no readable [project] table ({e.__class__.__name__}): the runtime "
                             "selection reads the project's dependencies and extras from it") from None
    optional = project.get("optional-dependencies", {})
    if unknown := [e for e in extras if e not in optional]:
        raise SelectionError(f"{pyproject} has no extra {', '.join(unknown)} (it has {', '.join(sorted(optional))})")
    reqs = list(project.get("dependencies", []))
    for extra in extras:
        reqs += [r for r in optional[extra] if not r.startswith(project["name"] + "[")]
    others = {e: [_name(r) for r in optional[e] if not r.startswith(project["name"] + "[")]
              for e in optional if e not in extras}
    return reqs, others


def _name(requirement: str) -> str:
    return lock.normalise(re.split(r"[\s\[<>=!~;@(]", requirement.strip(), maxsplit=1)[0])


def closure(requirements: list[str], python: str, skip=()) -> dict[str, str]:
    """{name: the distribution that first asked for it ("" for a root)} of every distribution the
    requirements need, through the installed distributions' Requires-Dist (markers evaluated for the
    target's Python, extras followed); `skip`: roots not followed."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    env = _markers(python)
    seen: dict[str, str] = {}
    todo = [(r, "") for r in requirements]
    extras_done: set[tuple[str, str]] = set()
    while todo:
        text, parent = todo.pop()
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker and not req.marker.evaluate({**env, "extra": ""}):  # a root's (its extras are chosen)
            continue
        name = lock.normalise(req.name)
        if name in skip and not parent:
            continue
        new_extras = [e for e in sorted(req.extras) if (name, e) not in extras_done]
        if name in seen and not new_extras:
            continue
        seen.setdefault(name, parent)
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue  # not installed here: not in the lock either, so nothing of it is packed
        wanted = {""} | set(req.extras)
        extras_done.update((name, e) for e in req.extras)
        for sub in requires:
            try:
                r = Requirement(sub)
            except InvalidRequirement:
                continue
            if r.marker is None or any(r.marker.evaluate({**env, "extra": e}) for e in wanted):
                extras = f"[{','.join(sorted(r.extras))}]" if r.extras else ""
                todo.append((f"{r.name}{extras}{r.specifier}", name))  # its marker is evaluated: dropped
    return seen


def select(locks: dict[str, str], pyproject: Path, python: str, extras=RUNTIME_EXTRAS) -> tuple[tuple[str, ...], dict]:
    """(the lock's distributions a run does not need, the manifest's `selection`) for the target's Python."""
    reqs, others = roots(pyproject, extras)
    needed = closure(reqs, python, skip=tuple(NOT_RUNTIME))
    names = {n for text in locks.values() for n in lock.parse(text).requirements if n not in lock.OWN}
    leave = sorted(names - set(needed))
    why = {}
    for extra, members in others.items():
        for n in members:
            if n in leave:
                why[n] = f"extra [{extra}]: {NOT_RUNTIME_EXTRAS.get(extra, 'not imported by a run')}"
    for n, reason in NOT_RUNTIME.items():
        if n in leave:
            why[n] = reason
    selection = {
        "runtime_only": True,
        "extras": list(extras),
        "roots": sorted({_name(r) for r in reqs} - set(NOT_RUNTIME)),
        "not_runtime_roots": {**why},
        "python": python,
        "needed": len(set(needed) & names),
        "left_out": leave,
        "rule": "repro's dependencies and the extras " + ", ".join(extras) + " of pyproject.toml, less "
                + ", ".join(NOT_RUNTIME) + ", closed over Requires-Dist for Python " + python
                + "; the rest of the lock (test, docs, lint and replay tools and what only they need) is left out",
    }
    return tuple(leave), selection


def describe(selection: dict) -> list[str]:
    """The selection in a pack's description: its rule, and the left-out roots with their reasons."""
    lines = [f"  runtime only: {selection['needed']} of the lock's distributions a run imports ({selection['rule']}); "
             f"{len(selection['left_out'])} left out"]
    lines += [f"    left out {name}: {why}" for name, why in sorted(selection["not_runtime_roots"].items())]
    return lines


def fits(files: list[Path], max_size: int | None, log=print) -> int:
    """The wheels' total bytes, logged with their count and the largest, before the pack is written;
    over `max_size` a SelectionError naming the biggest contributors."""
    sized = sorted(((f.stat().st_size, f.name) for f in files), reverse=True)
    total = sum(s for s, _ in sized)
    top = ", ".join(f"{name.split('-')[0]} {mib(s)}" for s, name in sized[:LARGEST])
    log(f"  {len(sized)} wheels, {mib(total)}" + (f" (limit {mib(max_size)})" if max_size else "") + f"; largest: {top}")
    if max_size and total > max_size:
        over, biggest = total - max_size, []
        for s, name in sized:  # the fewest largest wheels whose removal would fit
            biggest.append(f"{name.split('-')[0]} {mib(s)}")
            over -= s
            if over <= 0:
                break
        raise SelectionError(f"the pack would be {mib(total)} in {len(sized)} wheels, over --max-size {mib(max_size)} by "
                        f"{mib(total - max_size)}; its biggest contributors: {', '.join(biggest)}: leave what the target "
                        "has out (--have, --keep), what a run does not need (--runtime-only, --leave-out), or raise "
                        "--max-size; nothing written")
    return total
