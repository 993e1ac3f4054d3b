"""Where a run's processes meet: the rendezvous, from `cluster.*` or from SLURM's variables.

The parent resolves it where the job runs (on a SLURM node, the variables exist there, not
on the login node that launched the sweep) and hands it to the worker in the spec. Node 0
hosts the rendezvous (torch's TCP store, JAX's coordination service) and records the run.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from typing import Mapping

from repro.backends import capabilities
from repro.backends.layouts import mesh_size
from repro.config.schema import ClusterConfig, Config, ConfigError
from repro.config.workerspec import Rendezvous  # noqa: F401 - the type the worker reads too

SLURM_VARS = ("SLURM_NNODES", "SLURM_NODEID", "SLURM_JOB_NODELIST")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list ("gpu[03-05,9],cpu1" -> "gpu03").

    `scontrol show hostnames` is SLURM's own expansion and is used where it is installed; job
    containers often lack it, hence the small parser of the compressed form as a fallback.
    """
    if shutil.which("scontrol"):
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.split():
            return out.stdout.split()[0]
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        raise ConfigError(f"cannot read a host from SLURM_JOB_NODELIST={nodelist!r}")
    prefix, ranges = match.groups()
    return prefix + (re.split(r"[-,]", ranges)[0] if ranges else "")


def node_address(node: str) -> str:
    """The address SLURM itself uses for a node: slurm.conf's NodeAddr (`scontrol show node NAME`),
    else the name. A SLURM node name need not be a host name (`n1` on a host called `vm`)."""
    if shutil.which("scontrol"):
        try:
            out = subprocess.run(["scontrol", "-o", "show", "node", node], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            return node
        for item in out.stdout.split() if out.returncode == 0 else []:
            key, _, value = item.partition("=")
            if key == "NodeAddr" and value:
                return value
    return node


def check_reachable(rdzv: Rendezvous) -> None:
    """Fail at once, naming host and port, where node 0's host does not resolve: the processes would
    otherwise wait cluster.join_timeout_s for a rendezvous that cannot happen."""
    if rdzv.nodes == 1:
        return
    try:
        socket.getaddrinfo(rdzv.host, rdzv.port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise ConfigError(f"node {rdzv.node_rank} of {rdzv.nodes} cannot join the run at {rdzv.endpoint}: the host "
                          f"{rdzv.host!r} does not resolve ({e.strerror or e}); set cluster.coordinator=<address of "
                          f"node 0>[:port] (under SLURM: slurm.conf's NodeAddr of the first node)") from None


def split_endpoint(coordinator: str, port: int) -> tuple[str, int]:
    host, _, given = coordinator.rpartition(":") if ":" in coordinator else (coordinator, "", "")
    if given and not given.isdigit():
        raise ConfigError(f"cluster.coordinator={coordinator!r}: the port must be a number (host:port)")
    return host, int(given) if given else port


def resolve(c: ClusterConfig, environ: Mapping[str, str] = os.environ) -> Rendezvous:
    """The rendezvous of a run from its `cluster` config (records made before it existed get the
    schema's defaults, one node, from `schema.from_dict`)."""
    nodes, node_rank, coordinator = c.nodes, c.node_rank, c.coordinator
    if c.name == "slurm":
        missing = [v for v in SLURM_VARS if not environ.get(v)]
        if missing:
            raise ConfigError(
                f"cluster=slurm reads {', '.join(SLURM_VARS)} where the job runs, but these are not set "
                f"here: {', '.join(missing)}; run inside an allocation (sbatch/srun, or hydra/launcher=submitit_slurm), "
                "or use cluster=local with cluster.nodes, cluster.node_rank and cluster.coordinator")
        nodes, node_rank = int(environ["SLURM_NNODES"]), int(environ["SLURM_NODEID"])
        coordinator = coordinator or node_address(first_host(environ["SLURM_JOB_NODELIST"]))
    check_nodes(nodes, node_rank, coordinator)
    if not coordinator:
        return Rendezvous(1, 0, "127.0.0.1", _free_port(), c.jax_processes, c.join_timeout_s, c.name)
    host, port = split_endpoint(coordinator, c.port)
    return Rendezvous(nodes, node_rank, host, port, c.jax_processes, c.join_timeout_s, c.name)


def check_nodes(nodes: int, node_rank: int, coordinator: str) -> None:
    if not 0 <= node_rank < nodes:
        raise ConfigError(f"cluster.node_rank={node_rank} must be in [0, cluster.nodes={nodes})")
    if nodes > 1 and not coordinator:
        raise ConfigError(f"cluster.nodes={nodes} needs cluster.coordinator=<host of node 0>[:port], "
                          "the same on every node (or cluster=slurm inside an allocation)")


def check_layout(config: Config, nodes: int, jax_processes: int) -> None:
    """Refuse a mesh the processes cannot split evenly, with the numbers."""
    sharding, backend = config.sharding, config.framework.backend
    if nodes == 1 and jax_processes == 1:
        return
    if sharding.name == "none":
        raise ConfigError(f"cluster.nodes={nodes} and cluster.jax_processes={jax_processes} spread a run over "
                          "processes, but sharding=none runs on one device; choose sharding=dp, fsdp, tp or dp_tp")
    per_node = capabilities.of(backend).processes == capabilities.PER_NODE
    if not capabilities.of(backend).multi_node:
        raise ConfigError(f"framework={config.framework.name} runs on one host (backend {backend}: one process, "
                          "capability 'processes'); use cluster.nodes=1")
    devices = mesh_size(sharding.mesh)
    split = nodes * (jax_processes if per_node else 1)
    what = f"cluster.nodes={nodes}" + (f" × cluster.jax_processes={jax_processes}" if per_node else "")
    if devices % split:
        raise ConfigError(f"sharding.mesh {sharding.mesh} spans {devices} devices, which {what} = {split} "
                          f"processes cannot share evenly ({devices} % {split} = {devices % split}); "
                          f"make the mesh a multiple of {split}")


def is_follower(c: ClusterConfig) -> bool:
    """A node other than node 0 of a multi-node run: it records nothing (node 0 records the run)."""

    try:
        return not resolve(c).leader
    except ConfigError:  # cluster=slurm outside the allocation (the launching host): not a node
        return False
