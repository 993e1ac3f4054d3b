"""run.compile_cache=repeats: a config's first run in a sweep compiles cold into a cache of its own and its
repeats reuse it; every record says cold or warm and what hit; the first-step column reads cold runs only,
and a framework with nothing to reuse is said so (backends/compile_cache.py, job/job.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.backends import compile_cache
from repro.ledger import Ledger
from repro.preflight import plan
from repro.report import comparison
from repro.job import job

from conftest import Sandbox


def test_cache_state_is_read_before_anything_compiles(tmp_path):
    assert compile_cache.start("torch", str(tmp_path / "absent")) == "cold"
    assert compile_cache.start("torch", str(tmp_path)) == "cold"
    (tmp_path / "entry").write_bytes(b"x")
    assert compile_cache.start("torch", str(tmp_path)) == "warm"
    assert set(compile_cache.counts("torch")) == {"fxgraph_hits", "fxgraph_misses", "aot_autograd_hits",
                                                  "aot_autograd_misses"}
    assert compile_cache.counts("torch_xla") == {}
    assert compile_cache.nothing_to_reuse("torch", compiled=False) and not compile_cache.nothing_to_reuse("torch", True)
    assert compile_cache.nothing_to_reuse("jax", compiled=False) is None


def test_one_cache_per_config_and_sweep(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (config,) = plan(["run.compile_cache=repeats"]).jobs
    run_dir = tmp_path / "run"
    first = job._cache_dir(config, run_dir, "c1", "sweep-a")
    assert first == job._cache_dir(config, tmp_path / "other-run", "c1", "sweep-a")  # its repeats: the same
    assert first != job._cache_dir(config, run_dir, "c2", "sweep-a")  # another config
    assert first != job._cache_dir(config, run_dir, "c1", "sweep-b")  # another sweep starts cold
    assert Path(first).is_dir() and str(tmp_path / "cache") in first
    assert job._cache_dir(config, run_dir, "c1", None) == str(run_dir / "compile-cache")  # no sweep: its own
    config.run.compile_cache = "cold"
    assert job._cache_dir(config, run_dir, "c1", "sweep-a") == str(run_dir / "compile-cache")


def test_a_warm_cache_with_nothing_to_reuse_is_said(capsys):
    plan(["framework=torch", "run.compile_cache=repeats"])
    assert "run.compile_cache=repeats with framework=torch: eager PyTorch compiles nothing" in capsys.readouterr().err
    plan(["framework=jax", "run.compile_cache=repeats"])
    assert "compiles nothing" not in capsys.readouterr().err


def _run(rid: str, first: float, state: str | None) -> dict:
    results = {"steady_median_s": 0.01, "first_step_s": first, "second_step_s": first / 10}
    if state:
        results["compile_cache"] = {"mode": "repeats", "state": state}
    return {"id": rid, "status": "ok", "config": {"framework": {"name": "jax"}, "run": {"batch_size": 8},
                                                  "model": {"name": "mlp", "preset": "tiny"}}, "results": results}


def test_first_steps_come_from_cold_runs_only():
    row = comparison.row([_run("a", 0.8, "cold"), _run("b", 0.2, "warm"), _run("c", 0.25, "warm")], "jax", {})
    assert row.first_s == 0.8 and row.second_s == pytest.approx(0.08) and row.warm == 2 and not row.first_warm
    assert row.cells()["first"] == "800"
    only_warm = comparison.row([_run("b", 0.2, "warm"), _run("c", 0.3, "warm")], "jax", {})
    assert only_warm.first_warm and only_warm.cells()["first"] == "250 warm"
    old = comparison.row([_run("x", 0.5, None), _run("y", 0.7, None)], "jax", {})  # records from before: all cold
    assert old.first_s == 0.6 and old.warm == 0 and not old.first_warm


@pytest.mark.slow
def test_repeats_reuse_the_first_runs_compile_and_measure_the_same(tmp_path):
    box = Sandbox(tmp_path)
    proc = box.run("-m", "framework=jax", "model=mlp", "model.preset=tiny", "run.steps=12", "run.warmup=4",
                   "run.repeats=3", "run.compile_cache=repeats", "verdict.max_reruns=0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    runs = sorted((r for r in Ledger(box.ledger).heads(kind="run") if r["status"] == "ok"), key=lambda r: r["sweep"]["job"])
    caches = [r["results"]["compile_cache"] for r in runs]
    assert [c["state"] for c in caches] == ["cold", "warm", "warm"]
    assert caches[0]["hits"] == 0 and caches[0]["misses"] >= 1
    assert all(c["hits"] >= 1 and c["misses"] == 0 for c in caches[1:])
    assert len({r["results"]["loss_sha256"] for r in runs}) == 1  # the same executables, the same numbers
    assert "1 run(s) started with a warm" not in proc.stdout and "2 run(s) started with a warm compile cache" in \
        " ".join(proc.stdout.split())
