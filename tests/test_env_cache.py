"""The environment cache tells the truth. A venv uv hard-links from its cache is counted
once per inode, split into its own bytes and those shared with uv's cache; uv's cache is where uv
says (`uv cache dir`, here moved by XDG_CACHE_HOME); prune goes by last use, never removes what a
running replay holds, and without --all or --older-than removes nothing."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from repro.envs import lock

pytestmark = pytest.mark.slow  # every test here starts a process

HOLD = """
import sys
from repro.envs import venvs
venv, meta = venvs.ensure(open(sys.argv[1]).read(), log=lambda _: None)
print(venv, flush=True)
sys.stdin.read()  # holds the venv (as a replay does for its life) until the test closes stdin
"""


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("UV_CACHE_DIR", "REPRO_ENV_CACHE")}
    return {**env, "XDG_CACHE_HOME": str(tmp_path / "xdg"), "PYTHONUNBUFFERED": "1"}


def _repro(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "repro", "env", *args], env=_env(tmp_path), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def _mib(text: str, pattern: str) -> float:
    return float(re.search(pattern, text).group(1).replace(",", ""))


def test_sizes_count_shared_inodes_once_and_prune_frees_only_its_own(tmp_path):
    text = lock.render([lock.Dist(n, metadata.version(n)) for n in ("numpy", "rich")],
                       platform.python_version())
    (tmp_path / "lock.txt").write_text(text)
    built = subprocess.run([sys.executable, "-c", HOLD.replace("sys.stdin.read()", "pass"), str(tmp_path / "lock.txt")],
                           env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    venv = Path(built.stdout.strip())
    assert venv.is_relative_to(tmp_path / "xdg" / "repro" / "venvs")

    listing = _repro(tmp_path, "list", "--sizes").stdout
    own, shared = _mib(listing, r"venv .*?([\d,.]+) MiB own"), _mib(listing, r"own\s+([\d,.]+) MiB shared")
    assert shared > 10 and own < shared / 5, listing  # numpy's files are uv's, hard-linked: not the venv's own
    assert f"uv's cache {tmp_path / 'xdg' / 'uv'}:" in listing, listing  # where `uv cache dir` says, not ~/.cache/uv

    pruned = _repro(tmp_path, "prune", "--all").stdout
    assert f"removed venv {venv.name}" in pruned and not venv.exists(), pruned
    freed = _mib(pruned, r"pruned 1 entries, ([\d,.]+) MiB freed")
    assert freed <= own + 0.1, (freed, own, pruned)  # what was freed, not what the venv's files add up to
    print(f"\n{listing}{pruned}")


def test_prune_lists_without_a_flag_goes_by_last_use_and_keeps_what_a_replay_holds(tmp_path):
    text = lock.render([lock.Dist("rich", metadata.version("rich"))],
                       platform.python_version())
    (tmp_path / "lock.txt").write_text(text)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "lock.txt")], env=_env(tmp_path),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        venv = Path(holder.stdout.readline().strip())
        assert venv.is_dir(), holder.stderr.read() if holder.poll() is not None else venv

        dry = _repro(tmp_path, "prune").stdout
        assert f"would remove venv {venv.name}" in dry and "nothing removed" in dry and venv.is_dir(), dry

        old = time.time() - 10 * 86400
        os.utime(venv, (old, old))  # built ten days ago, used a moment ago: not "older than 1 day"
        recent = _repro(tmp_path, "prune", "--older-than", "1").stdout
        assert "pruned 0 entries" in recent and venv.is_dir(), recent

        held = _repro(tmp_path, "prune", "--all").stdout
        assert f"kept venv {venv.name}: in use" in held and (venv / "bin" / "python").exists(), held
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    use = venv.parent / f".{venv.name}.use"
    os.utime(use, (time.time() - 3 * 86400,) * 2)  # last used three days ago, no longer held
    gone = _repro(tmp_path, "prune", "--older-than", "1").stdout
    assert f"removed venv {venv.name}" in gone and not venv.exists(), gone
