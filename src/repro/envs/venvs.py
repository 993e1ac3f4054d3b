"""A venv with exactly a lock's versions, built with uv, cached by the lock's hash and reused.

uv does not read pip's configuration; this machine's pip finds large wheels (torch's CPU
build) in local folders (`find-links`, file:// indexes) and trusts a certificate bundle its
config names. `sources()` and `uv_env()` hand uv the same places and settings (envs.pipconf),
so a rebuild takes wheels from disk and reaches the index wherever pip does.
uv is used (not `python -m venv` + pip) because it installs an exact list in seconds,
hard-linking from its cache.

What was installed is checked against the lock's content digests (envs.lock) once the venv is
built: a wheel that is not the recorded one (a rebuilt wheel in a pack, another build of the same
version on an index) is refused, naming it, and no venv is kept. A venv built from a pack is cached
under the lock's hash and the pack's wheels' sha256, so it is never reused for another pack's or
an index's build of the same lock, nor theirs for it.

A distribution the lock names but no index serves here (a CUDA build on a CPU machine, a
version an index dropped) refuses the build, naming it; with `allow_substitutes` it is
replaced by the nearest version served, and the substitution is kept with the venv.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from repro.blocks import typed
from repro.envs import cache, lock, pipconf
from repro.redaction import redact_data

MARKER = "repro-env.json"  # written last: a venv without it is half-built and is built again
MAX_SUBSTITUTES = 8


class EnvError(Exception):
    """An environment that cannot be rebuilt here; the message says what and what to do."""


def uv() -> list[str]:
    return [sys.executable, "-m", "uv"]


def sources() -> list[str]:
    """uv options for the package sources pip is configured with here (envs.pipconf)."""
    return pipconf.uv_args(pipconf.read())


def uv_env() -> dict:
    """The environment uv runs in: this process's plus pip's certificate, proxy and timeout (envs.pipconf)."""
    return pipconf.uv_env(pipconf.read())


def path_of(digest: str) -> Path:
    return cache.venvs() / digest[:16]


def python_of(venv: Path) -> str:
    return str(venv / "bin" / "python")


@dataclass(frozen=True)
class Meta:
    """A built venv's marker (MARKER: written once, when it is built) and whether this process reused it."""

    env_hash: str | None = None
    python: str | None = None
    substitutes: dict = field(default_factory=dict)  # {the lock's requirement: the nearest version installed instead}
    content_checked: int = 0  # distributions whose installed files were checked against the lock's digests
    built: str | None = None
    build_s: float | None = None
    packages: int | None = None
    sources: dict | None = None  # the wheelhouse (offline), or pip's configuration handed to uv (pipconf.describe)
    reused: bool = False  # not in the marker: this process found the venv built

    def marker(self) -> dict:
        return {"env_hash": self.env_hash, "python": self.python, "substitutes": self.substitutes,
                "content_checked": self.content_checked, "built": self.built, "build_s": self.build_s,
                "packages": self.packages, "sources": self.sources}


def meta_of(venv: Path) -> Meta | None:
    """The venv's marker, typed; None where it has none (half-built) or it cannot be read."""
    return typed(Meta, info(venv))


def info(venv: Path) -> dict | None:
    try:
        return json.loads((venv / MARKER).read_text())
    except (OSError, ValueError):
        return None


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # two jobs wanting one venv: the second waits, then reuses it
        yield


def _interpreter(version: str | None) -> str:
    if version in (None, platform.python_version()):
        return getattr(sys, "_base_executable", sys.executable)
    return version  # uv looks for an installed one (downloads are switched off below)


def _unserved(stderr: str) -> list[str]:
    """Requirements uv's resolver says no index serves: 'there is no version of optax==0.0.7'."""
    return list(dict.fromkeys(re.findall(r"no version of ([A-Za-z0-9_.\-]+==[^\s,]+)", stderr)))


def nearest(requirement: str) -> str | None:
    """The served version nearest to a pinned one (the closest older, else the oldest newer)."""
    from packaging.version import InvalidVersion, Version

    name, wanted = requirement.split("==", 1)
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name], capture_output=True, text=True).stdout
    m = re.search(r"Available versions: (.*)", out)
    if not m:
        return None
    try:
        want = Version(wanted)
        served = sorted(Version(v.strip()) for v in m.group(1).split(","))
    except InvalidVersion:
        return None
    older = [v for v in served if v <= want]
    pick = older[-1] if older else (served[0] if served else None)
    return f"{name}=={pick}" if pick else None


