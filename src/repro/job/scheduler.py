"""Where a run ran, as its scheduler knows it: the record's `scheduler` block, and how SLURM ended a job.

Under SLURM (SLURM_JOB_ID is set where the job runs) the block names the job, its array job and
task, the step, the node list and this node, the partition, account and QOS where set, the
submission's resources (cpus, gpus, memory, time limit), the job's stdout/stderr and which
attempt this is (SLURM_RESTART_COUNT + 1: a requeued job runs again under the same id).
SLURM's variables say where this process is; `scontrol show job` adds what only the controller
knows (time limit, log paths, the job's state). Anywhere else the block is `{"name": "local"}`.

The block is provenance, not configuration: it is never part of `config` nor of the config hash.
How a stored block reads (a line, MLflow tags, where a run ran) is the read side's: ledger/render.py.
This module is the one place that reads SLURM's variables for provenance (job/cluster.py reads
the three that make the rendezvous). A launcher that runs rounds elsewhere names that place itself
(`running_under`: a Ray task's job, task and node, loop/ray_rounds.py).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from repro.blocks import typed

LOCAL = {"name": "local"}
_ELSEWHERE: Callable[[], dict] | None = None  # a launcher's block for this process's records (`running_under`)
SCONTROL_TIMEOUT_S = 5
# The block's key <- SLURM's variable (read where the job runs).
VARIABLES = {
    "cluster": "SLURM_CLUSTER_NAME",
    "job_id": "SLURM_JOB_ID",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_task_id": "SLURM_ARRAY_TASK_ID",
    "step_id": "SLURM_STEP_ID",
    "nodes": "SLURM_JOB_NODELIST",
    "node": "SLURMD_NODENAME",
    "partition": "SLURM_JOB_PARTITION",
    "account": "SLURM_JOB_ACCOUNT",
    "qos": "SLURM_JOB_QOS",
}
# The submission's resources <- (`scontrol show job` field, else SLURM's variable).
RESOURCES = {
    "cpus": ("NumCPUs", "SLURM_CPUS_ON_NODE"),
    "gpus": (None, "SLURM_GPUS_ON_NODE"),
    "mem": ("MinMemoryNode", "SLURM_MEM_PER_NODE"),
    "mem_per_cpu": ("MinMemoryCPU", "SLURM_MEM_PER_CPU"),
    "time_limit": ("TimeLimit", None),
}
# How SLURM ended a job -> (status, what happened). While a job's processes are being killed,
# `scontrol show job` says JobState=COMPLETING whatever the cause (this build has no --json), so
# the cause is read from what it does show: the job's Reason (NodeDown, TimeLimit, Preempted...),
# Restarts going up (a requeue), RunTime reaching TimeLimit, and the state of the node the run was
# on (`scontrol show node`: DOWN, FAIL or not responding `*` is a node failure, also when SLURM
# requeued the job because of it, and when a controller that has not yet noticed still says RUNNING);
# where accounting is on, sacct's final state.
ENDED_BY_SLURM = {
    "requeued": ("killed", "requeued by SLURM (scontrol requeue); it runs again as attempt {next}"),
    "preempted": ("killed", "preempted by SLURM ({why}){requeue}"),
    "timeout": ("timeout", "ended by SLURM: the job's time limit ({TimeLimit}) was reached"),
    "cancelled": ("killed", "cancelled by SLURM (scancel)"),
    "node_fail": ("killed", "ended by SLURM: node failure ({why}){requeue}"),
}
ENDING_STATES = {"COMPLETING": None, "CANCELLED": "cancelled", "TIMEOUT": "timeout", "DEADLINE": "timeout",
                 "NODE_FAIL": "node_fail", "PREEMPTED": "preempted", "REQUEUED": "requeued",
                 "REQUEUE_HOLD": "requeued", "REQUEUE_FED": "requeued", "PENDING": None}
NODE_REASONS = ("NodeDown", "NodeFail", "Node_fail", "NODE_FAIL")
NODE_DOWN_STATES = ("DOWN", "FAIL", "NOT_RESPONDING")  # `scontrol show node` State= parts (DOWN*, IDLE+FAIL...)


@dataclass(frozen=True)
class Block:
    """A record's `scheduler` block, typed: where the run ran (`name`: local, slurm, or a launcher's own,
    such as ray) and, under SLURM, its job, array task, step, nodes, partition, account, QOS, the
    submission's resources, its logs and its attempt. A launcher's block (`running_under`) is kept as
    it gave it (`given`), its keys its own."""

    name: str = "local"
    cluster: str | None = None
    job_id: str | None = None
    array_job_id: str | None = None
    array_task_id: str | None = None
    step_id: str | None = None
    nodes: str | None = None
    node: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    resources: Mapping | None = None  # SLURM's own words for them: cpus, gpus, mem, mem_per_cpu, time_limit
    stdout: str | None = None
    stderr: str | None = None
    attempt: int = 1  # a requeued job runs again under its id: SLURM_RESTART_COUNT + 1
    given: Mapping | None = dataclasses.field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, node: Mapping | "Block") -> "Block":
        """A stored (or a launcher's) block, typed; the whole of it kept to be written as it was."""
        if isinstance(node, Block):
            return node
        return dataclasses.replace(typed(cls, node), given=node)

    @classmethod
    def here(cls, environ: Mapping[str, str] = os.environ) -> "Block":
        """The block of a record made in this process."""
        if not environ.get("SLURM_JOB_ID"):
            return cls.of(_ELSEWHERE()) if _ELSEWHERE is not None else cls()
        found = {key: value for key, var in VARIABLES.items() if (value := environ.get(var))}
        slurm = cls("slurm", **found)
        info = job_info(slurm.ref, environ)  # `scontrol show job`: SLURM's own Key=Value, read as it says them
        resources = {}
        for key, (field, var) in RESOURCES.items():
            value = info.get(field) if field else None
            if not value or value in ("0", "0M", "(null)"):
                value = environ.get(var) if var else None
            if value:
                resources[key] = value
        if gpus := _gpus(info.get("TRES", "")):
            resources["gpus"] = gpus
        told = {key: info.get(field) for key, field in (("partition", "Partition"), ("account", "Account"), ("qos", "QOS"))
                if key not in found and info.get(field) not in (None, "", "(null)")}
        return dataclasses.replace(slurm, **told, step_id=slurm.step_id or "batch",  # a batch script's own process
                                   resources=resources or None, stdout=info.get("StdOut") or None,
                                   stderr=info.get("StdErr") or None,
                                   attempt=int(environ.get("SLURM_RESTART_COUNT") or 0) + 1)

    @property
    def slurm(self) -> bool:
        return self.name == "slurm"

    @property
    def ref(self) -> str:
        """How SLURM's commands name this job: `ARRAY_TASK` for an array task (its plain job id can be the
        array's own, which `scancel` or `scontrol show job` read as every task of the array)."""
        return f"{self.array_job_id}_{self.array_task_id}" if self.array_task_id else self.job_id

    def as_dict(self) -> dict:
        """The block as a record stores it: the fields it has (a launcher's block: as given)."""
        if self.given is not None:
            return dict(self.given)
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "given"}
        if not self.slurm:
            del out["attempt"]  # only SLURM counts attempts
        return {k: v for k, v in out.items() if v is not None}


