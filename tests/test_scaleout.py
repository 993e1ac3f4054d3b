"""Runs over several processes and hosts: JAX through jax.distributed (processes on one node),
torch's ranks over two nodes from the config. JAX over two nodes found from SLURM's variables
runs on the real SLURM of tests/test_slurm.py (`test_two_slurm_nodes_record_one_run[jax-dp_tp]`),
where it was once also run here on hand-set variables: the same claim twice.
The "nodes" are two repro commands on 127.0.0.1, each its own process tree, meeting only
at the rendezvous, as two hosts would."""

from __future__ import annotations

import subprocess

import pytest

from conftest import free_port
from repro.config import ConfigError
from repro.preflight import plan
from repro.config.schema import ClusterConfig
from repro.job import cluster

LOSS_RTOL = 1e-5  # as in test_sharding: reductions over shards run in another order
FAST = ("model=mlp", "run.steps=6", "run.warmup=2")


def _assert_same_loss(base: list[float], other: list[float]) -> None:
    assert len(base) == len(other)
    for a, b in zip(base, other):
        assert abs(a - b) <= LOSS_RTOL * abs(a), (base, other)


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory) -> dict[str, list[float]]:
    """{framework: the loss trajectory of the same run on one device}, JAX and torch in one sweep."""
    from conftest import Sandbox, one_device_losses

    return one_device_losses(Sandbox(tmp_path_factory.mktemp("unsharded")), FAST)


def _two_nodes(sandbox, tmp_path, args: list[str]):
    """Node 1 in the background with a ledger and store of its own, node 0 in the sandbox."""
    follower_ledger, follower_db = tmp_path / "node1-ledger", tmp_path / "node1.db"
    cmd = sandbox.repro_cmd(*args, "cluster.node_rank=1")[:-2] + [f"ledger.dir={follower_ledger}", "progress.mode=plain"]
    env = {**sandbox.env(), "MLFLOW_TRACKING_URI": f"sqlite:///{follower_db}"}
    node1 = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    node0 = sandbox.run(*args, "cluster.node_rank=0", timeout=300)
    out1, _ = node1.communicate(timeout=300)
    assert node0.returncode == 0, node0.stdout[-3000:] + node0.stderr[-3000:]
    assert node1.returncode == 0, out1[-3000:]
    assert "node 0 records it" in out1
    assert not follower_ledger.exists() and not follower_db.exists()  # node 0 alone records
    return sandbox.heads()


@pytest.mark.slow
def test_jax_processes_match_unsharded(sandbox, unsharded):
    # fsdp alone: dp_tp over two JAX processes (jax.distributed, the unsharded loss) runs on the
    # real SLURM, test_slurm.py's test_two_slurm_nodes_record_one_run[jax-dp_tp] (a job of ~7 s of
    # CPU here for the same claim); dp_tp on one process's 8 devices in test_sharding.py.
    base = unsharded["jax"]
    proc = sandbox.run("framework=jax", "sharding=fsdp", "cluster.jax_processes=2", *FAST)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = {h["config"]["sharding"]["name"]: h for h in sandbox.heads()}
    assert set(runs) == {"fsdp"}
    for name, h in runs.items():
        assert h["status"] == "ok", h.get("error")
        _assert_same_loss(base, h["results"]["loss"])
        sh = h["results"]["sharding"]
        assert sh["processes"] == 2 and sh["devices"] == 4, sh
        assert [r["rank"] for r in h["results"]["ranks"]] == [0, 1]
        assert h["environment"]["framework"]["process"] == {"index": 0, "count": 2}
    fsdp = runs["fsdp"]["results"]["sharding"]
    assert fsdp["param_bytes_per_device"] <= 1.05 * fsdp["param_bytes_total"] / 4


@pytest.mark.slow
def test_torch_ranks_over_two_nodes_from_the_config(sandbox, tmp_path, unsharded):
    base = unsharded["torch"]
    args = ["framework=torch", "sharding=dp", "sharding.mesh.data=4", *FAST, "cluster.nodes=2",
            f"cluster.coordinator=127.0.0.1:{free_port()}"]
    (head,) = _two_nodes(sandbox, tmp_path, args)
    assert head["status"] == "ok", head.get("error")
    _assert_same_loss(base, head["results"]["loss"])
    assert [(r["rank"], r["node"]) for r in head["results"]["ranks"]] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert head["cluster"]["nodes"] == 2 and head["cluster"]["source"] == "local"


