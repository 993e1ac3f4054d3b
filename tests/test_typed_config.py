"""The typed config: `check()` returns `schema.Config`, and its canonical dict is today's, byte for byte."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pytest

from conftest import shipped_ledger
from repro.config import ConfigError, config_hash
from repro import preflight
from repro.config import spec
from repro.config.schema import NON_SEMANTIC_KEYS, Config, as_dict, from_dict
from repro.hashing import canonical_json

REPO = Path(__file__).resolve().parents[1]
SHIPPED = [json.loads(Path(p).read_text()) for p in sorted(glob.glob(str(shipped_ledger() / "*/*.json")))]
RUNS = [r for r in SHIPPED if "config" in r]


def test_check_returns_a_typed_config():
    (config,) = preflight.plan(["model=vit", "run.steps=7"]).jobs
    assert isinstance(config, Config)
    assert (config.run.steps, config.model.name, config.model.impl, config.model.width) == (7, "vit", "native", 64)
    assert "mesh_by_framework" not in as_dict(config)["sharding"]  # read by check, not recorded


@pytest.mark.slow
@pytest.mark.parametrize("record", RUNS, ids=[r["id"] for r in RUNS])
def test_shipped_config_round_trips_with_its_hash(record):
    recorded = record["config"]
    again = as_dict(from_dict(recorded))
    assert config_hash(again) == config_hash(recorded) == record["config_hash"]
    added = {k for k in again if k not in recorded} | {f"{g}.{k}" for g in recorded for k in again[g]
                                                        if k not in recorded[g]}
    if not added:  # a record of today's schema: the same bytes
        assert canonical_json(again) == canonical_json(recorded)
    else:  # older records gain only the keys added since (at defaults that leave the hash as it was)
        # (keys added since are named in spec.ADDED_AT_DEFAULT, or are keys no hash reads)
        since = set(spec.ADDED_AT_DEFAULT) | set(NON_SEMANTIC_KEYS)
        assert {k for k in added if k not in since and k.split(".")[0] not in since} == set(), added


def test_spec_json_bytes_round_trip():
    for config in preflight.plan(["+exp=sharding_cpu"]).jobs:
        d = as_dict(config)
        assert json.dumps(as_dict(from_dict(json.loads(json.dumps(d))))) == json.dumps(d)


def test_worker_spec_round_trips_exactly(tmp_path):
    """The parent writes spec.json from one WorkerSpec and the worker reads the same WorkerSpec back:
    equal typed parts (config, rendezvous), the same bytes when written again, and the file's
    layout the one every worker (today's, or recorded code's under --as-recorded) reads."""
    import pickle

    from repro.config.workerspec import Rendezvous, WorkerSpec
    from repro.worker.worker import local_processes, parallel

    rdzv = Rendezvous(nodes=2, node_rank=1, host="10.0.0.7", port=29511, jax_processes=2, join_timeout_s=12.5,
                      source="slurm")
    for i, config in enumerate(preflight.plan(["+exp=sharding_cpu"]).jobs):
        sent = WorkerSpec(config, config_hash(config), str(tmp_path / f"run{i}"), "/cache", rdzv)
        path = sent.write(tmp_path / f"spec{i}.json")
        got = WorkerSpec.read(path)
        assert isinstance(got.config, Config) and isinstance(got.rendezvous, Rendezvous)
        # what travels is the recorded config: sharding.mesh_by_framework (the preflight's input) stays home
        assert got.as_dict() == sent.as_dict() and got.rendezvous == rdzv and got.config.run == config.run
        assert WorkerSpec.read(got.write(tmp_path / "back.json")) == got  # read ∘ write: the identity
        assert got.rendezvous.endpoint == "10.0.0.7:29511" and not got.rendezvous.leader
        assert got.write(tmp_path / "again.json").read_bytes() == path.read_bytes()
        on_disk = json.loads(path.read_text())
        assert sorted(on_disk) == ["cache_dir", "config", "config_hash", "out_dir", "rendezvous"]
        assert on_disk["config"] == as_dict(config) and on_disk["rendezvous"]["nodes"] == 2
        assert pickle.loads(pickle.dumps(got)) == got  # what ranks and JAX processes are handed
        if parallel(got) == "per_node":  # 2 nodes x 2 JAX processes: 2 on this node
            assert local_processes(got) == 2


def test_the_worker_path_reads_no_spec_by_string_key():
    """No `spec[...]` or `rdzv[...]` in the worker path: the spec is read as WorkerSpec's attributes."""
    import ast

    import repro

    src = Path(repro.__file__).parent
    found = []
    for rel in ("worker/worker.py", "backends/torch_distributed.py", "backends/jax_distributed.py"):
        for node in ast.walk(ast.parse((src / rel).read_text())):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                    node.value.id in ("spec", "rdzv", "rendezvous"):
                found.append(f"{rel}:{node.lineno}")
    assert found == []


