"""Start a worker process and follow it to its end, whatever that end is.

The parent blocks on the worker's event pipe (no polling). A watcher thread reaps the
worker and kills its process group, so helpers it forked (compile workers) cannot hold the
pipe open. A worker's last event says the code it exits with (worker.exit_now): the parent goes
on from there while the kernel frees the worker's memory, and waits for its end (`settle`) only
before the next worker is told to go and before this process ends. A timer enforces
`run.timeout_s`. Ctrl-C (or SIGTERM, which repro turns into one) kills the worker and is
re-raised. The worker's stdin is a pipe only the parent writes to: when the parent dies, the
worker sees EOF and ends too (see worker/lifeline.py).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from repro import paths
from repro.blocks import typed
from repro.worker.events import EVENTS_FD_ENV, EXIT, GATE_FD_ENV, Events, open_gate, read_events, read_ready
from repro.worker import pinning
from repro.worker.lifeline import PARENT_PID_ENV, interrupt_came
from repro.worker import machine_locks

LOG_TAIL_LINES = 40
# The most a worker's measured window waits for a projector's turn to end (tracking/handoff.py);
# a job passes its tracking.projector_wait_s.
WINDOW_WAIT_S = 30.0
# The most a worker that said it exits is given to be gone (`settle`) before its process group is killed.
EXIT_WAIT_S = 30.0
# (pid, its reaper, its stdin) of workers that said they exit. Their stdin stays open until they are gone:
# a worker's lifeline reads EOF on it as its parent's end, and would remove its run folder (its log
# with it) in the moment between its word and its exit (worker/lifeline.py).
_EXITING: list[tuple[int, threading.Thread, object]] = []


def settle() -> None:
    """Wait until every worker that said it exits (its EXIT event) is gone: the kernel has freed its
    memory (an accelerator's too) and the stragglers of its process group are killed. Run before the
    next worker is told to go (`run_worker`) and before this process ends (cli.main; atexit)."""
    while _EXITING:
        pid, reaper, stdin = _EXITING.pop()
        reaper.join(EXIT_WAIT_S)
        if reaper.is_alive():  # said it exits, and did not: what a timeout would have done
            _kill_group(pid)
            reaper.join(EXIT_WAIT_S)
        try:
            stdin.close()
        except OSError:  # nothing was left to flush to a worker that is gone
            pass


atexit.register(settle)


@dataclass
class WorkerOutcome:
    status: str  # ok | failed | oom | killed | interrupted (job.py adds timeout: SLURM's time limit)
    returncode: int | None
    events: dict = field(default_factory=dict)  # the last event of each kind
    reason: str = ""
    log_tail: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    started_at: float | None = None  # the wall clock when the worker was started (or handed its spec)

    @functools.cached_property
    def typed_events(self) -> Events:
        """`events` read as typed payloads, once for every reader of this outcome (the record, the wall
        split, the hand-over, the profiles)."""
        return Events.of(self.events)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _status(events: dict, returncode: int | None, timed_out: bool) -> tuple[str, str]:
    if timed_out:
        return "failed", "timed out (run.timeout_s) and was killed"
    if "result" in events and returncode == 0:
        return "ok", ""
    if (err := Events.of(events).error) is not None:
        return err.status, f"{err.type}: {err.message}"
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name
        return "killed", f"worker killed by {name}"
    return "failed", f"worker exited with code {returncode} without a result"


resolve_python = paths.interpreter  # a config's interpreter, relative to the checkout where conf/ says so


# `--warm [BACKEND [PACKAGE ...]] SPEC`: the worker imports the framework's packages, then the
# backend, says so, then waits for a line on stdin to read SPEC (worker/worker_main.py, worker.py)
WARM = "--warm"


def worker_command(python: str | None, spec_path: Path | str, *before: str, src: Path | None = None) -> list[str]:
    """The worker's command line; its last argument is always its spec's path. `src`: the folder
    its repro is imported from; recorded code of repro's (a replay as recorded) starts as it did
    then: from before the run path was split into rooms (`repro.runner.worker_main`), or from
    before worker_main existed (`repro.runner.worker`). A folder without repro in it (a user's
    own model package restored) runs today's repro."""
    module = "repro.worker.worker_main"
    old = Path(src) / "repro" if src is not None else None
    if old is not None and old.is_dir() and not (old / "worker" / "worker_main.py").is_file():
        module = "repro.runner.worker_main" if (old / "runner" / "worker_main.py").is_file() else "repro.runner.worker"
    return [resolve_python(python) or sys.executable, "-m", module, *before, str(spec_path)]


RUN_DIR_PREFIX = "repro-run-"  # + the owner's pid + "-": a parent killed by SIGKILL cannot remove its own


def make_run_dir() -> Path:
    """A fresh temp folder for one run, named after this process; stale ones (their owner gone)
    are removed first."""
    for stale in Path(tempfile.gettempdir()).glob(f"{RUN_DIR_PREFIX}*"):
        if _owner_gone(stale):
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{RUN_DIR_PREFIX}{os.getpid()}-"))


def _owner_gone(folder: Path) -> bool:
    """Whether the process named in a run folder's name is gone (or is a later one with its pid)."""
    try:
        pid = int(folder.name[len(RUN_DIR_PREFIX):].split("-")[0])
        made = folder.stat().st_mtime
    except (ValueError, OSError):
        return False  # not one of ours (an older name without a pid), or gone already
    import psutil  # only where a run folder is left over

    try:
        return psutil.Process(pid).create_time() > made + 1  # a pid reused since
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def spec_path_of(run_dir: Path) -> Path:
    """Where a run's worker spec is written (known before the job: a worker started ahead is told)."""
    return run_dir / "spec.json"


@dataclass
class Warm:
    """A worker interpreter started ahead of its job (`warm_start`): Python started, repro's
    worker and the job's framework backend imported, waiting for its spec path on stdin;
    nothing of the job has run."""

    proc: subprocess.Popen
    read_fd: int
    gate_write: int
    run_dir: Path
    key: tuple  # (python, env, src, backend): what it was started with
    ready: bool = False  # it said so on its event pipe (`wait_ready`): nothing of it runs until handed its spec

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until it has imported what it imports ahead and waits for its spec."""
        self.ready = self.ready or read_ready(self.read_fd, timeout_s)
        return self.ready

    def discard(self) -> None:
        """Not needed after all: ended (EOF on its stdin ends a waiting worker), its folder removed."""
        _kill_group(self.proc.pid)
        self.proc.stdin.close()
        self.proc.wait()
        for fd in (self.read_fd, self.gate_write):
            os.close(fd)
        shutil.rmtree(self.run_dir, ignore_errors=True)


@dataclass(frozen=True)
class Place:
    """Where a job's worker runs when not in this environment (a job's `place`: a replay as recorded, a
    bisection's commit): an interpreter, repro's code. Read here once for the job's own start and for
    its worker started ahead (job/warm.py), so that the two agree on the worker's key."""

    python: str | None = None
    src: str | None = None

    @classmethod
    def of(cls, place: Mapping | None) -> "Place":
        return typed(cls, place) or cls()

    def interpreter(self, config) -> str | None:
        """The job's interpreter: the place's, else its config's (None: this one)."""
        return self.python or config.framework.python


def warm_key(python: str | None, env: dict[str, str], src: Path | None, backend: str | None = None,
             fork: bool = False) -> tuple:
    return resolve_python(python), tuple(sorted(env.items())), str(src or ""), backend or "", fork


def _spawn(command: list[str], log_path: Path, env: dict[str, str], src: Path | None, fork: str | None = None):
    """The worker process with its event and gate pipes: (proc, read_fd, gate_write), or the
    failed outcome where its interpreter could not be started. `fork`: the backend whose fork
    server forks it (run.start=fork, job/forked.py), its command then a worker started ahead's."""
    read_fd, write_fd = os.pipe()
    gate_read, gate_write = os.pipe()
    base_env = {**os.environ, **env, PARENT_PID_ENV: str(os.getpid()), **pinning.pin_parent()}
    base_env["PYTHONIOENCODING"] = "utf-8"  # its log is a file: UTF-8 whatever the terminal's encoding
    base_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src or paths.src_dir()), os.environ.get("PYTHONPATH")]))
    with open(log_path, "w") as log:
        try:
            if fork is not None:
                proc = _forked(command, base_env, fork, log.fileno(), write_fd, gate_read, src)
            else:
                proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                        env={**base_env, EVENTS_FD_ENV: str(write_fd), GATE_FD_ENV: str(gate_read)},
                                        pass_fds=(write_fd, gate_read), start_new_session=True)
        except OSError as e:
            for fd in (read_fd, write_fd, gate_read, gate_write):
                os.close(fd)
            if fork is not None:
                return WorkerOutcome("failed", None, reason=f"could not fork the worker (run.start=fork): {e}")
            return WorkerOutcome("failed", None, reason=(
                f"could not start the worker interpreter {command[0]!r} (framework.python): {e}. "
                "For framework=torch_xla, run `make xla-env` (scripts/make_xla_env.sh) to create it, "
                "or point $REPRO_XLA_PYTHON or framework.python at an interpreter that has torch_xla "
                "(docs/how-to/torch-xla.md)"))
    os.close(write_fd)
    os.close(gate_read)
    return proc, read_fd, gate_write


