"""`env.packages` checked before anything runs: each pin's syntax, what it may replace, and that an index serves it.

A pin replaces one version of the worker's environment (a version sweep: optax 0.2.6 against
0.2.8). Checked here rather than when the job's venv is built, because by then a bad pin has
become a `failed` record, or worse, a run: a pin of a name the environment does not have
(`repro==0.0.1`) installed an unrelated distribution of that name from the index. So:

- the syntax: an exact pin `name==version` (packaging's requirement grammar, one `==`);
- `repro` itself is never replaced: its code is the checkout's (`src/`); to run another repro,
  check out that commit (or replay a record `--as-recorded`);
- a name the worker's environment does not have is refused unless `env.allow_new=true`;
- the version is served: `uv pip compile --no-deps` resolves each pin against the sources pip is
  configured with (the same uv and sources that build the venv), one process per pin, in parallel.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Sequence

from repro.config.schema import Config, ConfigError

OWN = ("repro",)  # distributions whose code the checkout provides


def parse(pin: str) -> tuple[str, str]:
    """(normalised name, version) of an exact pin; ConfigError naming it otherwise."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    example = "e.g. env.packages=['flax==0.12.7']"
    try:
        req = Requirement(str(pin))
    except InvalidRequirement as e:
        raise ConfigError(f"env.packages: {pin!r} is not a requirement ({e}): each entry is an exact pin "
                          f"name==version, {example}") from None
    specs = list(req.specifier)
    if req.url or req.marker or req.extras or len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
        raise ConfigError(f"env.packages: {pin!r} is not an exact pin: each entry is name==version (one exact "
                          f"version, no extras, markers, URLs or ranges: a run's environment is exact), {example}")
    return canonicalize_name(req.name), specs[0].version


def _base(python: str | None) -> dict[str, str]:
    """{name: version} of the worker's interpreter (its lock, cached by site-packages mtimes)."""
    from repro.envs import cache, lock
    from repro.job.launch import resolve_python

    return lock.versions(lock.of_interpreter(resolve_python(python), cache.locks()))


def _refuse_names(job: Config, pins: list[tuple[str, str, str]]) -> None:
    for pin, name, _ in pins:
        if name in OWN:
            raise ConfigError(f"env.packages: {pin!r} would replace repro itself, which env.packages cannot do: "
                              "the worker runs this checkout's repro (src/). To run another version of repro, "
                              "check out its commit, or `repro replay ID --as-recorded` a run it recorded")
    base = _base(job.framework.python)
    if job.env.allow_new:
        return
    for pin, name, _ in pins:
        if name not in base:
            raise ConfigError(f"env.packages: {pin!r} names {name}, which the worker's environment "
                              f"({job.framework.python or 'this interpreter'}) does not have: a pin replaces the "
                              "version of a distribution the run already uses. Check the name; to add a new "
                              "distribution to the run's environment, also set env.allow_new=true")


def _unserved(pins: dict[str, str]) -> dict[str, str]:
    """{pin: uv's reason} for each pin no configured source serves for its interpreter ({pin: python});
    one `uv pip compile` per pin, in parallel."""
    import re

    from repro.envs import venvs

    procs = {pin: subprocess.Popen([*venvs.uv(), "pip", "compile", "-", "--no-deps", "--no-header", "-q",
                                    "--python", python, *venvs.sources()], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**venvs.uv_env(), "UV_PYTHON_DOWNLOADS": "never"})
             for pin, python in pins.items()}
    out = {}
    for pin, proc in procs.items():
        _, err = proc.communicate(pin + "\n")
        if proc.returncode:
            causes = re.findall(r"cause: (.+)", err)
            out[pin] = (causes[-1] if causes else err.strip().splitlines()[-1] if err.strip() else "uv failed").strip()
    return out


def check(jobs: Sequence[Config]) -> None:
    """Every job's env.packages (ConfigError naming the pin and what to do); served versions checked once."""
    from repro.job.launch import resolve_python

    to_serve: dict[str, str] = {}
    for job in jobs:
        if job.env.wheelhouse:  # the pack serves it, offline: it must hold every wheel, intact
            from repro.envs import runs

            if why := runs.wheelhouse_refusal(job):
                raise ConfigError(why)
        if not job.env.packages or job.env.wheelhouse:
            continue
        pins = [(str(p), *parse(p)) for p in job.env.packages]
        _refuse_names(job, pins)
        base = _base(job.framework.python)
        python = resolve_python(job.framework.python) or sys.executable
        to_serve.update({pin: python for pin, name, version in pins if base.get(name) != version and pin not in to_serve})
    if not to_serve:
        return
    from repro.envs import pipconf

    if bad := _unserved(to_serve):
        where = pipconf.one_line(pipconf.describe(pipconf.read()))
        raise ConfigError("env.packages: no package source here serves "
                          + "; ".join(f"{pin} ({why})" for pin, why in bad.items())
                          + f". Sources (pip's configuration): {where}. Pin a version they serve "
                          "(`pip index versions NAME` lists them)")
