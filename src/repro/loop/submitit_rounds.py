"""The launcher adapter of `hydra/launcher=submitit_slurm` and `submitit_local` (loop/rounds.py):
one submitit job per round, waited for before the loop decides the next.

A round is one allocation: its configs run one after another on one node, in the round's random
order (`rounds.run_elsewhere`), so a pair never spans nodes and its runs never overlap; every record
carries its node (the `scheduler` block on SLURM, `machine.host` everywhere). The executor takes its
parameters from the composed `hydra.launcher` node the user chose, mapped as hydra-submitit-launcher
maps them (`timeout_min`, `partition`, `cpus_per_task`, `nodes`, `tasks_per_node`,
`additional_parameters`, ...), so `hydra.launcher.timeout_min=10` means what it meant there. With
`nodes` > 1 (a `cluster=slurm` run over several nodes) every node runs the round and node 0
records it, as under `srun`.

Rounds run at the same time only when asked: `hydra.launcher.array_parallelism=N` on the command
line (hydra-submitit-launcher's own key; its default of 256 is not taken as a wish) lets the loop
hand up to N rounds at once (`at_once`, loop/sweep.py: as many as run whatever their records say).
Each such round asks SLURM for a node of its own (`--exclusive`), so two rounds never share a
node's cores; their records name their nodes, and the verdict counts node-to-node spread in its
interval (report/verdict.py). Rounds that still overlapped on one host (two slurmd on one machine)
are refused by the comparison, naming the overlap.

The time from submit to the round's start is the queue's (`host.queue_s`), counted apart from the
run time that `verdict.budget_s` holds. A job that SLURM ended before it handed back its records
(scancel while it waited, started or ran; its time limit; a node failure) is read from the ledger: the
run it was in recorded how it ended, and the round's runs that recorded no end are recorded as SLURM
ended them (`killed`: "cancelled by SLURM (scancel) ... (JobState=CANCELLED)", read from `scontrol show
job`, which keeps an ended job for MinJobAge, else from submitit's watcher), `lost` where SLURM says nothing.

Ctrl-C under submitit_local stops the round as the default launcher stops a sweep (rounds.Stop): the
run that runs is recorded `interrupted`, the round's later jobs do not run, the sweep ends (exit 130);
under submitit_slurm the same, the round's job sent SIGINT (`scancel --signal=INT`), then cancelled.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

from repro.loop import rounds
from repro.loop.launchers import CLUSTER, HOST, Launch, launcher
from repro.job import scheduler
from repro.job.host import JobHost

# hydra-submitit-launcher's BaseQueueConf keys: submitit's own names; every other key takes the executor's prefix
BASE_KEYS = ("timeout_min", "cpus_per_task", "gpus_per_node", "tasks_per_node", "mem_gb", "nodes", "name",
             "stderr_to_stdout")
INIT_KEYS = ("submitit_folder", "max_num_timeout")


def executor(cluster: str, params: dict):
    """A submitit executor for `cluster` (slurm | local) from a composed `hydra.launcher` node."""
    import submitit

    init = {"folder": params["submitit_folder"]}
    if "max_num_timeout" in params:
        init[f"{cluster}_max_num_timeout"] = params["max_num_timeout"]
    ex = submitit.AutoExecutor(cluster=cluster, **init)
    ex.update_parameters(**{k if k in BASE_KEYS else f"{cluster}_{k}": v for k, v in params.items()
                            if k not in INIT_KEYS and k != "_target_"})
    return ex


def minutes(limit: str) -> float | None:
    """A SLURM time limit in minutes (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS); None: UNLIMITED,
    unreadable."""
    days, dash, rest = limit.partition("-") if "-" in limit else ("0", "", limit)
    try:
        d, parts = int(days), [int(p) for p in rest.split(":")]
    except ValueError:
        return None
    if dash:
        h, m, sec = (parts + [0, 0])[:3]
    elif len(parts) == 3:
        h, m, sec = parts
    else:
        h, m, sec = 0, parts[0], parts[1] if len(parts) > 1 else 0
    return d * 1440 + h * 60 + m + sec / 60


def partition_limit_min(partition: str | None) -> float | None:
    """The MaxTime of `partition` in minutes (`scontrol show partition`); None where it has none, none is
    named, or SLURM cannot be asked."""
    if not partition or not shutil.which("scontrol"):
        return None
    try:
        out = subprocess.run(["scontrol", "-o", "show", "partition", partition], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = [w.split("=", 1)[1] for w in out.split() if w.startswith("MaxTime=")]
    return minutes(found[0]) if found else None


class Submitit(rounds.Elsewhere):
    """Rounds as submitit jobs (module docstring); `attach(config)`: a host of the sweep in the job."""

    def __init__(self, cluster: str, params: dict, attach: Callable, folder: Path, at_once: int = 1):
        self.name = f"submitit_{cluster}"
        folder.mkdir(parents=True, exist_ok=True)
        if cluster == "slurm":
            scheduler.sacct_stand_in(folder)  # where accounting is off
        self.at_once = max(1, at_once) if cluster == "slurm" else 1  # local rounds at once would share this host
        self.executor, self.attach = executor(cluster, params), attach
        if self.at_once > 1:
            self.executor.update_parameters(slurm_exclusive=True)  # a node each: rounds at once never share cores
        # Ctrl-C: a local round is asked to stop as the default launcher stops (rounds.Stop); SLURM's is cancelled
        self.stop = rounds.Stop.under(folder / "stop") if cluster == "local" else None
        self.running: list = []  # submitted, not yet collected

    def run_round(self, host: JobHost, jobs: Sequence, first_job_no: int, hooks: rounds.Hooks = rounds.NO_HOOKS) -> list:
        return self._collect(host, *self._submit(host, jobs, first_job_no, hooks))

    def run_rounds(self, host: JobHost, batches: Sequence) -> list[list]:
        """Several rounds at once ((jobs, first_job_no, hooks) each): all submitted, then each waited for.
        They wait in the queue together: the sweep's queue time grows by the wait of the first to start
        (`host.queue_s`), not by their sum. Interrupted: every round of them is cancelled."""
        submitted, out, queued = [], [], host.queue_s
        try:
            for nth, (jobs, no, hooks) in enumerate(batches):
                submitted.append(self._submit(host, jobs, no, hooks, nth))
            waits = []
            for s in submitted:
                before = host.queue_s
                out.append(self._collect(host, *s))
                waits.append(host.queue_s - before)
        except KeyboardInterrupt:
            for s in submitted:
                s[0].cancel(check=False)
            raise
        host.queue_s = queued + min(waits, default=0.0)
        return out

    def _submit(self, host: JobHost, jobs: Sequence, first_job_no: int, hooks: rounds.Hooks, nth: int = 0):
        """`nth`: the round's place among rounds handed over at once (run.resume=true takes the nth record)."""
        jobs = [hooks.before(job) for job in jobs]
        submitted = time.time()
        taken = rounds.taken(host)
        with _deaf(self.stop is not None):  # submitit's local controller: deaf to the terminal's Ctrl-C
            job = self.executor.submit(rounds.run_elsewhere, self.attach, jobs, first_job_no, taken, nth,
                                       str(self.stop.folder) if self.stop else None)
        self.running.append(job)
        host.say(f"round of {len(jobs)} job(s) submitted as {self.name} job {job.job_id}")
        return job, jobs, first_job_no, hooks, submitted

    def _collect(self, host: JobHost, job, jobs: list, first_job_no: int, hooks: rounds.Hooks, submitted: float) -> list:
        result, reason = None, f"{self.name} job {job.job_id} ended before this job of its round ran"
        try:
            result = job.results()[0]  # task 0: node 0 of a multi-node round, which records
        except KeyboardInterrupt:
            rounds.adopt(host, jobs, first_job_no, self._stopped(job), reason, submitted, hooks)
            raise
        except Exception as e:  # noqa: BLE001 - submitit's UncompletedJobError, FailedJobError, ...
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            reason = f"{self.name} job {job.job_id} ended without handing back its records ({type(e).__name__}: {first})"
        finally:
            if job.done():
                self.running = [j for j in self.running if j is not job]
        interrupted = result is not None and result.interrupted
        if interrupted and self.stop is not None:  # Ctrl-C reached the round: the sweep ends, as it would here
            rounds.adopt(host, jobs, first_job_no, result, reason, submitted, hooks)
            raise KeyboardInterrupt
        if interrupted:
            reason = f"{self.name} job {job.job_id} was ended (SIGTERM: scancel, its time limit, its node) before this job of its round ran"
        lost = rounds.Lost(reason)
        if self.name == "submitit_slurm" and (result is None or interrupted):
            if ended := _how_slurm_ended(job):  # SLURM names its end
                status, what = ended
                lost = rounds.Lost(f"{what} before this job of its round ran; SLURM job {job.job_id}", status)
                reason = f"{self.name} job {job.job_id} ended: {what}"
        if result is None:
            host.say(f"{reason}; the ledger says how its runs ended")
        return rounds.adopt(host, jobs, first_job_no, result, lost, submitted, hooks)

    def _stopped(self, job) -> rounds.RoundResult | None:
        """Ctrl-C here: the round asked to stop as Ctrl-C stops a sweep (local: rounds.Stop; SLURM: SIGINT
        to the job's steps, `scancel --signal=INT`, so its run records `interrupted`, not a cancel) and
        waited for, its records handed back; after Stop.WAIT_S, or a second Ctrl-C, it is ended (its
        controller, or `scancel`) and nothing comes back: the ledger has what it recorded."""
        if self.stop is not None:
            self.stop.ask()
        else:
            _scancel(job, "--signal=INT")
        deadline = time.time() + rounds.Stop.WAIT_S
        try:
            while not job.done() and time.time() < deadline:
                time.sleep(0.2)
            if job.done():
                return job.results()[0]
        except KeyboardInterrupt:
            pass
        except Exception:  # noqa: BLE001 - the round ended without a result
            return None
        finally:
            if not job.done():
                _end_controller(job) if self.stop is not None else job.cancel(check=False)
        return None

    def close(self) -> None:
        """The sweep ended (interrupted between a round's submission and its collection, too): a local
        round still running is stopped as Ctrl-C stops one and waited for, the stop folder removed; a
        SLURM round still running is cancelled."""
        running = [j for j in self.running if not j.done()]
        if self.stop is None:  # SLURM: a round submitted but never waited for is cancelled
            for j in running:
                j.cancel(check=False)
            self.running = []
            return
        if running:
            self.stop.ask()
            deadline = time.time() + rounds.Stop.WAIT_S
            try:
                while any(not j.done() for j in running) and time.time() < deadline:
                    time.sleep(0.2)
            except KeyboardInterrupt:
                pass
            for j in running:
                if not j.done():
                    _end_controller(j)
        self.running = []
        self.stop.remove()


