"""The README's quick start as a new user runs it: from a fresh clone, in a fresh login shell,
and a `repro replay --as-recorded` in that shell."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from conftest import REPO
from repro.ledger import Ledger

pytestmark = pytest.mark.slow  # every test here starts a process


def _quick_start_block() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Quick start", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]

def test_the_quick_start_block_runs_as_written_in_a_fresh_clone_and_shell(tmp_path):
    """What it runs: `git clone` of this repository (its committed HEAD) into a temp folder; the
    README's quick-start block parsed from the clone; each command in `env -i` with only
    PATH=/usr/local/bin:/usr/bin:/bin and HOME (a fresh login shell has no .venv on its PATH), by
    `bash -c`, in the clone.

    What it does not run: the install. The clone's `.venv` is a symlink to the shared venv (made
    by `make install` once), and each `make TARGET` line runs as `make -n TARGET`, which must
    succeed and print the recipe the README's comment names (`.venv/bin/python -m repro
    +exp=quickstart`, `.venv/bin/python -m pytest`): running them would reinstall ~2 GB, and
    `make test` inside the suite would recurse. Every other line (`.venv/bin/repro --help`) runs
    for real and must exit 0 with repro's help. The shared venv's editable install points at the
    main checkout, so `repro --help` there prints main's help text, not the clone's."""
    clone = tmp_path / "repro"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    venv = REPO / ".venv"
    (clone / ".venv").symlink_to(venv.resolve())
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    commands = _quick_start_block()
    assert commands and any(c.startswith("make ") for c in commands) and not any(c.startswith("repro ") for c in commands)
    ran = []
    for command in commands:
        if command.startswith("make "):
            target = command.split()[1]
            proc = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], "bash", "-c",
                                   f"make -n {target}"], cwd=clone, capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, (command, proc.stderr)
            wanted = {"quickstart": ".venv/bin/python -m repro +exp=quickstart", "test": ".venv/bin/python -m pytest"}
            assert any(line.startswith(wanted[target]) for line in proc.stdout.splitlines()), (command, proc.stdout)
        else:
            proc = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], "bash", "-c", command],
                                  cwd=clone, capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
            assert "usage: repro" in proc.stdout and "Commands:" in proc.stdout, (command, proc.stdout)
        ran.append(command)
    assert ran == ["make quickstart", "make test", ".venv/bin/repro --help"]
    # the same line as the old README had it fails in a fresh shell: the reason for the fix
    bare = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], "bash", "-c", "repro --help"],
                          cwd=clone, capture_output=True, text=True, timeout=60)
    assert bare.returncode == 127 and "command not found" in bare.stderr
    _replay_as_recorded_in_the_fresh_shell(clone, env, tmp_path)

def _replay_as_recorded_in_the_fresh_shell(clone: Path, env: dict, tmp_path: Path) -> None:
    """Issue 30: one `repro replay ID --as-recorded` for real in that fresh shell (no SSL_CERT_FILE, no
    PIP_* variables, a HOME with no uv cache): uv must reach the package index with what pip's own
    configuration names (its certificate bundle). The run it replays uses a small venv (what a JAX MLP
    worker imports), so the rebuild downloads tens of MB, not the whole stack. PYTHONPATH makes the
    clone's code the code that runs (the shared venv's editable install points at the main checkout)."""
    from repro.envs import venvs

    small = tmp_path / "small"
    uv = [sys.executable, "-m", "uv"]
    subprocess.run([*uv, "venv", "-q", "--python", sys._base_executable, str(small)], check=True, env=venvs.uv_env())
    needs = ("jax", "jaxlib", "flax", "numpy", "omegaconf", "psutil", "rich")
    subprocess.run([*uv, "pip", "install", "-q", "--python", str(small / "bin/python"),
                    *(f"{n}=={metadata.version(n)}" for n in needs), *venvs.sources()], check=True, env=venvs.uv_env())
    shell = [f"{k}={v}" for k, v in env.items()] + ["LANG=C.UTF-8", f"PYTHONPATH={clone / 'src'}"]
    ledger = tmp_path / "ledger"

    def fresh(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["env", "-i", *shell, "bash", "-lc", command], cwd=clone, capture_output=True,
                              text=True, timeout=600)

    ran = fresh(f".venv/bin/repro model=mlp framework=jax run.steps=6 run.warmup=2 run.batch_size=8 "
                f"framework.python={small / 'bin/python'} ledger.dir={ledger} progress.mode=plain")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    (recorded,) = Ledger(ledger).heads(kind="run", status="ok")
    rid = recorded["id"]
    replay = fresh(f".venv/bin/repro replay {rid} --as-recorded --ledger {ledger} --progress none")
    assert replay.returncode == 0 and "verdict: exact" in replay.stdout, replay.stdout[-3000:] + replay.stderr[-3000:]
    assert "package sources (pip's configuration, handed to uv)" in replay.stdout, replay.stdout
    print("\n" + "\n".join(line for line in replay.stdout.splitlines() if "restored" in line or "sources" in line
                             or "verdict" in line))
