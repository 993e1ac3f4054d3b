"""Your own model: a workload outside repro's source, found by Hydra's conventions.

- The example package (examples/own_model) installed into a fresh venv and run from a folder
  outside the repo: found by `--config-dir` (its yaml's `_target_`) and by its `repro.models`
  entry point, JAX and PyTorch from one start agree over 50 steps, the record names its source,
  a replay says when that source changed and `--as-recorded` restores it: exact.
- A broken workload stops in the preflight (exit 2, nothing written), naming the file and the piece.
- The models import nothing of repro.config and config.schema imports no model.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import repro
from repro import paths

SRC = Path(repro.__file__).parent
EXAMPLE = paths.repo_root() / "examples" / "own_model"
GOOD = (EXAMPLE / "own_model.py").read_text()


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def test_models_import_no_config_and_the_schema_no_model():
    """The circle config/schema.py <-> models/__init__.py is gone: an ast scan of every import
    (lazy and TYPE_CHECKING ones included)."""
    from_models = {str(p.relative_to(SRC)): sorted(m for m in _imports(p) if m.startswith("repro.config"))
                   for p in (SRC / "models").rglob("*.py")}
    assert {k: v for k, v in from_models.items() if v} == {}
    schema = _imports(SRC / "config" / "schema.py")
    assert not [m for m in schema if m.startswith("repro.models")]
    assert "repro.models" in {m.rsplit(".", 1)[0] if m.startswith("repro.models.") else m
                              for m in _imports(SRC / "preflight" / "checks.py")}  # the check that reads both


def test_the_scan_sees_a_model_importing_config(tmp_path):
    probe = tmp_path / "m.py"
    probe.write_text("def f():\n    from repro.config.schema import dims\n")
    assert "repro.config.schema" in _imports(probe)


# ---- a fresh venv with the example installed ---------------------------------------------------

def fresh_venv(path: Path) -> Path:
    """A venv that sees this interpreter's packages (a .pth adding its site-packages, with their own
    .pth files: torch and jax are not installed twice), and pip's, from the same place."""
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(path), "platbase": str(path)})["purelib"])
    ours = sysconfig.get_paths()["purelib"]  # this interpreter's (the main venv's), from sys.executable
    (site / "_repro_parent_venv.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return path / "bin" / "python"


class Outside:
    """A clone of repro's committed code, and a folder outside it with the example package in git."""

    def __init__(self, root: Path):
        self.root = root
        self.clone = root / "repro"
        subprocess.run(["git", "clone", "-q", str(paths.repo_root()), str(self.clone)], check=True)
        self.pkg = root / "own_model_pkg"
        shutil.copytree(EXAMPLE, self.pkg)
        self.git("init", "-q")
        self.commit("the example")
        self.python = fresh_venv(root / "venv")
        self.work = root / "work"
        self.work.mkdir()
        self.ledger = self.work / "ledger"
        self.env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "PYTHONPATH", "REPRO_SNAPSHOT")}
        self.env.update(PYTHONPATH=str(self.clone / "src"), REPRO_ENV_CACHE=str(root / "cache"),
                        XDG_CACHE_HOME=str(root / "xdg"), PYTHONUNBUFFERED="1",
                        MLFLOW_TRACKING_URI=f"sqlite:///{self.work / 'mlflow.db'}")
        out = subprocess.run([str(self.python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                              "-e", str(self.pkg)], capture_output=True, text=True, env=self.env, cwd=self.work)
        assert out.returncode == 0, out.stderr

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.pkg), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                              capture_output=True, text=True, check=True).stdout

    def commit(self, message: str) -> None:
        self.git("add", "-A")
        self.git("commit", "-qm", message)

    def repro(self, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.python), "-m", "repro", *args], cwd=self.work, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def records(self, kind: str = "run") -> list[dict]:
        """In the order they were made (a record's file is named by its id, which says nothing of when)."""
        out = [json.loads(p.read_text()) for p in self.ledger.glob("*/*.json")]
        return sorted((r for r in out if r.get("kind") == kind and r.get("status") != "started"), key=lambda r: r["created"])


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    return Outside(tmp_path_factory.mktemp("own"))