def _seconds(slurm_time: str) -> float | None:
    """SLURM's [days-]hours:minutes:seconds (or minutes:seconds) as seconds; None for UNLIMITED."""
    days, _, clock = slurm_time.rpartition("-")
    try:
        parts = [int(p) for p in clock.split(":")]
    except ValueError:
        return None
    while len(parts) < 3:
        parts.insert(0, 0)
    return (int(days or 0) * 24 + parts[0]) * 3600 + parts[1] * 60 + parts[2]


def _node_down(node: dict[str, str]) -> str | None:
    """'node n1 DOWN*: slurmd-killed' when the node is down, failed or not responding; None when it is up."""
    state = node.get("State", "")
    if not state or not (state.endswith("*") or any(part in state for part in NODE_DOWN_STATES)):
        return None
    reason = node.get("Reason", "")
    return f"node {node.get('NodeName', '?')} {state}" + (f": {reason}" if reason and reason != "(null)" else "")


def _cause(info: dict[str, str], attempt: int, node: dict[str, str] | None = None,
           final: str | None = None) -> tuple[str, str] | None:
    """(cause, what SLURM says of it) for a job SLURM ended; None while it runs on a live node.
    `node`: `scontrol show node` of the node the run was on; `final`: sacct's state where accounting is on."""
    state, reason = info.get("JobState", ""), info.get("Reason", "")
    down = _node_down(node or {})
    if final and state in ("COMPLETING", "", "RUNNING"):
        state = final.split()[0]  # sacct: 'CANCELLED by 0', 'NODE_FAIL', 'PREEMPTED', 'TIMEOUT'
    if state == "NODE_FAIL" or reason in NODE_REASONS:
        return "node_fail", down or f"{state} {reason}".strip()
    if state == "PREEMPTED" or "Preempt" in reason:
        return "preempted", reason if reason not in ("", "None") else state
    if state not in ENDING_STATES and not down:
        return None  # RUNNING on a live node: SLURM did not end it (the run failed by itself)
    if int(info.get("Restarts", "0") or 0) >= attempt:
        return ("node_fail", down) if down else ("requeued", "")
    if down:
        return "node_fail", down
    run, limit = _seconds(info.get("RunTime", "")), _seconds(info.get("TimeLimit", ""))
    if reason == "TimeLimit" or (run is not None and limit and run >= limit):
        return "timeout", ""
    cause = ENDING_STATES.get(state) or ("cancelled" if state == "COMPLETING" else None)
    return (cause, "") if cause else None