@pytest.mark.parametrize(("args", "message"), [
    (["run.task=fwd"], "run.task='fwd' is not valid; choose one of: train, forward"),
    (["sharding.name=pp"], "sharding.name='pp' is not valid; choose one of: none, dp, fsdp, tp, dp_tp"),
    (["model.impl=ours"], "model.impl='ours' is not valid; choose one of: native, hf"),
    (["cluster.port=0"], "cluster.port=0 must be > 0"),
    (["run.seed=-1"], "run.seed=-1 must be >= 0"),
])
def test_a_bad_value_names_its_key_and_the_choices(args, message):
    with pytest.raises(ConfigError) as e:
        preflight.plan(args)
    assert str(e.value) == message



@pytest.mark.parametrize("args", [
    ["+exp=quickstart"], ["+exp=quickstart", "run.steps=8"], ["+exp=sharding_cpu"], ["+exp=stack_wars_cpu"],
    ["+exp=vit_l4", "hardware=cpu"],
    ["-m", "framework=jax,torch", "model=mlp", "run.seed=0,1", "run.batch_size=16,32"],
    ["-m", "model=mlp", "model.preset=tiny,small", "run.repeats=2", "tracking.experiment=x"],
    ["-m", "model=mlp", "run.seed=0,1", "ledger.dir=/tmp/l-1", "tracking.experiment=123",
     "tracking.uri=sqlite:////tmp/m.db"],
])
def test_a_sweeps_jobs_are_composed_as_hydra_composes_each(args):
    """preflight.plan composes once per set of group choices and applies value overrides to a
    copy (JobComposer); every job must equal Hydra's own full compose of its overrides."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from repro import paths

    planned = preflight.plan(args)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(paths.conf_dir()), version_base="1.3"):
        full = [as_dict(preflight.check(compose("config", overrides=list(o)))) for o in planned.overrides]
    GlobalHydra.instance().clear()
    assert [as_dict(j) for j in planned.jobs] == full
    assert len({config_hash(c) for c in full}) == len(set(planned.overrides))


def test_a_misspelt_value_override_in_a_sweep_gets_hydras_message():
    with pytest.raises(ConfigError, match=r"run.stpes is not a config key: did you mean run.steps\?"):
        preflight.plan(["-m", "model=mlp", "run.seed=0,1", "run.stpes=3"])


PLAN_IN_A_FRESH_PROCESS = """
import json, sys
from repro import preflight
p = preflight.plan(sys.argv[1:])
print(json.dumps({"hydra": "hydra" in sys.modules, "steps": [j.run.steps for j in p.jobs],
                  "ledgers": [j.ledger.dir for j in p.jobs], "overrides": p.overrides}))
"""


@pytest.mark.slow
def test_the_same_command_line_composes_from_the_cache_without_hydra(tmp_path):
    """compose_cache: a second plan of a command line reads Hydra's compose from disk (Hydra is
    not imported), with another ledger.dir too; a changed config file is composed afresh."""
    import shutil
    import subprocess
    import sys

    from repro import paths

    conf = tmp_path / "root" / "conf"  # REPRO_ROOT: a checkout whose conf/ the test may change
    shutil.copytree(paths.conf_dir(), conf)
    env = {**__import__("os").environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "REPRO_ROOT": str(conf.parent)}

    def plan_(*args):
        proc = subprocess.run([sys.executable, "-c", PLAN_IN_A_FRESH_PROCESS, *args], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    first = plan_("-m", "model=mlp", "run.seed=0,1", f"ledger.dir={tmp_path}/a")
    again = plan_("-m", "model=mlp", "run.seed=0,1", f"ledger.dir={tmp_path}/b")
    assert first["hydra"] and not again["hydra"]
    assert again["ledgers"] == [f"{tmp_path}/b"] * 2
    assert again["overrides"] == [["model=mlp", "run.seed=0", f"ledger.dir={tmp_path}/b"],
                                  ["model=mlp", "run.seed=1", f"ledger.dir={tmp_path}/b"]]
    run_yaml = conf / "config.yaml"
    text = run_yaml.read_text()
    assert first["steps"] == ["auto"] * 2  # the default: the adaptive window
    run_yaml.write_text(text.replace("steps: auto", "steps: 27", 1))
    changed = plan_("-m", "model=mlp", "run.seed=0,1", f"ledger.dir={tmp_path}/b")
    assert changed["hydra"] and changed["steps"] == [27] * 2


PLAN_IN_A_SNAPSHOT = """
import dataclasses, json, sys
from repro.job import snapshot
if sys.argv[1] == "snapshot":  # as the CLI plans: in the snapshot it takes
    snapshot.use(snapshot.take())