@launcher("submitit_local", target="hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
          where=HOST, needs=("submitit", "hydra_plugins.hydra_submitit_launcher"), extra="launchers")
def _local(launch: Launch) -> Submitit:
    return Submitit("local", launch.node, launch.attach, launch.sweep_dir)


@launcher("submitit_slurm", target="hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
          where=CLUSTER, needs=("submitit", "hydra_plugins.hydra_submitit_launcher"), extra="launchers",
          scheduler="slurm")
def _slurm(launch: Launch) -> Submitit:
    if launch.estimate is not None:
        fits_time_limit(launch.estimate(), launch.node)
    at_once = int(launch.node.get("array_parallelism") or 1) if launch.asked("array_parallelism") else 1
    return Submitit("slurm", launch.node, launch.attach, launch.sweep_dir, at_once)  # at once only when asked (its default is 256)


def fits_time_limit(est, node: dict) -> None:
    """A round runs its configs one after another in one allocation: their estimated time (`est`, the
    plan's preflight/estimate.py `Estimate`) must fit `hydra.launcher.timeout_min` and the partition's
    MaxTime (where the ledger has history of every config)."""
    from repro.config.schema import ConfigError
    from repro.usertext import duration

    if len(est.known) < len(est.configs):
        return
    limits = [(float(node["timeout_min"]), f"hydra.launcher.timeout_min={node['timeout_min']}")] \
        if node.get("timeout_min") else []
    if (part := partition_limit_min(node.get("partition"))) is not None:
        limits.append((part, f"partition {node['partition']}'s MaxTime"))
    if not limits:
        return
    limit_min, what = min(limits)
    if est.first_round_s > limit_min * 60:
        need = int(est.first_round_s // 60) + 1
        raise ConfigError(f"a round of hydra/launcher=submitit_slurm runs its {len(est.configs)} configs one after "
                          f"another in one allocation: estimated {duration(est.first_round_s)} from the "
                          f"ledger, past the time limit {what} ({duration(limit_min * 60)}); give "
                          f"hydra.launcher.timeout_min={need} or more within the partition's limit (or a partition "
                          "with a longer one), or sweep fewer configs at once")


@contextlib.contextmanager
def _deaf(deaf: bool):
    """SIGINT ignored while submitit starts its local controller, which inherits that (and passes it on to
    the round's process, which listens to its launcher instead: rounds.Stop): the terminal's Ctrl-C then
    reaches this command, not a controller that would print a traceback and kill the round mid-record."""
    if not deaf or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _scancel(job, *args: str) -> None:
    try:
        subprocess.run(["scancel", *args, str(job.job_id)], capture_output=True, timeout=scheduler.SCONTROL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        job.cancel(check=False)


def _how_slurm_ended(job, wait_s: float = 30.0) -> tuple[str, str] | None:
    """(status, what SLURM says) of a round's job that ended early, asked again for up to `wait_s`: the
    round's process hands back its records a moment before SLURM shows the job ended, and a loaded
    controller may not answer `scontrol` at once."""
    deadline = time.time() + wait_s
    while True:
        if ended := scheduler.job_ended(str(job.job_id), _watcher_state(job)):
            return ended
        if time.time() >= deadline:
            return None
        time.sleep(1.0)


def _watcher_state(job) -> str | None:
    """submitit's own view of a SLURM job's state (its watcher polls sacct, or repro's stand-in); None unread."""
    try:
        return str(job.state)
    except Exception:  # noqa: BLE001
        return None


def _end_controller(job) -> None:
    """A local round that did not stop when asked: its controller and everything under it ended."""
    import psutil

    process = getattr(job, "_process", None)
    if process is None:
        return
    try:
        procs = [*psutil.Process(process.pid).children(recursive=True), psutil.Process(process.pid)]
    except psutil.Error:
        return
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass
