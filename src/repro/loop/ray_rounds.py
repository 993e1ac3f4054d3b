"""The launcher adapter of `hydra/launcher=ray` (loop/rounds.py): each round one task on a Ray cluster.

The sweep joins a running Ray cluster as its driver (`hydra.launcher.ray.init`: passed to
`ray.init`; `address: auto` finds RAY_ADDRESS or the cluster `ray start --head` started on this
machine, `HOST:PORT` names a head's GCS) and submits each round as one task
(`hydra.launcher.ray.remote`: the task's options, `num_cpus: 1` by default), which runs
`rounds.run_elsewhere` as a submitit job does: the round's configs one after another in one process
on one node, in the round's order, so a pair never spans nodes. The loop waits for the task's
records before it decides the next round, so `run.repeats=auto` decides as it does here. The keys
are those of Hydra's own Ray launcher (hydra-ray-launcher: `ray.init`, `ray.remote`), whose
`hydra/launcher=ray` predates Ray 2 and does not install beside it.

A round is never retried by Ray (`max_retries=0`: a retried round would run its jobs twice); a
task that ended without handing back its records (its node died, its worker was killed) leaves
its jobs to the ledger (`rounds.settle`: their own end, else `lost` with Ray's reason). The
variables repro reads where the round runs (REPRO_*, MLFLOW_*, XDG_CACHE_HOME, PYTHONPATH, ...) travel
with the task (`runtime_env.env_vars`), as SLURM's `--export` carries them, credentials left out
(`forwarded`: Ray logs a task's runtime environment); the ledger and the
MLflow store must be reachable from the cluster's nodes (the preflight warns for a sqlite store).
Each record names its Ray job, task and node (its `scheduler` block: `_block`, through
job/scheduler.py `running_under`).

Ctrl-C stops a round as the default launcher stops a sweep: the round's task is cancelled
(`ray.cancel`: an interrupt in the task, heard once, rounds.Stop's listener), the run that runs is
recorded `interrupted`, the round's records come back, the sweep ends (exit 130). The command
stays connected while the sweep runs and leaves at its end (`close`: `ray.shutdown`).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from repro.config.schema import ConfigError
from repro.job import scheduler
from repro.job.host import JobHost
from repro.loop import rounds
from repro.loop.launchers import CLUSTER, Launch, launcher

# What the round's process reads of this one's environment: repro's own, MLflow's, the caches', the
# frameworks' flags and the import path (a Ray worker starts with its raylet's environment, not the driver's)
FORWARDED = ("REPRO_", "MLFLOW_", "XDG_CACHE_HOME", "PYTHONPATH", "XLA_FLAGS", "JAX_", "TORCHINDUCTOR_", "PIP_",
             "HF_", "TOKENIZERS_PARALLELISM")
FIXED_OPTIONS = {"max_retries": 0, "retry_exceptions": False}  # a retried round runs its jobs twice


def forwarded(environ) -> dict[str, str]:
    """The variables a round's task gets (`runtime_env.env_vars`): repro's, MLflow's, the caches',
    the frameworks' flags, the import path; never a credential (a secret-named variable, or a value
    holding one in a URL): Ray writes a task's runtime environment to its logs in plain text
    (runtime_env_agent.log), and a credential reaches no file. A store that needs one is given it
    on the cluster's nodes; a round that cannot write MLflow leaves its runs to `repro sync`."""
    from repro.redaction import is_secret, redact

    return {k: v for k, v in environ.items() if k.startswith(FORWARDED) and not k.startswith("RAY_")
            and not is_secret(k) and redact(v, environ={}) == v}


def _round(attach: Callable, jobs: Sequence, first_job_no: int, taken: Sequence[str]) -> rounds.RoundResult:
    """The round in its Ray task: `rounds.run_elsewhere`, its records naming this task (`_block`),
    listening for one interrupt (`ray.cancel` raises it in the task's main thread), in a folder of
    this node's own."""
    stop = rounds.Stop.under(Path(tempfile.gettempdir()))
    scheduler.running_under(_block)
    try:
        return rounds.run_elsewhere(attach, jobs, first_job_no, taken, 0, str(stop.folder))
    finally:
        scheduler.running_under(None)
        stop.remove()


def _block() -> dict:
    """The `scheduler` block of a record made in a round's Ray task: Ray's job, task and node, the
    cluster's address and the resources the task holds."""
    import socket

    import ray

    ctx = ray.get_runtime_context()
    task = ctx.get_task_id()
    out = {"name": "ray", "job_id": ctx.get_job_id(), "task_id": task, "node": socket.gethostname(),
           "node_id": ctx.get_node_id(), "address": ctx.gcs_address}
    if resources := {k: v for k, v in ctx.get_assigned_resources().items() if v}:
        out["resources"] = resources
    return out


