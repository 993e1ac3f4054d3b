"""A real SLURM cluster for the tests: munged, slurmctld and two slurmd's (n1, n2) on this host.

Debian's `slurmctld slurmd slurm-client munge` (`make system-deps` installs them) run as root
without systemd or cgroups (a container has neither): every daemon in the foreground, all state, logs and the munge socket under one folder of our own, on free ports.
`SLURM_CONF` points the client commands (sbatch, srun, squeue, scontrol, scancel) and the
jobs' processes at it. `stop()` cancels every job, waits until none runs (a slurmd stopped
under a running job leaves its slurmstepd behind), then stops exactly the daemons it started,
by their recorded PIDs, in reverse order.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel")
NODES = ("n1", "n2")
PARTITIONS = {"both": "n1,n2", "one": "n1"}  # "one": a one-node partition (a sweep's jobs run one by one)


def _free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def missing_tools() -> list[str]:
    return [d for d in DAEMONS if not shutil.which(d) and not Path("/usr/sbin", d).exists()]


class SlurmCluster:
    """Start with `start()`, stop with `stop()`; `env()` is os.environ plus SLURM_CONF."""

    def __init__(self, root: Path | None = None):
        # Not under pytest's 0700 tmp folders: munged refuses a socket whose folders are not
        # world-executable; /tmp itself is. Unix socket paths stay under 108 characters.
        self.root = Path(root or tempfile.mkdtemp(prefix="repro-slurm-", dir="/tmp"))
        self.root.chmod(0o755)
        self.conf = self.root / "slurm.conf"
        self.procs: dict[str, subprocess.Popen] = {}
        self.host = socket.gethostname()
        self.cpus = os.cpu_count() or 1

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf), **extra}

    def _write_conf(self) -> None:
        ctld_port, *node_ports = _free_ports(1 + len(NODES))
        r = self.root
        nodes = "\n".join(f"NodeName={n} NodeHostname={self.host} NodeAddr=127.0.0.1 Port={p} CPUs={self.cpus} "
                          "State=UNKNOWN" for n, p in zip(NODES, node_ports))
        parts = "\n".join(f"PartitionName={name} Nodes={nodes_} {'Default=YES ' if name == 'both' else ''}"
                          "MaxTime=INFINITE State=UP" for name, nodes_ in PARTITIONS.items())
        self.conf.write_text(f"""\
ClusterName=repro-test
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.socket.2
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
ReturnToService=2
MinJobAge=300
KillWait=30
InactiveLimit=0
{nodes}
{parts}
""")

    def _start(self, name: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "w")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env(),
                                            start_new_session=True)

    def start(self, timeout: float = 30) -> "SlurmCluster":
        if missing := missing_tools():
            raise RuntimeError(f"the SLURM tests need a real SLURM, but {', '.join(missing)} is not installed: "
                               "`make system-deps` (as root) or `apt-get install slurmctld slurmd slurm-client munge`")
        for sub in ("munge", "state", "log", *(f"spool/{n}" for n in NODES)):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "munge").chmod(0o755)
        key = self.root / "munge" / "munge.key"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True)
        key.chmod(0o600)
        self._write_conf()
        try:
            self._start("munged", ["munged", "-F", "--force", f"--key-file={key}",
                                   f"--socket={self.root}/munge/munge.socket.2",
                                   f"--pid-file={self.root}/munge/munged.pid", f"--seed-file={self.root}/munge/seed",
                                   f"--log-file={self.root}/log/munged.log"])
            self._wait(lambda: (self.root / "munge" / "munge.socket.2").exists(), timeout, "munged's socket")
            self._start("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
            self._wait(lambda: self._ok(["scontrol", "ping"], "UP"), timeout, "slurmctld")
            for node in NODES:
                self._start(f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(self.conf)])
            self._wait(self._idle, timeout, "both nodes idle")
        except BaseException:
            self.stop()
            raise
        return self

    def _ok(self, argv: list[str], needle: str) -> bool:
        out = subprocess.run(argv, capture_output=True, text=True, env=self.env())
        return out.returncode == 0 and needle in out.stdout

    def _idle(self) -> bool:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, env=self.env())
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        return all(states.get(n) == "idle" for n in NODES)

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode} while waiting for {what}: "
                                       f"{self.log_tail(name)}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"SLURM: no {what} within {timeout:.0f} s; logs in {self.root / 'log'}")

    def log_tail(self, name: str, lines: int = 15) -> str:
        texts = []
        for path in sorted((self.root / "log").glob(f"{name.split('-')[0]}*")):
            texts.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(texts)

    # Jobs -------------------------------------------------------------------------------------

    def squeue(self, *args: str) -> list[dict]:
        """The jobs slurmctld knows (finished ones too, for MinJobAge): id, state, nodes, reason."""
        out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i|%T|%N|%r", *args], capture_output=True,
                             text=True, env=self.env())
        return [dict(zip(("id", "state", "nodes", "reason"), line.split("|"))) for line in out.stdout.splitlines()]

    def scontrol_job(self, job_id: str) -> dict[str, str]:
        out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True,
                             env=self.env())
        return dict(kv.split("=", 1) for kv in out.stdout.split() if "=" in kv)

    def wait_state(self, job_id: str, states: set[str], timeout: float = 120) -> str:
        deadline = time.time() + timeout
        state = ""
        while time.time() < deadline:
            state = self.scontrol_job(job_id).get("JobState", "")
            if state in states:
                return state
            time.sleep(0.2)
        raise AssertionError(f"SLURM job {job_id} did not reach {states} in {timeout:.0f} s (it is {state!r})")

    def cancel_all(self, timeout: float = 60) -> None:
        subprocess.run(["scancel", "--full", "-u", "root"], capture_output=True, env=self.env())
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not [j for j in self.squeue() if j["state"] in ("RUNNING", "PENDING", "COMPLETING", "CONFIGURING",
                                                              "SUSPENDED", "REQUEUED")]:
                return
            time.sleep(0.2)

    def stop(self) -> None:
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self.cancel_all()
        for name in reversed(list(self.procs)):  # slurmd's, slurmctld, munged: each by its PID
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        self.procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)  # state, logs, the munge key: nothing stays behind


if __name__ == "__main__":  # a cluster by hand: `python tests/slurm_cluster.py` prints its SLURM_CONF
    c = SlurmCluster().start()
    print(f"export SLURM_CONF={c.conf}  # Ctrl-C stops it")
    try:
        signal.pause()
    finally:
        c.stop()
