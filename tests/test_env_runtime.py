"""`repro env pack --runtime-only --max-size` (envs/runtime.py): what a run imports, computed from pyproject's
extras and the installed distributions' Requires-Dist for the target's Python; the pack's size said before it is
written, and refused over the limit naming its biggest wheels, with nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from repro.envs import lock, runtime

ROOT = Path(__file__).resolve().parent.parent


def test_sizes_read_as_people_write_them():
    assert runtime.parse_size("60MiB") == runtime.parse_size("60M") == 60 * 2**20
    assert runtime.parse_size("51MB") == 51_000_000 and runtime.parse_size("1.5GiB") == int(1.5 * 2**30)
    assert runtime.parse_size("4096") == 4096
    for bad in ("", "sixty", "-1M", "0", "60 parsecs"):
        with pytest.raises(runtime.SelectionError, match="is not a size: give e.g. 60MiB"):
            runtime.parse_size(bad)


def test_the_closure_follows_requires_dist_with_markers_for_the_target(tmp_path):
    rich = runtime.closure(["rich"], "3.12")
    assert {"rich", "markdown-it-py", "pygments", "mdurl"} <= set(rich) and rich["mdurl"] == "markdown-it-py"
    assert "tomli" in runtime.closure(['tomli; python_version < "3.11"'], "3.10")
    assert runtime.closure(['tomli; python_version < "3.11"'], "3.12") == {}
    assert "dvc" not in runtime.closure(["dvc"], "3.12", skip=("dvc",))


def test_the_runtime_selection_leaves_out_test_and_replay_tools_naming_why(tmp_path):
    text = lock.current()
    leave, selection = runtime.select({"x": text}, ROOT / "pyproject.toml", "3.12")
    for tool in ("pytest", "pytest-xdist", "hypothesis", "uv", "dvc"):
        if tool in lock.parse(text).requirements:
            assert tool in leave and tool in selection["not_runtime_roots"]
    assert "test runner" in selection["not_runtime_roots"]["pytest"]
    assert "data/dvc_check.py" in selection["not_runtime_roots"]["dvc"]
    for needed in ("hydra-core", "omegaconf", "mlflow", "mlflow-skinny", "sqlalchemy", "numpy", "rich", "psutil",
                   "jax", "torch", "transformers", "submitit"):
        assert needed not in leave, needed
    assert selection["runtime_only"] and selection["extras"] == list(runtime.RUNTIME_EXTRAS)
    assert selection["needed"] + len(leave) == len([n for n in lock.parse(text).requirements if n not in lock.OWN])
    lines = runtime.describe(selection)
    assert lines[0].startswith(f"  runtime only: {selection['needed']} of the lock's distributions a run imports")
    bad = tmp_path / "pyproject.toml"
    bad.write_text('[project]\nname = "x"\ndependencies = []\n[project.optional-dependencies]\njax = []\n')
    with pytest.raises(runtime.SelectionError, match="has no extra torch, tracking, launchers, hf"):
        runtime.select({"x": text}, bad, "3.12")
    with pytest.raises(runtime.SelectionError, match="no readable \\[project\\] table"):
        runtime.select({"x": text}, tmp_path / "none.toml", "3.12")


def test_the_size_is_said_before_writing_and_refused_over_the_limit(tmp_path):
    files = []
    for name, size in (("big-1.0-py3-none-any.whl", 3 * 2**20), ("mid-1.0-py3-none-any.whl", 2 * 2**20),
                       ("small-1.0-py3-none-any.whl", 2**19)):
        (path := tmp_path / name).write_bytes(b"\0" * size)
        files.append(path)
    said: list[str] = []
    assert runtime.fits(files, 6 * 2**20, log=said.append) == int(5.5 * 2**20)
    assert said == ["  3 wheels, 5.5 MiB (limit 6.0 MiB); largest: big 3.0 MiB, mid 2.0 MiB, small 0.5 MiB"]
    with pytest.raises(runtime.SelectionError) as refused:
        runtime.fits(files, 4 * 2**20, log=said.append)
    text = str(refused.value)
    assert "the pack would be 5.5 MiB in 3 wheels, over --max-size 4.0 MiB by 1.5 MiB" in text
    assert "its biggest contributors: big 3.0 MiB:" in text and "mid" not in text.split("contributors:")[1].split(":")[0]
    assert "nothing written" in text and "\n" not in text
    assert runtime.fits(files, None, log=said.append) == int(5.5 * 2**20)


@pytest.mark.slow
def test_pack_runtime_only_over_max_size_writes_nothing_and_bad_sizes_exit_2(tmp_path):
    """The CLI: a runtime pack of this venv less all it has but omegaconf (one wheel from the local index) is
    refused at 1 KiB, printing its size first; a bad --max-size exits 2 before anything is downloaded."""
    text = lock.current()
    have = tmp_path / "have.txt"
    have.write_text("".join(f"{line}\n" for n, line in lock.parse(text).requirements.items()
                            if n != "omegaconf" and "==" in line))
    base = [sys.executable, "-m", "repro", "env", "pack", "current", "--runtime-only", "--have", str(have)]
    bad = subprocess.run([*base, "--max-size", "lots", "--out", str(tmp_path / "bad")], capture_output=True,
                         text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--max-size 'lots' is not a size" in bad.stderr and not (tmp_path / "bad").exists()
    over = subprocess.run([*base, "--max-size", "1KiB", "--out", str(tmp_path / "over")], capture_output=True,
                          text=True, cwd=ROOT)
    assert over.returncode == 2, over.stderr  # a refusal, one line (envs/cli.py)
    assert "1 distributions" in over.stdout and "  1 wheels," in over.stdout and "largest: omegaconf" in over.stdout
    assert "over --max-size 1.0 KiB" in over.stderr
    assert "its biggest contributors: omegaconf" in over.stderr and "nothing written" in over.stderr
    assert not (tmp_path / "over").exists() and not list(tmp_path.glob(".over*"))
