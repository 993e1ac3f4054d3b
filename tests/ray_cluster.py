"""A real Ray head for the tests: `ray start --head` on loopback, on a free port, with a folder of its own.

Ray's own `ray stop` ends every Ray process on the machine (another test worker's head too), so
`stop()` ends exactly this head's: the processes whose command line names its folder (GCS, raylet,
its agents and monitors: each is started with `--temp-dir`/`--session-dir` under it) and their
children (the raylet's workers), SIGTERM first, then SIGKILL. The folder is short and under /tmp:
Ray's Unix sockets live in it, and a socket's path must stay under 108 characters.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from slurm_cluster import _free_ports


class RayHead:
    """Start with `start()`, stop with `stop()`; `address` is the head's GCS (HOST:PORT)."""

    def __init__(self, cpus: int = 2):
        self.root = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
        self.port = _free_ports(1)[0]
        self.address = f"127.0.0.1:{self.port}"
        self.cpus = cpus

    def start(self) -> "RayHead":
        ray = Path(sys.executable).with_name("ray")
        if not ray.exists():
            raise RuntimeError(f"{ray} is missing: the Ray tests need `pip install 'repro[ray]'` (make test installs it)")
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        proc = subprocess.run([str(ray), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={self.port}",
                               f"--num-cpus={self.cpus}", "--include-dashboard=false", "--disable-usage-stats",
                               f"--temp-dir={self.root}"], env=env, capture_output=True, text=True, timeout=180)
        if proc.returncode != 0:
            self.stop()
            raise RuntimeError(f"ray start --head failed ({proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        return self

    def processes(self) -> list[psutil.Process]:
        """This head's processes and their children (its workers)."""
        mine = []
        for p in psutil.process_iter(["cmdline"]):
            if any(str(self.root) in part for part in (p.info["cmdline"] or [])):
                mine.append(p)
        found = {p.pid: p for p in mine}
        for p in mine:
            try:
                found.update({c.pid: c for c in p.children(recursive=True)})
            except psutil.Error:
                pass
        return list(found.values())

    def stop(self) -> None:
        procs = self.processes()
        for p in procs:
            try:
                p.terminate()
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(procs, timeout=5)  # some of its agents outlive SIGTERM for 15 s and more
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)
