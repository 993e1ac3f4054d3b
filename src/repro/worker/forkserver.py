"""`python -m repro.worker.forkserver BACKEND PACKAGE ...`: a worker interpreter that imports its
framework once and forks every run's worker from there (`run.start=fork`; job/forked.py starts it).

It starts as a worker started ahead does (worker/worker_main.py): pinned onto the worker's cores,
tied to its parent, then the framework's own packages, the backend and what a training step imports
later (`PRELOAD`), all before any request. It then waits on its control socket (its stdin, a
SOCK_SEQPACKET socket: one request a message), and for each request forks a child. The child
becomes a worker started ahead in every other way: its own session, its stdin, log and event and
gate pipes are the ones the request carried, its environment gets the request's few variables
(the parent's pid, the pipes' numbers), and it runs `worker.main` with the imports' seconds as the
worker's `setup.import_s` (`imported_ahead`). Nothing of the run is done here, so every run's
seeding, build and measured steps happen in the child, as in a fresh worker.

The server is single-threaded (a fork copies only the forking thread: no lock can be held by a
thread the child lacks). A child's end reaches the parent as a message (SIGCHLD, read through
`signal.set_wakeup_fd`, then `waitpid`). EOF on the control socket (the parent closed it, or died)
ends the server; the kernel's parent-death signal ends it too, and its children's own lifeline
(worker/lifeline.py) ends them with it.
"""

import json
import os
import select
import signal
import socket
import sys
import time

# What a run of the backend imports after its framework's own packages, before its measured steps,
# imported here once (the backend's `capabilities.packages` and the backend come first): torch.optim's
# constructor imports dynamo (backends/torch_backend.py), 1.4 s on the 2-core reference machine.
PRELOAD = {"torch": ("torch._dynamo",), "torch_compile": ("torch._dynamo", "torch._inductor")}
REQUEST_BYTES = 1 << 20
FDS = 4  # stdin, log (stdout and stderr), event pipe, gate pipe


def _imports(backend: str, packages: list[str]) -> float:
    """The framework's packages, the backend and its preloads; their seconds. A failing import is
    left for the run's own import to raise again, as a recorded error."""
    import importlib

    t0 = time.perf_counter()
    try:
        for name in packages:
            importlib.import_module(name)
        from repro import backends
        from repro.worker import worker  # noqa: F401 - the worker's own modules, as a worker started ahead has them

        backends.load(backend)
        for name in PRELOAD.get(backend, ()):
            importlib.import_module(name)
    except Exception:  # noqa: BLE001 - see above
        pass
    return time.perf_counter() - t0


def _child(request: dict, fds: list[int], control: socket.socket, wakeup: tuple[int, int], import_s: float) -> None:
    """In the forked child: become the worker the request asked for, and never return."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control.close()
        for fd in wakeup:
            os.close(fd)
        os.setsid()
        stdin, log, events, gate = fds
        os.dup2(stdin, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(stdin)
        os.close(log)
        from repro.worker.events import EVENTS_FD_ENV, GATE_FD_ENV

        os.environ.update(request["env"])
        os.environ[EVENTS_FD_ENV], os.environ[GATE_FD_ENV] = str(events), str(gate)
        os.chdir(request["cwd"])
        sys.argv = [sys.argv[0], *request["argv"]]
        from repro.worker import lifeline, worker

        lifeline.die_with_parent(os.path.dirname(sys.argv[-1]), watch_stdin=False)
        worker.main(framework_first_s=import_s)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - printed into the run's log; the parent reads the exit code
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reap(control: socket.socket) -> None:
    """Every ended child's exit code, to the parent."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        control.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def serve(control: socket.socket, import_s: float) -> None:
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the signal wakes the loop below
    signal.set_wakeup_fd(wake_write)
    from repro.worker.lifeline import FORKED_BY_ENV

    os.environ[FORKED_BY_ENV] = str(os.getpid())  # its children's parent (worker/lifeline.py)
    control.send(json.dumps({"ready": os.getpid()}).encode())
    while True:
        readable, _, _ = select.select([control, wake_read], [], [])
        if wake_read in readable:
            os.read(wake_read, 4096)
            _reap(control)
        if control not in readable:
            continue
        message, fds, _, _ = socket.recv_fds(control, REQUEST_BYTES, FDS)
        if not message:  # the parent closed the socket, or died
            os._exit(0)
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            _child(request, fds, control, (wake_read, wake_write), import_s)
        for fd in fds:
            os.close(fd)
        control.send(json.dumps({"pid": pid}).encode())


def main() -> None:
    from repro.worker import lifeline, pinning

    pinning.pin_worker()  # before any thread pool exists; its children inherit the cores
    lifeline.die_with_parent("", watch_stdin=False)  # no folder of its own: its children remove theirs
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    serve(control, _imports(sys.argv[1], sys.argv[2:]))


if __name__ == "__main__":
    main()
