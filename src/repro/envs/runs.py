"""What a job needs from environments: its interpreter's lock hash, and a venv for pinned versions."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from repro.envs import cache, lock, venvs
from repro.paths import interpreter as resolve_python


def record_hash(ledger_root: Path, python: str | None, say) -> str | None:
    """The hash of `python`'s lock, the lock kept once in `<ledger>/envs/` (None: it could not be
    read, and `say` was told why: the record will name no whole environment, so `repro env pack`
    and `repro replay --as-recorded` will refuse it)."""
    try:
        return lock.store(ledger_root, lock.of_interpreter(resolve_python(python), cache.locks()))
    except OSError:
        return None  # an interpreter that does not start fails the run with its own message
    except subprocess.CalledProcessError as e:  # it started, and its lock could not be read
        last = (e.stderr or "").strip().splitlines()[-1:] or ["(nothing on stderr)"]
        say(f"the environment lock of {python or 'this interpreter'} could not be read (exit {e.returncode}: "
            f"{last[0]}): this run's record names no environment.env_hash, so it cannot be packed or "
            "replayed as recorded")
        return None


def pinned(config, log=print) -> dict | None:
    """For `env.packages=[flax==0.12.7, ...]`: the worker's environment with those pins in place,
    as a cached venv ({"python": its interpreter, "src": None}); None when nothing is pinned.
    With `env.wheelhouse=DIR`: the pack's environment (pins on top), built offline from the pack."""
    pins = list(config.env.packages)
    if not pins and not config.env.wheelhouse:
        return None
    if bad := [p for p in pins if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[^\s=]+", str(p))]:
        raise venvs.EnvError(f"env.packages takes exact pins name==version (an exact environment), not {bad}: "
                             "e.g. env.packages=['optax==0.2.8']")
    base = _packed(config.env.wheelhouse) if config.env.wheelhouse else \
        lock.of_interpreter(resolve_python(config.framework.python), cache.locks())
    venv, meta = venvs.ensure(lock.with_pins(base, pins), log=log, wheelhouse=config.env.wheelhouse or None)
    log(f"environment {meta.env_hash[:12]} ({', '.join(pins) or 'the pack ' + config.env.wheelhouse}): "
        + ("reused" if meta.reused else f"built in {meta.build_s:.1f} s") + f" at {venv}")
    return {"python": venvs.python_of(venv), "src": None}


def _packed(wheelhouse: str) -> str:
    """The one environment lock a pack holds (envs.pack: `locks/<env_hash>.txt`)."""
    from repro.envs import pack

    manifest = pack.manifest_of(Path(wheelhouse))
    if len(manifest.locks or []) != 1:
        raise pack.PackError(f"env.wheelhouse={wheelhouse} packs {len(manifest.locks or [])} environments: "
                             "a run takes a pack of one (`repro env pack RECORD` or an environment hash)")
    return lock.checked(Path(wheelhouse) / "locks" / f"{manifest.locks[0]}.txt")


def wheelhouse_refusal(config) -> str | None:
    """Why `env.wheelhouse` cannot serve this job (one line naming the key), or None: the pack is intact
    and holds every wheel of its environment with the job's pins."""
    from repro.envs import pack

    try:
        pack.check(Path(config.env.wheelhouse), lock.with_pins(_packed(config.env.wheelhouse), list(config.env.packages)),
                   f"env.wheelhouse={config.env.wheelhouse}")
    except (pack.PackError, lock.EditedLock, OSError) as e:
        return str(e) if str(e).startswith("env.wheelhouse") else f"env.wheelhouse: {e}"
    return None
