"""run.start=fork (issue 61: the fork server): every worker of a sweep forked by one server per
framework that imported it once (job/forked.py, worker/forkserver.py), as the same model with the
same result, stated in every verdict, refused beside a fresh start nobody varied, audited, and
ending as a fresh worker ends on Ctrl-C and when its parent is killed."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from repro.config.schema import as_dict, from_dict
from repro.config.spec import config_hash
from repro.report import audit, comparison
from repro.report import verdict as V

from conftest import shipped_ledger
from test_determinism_condition import WOBBLE, _record, _sweep
from test_launcher_parity import _ctrl_c

SERVER = "repro.worker.forkserver"


def _forked(records: list[dict], start: str = "fork") -> list[dict]:
    for r in records:
        r["config"]["run"]["start"] = start
    return records


def test_every_verdict_of_forked_workers_says_so():
    records = _forked(_sweep({("jax", False, None): WOBBLE,
                              ("torch", False, None): [1.5 * w * (1 + 0.002 * i) for i, w in enumerate(WOBBLE)]},
                             ("framework",)))
    (v,) = comparison.build(records).tables[0].verdicts
    assert v.outcome == V.FASTER
    assert ("on vit/tiny with each library's default kernels (run.deterministic=false), each worker forked from an "
            "interpreter that had imported its framework (run.start=fork) (95 % CI") in v.text
    fresh = _sweep({("jax", False, None): WOBBLE, ("torch", False, None): [1.5 * w for w in WOBBLE]}, ("framework",))
    (v,) = comparison.build(fresh).tables[0].verdicts
    assert "run.start" not in v.text  # a fresh interpreter per worker: what a bare script of the framework is


def test_a_forked_side_beside_a_fresh_one_nobody_varied_is_refused_and_audited():
    jax = _forked([_record(f"j{k}", "jax", WOBBLE[k], k, job=k) for k in range(5)])
    torch = [_record(f"t{k}", "torch", 1.5 * WOBBLE[k], k, job=k) for k in range(5)]
    (v,) = comparison.build(jax + torch).tables[0].verdicts
    assert v.outcome == V.UNFAIR and "faster" not in v.text
    assert "(run.start=fork), torch" in v.text and v.text.count("(run.start=fork)") == 1
    found = audit.audit(jax + torch, lambda r: r["id"])
    assert [label for label, _ in found.differences] == ["worker start"]
    assert set(found.differences[0][1].values()) == {"fork", "fresh"}


def test_a_fresh_start_leaves_every_config_hash_as_it_was_and_a_forked_one_is_another_config():
    """run.start came after records were published: at its default a recorded config keeps its hash
    (every shipped record: test_determinism_condition's rebuild test), and a forked start is another run."""
    from repro.ledger import Ledger

    run = next(iter(Ledger(shipped_ledger()).heads(kind="run")))
    config = as_dict(from_dict(run["config"]))
    assert config["run"]["start"] == "fresh" and config_hash(config) == run["config_hash"]
    config["run"]["start"] = "fork"
    assert config_hash(config) != run["config_hash"]


def _servers_in(folder) -> list[psutil.Process]:
    """Fork servers and the workers they forked (a fork keeps its server's command line) started in `folder`."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if SERVER in " ".join(p.info["cmdline"] or ()) and p.cwd() == str(folder):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


@pytest.mark.slow
def test_a_forked_sweep_imports_each_framework_once_and_measures_the_same_model(sandbox):
    args = ("-m", "model=mlp", "framework=jax,torch", "run.steps=6", "run.warmup=2", "verdict.max_reruns=0")
    forked = sandbox.run(*args, "run.repeats=2", "run.start=fork")
    assert forked.returncode == 0, forked.stdout[-3000:] + forked.stderr[-3000:]
    assert "(run.start=fork)" in forked.stdout
    fresh = sandbox.run(*args)
    assert fresh.returncode == 0, fresh.stdout[-3000:] + fresh.stderr[-3000:]
    runs = [r for r in sandbox.heads() if r.get("kind") == "run"]
    assert sorted((r["config"]["run"].get("start", "fresh"), r["status"]) for r in runs) == \
        [("fork", "ok")] * 4 + [("fresh", "ok")] * 2
    by = {}
    for r in runs:
        by.setdefault((r["config"]["framework"]["name"], r["config"]["run"].get("start", "fresh")), []).append(r)
    for framework in ("jax", "torch"):
        forks = by[(framework, "fork")]
        assert all(r["results"]["setup"]["imported_ahead"] for r in forks)
        # one server per framework imported it once and forked every run of it
        assert len({r["results"]["setup"]["forked_by"] for r in forks}) == 1
        assert not any("forked_by" in r["results"]["setup"] for r in by[(framework, "fresh")])
        # the same model, the same batches, the same result whichever way its process started
        assert {r["results"]["params_sha256"] for r in forks + by[(framework, "fresh")]} == \
            {by[(framework, "fresh")][0]["results"]["params_sha256"]}
    assert _servers_in(sandbox.root) == []  # the sweep's close ended its servers


@pytest.mark.slow
def test_ctrl_c_ends_a_forked_sweep_as_it_ends_a_fresh_one(sandbox):
    got = _ctrl_c(sandbox, ["run.start=fork"])
    assert got == {"rc": 130, "statuses": ["ok", "interrupted"], "traceback": False,
                   "last line": "repro: interrupted", "ok sweep records": 0}, got
    assert _servers_in(sandbox.root) == []


@pytest.mark.slow
def test_a_killed_parent_takes_its_fork_server_and_forked_worker_with_it(sandbox):
    """SIGKILL of the repro process alone (no handler runs): the server dies with its parent, and
    the worker it forked with the server (worker/lifeline.py); nothing of the run is left running."""
    proc = subprocess.Popen(sandbox.repro_cmd("model=mlp", "framework=torch", "run.steps=1000000", "run.start=fork"),
                            cwd=sandbox.root, env=sandbox.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and len(_servers_in(sandbox.root)) < 2:  # the server and its worker
            assert proc.poll() is None
            time.sleep(0.3)
        assert len(_servers_in(sandbox.root)) == 2
        time.sleep(1)
        proc.kill()
        proc.wait()
        deadline = time.time() + 60
        while time.time() < deadline and _servers_in(sandbox.root):
            time.sleep(0.3)
        assert _servers_in(sandbox.root) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in _servers_in(sandbox.root):
            p.kill()
    assert [r["status"] for r in sandbox.records() if r.get("kind") == "run"] == ["started"]


@pytest.mark.slow
def test_a_fork_server_that_cannot_start_fails_its_run_naming_why_and_never_starts_it_fresh(sandbox):
    proc = sandbox.run("model=mlp", "framework=torch", "run.steps=8", "run.start=fork", "framework.python=/bin/false")
    (run,) = [r for r in sandbox.heads() if r.get("kind") == "run"]
    assert proc.returncode != 0 and run["status"] == "failed"
    assert run["error"]["reason"].startswith("could not fork the worker (run.start=fork): the fork server "
                                    "(repro.worker.forkserver torch torch) did not start"), run["reason"]
    assert _servers_in(sandbox.root) == []


@pytest.mark.slow
def test_a_closed_server_ends_on_its_own_not_killed(tmp_path):
    """close_all shuts its control socket down: the server sees EOF and exits 0 (a close alone left the
    reader thread's recv holding the socket open, and the server was killed after 10 s, each sweep's close)."""
    import sys

    from repro.job import forked, launch

    env = {**os.environ, "PYTHONPATH": str(Path(forked.__file__).parents[2]), "JAX_PLATFORMS": "cpu"}
    server = forked.server(("test",), [sys.executable, "-m", SERVER, "jax", "jax"], env, launch.make_run_dir)
    assert server.alive()
    forked.close_all()
    assert server.proc.returncode == 0 and not server.folder.exists()