def _forked(command: list[str], base_env: dict[str, str], backend: str, log_fd: int, events_fd: int, gate_fd: int,
            src: Path | None):
    """The worker forked by this backend's fork server (started on first use, job/forked.py), with
    the pipes a started worker has; a server that cannot start or answer is an OSError here, so the
    run is recorded failed with its reason, never started another way."""
    from repro.backends.capabilities import BACKENDS
    from repro.job import forked

    if command[1:3] != ["-m", "repro.worker.worker_main"]:
        raise OSError(f"run.start=fork needs today's worker ({command[2]} is an older repro's): run it with run.start=fresh")
    caps = BACKENDS.get(backend)
    server_command = [command[0], "-m", "repro.worker.forkserver", backend, *(caps.packages if caps else ())]
    key = (tuple(server_command), tuple(sorted(base_env.items())))
    stdin_read, stdin_write = os.pipe()
    try:
        server = forked.server(key, server_command, base_env, make_run_dir)
        return server.fork(command[3:], {PARENT_PID_ENV: str(os.getpid())}, [stdin_read, log_fd, events_fd, gate_fd],
                           stdin_write)
    except forked.ServerError as e:
        os.close(stdin_write)
        raise OSError(str(e)) from e
    finally:
        os.close(stdin_read)


def warm_start(run_dir: Path, python: str | None, env: dict[str, str], src: Path | None = None,
               backend: str | None = None, fork: bool = False) -> Warm | None:
    """Start the next job's worker interpreter now (its env as that job will have it), to be
    handed its spec by `run_worker(..., warm=)`; None where it could not be started. `backend`:
    the framework backend it imports while it waits (the job's `setup.import_s` is that import's
    time, outside the measured region either way). `fork`: forked by the backend's fork server
    (run.start=fork), which imported it once for every worker of its kind."""
    from repro.backends.capabilities import BACKENDS

    caps = BACKENDS.get(backend or "")
    ahead = [backend, *caps.packages] if caps else [backend] if backend else []
    spawned = _spawn(worker_command(python, spec_path_of(run_dir), WARM, *ahead, src=src), run_dir / "worker.log", env, src,
                     fork=backend if fork and backend else None)
    if isinstance(spawned, WorkerOutcome):
        return None
    return Warm(*spawned, run_dir=run_dir, key=warm_key(python, env, src, backend, fork))


