"""The parent's side of `run.start=fork`: workers forked by a fork server (worker/forkserver.py).

One server per command and environment (its interpreter, code and backend among them: job/launch.py
`_forked` makes the key), started when the
first worker of that kind is asked for and kept for this process's later runs of the same kind, so
a sweep imports each framework once instead of once per run. `close_all` ends them (the sweep's
close, and this process's exit). A worker it forks is handed the same pipes a started worker has
(its stdin, its log, the event and gate pipes: job/launch.py `_spawn`), over the server's control
socket, and `ForkedProc` gives launch.py the part of `subprocess.Popen` it uses; the worker is the
server's child, so its end comes back as a message.

The standard library's `multiprocessing.forkserver` is not used: it forks a function of the parent's
program with pickled arguments and hides the child's pid and exit status behind its own pipes,
while a worker here is a whole process with its own session, file descriptors and exit code that
the parent kills by process group and waits on (job/launch.py).
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Callable

SERVER_READY_S = 300.0  # the server's imports (torch and dynamo: ~4 s on the 2-core reference machine)
LOG_TAIL_LINES = 20


class ServerError(RuntimeError):
    """A fork server that could not start or answer: what it printed, in its message."""


class ForkedProc:
    """A forked worker as launch.py uses a `subprocess.Popen`: pid, stdin, poll, wait, returncode."""

    def __init__(self, pid: int, stdin_fd: int):
        self.pid = pid
        self.stdin = os.fdopen(stdin_fd, "wb")
        self.returncode: int | None = None
        self._ended = threading.Event()

    def ended(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout)
        return self.returncode


class Server:
    """One running fork server, its control socket and the workers it forked that have not ended."""

    def __init__(self, command: list[str], env: dict[str, str], folder: Path):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.folder = folder  # its log's; named after this process, so a later one removes it if this one is killed
        self.log_path = folder / "forkserver.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(command, stdin=theirs, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        theirs.close()
        self.sock = ours
        self.sock.settimeout(SERVER_READY_S)
        self._lock = threading.Lock()  # one request at a time: its pid is the next reply
        self._children: dict[int, ForkedProc] = {}
        self._exited: dict[int, int] = {}  # ended before their ForkedProc was made
        self._pids: list[int] = []
        self._pid_came = threading.Condition(self._lock)
        try:
            hello = json.loads(self.sock.recv(4096) or b"{}")
        except (OSError, ValueError):
            hello = {}
        if "ready" not in hello:
            said = self.tail()
            self.close()
            raise ServerError(f"the fork server ({' '.join(command[2:])}) did not start: {said}")
        self.sock.settimeout(None)
        threading.Thread(target=self._read, name="repro-forkserver", daemon=True).start()

    def tail(self) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]) or "(no output)"
        except OSError:
            return "(no log)"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, argv: list[str], env: dict[str, str], fds: list[int], stdin_fd: int) -> ForkedProc:
        """A worker forked with these arguments (the worker's command after `-m MODULE`), extra
        environment and pipes (stdin, log, events, gate: the server dups them; the caller closes its copies)."""
        request = json.dumps({"argv": argv, "env": env, "cwd": os.getcwd()}).encode()
        with self._lock:
            try:
                socket.send_fds(self.sock, [request], fds)
            except OSError as e:
                raise ServerError(f"the fork server is gone ({e}): {self.tail()}") from e
            count = len(self._pids)
            if not self._pid_came.wait_for(lambda: len(self._pids) > count or not self.alive(), SERVER_READY_S):
                raise ServerError(f"the fork server did not answer within {SERVER_READY_S:.0f} s: {self.tail()}")
            if len(self._pids) == count:
                raise ServerError(f"the fork server ended: {self.tail()}")
            proc = ForkedProc(self._pids[count], stdin_fd)
            self._children[proc.pid] = proc
            if proc.pid in self._exited:
                proc.ended(self._exited.pop(proc.pid))
        return proc

    def _read(self) -> None:
        while True:
            try:
                message = self.sock.recv(4096)
            except OSError:
                message = b""
            if not message:  # the server ended: its children end with it (their lifeline)
                with self._lock:
                    for proc in self._children.values():
                        if proc.returncode is None:
                            proc.ended(-9)
                    self._pid_came.notify_all()
                return
            said = json.loads(message)
            with self._lock:
                if "pid" in said:
                    self._pids.append(said["pid"])
                    self._pid_came.notify_all()
                elif (proc := self._children.pop(said["exit"], None)) is not None:
                    proc.ended(said["code"])
                else:
                    self._exited[said["exit"]] = said["code"]

    def close(self) -> None:
        """EOF on its control socket ends it; it is waited for, and its log removed. The socket is shut
        down before it is closed: a close alone leaves the reader thread's recv holding it open, so the
        server would see no EOF (and be killed after 10 s)."""
        try:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # not connected any more (the server ended first)
                pass
            self.sock.close()
        finally:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.folder, ignore_errors=True)


_servers: dict[tuple, Server] = {}


def server(key: tuple, command: list[str], env: dict[str, str], folder: Callable[[], Path]) -> Server:
    """The running server for `key` (its command and environment), started with `command` and `env`
    if there is none; `folder` makes the folder its log goes in (job/launch.py `make_run_dir`)."""
    found = _servers.get(key)
    if found is not None and found.alive():
        return found
    if found is not None:
        found.close()
    _servers[key] = Server(command, env, folder())
    return _servers[key]


def close_all() -> None:
    """End every fork server this process started (a sweep's close; this process's exit)."""
    while _servers:
        _servers.popitem()[1].close()


atexit.register(close_all)
