"""The GPU pass rehearsed on CPU (issue 58 item 3): experiments/gpu/device_pass.sh itself, both calls, on a copy of
the working tree as the device receives it (no .git: the commit comes from the pack's bundle), with a pack built
here installed offline into a fresh target folder, hardware=cpu and tiny presets. Every line the script runs on the
device runs here but nvidia-smi's: a change that breaks the script fails here, not on a lent machine.

The pack is this machine's (Python 3.11): the runtime set less what the venv has, but hydra-core and omegaconf,
which the parent and the worker import, so they install into the target folder and are imported from it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from repro.envs import lock

ROOT = Path(__file__).resolve().parent.parent
PACKED = ("hydra-core", "omegaconf")
# the rehearsal's knobs (device_pass.sh's header): smaller work, the same lines; budgets x3 on a shared CI host,
# but the A/As': 10 s each (30 s at x3), which cuts them on a busy host (the path a cut part takes, rehearsed too; quiet,
# aa_torch took 11 s and aa_jax 27 s; at 60 s each, a busy host spent 2 x 60 s of CPU on them)
REHEARSAL = {"DEVICE_PASS_HW": "cpu", "DEVICE_PASS_PRESET": "tiny", "DEVICE_PASS_PRECISION": "fp32",
             "DEVICE_PASS_ROUNDS": "2", "DEVICE_PASS_TRIALS": "2", "DEVICE_PASS_BUDGET_X": "300", "DEVICE_PASS_AA_S": "10",
             "DEVICE_PASS_LIMIT_S": "1500", "DEVICE_PASS_VIT_L4": "framework=jax,torch model.impl=native",
             "DEVICE_PASS_EXTRA": "run.steps=12 run.warmup=2 verdict.max_reruns=0"}


def _device_tree(dest: Path) -> None:
    """The checkout as the device tool sends it: tracked and untracked-not-ignored files, without .git."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        src = ROOT / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_device_pass_rehearsed_on_cpu_both_calls(tmp_path):
    tree, out, site, work = (tmp_path / p for p in ("tree", "out", "site", "work"))
    _device_tree(tree)
    text = lock.current()
    have = tmp_path / "have.txt"  # this venv as the "image": all it has but PACKED
    have.write_text("".join(f"{line}\n" for n, line in lock.parse(text).requirements.items()
                            if n not in PACKED and "==" in line))
    packed = subprocess.run([sys.executable, "-m", "repro", "env", "pack", "current", "--runtime-only", "--have", str(have),
                             "--max-size", "60MiB", "--out", str(tree / ".pack")], cwd=ROOT, capture_output=True, text=True)
    assert packed.returncode == 0, packed.stderr
    assert "  2 wheels, " in packed.stdout and "runtime only: " in packed.stdout
    env = {**os.environ, **REHEARSAL, "DEVICE_PASS_SITE": str(site), "DEVICE_PASS_WORK": str(work),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    summary, walls = {}, {}
    for call in (1, 2):
        t0 = time.monotonic()
        done = subprocess.run(["bash", "experiments/gpu/device_pass.sh", str(call), str(out)], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=1700)
        walls[call] = time.monotonic() - t0
        summary[call] = (out / f"summary{call}.txt").read_text()
        assert done.returncode == 0, summary[call] + done.stdout[-3000:]
        assert f"call {call}: ended rc 0" in summary[call] and "0 part(s) failed" in summary[call]
        # both calls: the pack checked and installed into the fresh folder, the commit from its bundle
        assert "installed 2 wheels" in summary[call] and (site / "hydra").is_dir() and (site / "omegaconf").is_dir()
        shown = re.search(r"^code: ([0-9a-f]{7,}) ", summary[call], re.M)  # the packed commit (HEAD may move meanwhile)
        assert shown and json.loads((tree / ".pack" / "manifest.json").read_text())["commit"].startswith(shown[1])
        assert "gpu: none (a rehearsal: hardware=cpu) -> hardware=cpu" in summary[call]
        assert "\ntorch 2." in summary[call] and "mlflow 3." in summary[call]
        for name in (f"call{call}.log", f"call{call}.tar.gz", "image-packages.txt"):
            assert (out / name).is_file(), name
        with tarfile.open(out / f"call{call}.tar.gz") as tar:
            names = tar.getnames()
        assert any(n.startswith("./ledger/") for n in names) and "./mlflow.db" in names
    print(f"rehearsal walls: call 1 {walls[1]:.0f} s, call 2 {walls[2]:.0f} s")
    one, two = summary[1], summary[2]
    assert "vit_l4: rc 0 in" in one and "gpu_tests: rc 0 in" in one and " skipped" in one
    assert (work / "reports" / "vit_l4" / "report.md").is_file()
    assert "price: rc 0 in" in two
    for aa in ("aa_torch", "aa_jax"):  # done, or cut at its budget (runs cut are recorded interrupted)
        assert re.search(rf"{aa}: rc (0 in|124 in .*: cut at its budget)", two), two
        log = (work / f"c2-{aa}.log").read_text()
        # cut at its budget: during its trials, or after it stored them, while it exited (both seen at 60 s)
        assert "run-to-run noise" in log if f"{aa}: rc 0 in" in two else ("interrupted after" in log
                                                                           or "\nstored: ledger " in log), log[-2000:]
    assert (work / "reports" / "price_of_determinism" / "report.md").is_file()
    # the fill decision, one line; JAX's two modes on XLA:CPU are one program: no verdict, said so
    assert "fill decision: torch deterministic with fill_uninitialized_memory=false: " in two
    assert "jax on cpu: the same program in both modes (XLA:CPU has no nondeterministic kernels to replace" in two
    assert (out / "image-packages.txt").read_text().count("==") > 50  # the "image's" own list, saved