from repro import preflight
p = preflight.plan(sys.argv[2:])
print(json.dumps({"omegaconf": "omegaconf" in sys.modules, "jobs": [dataclasses.asdict(j) for j in p.jobs],
                  "models": [type(j.model).__name__ for j in p.jobs], "overrides": p.overrides}))
"""


@pytest.mark.slow
def test_a_cached_plan_in_the_same_snapshot_types_its_jobs_without_omegaconf(tmp_path):
    """compose_cache keeps the schema's typed jobs: the same command line again, in the same
    snapshot, plans without importing OmegaConf, to exactly the jobs OmegaConf types (model
    group type included), with its own placed values; a job with an interpolation keeps none."""
    import subprocess
    import sys

    env = {**__import__("os").environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}

    def plan_(where, *args):
        proc = subprocess.run([sys.executable, "-c", PLAN_IN_A_SNAPSHOT, where, *args], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    sweep = ("-m", "framework=jax,torch", "model=mlp,vit", "run.seed=0,1")
    plan_("snapshot", *sweep, f"ledger.dir={tmp_path}/a", "tracking.experiment=first")
    cached = plan_("snapshot", *sweep, f"ledger.dir={tmp_path}/b", "tracking.experiment=typed")
    typed_by_omegaconf = plan_("checkout", *sweep, f"ledger.dir={tmp_path}/b", "tracking.experiment=typed")
    assert not cached["omegaconf"] and typed_by_omegaconf["omegaconf"]
    assert cached["jobs"] == typed_by_omegaconf["jobs"] and len(cached["jobs"]) == 8
    assert cached["models"] == typed_by_omegaconf["models"] and sorted(cached["models"]) == ["MlpModelConfig"] * 4 + ["VitModelConfig"] * 4
    assert {j["ledger"]["dir"] for j in cached["jobs"]} == {f"{tmp_path}/b"}
    assert {j["tracking"]["experiment"] for j in cached["jobs"]} == {"typed"}
    assert cached["overrides"] == typed_by_omegaconf["overrides"]
    xla = ("framework=torch_xla", "model=mlp")  # framework.python: ${oc.env:REPRO_XLA_PYTHON,...}, resolved every run
    plan_("snapshot", *xla)
    assert plan_("snapshot", *xla)["omegaconf"]


def test_kept_typed_jobs_are_read_only_in_the_snapshot_that_kept_them(tmp_path, monkeypatch):
    """Another snapshot (the code changed: the schema or a model's presets may have) composes from
    the cache but types its jobs again."""
    from repro.config import compose_cache
    from repro.job import snapshot

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    composed = compose_cache.Composed(False, [("model=mlp",)], [{"model": {"name": "mlp"}}], "", [{"kept": 1}], "aaaa")
    monkeypatch.setenv(snapshot.ENV, str(tmp_path / "snapshots" / "aaaa"))
    compose_cache.store("k", composed)
    monkeypatch.setattr(compose_cache, "key", lambda args, extra=b"": "k")
    assert compose_cache.load(["model=mlp"])[1].typed == [{"kept": 1}]
    monkeypatch.setenv(snapshot.ENV, str(tmp_path / "snapshots" / "bbbb"))
    again = compose_cache.load(["model=mlp"])[1]
    assert again.typed is None and again.configs == [{"model": {"name": "mlp"}}]
    monkeypatch.delenv(snapshot.ENV)
    assert compose_cache.load(["model=mlp"])[1].typed is None