@pytest.mark.slow
def test_dead_jax_process_fails_the_run_naming_it(sandbox):
    heads, out, after_kill = sandbox.kill_one_process_mid_run(
        "framework=jax", "model=mlp", "sharding=fsdp", "sharding.mesh.data=2", "cluster.jax_processes=2",
        "run.steps=1000000,8", "run.timeout_s=240", "tracking.experiment=deadprocess",
        settle_s=12)  # past jax.distributed's start and the compile, into the timed loop
    assert [h["status"] for h in heads] == ["failed", "ok"], out[-3000:]
    reason = heads[0]["error"]["reason"]
    assert "jax process 1" in reason and "SIGKILL" in reason, reason
    assert after_kill < 240


@pytest.mark.slow
def test_node_that_never_joins_fails_the_run_within_the_timeout(sandbox):
    """Node 0 of 2 started alone: each framework's run ends `failed` past cluster.join_timeout_s,
    saying where it waited and what to check, and the sweep goes on."""
    timeout = 5
    proc = sandbox.run("-m", "framework=jax,torch", "model=mlp", "sharding=dp", "sharding.mesh.data=2", *FAST[1:],
                       "cluster.nodes=2", f"cluster.coordinator=127.0.0.1:{free_port()}",
                       f"cluster.join_timeout_s={timeout}", timeout=300)
    heads = sorted(sandbox.heads(), key=lambda r: r["sweep"]["job"])
    assert [h["status"] for h in heads] == ["failed", "failed"], proc.stdout[-3000:] + proc.stderr[-3000:]
    for h in heads:
        reason = h["error"]["reason"]
        assert f"cluster.join_timeout_s={timeout}" in reason and "is every node started" in reason, reason
        # the reason names the configured timeout, not the default (no wall is asserted: a run that waited
        # for ever is caught by sandbox.run's own limit, and how fast it ended is the machine's)
        assert f"cluster.join_timeout_s={ClusterConfig.join_timeout_s:g}" not in reason, reason
    assert "before all 2 processes joined" in heads[0]["error"]["reason"]  # JAX
    assert "1/2 clients joined" in heads[1]["error"]["reason"]  # torch's TCP store


@pytest.mark.parametrize("args,message", [
    (["sharding=fsdp", "cluster.jax_processes=3"],
     "spans 4 devices, which cluster.nodes=1 × cluster.jax_processes=3 = 3 processes cannot share evenly (4 % 3 = 1)"),
    (["framework=torch", "sharding=dp", "sharding.mesh.data=4", "cluster.nodes=3", "cluster.coordinator=h:1"],
     "spans 4 devices, which cluster.nodes=3 = 3 processes cannot share evenly"),
    (["sharding=dp", "cluster.nodes=2"], "cluster.nodes=2 needs cluster.coordinator=<host of node 0>[:port]"),
    (["sharding=dp", "cluster.nodes=2", "cluster.node_rank=2", "cluster.coordinator=h"],
     "cluster.node_rank=2 must be in [0, cluster.nodes=2)"),
    (["cluster.jax_processes=2"], "but sharding=none runs on one device"),
    (["sharding=dp", "cluster.nodes=2", "cluster.coordinator=h:abc"], "the port must be a number (host:port)"),
    (["sharding=dp", "cluster=slurm"], "not set here: SLURM_NNODES, SLURM_NODEID, SLURM_JOB_NODELIST; run inside an allocation"),
])
def test_impossible_cluster_refused_before_launch(args, message):
    with pytest.raises(ConfigError) as err:
        plan(args)
    assert message in str(err.value)


@pytest.mark.slow
def test_slurm_rendezvous_from_the_variables():
    env = {"SLURM_NNODES": "4", "SLURM_NODEID": "2", "SLURM_JOB_NODELIST": "gpu[03-05,9],cpu1"}
    rdzv = cluster.resolve(ClusterConfig(name="slurm", port=29400, jax_processes=8), env)
    assert (rdzv.nodes, rdzv.node_rank, rdzv.endpoint, rdzv.leader) == (4, 2, "gpu03:29400", False)
    assert cluster.first_host("node17") == "node17"
    with pytest.raises(ConfigError) as err:
        cluster.resolve(ClusterConfig(name="slurm"), {"SLURM_NNODES": "2"})
    assert "not set here: SLURM_NODEID, SLURM_JOB_NODELIST;" in str(err.value)
    assert "hydra/launcher=submitit_slurm" in str(err.value)