def _answers(address: str | None, timeout_s: float = 5.0) -> None:
    """OSError unless the GCS of `address` (auto: RAY_ADDRESS, else the cluster this machine started
    last) takes a TCP connection within `timeout_s`; a Ray client address (ray://) is left to Ray."""
    import socket

    if address and "://" in address:
        return
    from ray._private.services import canonicalize_bootstrap_address  # Ray's own reading of "auto" and HOST:PORT

    found = canonicalize_bootstrap_address(address or "auto")
    if not found:
        raise OSError("no running cluster found: none in RAY_ADDRESS, none started on this machine")
    host, _, port = found.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s):
        pass


class Ray(rounds.Elsewhere):
    """Rounds as Ray tasks (module docstring); `attach(config)`: a host of the sweep in the task."""

    name = "ray"

    def __init__(self, params: dict, attach: Callable):
        import ray

        settings = params.get("ray") or {}
        self.init = dict(settings.get("init") or {})
        remote = dict(settings.get("remote") or {})
        env = forwarded(os.environ)
        runtime_env = dict(remote.pop("runtime_env", None) or {})
        runtime_env["env_vars"] = {**env, **(runtime_env.get("env_vars") or {})}
        self.options = {"num_cpus": 1, **remote, "runtime_env": runtime_env, **FIXED_OPTIONS}
        self.attach = attach
        self._connect(ray)
        self.task = ray.remote(_round).options(**self.options)

    def _connect(self, ray) -> None:
        """Join the cluster (`ray.init`): ConfigError naming the address and how to start one where none answers."""
        import logging

        if ray.is_initialized():
            return
        address = self.init.get("address", "auto")
        kwargs = {"log_to_driver": False, "logging_level": logging.WARNING, **self.init}
        try:
            _answers(address)  # ray.init retries a silent address for minutes, printing as it goes
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError, OSError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ConfigError(f"hydra/launcher=ray: no Ray cluster answered at hydra.launcher.ray.init.address="
                              f"{address} ({first}); start one (`ray start --head`), or name its head "
                              "(hydra.launcher.ray.init.address=HOST:6379)") from None

    def run_round(self, host: JobHost, jobs: Sequence, first_job_no: int, hooks: rounds.Hooks = rounds.NO_HOOKS) -> list:
        import ray

        jobs = [hooks.before(job) for job in jobs]
        taken = rounds.taken(host)
        submitted = time.time()
        ref = self.task.remote(self.attach, jobs, first_job_no, taken)
        host.say(f"round of {len(jobs)} job(s) submitted as ray task {ref.task_id().hex()}")
        reason = f"ray task {ref.task_id().hex()} ended before this job of its round ran"
        try:
            result = ray.get(ref)
        except KeyboardInterrupt:
            rounds.adopt(host, jobs, first_job_no, self._stopped(ref), reason, submitted, hooks)
            raise
        except ray.exceptions.RayError as e:  # the task's worker or node died, the task raised
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            reason = f"ray task {ref.task_id().hex()} ended without handing back its records ({type(e).__name__}: {first})"
            host.say(f"{reason}; the ledger says how its runs ended")
            result = None
        out = rounds.adopt(host, jobs, first_job_no, result, reason, submitted, hooks)
        if result is not None and result.interrupted:  # the task was interrupted: the sweep ends, as it would here
            raise KeyboardInterrupt
        return out

    @staticmethod
    def _stopped(ref) -> rounds.RoundResult | None:
        """Ctrl-C here: the round's task interrupted (`ray.cancel`), its records waited for (at most
        Stop.WAIT_S, or until a second Ctrl-C); None where none came back (the ledger has what it recorded)."""
        import ray

        ray.cancel(ref)
        try:
            return ray.get(ref, timeout=rounds.Stop.WAIT_S)
        except KeyboardInterrupt:
            ray.cancel(ref, force=True)
        except Exception:  # noqa: BLE001 - cancelled before it ran, timed out, its worker died: nothing came back
            pass
        return None

    def close(self) -> None:
        import ray

        if ray.is_initialized():
            ray.shutdown()


@launcher("ray", target="repro.loop.ray_rounds.Ray", where=CLUSTER, needs=("ray",), extra="ray")
def _ray(launch: Launch) -> Ray:
    return Ray(launch.node, launch.attach)