def run_worker(spec_path: Path, log_path: Path, python: str | None, env: dict[str, str],
               timeout_s: float, on_event: Callable[[dict], None], src: Path | None = None,
               beside_start: Callable[[], None] | None = None, warm: Warm | None = None,
               window_wait_s: float = WINDOW_WAIT_S, fork: str | None = None) -> WorkerOutcome:
    """Run the worker to its end. `src`: the folder repro's worker is imported from (default: this
    repro's; a replay's restored worktree). `beside_start`: the parent's own work (MLflow's side of
    the run, the next job's worker started and made ready: job/job.py), done while the worker
    starts, imports its framework and builds; the worker's measured steps wait until it has returned (worker/events.py: Gate), so nothing runs beside them;
    from the gate to the worker's `window_end` this machine's projectors hold their writes
    (tracking/handoff.py: open_window, quiet_turn).
    `warm`: a worker started ahead for this job (`warm_start`, its log at `log_path`, `spec_path`
    the one it was told); it is told to go, and its wall time counts from then. `fork`: the backend
    whose fork server forks the worker (run.start=fork: job/forked.py), where none was started ahead."""
    settle()  # the worker before this one is gone (its memory freed) before this one builds
    start, started_at = time.perf_counter(), time.time()
    if warm is not None:
        if Path(spec_path) != spec_path_of(warm.run_dir):
            raise ValueError(f"a worker started ahead reads {spec_path_of(warm.run_dir)}, not {spec_path}")
        proc, read_fd, gate_write = warm.proc, warm.read_fd, warm.gate_write
        try:
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        except OSError:  # it ended while waiting: its log and exit code say why (below)
            pass
    else:
        ahead = (WARM, fork) if fork else ()  # a forked worker is one started ahead, told to go once it is ready
        spawned = _spawn(worker_command(python, spec_path, *ahead, src=src), log_path, env, src, fork=fork)
        if isinstance(spawned, WorkerOutcome):
            return spawned
        proc, read_fd, gate_write = spawned
        if fork and read_ready(read_fd, WINDOW_WAIT_S):
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
    timed_out = threading.Event()

    def on_timeout() -> None:
        timed_out.set()
        _kill_group(proc.pid)

    def reap() -> None:
        proc.wait()
        _kill_group(proc.pid)  # stragglers it forked would keep the event pipe open

    timer = threading.Timer(timeout_s, on_timeout)
    timer.daemon = True
    timer.start()
    reaper = threading.Thread(target=reap, daemon=True)
    reaper.start()
    events: dict = {}
    said = None  # the code the worker said it exits with (EXIT, its last event); None: it said none
    owed = False  # its end is owed to `settle` (which closes its stdin then)
    window = None  # this machine's windows lock, held from the gate to the worker's window_end
    try:
        try:
            if beside_start:
                beside_start()
            window = machine_locks.open_window(window_wait_s)
        except Exception:
            if interrupt_came():  # the interrupt, raised inside an import and wrapped by Python
                raise KeyboardInterrupt from None
            raise
        finally:
            open_gate(gate_write)
        with os.fdopen(read_fd) as stream:
            for event in read_events(stream):
                if event["event"] == EXIT:
                    said = event.get("code")
                    break
                events[event["event"]] = event
                if event["event"] == "window_end" and window:
                    window.close()
                    window = None
                on_event(event)
        if said is None:  # a worker of older code, or one that ended without saying: its end is its exit
            proc.wait()
        else:
            _EXITING.append((proc.pid, reaper, proc.stdin))
            owed = True
    except KeyboardInterrupt:
        _kill_group(proc.pid)
        proc.wait()
        return WorkerOutcome("interrupted", proc.returncode, events, "interrupted (Ctrl-C)",
                             _tail(log_path), time.perf_counter() - start, started_at)
    finally:
        if window:
            window.close()
        timer.cancel()
        if not owed:
            proc.stdin.close()
    code = proc.returncode if said is None else said
    status, reason = _status(events, code, timed_out.is_set())
    return WorkerOutcome(status, code, events, reason, _tail(log_path), time.perf_counter() - start, started_at)


def _tail(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
    except OSError:
        return []