@pytest.fixture(scope="module")
def trained(outside) -> tuple[dict, dict]:
    """The package's model swept over JAX and torch from one start (its JAX run is what the replay test
    replays): a fixture, so each test that reads it runs alone as in its module."""
    out = outside.repro("--config-dir", str(outside.pkg / "conf"), "-m", "framework=jax,torch", "model=resconv",
                        "run.init=shared", "run.steps=50", "run.warmup=5", "run.batch_size=8",
                        f"ledger.dir={outside.ledger}", "progress.mode=none")
    assert out.returncode == 0, out.stdout + out.stderr
    jax_run, torch_run = sorted(outside.records(), key=lambda r: r["config"]["framework"]["name"])
    return jax_run, torch_run


@pytest.mark.slow
def test_found_by_config_dir_trained_alike_from_one_start(outside, trained):
    jax_run, torch_run = trained
    assert {jax_run["status"], torch_run["status"]} == {"ok"}
    assert jax_run["config"]["model"]["_target_"] == "own_model.ResConvNet"
    assert jax_run["results"]["init_params_sha256"] == torch_run["results"]["init_params_sha256"]
    a, b = jax_run["results"]["loss"], torch_run["results"]["loss"]
    assert len(a) == len(b) == 50
    assert max(abs(x - y) / abs(x) for x, y in zip(a, b)) < 1e-4
    wide = outside.repro("compare", "--sweep", jax_run["sweep"]["id"], "--wide", "--ledger", str(outside.ledger))
    assert wide.returncode == 0 and "max " in wide.stdout and ">1e-4 never" in wide.stdout  # the trajectory column
    assert {jax_run["results"]["flops_source"], torch_run["results"]["flops_source"]} == \
        {"xla_cost_analysis", "torch_flop_counter"}
    src = jax_run["workload_source"]
    assert src["distribution"] == {"name": "own-model", "version": "0.1.0", "installed": "editable"}
    assert src["git"]["commit"] == outside.git("rev-parse", "HEAD").strip() and src["git"]["dirty"] is False
    assert src["file"] == str(outside.pkg / "own_model.py") and len(src["sha256"]) == 64
    assert not str(outside.work).startswith(str(paths.repo_root()))


@pytest.mark.slow
def test_found_by_entry_point_and_listed_with_its_source(outside):
    listed = outside.repro("models", "--json", "--config-dir", str(outside.pkg / "conf"))
    rows = [r for r in json.loads(listed.stdout) if r["model"] == "resconv"]
    assert {r["source"] for r in rows} == {"entry point own_model:ResConvNet (own-model 0.1.0)",
                                           f"{outside.pkg / 'conf/model/resconv.yaml'} (_target_: own_model.ResConvNet)"}
    out = outside.repro("framework=torch", "model=resconv", "model.preset=tiny", "run.steps=4", "run.warmup=2",
                        f"ledger.dir={outside.ledger}", "progress.mode=none")
    assert out.returncode == 0, out.stdout + out.stderr
    assert outside.records()[-1]["config"]["model"]["_target_"] == "own_model.ResConvNet"


@pytest.mark.slow
def test_layouts_and_backends_it_does_not_declare_are_refused(outside):
    for args, says in ((["framework=torch_xla"], "does not say it runs under PyTorch/XLA"),
                       (["framework=jax", "sharding=fsdp"], "declares no fsdp partitioning")):
        out = outside.repro(*args, "model=resconv", f"ledger.dir={outside.work / 'refused'}")
        assert out.returncode == 2 and says in out.stderr and "own_model.py" in out.stderr, out.stderr
        assert not (outside.work / "refused").exists()


@pytest.mark.slow
def test_replay_names_a_changed_source_and_as_recorded_restores_it(outside, trained):
    original = trained[0]
    module = outside.pkg / "own_model.py"
    module.write_text(module.read_text().replace("x.mean(axis=(1, 2))", "x.max(axis=(1, 2))")
                      .replace("x.mean(dim=(2, 3))", "x.amax(dim=(2, 3))"))
    outside.commit("max pooling")
    plain = outside.repro("replay", original["id"], "--ledger", str(outside.ledger), "--progress", "none")
    assert "workload differs" in plain.stdout and "sha256" in plain.stdout, plain.stdout + plain.stderr
    assert "verdict: differs" in plain.stdout and "workload differs" in plain.stdout.split("verdict:")[1]  # its sentence
    assert outside.records("replay")[-1]["parts"]["workload"] == "differs"
    exact = outside.repro("replay", original["id"], "--as-recorded", "--ledger", str(outside.ledger),
                          "--progress", "none")
    assert exact.returncode == 0, exact.stdout + exact.stderr
    assert "restored: workload own_model.ResConvNet" in exact.stdout
    verdict = outside.records("replay")[-1]
    assert verdict["status"] == "exact", exact.stdout[-3000:]
    assert verdict["parts"]["workload"] == "restored" and "workload restored" in exact.stdout.split("verdict:")[1]
    rerun = next(r for r in outside.records() if r["id"] == verdict["replay"])
    assert rerun["workload_source"]["sha256"] == original["workload_source"]["sha256"]


