"""Launcher adapters that run a round in another process (loop/rounds.py): submitit's local
executor (the same adapter as SLURM's, loop/submitit_rounds.py) and joblib. The sweep loop hands
them each round; the round's process attaches to the sweep (repro.session `attached`) and records
exactly what a local sweep records."""

from __future__ import annotations

import subprocess
import time

import psutil
import pytest

from repro.flat import flatten

ARGS = ("-m", "model=mlp", "framework=jax,torch", "run.steps=6", "run.warmup=2")
# Values that differ between any two sweeps; the fields themselves must be the same.
VOLATILE = ("environment.variables.",)  # which variables are set is the environment, not the record format


def _launcher_workers_left(root) -> list[list[str]]:
    """Processes of the launcher's (loky's, submitit's) still running in the sandbox."""
    left = []
    for p in psutil.process_iter(["cmdline", "cwd"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if p.info["cwd"] == str(root) and ("loky" in cmdline or "submitit" in cmdline):
            left.append(p.info["cmdline"])
    return left


def _fields(record: dict) -> set[str]:
    return {k for k in flatten(record) if not k.startswith(VOLATILE)}


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    from conftest import Sandbox

    box = Sandbox(tmp_path_factory.mktemp("local"))
    proc = box.run(*ARGS, "tracking.experiment=launch")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return box


@pytest.mark.slow
@pytest.mark.parametrize("launcher", [["hydra/launcher=submitit_local"],
                                      ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
                                      ["hydra/launcher=ray"]],
                         ids=["submitit_local", "joblib", "ray"])
def test_launcher_records_same_fields_as_local(request, sandbox, local_sweep, launcher):
    # Output to files, not pipes: a launcher's worker left behind holding them would make the
    # run wait for it (joblib's loky workers idle 300 s), not fail the check below.
    out, err = sandbox.root / "stdout.txt", sandbox.root / "stderr.txt"
    ray = launcher == ["hydra/launcher=ray"]
    if ray:  # a real Ray head on loopback (tests/ray_cluster.py)
        launcher = [*launcher, f"hydra.launcher.ray.init.address={request.getfixturevalue('ray_head').address}"]
    with out.open("w") as stdout, err.open("w") as stderr:
        returncode = subprocess.run(sandbox.repro_cmd(*ARGS, *launcher, "tracking.experiment=launch"), cwd=sandbox.root,
                                    env=sandbox.env(), stdout=stdout, stderr=stderr, timeout=600).returncode
    proc = subprocess.CompletedProcess([], returncode, out.read_text(), err.read_text())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    deadline = time.time() + 10  # loky's resource tracker ends once it reads the command's exit (EOF): a moment after
    while _launcher_workers_left(sandbox.root) and time.time() < deadline:
        time.sleep(0.2)
    assert not _launcher_workers_left(sandbox.root), "the launcher's workers outlived the command by 10 s"
    assert "leaked" not in proc.stderr, proc.stderr[-3000:]
    remote = {h["config"]["framework"]["name"]: h for h in sandbox.heads()}
    local = {h["config"]["framework"]["name"]: h for h in local_sweep.heads()}
    assert set(remote) == {"jax", "torch"} and all(h["status"] == "ok" for h in remote.values())
    assert len({h["sweep"]["id"] for h in remote.values()}) == 1
    # The local sweep's jobs ran in workers started ahead (their framework imported: the first as the
    # sweep started, the second while the first started). submitit runs the round in one process of its
    # own: its first job starts cold there, the second's worker is started while the first starts;
    # joblib with n_jobs=2 runs each job in its own process, both cold. The same losses either way
    assert [local[fw]["results"]["setup"]["imported_ahead"] for fw in ("jax", "torch")] == [True, True]
    ahead = [h["results"]["setup"]["imported_ahead"] for h in sorted(remote.values(), key=lambda h: h["sweep"]["job"])]
    assert ahead == ([False, True] if "joblib" not in launcher[0] else [False, False]), ahead
    for fw in ("jax", "torch"):  # Ray's scheduler block names its job, task and node where the local one says "local"
        skip = ("scheduler.",) if ray else ()
        assert {f for f in _fields(remote[fw]) if not f.startswith(skip)} == \
            {f for f in _fields(local[fw]) if not f.startswith(skip)}, fw
        assert remote[fw]["results"]["loss_sha256"] == local[fw]["results"]["loss_sha256"]
    runs = sandbox.mlflow_runs("launch")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 2
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert "mlp/tiny · batch 32" in proc.stdout  # the closing table, read back from the ledger


def _hydra_launchers() -> dict[str, str]:
    """Every `hydra/launcher=` choice Hydra knows here (its own and its installed plugins') -> its _target_."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from repro import paths

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(paths.conf_dir()), version_base="1.3"):
            names = GlobalHydra.instance().config_loader().get_group_options("hydra/launcher")
            return {name: str(compose("config", overrides=[f"hydra/launcher={name}"],
                                      return_hydra_config=True).hydra.launcher._target_) for name in names}
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.slow
def test_every_launcher_hydra_knows_is_registered_once_beside_its_adapter():
    """Each `hydra/launcher=` choice Hydra composes parses to the registration of that name (loop/launchers.py),
    each registered in the adapter module it makes; only the default runs rounds in this process."""
    import inspect

    from repro.loop import launchers

    known = _hydra_launchers()
    assert {"basic", "joblib", "submitit_local", "submitit_slurm", "ray"} <= set(known), known
    for choice, target in known.items():
        assert launchers.parse(target).name == choice, (choice, target)
    registered = launchers.registered()
    assert [r.name for r in registered] == ["basic", "joblib", "ray", "submitit_local", "submitit_slurm"]
    assert {r.name for r in registered} <= set(known)  # every registered one is a choice Hydra composes
    assert launchers.parse("").name == "basic" and [r.name for r in registered if r.in_process] == ["basic"]
    assert [r.name for r in registered if r.remote] == ["ray", "submitit_slurm"]
    assert [r.name for r in registered if r.scheduler == "slurm"] == ["submitit_slurm"]
    for r in registered:  # each beside its adapter: the module that registers it is the one its factory makes from
        module = inspect.getmodule(r.make).__name__
        assert module.startswith("repro.loop.") and (module.endswith("_rounds") or module == "repro.loop.rounds"), module


def test_a_launcher_registered_twice_is_refused_naming_both():
    from repro.loop import launchers

    launchers.registered()
    with pytest.raises(ValueError) as err:
        launchers.launcher("ray", target="somewhere.else.Ray", where=launchers.CLUSTER)(lambda launch: None)
    assert str(err.value) == ("launcher 'ray' (somewhere.else.Ray) is registered already as 'ray' "
                              "(repro.loop.ray_rounds.Ray); a launcher is registered once, beside its adapter")
    with pytest.raises(ValueError, match="where='nowhere' is none of here, host, cluster"):
        launchers.launcher("k8s", target="x.K8s", where="nowhere")
    assert [r.name for r in launchers.registered()].count("ray") == 1


def test_a_launcher_whose_package_is_missing_is_refused_naming_the_install(monkeypatch):
    import importlib.util

    from repro.loop import launchers

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    assert launchers.named("ray").missing() == ("hydra/launcher=ray needs ray, which is not installed here; "
                                                "pip install 'repro[ray]'")
    assert launchers.named("basic").missing() is None


def test_an_unknown_launcher_is_refused_by_the_preflight_by_name():
    from repro import preflight
    from repro.config import ConfigError

    assert preflight.plan(["-m", "model=mlp", "hydra/launcher=joblib"]).launcher.name == "joblib"
    with pytest.raises(ConfigError) as err:
        preflight.plan(["model=mlp", "hydra.launcher._target_=my_plugins.K8sLauncher"])
    assert str(err.value) == ("hydra.launcher._target_='my_plugins.K8sLauncher' is a launcher repro does not "
                              "know; choose hydra/launcher=basic, joblib, ray, submitit_local, submitit_slurm (a new "
                              "one is registered beside its adapter in src/repro/loop/: docs/architecture.md, "
                              "'A launcher')")


def test_a_slurm_round_past_the_launchers_time_limit_is_refused_naming_both(monkeypatch):
    """A round runs its configs one after another in one allocation: where the ledger's estimate of
    that passes hydra.launcher.timeout_min, the sweep is refused before anything is submitted."""
    from repro.config import ConfigError
    from repro.loop import submitit_rounds
    from repro.preflight import estimate

    costs = tuple(estimate.ConfigCost(h, 3, past=4, parts={"steps": 50.0}) for h in ("a", "b"))
    est = estimate.Estimate(costs, 3)
    submitit_rounds.fits_time_limit(est, {"timeout_min": 2})  # 100 s of a round within 2 min
    with pytest.raises(ConfigError) as err:
        submitit_rounds.fits_time_limit(est, {"timeout_min": 1})
    assert str(err.value).startswith("a round of hydra/launcher=submitit_slurm runs its 2 configs one after another "
                                     "in one allocation: estimated 1 min 40 s from the ledger, past the time limit "
                                     "hydra.launcher.timeout_min=1 (1 min"), str(err.value)
    assert "hydra.launcher.timeout_min=2 or more" in str(err.value)
    monkeypatch.setattr(submitit_rounds, "partition_limit_min", lambda partition: 1.5 if partition == "short" else None)
    with pytest.raises(ConfigError, match=r"past the time limit partition short's MaxTime \(1 min 30 s\)"):
        submitit_rounds.fits_time_limit(est, {"timeout_min": 60, "partition": "short"})
    assert [submitit_rounds.minutes(t) for t in ("UNLIMITED", "30", "10:30", "01:00:00", "1-00:00:00", "2-12")] == \
        [None, 30, 10.5, 60, 1440, 3600]


def test_auto_says_a_pair_run_side_by_side_is_refused_not_that_there_is_none(monkeypatch):
    """run.repeats=auto under joblib with n_jobs > 1: the sweep has a pair, but its runs went side by side
    and are never judged; the stop names that refusal, not "no two configs differ only in a compared key"."""
    from types import SimpleNamespace

    from repro import repeats
    from repro.report import comparison, verdict

    why = ("their runs were launched 2 at a time on one host (hydra/launcher=joblib with n_jobs > 1): each slowed "
           "the other; run them one after another (hydra.launcher.n_jobs=1, or the default launcher)")
    refused = verdict.Verdict(verdict.UNFAIR, "jax", "torch", 1.0, 1, 1, what="mlp/tiny", refused=why)
    monkeypatch.setattr(comparison, "build", lambda records: SimpleNamespace(tables=[SimpleNamespace(verdicts=[refused])]))
    assert repeats._verdicts([]) == []
    assert repeats._nothing([]) == f"nothing to decide: every pair is refused a verdict (jax vs torch: {why})"
    monkeypatch.setattr(comparison, "build", lambda records: SimpleNamespace(tables=[]))
    assert repeats._nothing([]) == repeats.NOTHING


def test_a_resumed_round_flagged_busy_when_it_first_ran_is_not_run_again(tmp_path):
    """run.resume=true keeps an earlier sweep's records as they were: a round of resumed runs that
    telemetry flagged busy back then is not rerun (it would run what the resume skipped); a round this
    sweep ran and telemetry flagged is, as before."""
    from types import SimpleNamespace

    from test_sweep_loop import _Host  # the least a host of the loop is

    from repro.loop import sweep

    busy = {"machine": {"other_cpu_share": 0.9}}

    from repro.loop.rounds import Elsewhere

    class Adapter(Elsewhere):  # the protocol's defaults (loop/rounds.py)
        name, rounds = "fake", []

        def run_round(self, host, jobs, first, hooks):
            self.rounds.append(first)
            resumed = first == 0  # round 1: the earlier sweep's records, flagged busy when they ran
            out = [{"id": f"r{first + i}", "status": "ok", **busy, **({"resumed_from": "T"} if resumed else {})}
                   for i in range(len(jobs))]
            for r in out:
                host.finished(r)
            return out

    configs = [(SimpleNamespace(run=SimpleNamespace(steps=6), name=n), (f"x={n}",)) for n in "ab"]
    host, adapter = _Host(tmp_path), Adapter()
    sweep.run(host, sweep.Fixed(configs, 2, "S", lambda c, o: c.name), 5, max_reruns=1, launcher=adapter)
    assert adapter.rounds == [0, 2, 4]  # round 1 (resumed) not rerun; round 2 (run here, busy) rerun once
    assert [line.split(" (")[0] for line in host.said] == ["round 2 runs again"]


def test_run_resume_is_not_what_varied_and_an_interrupted_sweep_writes_no_ok_record(tmp_path):
    """A resumed sweep's rows are not labelled `resume False` nor its audit calling run.resume varied (it says
    whether a job is skipped, not what runs); the record of an interrupted sweep (the runs it reused, their
    identities) says `interrupted`, never `ok`."""
    from repro.ledger import Ledger
    from repro.report import trajectory, varied

    then = {"overrides": ["framework=torch", "run.batch_size=16"]}
    now = {"overrides": ["framework=torch", "run.batch_size=16", "run.resume=true"]}
    assert varied.swept_keys([then, now]) == []
    reused = [{"id": "a" * 16, "resumed_from": "T", "sweep": {"id": "S", "job": 0}, "status": "ok"}]
    record = trajectory.store(Ledger(tmp_path), {"id": "S", "experiment": "e", "jobs": 4}, reused, "interrupted")
    assert record["status"] == "interrupted" and record["reused"][0]["id"] == "a" * 16


def test_a_ray_round_gets_repros_variables_but_never_a_credential():
    """Ray writes a task's runtime environment (its env_vars) to runtime_env_agent.log in plain text:
    what hydra/launcher=ray forwards to a round holds no secret-named variable and no URL with a password."""
    from repro.loop.ray_rounds import forwarded

    environ = {"REPRO_MACHINE_DIR": "/m", "XDG_CACHE_HOME": "/c", "PYTHONPATH": "/src", "HOME": "/root",
               "MLFLOW_TRACKING_URI": "http://bob:s3cret@mlflow:5000", "MLFLOW_TRACKING_PASSWORD": "s3cret-pw",
               "MLFLOW_TRACKING_TOKEN": "tok-123456", "PIP_INDEX_URL": "https://u:pw1234@pypi.example/simple",
               "PIP_FIND_LINKS": "/opt/wheels", "RAY_ADDRESS": "h:6379", "REPRO_REAL_URIS": '["http://a:b@h"]'}
    assert forwarded(environ) == {"REPRO_MACHINE_DIR": "/m", "XDG_CACHE_HOME": "/c", "PYTHONPATH": "/src",
                                  "PIP_FIND_LINKS": "/opt/wheels"}