def offline(wheelhouse: Path) -> tuple[list[str], dict]:
    """uv options and environment that install from a pack's wheels alone (envs.pack): no index, no network."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_INDEX", "UV_EXTRA_INDEX", "UV_DEFAULT_INDEX",
                                                                  "UV_FIND_LINKS"))}
    return (["--offline", "--no-index", "--find-links", str(Path(wheelhouse).resolve() / "wheels")],
            {**env, "UV_OFFLINE": "1", "UV_NO_INDEX": "1"})


def _key(digest: str, text: str, wheelhouse: Path | None) -> str:
    """The venv's cache key: the lock's hash, and for a build from a pack the sha256 of each of its wheels
    the lock installs (a lock from before content digests cannot tell two builds of one version apart)."""
    if not wheelhouse:
        return digest
    import hashlib

    from repro.profile import sha256_file

    wanted = {lock.normalise(re.split(r"\s*(==|@)", line, maxsplit=1)[0]) for line in lock.parse(text).requirements.values()}
    wheels = sorted(sha256_file(w) for w in (Path(wheelhouse) / "wheels").glob("*.whl")
                    if lock.normalise(w.name.split("-")[0]) in wanted)
    return hashlib.sha256("\n".join([digest, *wheels]).encode()).hexdigest()


def content_differs(text: str, venv: Path, skip: set[str] = frozenset()) -> list[tuple[str, str, str]]:
    """(name, installed content, recorded content) for each distribution of the lock whose installed files differ
    from the ones the lock names (envs.lock): none to check in a lock from before content digests."""
    recorded = lock.contents(text)
    if not recorded:
        return []
    skipped = {lock.normalise(s.split("==")[0]) for s in skip}
    installed = lock.contents(lock.of_interpreter(python_of(venv), cache.locks()))
    wanted = lock.parse(text).requirements
    return [(name, installed.get(name, "none"), digest) for name, digest in sorted(recorded.items())
            if name in wanted and name not in skipped and installed.get(name) != digest]


def ensure(text: str, allow_substitutes: bool | None = None, log=print, wheelhouse: Path | None = None) -> tuple[Path, Meta]:
    """The venv of lock `text` (built once, then reused) and its info: hash, substitutes, build time, sources.

    `allow_substitutes` None: the caller has no --allow-substitutes flag (a run's env.packages), so
    an unserved version is not told to use one. `wheelhouse`: install from that pack only, offline
    (the caller checked that it serves every distribution: envs.pack.check)."""
    digest = lock.env_hash(text)
    venv = path_of(_key(digest, text, wheelhouse))
    cache.hold(venv)  # in use by this process until it exits: `repro env prune` keeps it
    with _locked(venv):
        cache.touch(venv)
        if (have := meta_of(venv)) and (not have.substitutes or allow_substitutes):
            return venv, replace(have, reused=True)
        parsed = lock.parse(text)
        if parsed.local:
            raise EnvError("the recorded environment has distributions no index can rebuild: "
                           + ", ".join(parsed.local.values())
                           + " (installed from a folder; install them from an index or a wheel to record them exactly)")
        cache.remove(venv)
        start = time.perf_counter()
        from_args, from_env = offline(wheelhouse) if wheelhouse else (sources(), uv_env())
        env = {**from_env, "UV_PYTHON_DOWNLOADS": "never"}
        made = subprocess.run([*uv(), "venv", "-q", "--python", _interpreter(parsed.python), str(venv)],
                              capture_output=True, text=True, env=env)
        if made.returncode:
            raise EnvError(f"no Python {parsed.python} for the recorded environment here ({made.stderr.strip()}): "
                           f"install one (`uv python install {parsed.python}`), then replay again")
        requirements = dict(parsed.requirements)
        substitutes: dict[str, str] = {}
        for _ in range(MAX_SUBSTITUTES + 1):
            req_file = venv / "requirements.lock.txt"
            req_file.write_text("\n".join(requirements.values()) + "\n")
            done = subprocess.run([*uv(), "pip", "install", "-q", "--no-deps", "--python", python_of(venv),
                                   "-r", str(req_file), *from_args], capture_output=True, text=True, env=env)
            if done.returncode == 0:
                break
            missing = _unserved(done.stderr)
            if why := pipconf.unreachable(done.stderr, pipconf.read()):
                raise EnvError(why)
            if not missing or wheelhouse:
                raise EnvError(f"uv could not build the recorded environment{f' from {wheelhouse}' if wheelhouse else ''}: "
                               f"{done.stderr.strip()[-800:]}")
            if not allow_substitutes:
                raise EnvError(f"cannot be installed here: {', '.join(missing)} (no index or wheel folder serves it): "
                               + ("replay with --allow-substitutes to take the nearest version, marked so"
                                  if allow_substitutes is False else
                                  "pin a version the index serves (`pip index versions NAME` lists them)"))
            for req in missing:
                sub = nearest(req)
                if not sub or sub == req:
                    raise EnvError(f"cannot be installed here and has no substitute: {req}")
                name = lock.normalise(req.split("==")[0])
                substitutes[req] = sub
                requirements[name] = sub
                log(f"  substitute: {req} → {sub}")
        else:
            raise EnvError(f"gave up after {MAX_SUBSTITUTES} substitutions: {substitutes}")
        if wrong := content_differs(text, venv, set(substitutes)):
            cache.remove(venv)
            name, installed, recorded = wrong[0]
            raise EnvError(f"the {name} installed{f' from {wheelhouse}' if wheelhouse else ''} holds other files than "
                           f"the recorded environment's (content sha256 {installed[:16]} installed, {recorded[:16]} "
                           f"recorded)" + (f", and {len(wrong) - 1} more" if len(wrong) > 1 else "")
                           + ": not the wheel the record ran with; nothing was kept")
        made = Meta(digest, parsed.python, substitutes, len(lock.contents(text)), time.strftime("%Y-%m-%dT%H:%M:%S"),
                    round(time.perf_counter() - start, 2), len(requirements),
                    {"wheelhouse": str(Path(wheelhouse).resolve()), "offline": True} if wheelhouse
                    else pipconf.describe(pipconf.read()))
        marker = redact_data(made.marker())  # an index URL's credentials (PIP_INDEX_URL=https://user:token@...) never reach a file
        (venv / "lock.txt").write_text(text)
        (venv / MARKER).write_text(json.dumps(marker, indent=1))
        cache.touch(venv)
        return venv, typed(Meta, marker)
