"""The command's side of the machine's MLflow writer (tracking/writer.py): where its socket is, and
the hand-over of a ledger to it (started where none answers). Apart from the writer so that the run
path (tracking/handoff.py) imports neither MLflow nor the drain."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

SOCKET_LIMIT = 100  # AF_UNIX paths are bounded (108 bytes on Linux): a longer one is reached through its folder
CONNECT_S = 2.0  # a writer that is alive answers at once
START_S = 20.0  # a new writer binds its socket before importing anything heavy
REPLY_S = 5.0  # the most a command waits for a writer's answer before it starts a projector of its own


@dataclass(frozen=True)
class HandOver:
    """A command's one line to the writer: the ledger to drain, the command's environment (its store's
    credentials, MLflow's settings) and folder, and how long the writer idles before it ends."""

    ledger: str
    env: dict
    cwd: str = "/"
    idle_s: float = 0.0  # 0: the writer keeps the idle time it has

    def line(self) -> bytes:
        return json.dumps(asdict(self)).encode() + b"\n"

    @classmethod
    def parse(cls, line: bytes) -> HandOver:
        """The request a command sent (ValueError, KeyError or TypeError where it is not one)."""
        given = json.loads(line)
        return cls(ledger=str(given["ledger"]), env=dict(given["env"]), cwd=str(given.get("cwd") or "/"),
                   idle_s=float(given.get("idle_s") or 0.0))


def _code_stamp() -> str:
    """The interpreter, the package's folder and its files' latest change: what makes two writers
    the same code."""
    import repro

    root = Path(repro.__file__).parent
    latest = 0.0
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                try:
                    latest = max(latest, os.stat(os.path.join(folder, name)).st_mtime)
                except OSError:
                    pass
    return f"{sys.executable}|{root}|{latest:.6f}"


def socket_path() -> Path:
    from repro import paths

    key = hashlib.sha256(_code_stamp().encode()).hexdigest()[:12]
    return paths.machine_dir() / f"writer-{key}.sock"


def hand_over(ledger_root: str | Path, idle_s: float, env: dict, log: Path | None = None) -> int | None:
    """Hand `ledger_root`'s pending entries to this machine's writer (started where none answers):
    its pid once it has queued them and holds the ledger's lock, or None where no writer could take
    them (the caller starts a projector)."""
    path = socket_path()
    try:
        cwd = os.getcwd()
    except OSError:  # removed under the command: the drain runs from /
        cwd = "/"
    request = HandOver(str(Path(ledger_root).resolve()), env, cwd, idle_s)
    for _ in range(2):  # a writer that was ending as we connected: start another, once
        conn = _connect(path)
        if conn is None:
            _start(path, idle_s, env, log)
            conn = _connect(path, wait_s=START_S)
        if conn is None:
            return None
        with conn:
            try:
                conn.settimeout(REPLY_S)  # its accepting thread answers at once, importing or draining
                conn.sendall(request.line())
                line = conn.makefile("rb").readline()
            except OSError:
                return None  # alive but not answering (stopped, say): a projector of our own
            if not line:
                continue  # it was ending: another is started
            try:
                pid = int(json.loads(line)["pid"])
            except (ValueError, KeyError, TypeError):
                return None
            return pid
    return None


@contextmanager
def address(path: Path) -> Iterator[str]:
    """`path` as a socket address: itself, or, where it is longer than an AF_UNIX address may be (a
    deep machine folder), the same file named through an open descriptor of its folder (Linux's
    /proc/self/fd), which is short whatever the folder's depth."""
    if len(os.fsencode(path)) <= SOCKET_LIMIT:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _connect(path: Path, wait_s: float = 0.0) -> socket.socket | None:
    deadline = time.monotonic() + wait_s
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(CONNECT_S)
        try:
            with address(path) as where:
                s.connect(where)
            return s
        except OSError:
            s.close()
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)


def _start(path: Path, idle_s: float, env: dict, log: Path | None) -> None:
    import subprocess

    path.parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "ab") if log else subprocess.DEVNULL
    try:
        # started where the command runs, so that it imports repro as the command did (it leaves the folder
        # once MLflow is imported)
        subprocess.Popen([sys.executable, "-m", "repro.tracking.writer", str(path), f"{idle_s:g}"],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                         env=env)
    finally:
        if log:
            out.close()