def job_ref(sched: Mapping[str, str] | Block) -> str:
    """How SLURM's commands name this job (`Block.ref`)."""
    return Block.of(sched).ref


def _scontrol(args: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """`scontrol -o ARGS` (one line of Key=Value) as a dict ({} where scontrol is missing or fails)."""
    if not shutil.which("scontrol"):
        return {}
    try:
        out = subprocess.run(["scontrol", "-o", *args], capture_output=True, text=True,
                             timeout=SCONTROL_TIMEOUT_S, env=dict(environ))
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0:
        return {}
    fields = {}
    for item in out.stdout.split():  # values hold no spaces but Command's and Reason's (their first word is kept)
        key, sep, value = item.partition("=")
        if sep and key not in fields:
            fields[key] = value
    return fields


def job_info(job_id: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """`scontrol -o show job ID` as a dict ({} where scontrol is missing or fails)."""
    return _scontrol(["show", "job", job_id], environ)


def _gpus(tres: str) -> str | None:
    """The gpus of a TRES string ("cpu=2,mem=8G,node=1,gres/gpu=4" -> "4")."""
    for part in tres.split(","):
        if part.startswith("gres/gpu="):
            return part.split("=", 1)[1]
    return None


def block(environ: Mapping[str, str] = os.environ) -> dict:
    """The `scheduler` block of a record made in this process."""
    return Block.here(environ).as_dict()


def running_under(read: Callable[[], dict] | None) -> None:
    """Where a launcher runs a round outside SLURM (a Ray task: loop/ray_rounds.py), `read()` gives the
    `scheduler` block of the records this process makes (its job, task and node); None: `local` again."""
    global _ELSEWHERE
    _ELSEWHERE = read


def node_info(node: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """`scontrol -o show node NODE` as a dict ({} where it fails)."""
    return _scontrol(["show", "node", node], environ)


def final_state(job: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """sacct's state of `job` where SLURM accounting is on (None where it is off or sacct is repro's stand-in)."""
    real = shutil.which("sacct", path=environ.get("PATH"))
    if not real or "repro-sacct" in real:
        return None
    try:
        out = subprocess.run([real, "-n", "-X", "-P", "-j", job, "-o", "State"], capture_output=True, text=True,
                             timeout=SCONTROL_TIMEOUT_S, env=dict(environ))
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return lines[-1] if out.returncode == 0 and lines else None


def interrupt_on_sigterm(sched: Block | Mapping) -> Callable[[], None]:
    """Under SLURM, until the worker's measured steps begin, SLURM's SIGTERM (scancel, a time limit)
    interrupts this process; returns what restores the handler it replaced. A submitit job process
    ignores SIGTERM (submitit's own handler only logs it): where SLURM ended the job while it waited
    before its steps (for an MLflow projector at work), the process waited on and was SIGKILLed after
    KillWait, its run left `lost`; interrupted, it records how SLURM ended it (`ended_by_scheduler`).
    Once the steps run, SLURM's SIGTERM ends the worker, and its end says so as before."""
    if not Block.of(sched).slurm or threading.current_thread() is not threading.main_thread():
        return lambda: None
    from repro.worker import lifeline

    previous = signal.getsignal(signal.SIGTERM)
    if previous is lifeline.interrupt or previous is None:
        return lambda: None
    signal.signal(signal.SIGTERM, lifeline.interrupt)

    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) is lifeline.interrupt:
            signal.signal(signal.SIGTERM, previous)

    return restore


def ended_by_scheduler(sched: Block | Mapping, environ: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """(status, reason) when the scheduler itself ended this job (scancel, time limit, preemption, requeue,
    node failure); None when it did not (the job still runs, or the run is not under a scheduler)."""
    sched = Block.of(sched)
    if not sched.slurm or sched.job_id is None:
        return None
    found = _how_ended(sched, environ)
    return (found[0], f"{found[1]}; SLURM job {sched.ref}") if found else None


def job_ended(job_id: str, watcher_state: str | None = None,
              environ: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """(status, what SLURM says) for a job SLURM ended, seen from the command that submitted it (a
    round's job of hydra/launcher=submitit_slurm): `scontrol show job` (it keeps JobState=CANCELLED for
    MinJobAge), else sacct, else `watcher_state`, submitit's own view of it (CANCELLED, TIMEOUT, ...);
    None where none of them says SLURM ended it."""
    found = _how_ended(Block("slurm", job_id=job_id), environ, final=watcher_state)
    if found is None:
        return None
    return found[0], f"{found[1]} (JobState={found[2]})"


def _how_ended(sched: Block, environ: Mapping[str, str], final: str | None = None) -> tuple[str, str, str] | None:
    """(status, what happened, SLURM's state) of a job SLURM ended; None where it did not."""
    info = job_info(sched.ref, environ)
    node = node_info(sched.node, environ) if sched.node else {}
    final = final_state(sched.ref, environ) or final
    found = _cause(info, sched.attempt, node, final)
    if found is None:
        return None
    cause, why = found
    status, what = ENDED_BY_SLURM[cause]
    requeued = int(info.get("Restarts", "0") or 0) >= sched.attempt
    next_attempt = sched.attempt + 1
    reason = what.format(TimeLimit=info.get("TimeLimit", "?"), next=next_attempt, why=why,
                         requeue=f"; requeued, it runs again as attempt {next_attempt}" if requeued else "")
    state = info.get("JobState") or (final or "").split(" ")[0] or cause.upper()
    return status, reason, state


SACCT_STAND_IN = """#!/bin/sh
# repro's sacct stand-in (SLURM accounting is off on this cluster): answers submitit's
# `sacct -o JobID,State,NodeList --parsable2 -j IDS` from squeue, which keeps ended jobs for MinJobAge.
ids=""
while [ $# -gt 0 ]; do case "$1" in -j) ids="$2"; shift;; esac; shift; done
echo "JobID|State|NodeList"
[ -n "$ids" ] && squeue -h -t all -j "$ids" -o '%i|%T|%N' 2>/dev/null
exit 0
"""


def sacct_stand_in(folder: Path) -> Path | None:
    """Where SLURM accounting is off, put a `sacct` that answers from squeue first on this process's PATH.

    submitit polls `sacct` for its jobs' states. Without accounting each poll prints SLURM's
    "accounting storage is disabled" and submitit's "Bypassing sacct error ... status may be
    inaccurate" (three copies), and a job SLURM ended before it wrote its result (scancel, time
    limit) stays "UNKNOWN" to submitit. A logging filter could hide only the second of those and
    leave submitit blind; the stand-in gives it SLURM's real states (RUNNING, CANCELLED, TIMEOUT).
    It is installed only in the launching process and only when the real sacct says accounting is
    off, and said once. Returns its path (None: sacct works, or there is no SLURM here).
    """
    if not shutil.which("squeue"):
        return None
    real = shutil.which("sacct")
    if real and "repro-sacct" not in real:
        try:
            probe = subprocess.run([real, "-n", "-X", "-j", "1"], capture_output=True, text=True,
                                   timeout=SCONTROL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            probe = None
        if probe is not None and "accounting storage is disabled" not in (probe.stdout + probe.stderr):
            return None
    elif real:
        return Path(real)  # already installed by this process
    bin_dir = folder / "repro-sacct"
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "sacct"
    path.write_text(SACCT_STAND_IN)
    path.chmod(0o755)
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    print(f"repro: SLURM accounting (sacct) is off on this cluster; submitit reads its jobs' states from "
          f"squeue through {path}", file=sys.stderr)
    return path


def shared_store_warning(uris: list[str], launcher: str = "submitit_slurm") -> str | None:
    """Said before a sweep whose jobs `launcher` runs on other nodes, when a job's MLflow store is a sqlite file."""
    files = sorted({u for u in uris if u.startswith("sqlite:")})
    if not files:
        return None
    return (f"warning: jobs launched through hydra/launcher={launcher} can run on other nodes, and MLflow's store {', '.join(files)} is a "
            "sqlite file they would all write: it must be on a filesystem every node sees, and sqlite's locking "
            "over a network filesystem (NFS, Lustre) is unreliable. On more than one node, start `mlflow server` "
            "(with a SQL database) and set tracking.uri=http://HOST:PORT (or MLFLOW_TRACKING_URI); the ledger "
            "(ledger.dir) must be on a shared filesystem too. See docs/how-to/slurm.md, 'On a SLURM cluster'")
