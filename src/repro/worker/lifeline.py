"""Who started a run, and a worker that never outlives its parent.

The parent writes its identity into the `started` record (host, pid and the pid's create
time, so a reused pid is not taken for the parent). The worker dies with its parent in two
ways, because either alone can miss: the kernel sends it SIGTERM when the parent dies
(`prctl(PR_SET_PDEATHSIG)`, Linux), and a thread sees EOF on its stdin, a pipe whose only
writer is the parent. Either one removes the run's temp folder (the parent that would have
removed it is gone) and kills the worker's process group (ranks and compile helpers too).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import stat
import sys
import threading

PARENT_PID_ENV = "REPRO_PARENT_PID"
# A worker forked by a fork server (worker/forkserver.py, run.start=fork): the server's pid, its
# parent process; the server is tied to the repro parent as a worker is, so the chain holds.
FORKED_BY_ENV = "REPRO_FORKED_BY"
PR_SET_PDEATHSIG = 1


def identity() -> dict:
    """This process as a `started` record's `parent`."""
    import psutil

    return {"host": socket.gethostname(), "pid": os.getpid(), "create_time": psutil.Process().create_time()}


def is_gone(parent: dict | None) -> bool:
    """True when the recorded parent is known to have ended (same host, pid dead or reused)."""
    from repro.ledger.state import parent_alive

    if not parent or parent.get("host") != socket.gethostname():
        return False  # another host (or an older record): it cannot be checked from here
    return not parent_alive(parent["pid"], parent.get("create_time"))


_parent_pid: int | None = None
_forked_by: int | None = None  # the fork server this worker was forked by (its parent process), if one


def parent_pid() -> int | None:
    """In the worker: the repro parent's pid (None where it was not started by one)."""
    return _parent_pid


def forked_by() -> int | None:
    """In the worker: the pid of the fork server that forked it (run.start=fork), else None."""
    return _forked_by


def die_with_parent(run_dir: str, watch_stdin: bool = True) -> None:
    """In the worker: end (and clean up) as soon as the parent process is gone. A worker started
    ahead calls it first with `watch_stdin=False` (its stdin carries the word to go, read by
    itself), then again once it goes."""

    def die(*_) -> None:
        shutil.rmtree(run_dir, ignore_errors=True)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    global _parent_pid, _forked_by
    expected, server = os.environ.pop(PARENT_PID_ENV, None), os.environ.pop(FORKED_BY_ENV, None)
    if expected is not None:
        _parent_pid = int(expected)
    if server is not None:
        _forked_by = int(server)
    if _parent_pid is None:  # not started by a repro parent (run by hand): nothing to follow
        return
    signal.signal(signal.SIGTERM, die)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != (_forked_by or _parent_pid):  # the parent died before prctl took effect
        die()
    if not watch_stdin or not stat.S_ISFIFO(os.fstat(0).st_mode):
        return

    def watch_stdin() -> None:
        while os.read(0, 4096):
            pass
        die()

    threading.Thread(target=watch_stdin, name="repro-lifeline", daemon=True).start()


_interrupt_came = threading.Event()


def interrupt(signum=None, frame=None) -> None:
    """A command's SIGINT and SIGTERM handler: the interrupt is noted, then raised. The note
    outlives the exception where Python does not pass it on: raised inside a class body that an
    import is running, 3.11 wraps it in RuntimeError ("Error calling __set_name__"), which would
    end the job as failed and let the sweep go on (`interrupt_came` then tells the truth)."""
    _interrupt_came.set()
    raise KeyboardInterrupt


def interrupt_came() -> bool:
    """Whether an interrupt reached this process since `forget_interrupt()`."""
    return _interrupt_came.is_set()


def forget_interrupt() -> None:
    """A new session starts: an interrupt that ended an earlier one (same process) is not its own."""
    _interrupt_came.clear()


def interrupt_on_signals() -> None:
    """A command that runs jobs (a sweep, a replay): SIGINT and SIGTERM end it as Ctrl-C does,
    recorded `interrupted` and closed, from a fresh note."""
    forget_interrupt()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, interrupt)


class HeldInterrupts:
    """SIGINT and SIGTERM noted, not acted on, until `release()` (main thread only)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.came: list[int] = []
        self.saved = {}
        if threading.current_thread() is threading.main_thread():
            self.saved = {s: signal.signal(s, lambda n, f: self.came.append(n)) for s in self.SIGNALS}

    def release(self) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        self.saved = {}
        if self.came:
            interrupt()