# ---- broken workloads ----------------------------------------------------------------------------

BROKEN = {
    "import_error": (GOOD.replace("from repro.models.api import Model", "import not_a_package_xyz\nfrom repro.models.api import Model"),
                     ["import_error.py", "ModuleNotFoundError", "not_a_package_xyz"]),
    "missing_method": (GOOD.split("    def torch_module")[0],
                       ["missing_method.py", "lacks torch_module()"]),
    "param_counts": (GOOD.replace("nn.Linear(w, dims[\"classes\"])", "nn.Linear(w, dims[\"classes\"], bias=False)"),
                     ["param_counts.py", "parameter counts differ", "5,258", "5,248", "10#0.bias"]),
    "output_shapes": (GOOD.replace("x.mean(axis=(1, 2))", "x.mean(axis=1)"),
                      ["output_shapes.py", "output shapes differ", "(2, 16, 10)", "(2, 10)"]),
    "converter": (GOOD + textwrap.dedent("""
        class Broken(ResConvNet):
            def flax_state(self, fmodel):
                return {k: v * 2 for k, v in super().flax_state(fmodel).items()}
        """), ["converter.py", "does not round-trip"]),
    "ambiguous": (GOOD.replace("self.res1 = nn.Conv2d(w, w, 3, padding=1)\n                self.res2 = nn.Conv2d(w, w, 3, padding=1)",
                               "self.res2 = nn.Conv2d(w, w, 3, padding=1)\n                self.res1 = nn.Conv2d(w, w, 3, padding=1)"),
                  ["ambiguous.py", "ambiguous", "block_a/kernel, block_b/kernel", "res2.weight, res1.weight"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_workload_stops_in_the_preflight(case, tmp_path):
    source, expected = BROKEN[case]
    (tmp_path / f"{case}.py").write_text(source)
    cls = "Broken" if case == "converter" else "ResConvNet"
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "bad.yaml").write_text(f"_target_: {case}.{cls}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC.parent), str(tmp_path)]),
           "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    ledger = tmp_path / "ledger"
    out = subprocess.run([sys.executable, "-m", "repro", "--config-dir", "conf", "model=bad", "run.init=shared",
                          f"ledger.dir={ledger}", "tracking.uri=sqlite:///" + str(tmp_path / "m.db")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    message = out.stderr
    assert "invalid config, nothing was run" in message
    for piece in expected:
        assert piece in message, (piece, message)
    assert not ledger.exists() and not (tmp_path / "m.db").exists()
    print(f"\n{case}: {message.strip()}")


def test_config_dir_reaches_the_compose_and_its_cache_key(tmp_path, monkeypatch):
    """`--config-dir DIR` becomes one absolute hydra.searchpath entry (the same key from any cwd),
    and the compose cache's key changes with the folder's yaml."""
    from repro.config import compose_cache
    from repro.preflight import search

    (tmp_path / "conf" / "model").mkdir(parents=True)
    yaml = tmp_path / "conf" / "model" / "mine.yaml"
    yaml.write_text("_target_: mine.Model\n")
    monkeypatch.chdir(tmp_path)
    args = search.normalise(["--config-dir", "conf", "model=mine", "hydra.searchpath=[pkg://other.conf]"])
    assert args == ["model=mine", f"hydra.searchpath=['file://{tmp_path / 'conf'}','pkg://other.conf']"]
    assert search.normalise(["-cd=conf"]) == search.normalise([f"--config-dir={tmp_path / 'conf'}"])
    before = compose_cache.key(args, search.fingerprint(args))
    yaml.write_text("_target_: mine.Other\n")
    assert compose_cache.key(args, search.fingerprint(args)) != before
    with pytest.raises(ValueError, match="no such folder"):
        search.normalise(["--config-dir", "nowhere"])
