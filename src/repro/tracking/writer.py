"""The machine's MLflow writer: one long-lived process that keeps MLflow imported and drains the
ledgers sessions hand it (`python -m repro.tracking.writer SOCKET IDLE_S`).

A projector process per command (tracking/projector.py) pays MLflow's import every time: 2.3 s of
wall and 2.1 s of CPU on a quiet 2-core VM, most of it MLflow's own genai, pandas and fastapi
imports, which no lighter client path avoids (`mlflow.entities` alone pulls pandas in). The next
command's measured steps wait for it. The writer pays it once per busy period: a session hands
it the ledger over a Unix socket in the machine folder (paths.machine_dir), and it drains that
ledger with the same code `repro sync` runs (drain.drain), under the same locks:
- the ledger's projection lock (handoff.lock), taken before the hand-over is acknowledged, so a
  next command sees the ledger busy from the moment this one returns, as with a projector;
- the machine's projector lock, held shared while it imports or has work (a worker's measured
  steps wait for it, as for a projector; idle, it holds nothing), and its registry entry while it
  works (a waiting command names it);
- quiet turns for the import and every write (machine_locks.quiet_turn).
Each drain runs in the environment and folder of the command that handed it over (its store's
credentials, MLflow's settings) and writes to that ledger's projector log. Idle for
`tracking.writer_idle_s`, it ends; killed at any point, it loses nothing (the entries stay in the
ledger's pending folder for the next drain or `repro sync`). A hand-over that finds no writer
starts one; one that cannot reach or start one falls back to a projector process
(handoff.start_projector).

There is one writer per machine folder and per code: the socket's name carries the interpreter, the
package's folder and its files' latest change, so a command from another venv, checkout or edit
starts its own. Why not a library (a job queue, a server framework): the whole protocol is one
JSON line each way on a socket only this user can open, and the locks it must keep are repro's.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from repro.tracking.writer_socket import HandOver, address

READ_S = 5.0  # the most a writer waits for a connected command's one line


@dataclass
class Job:
    """One ledger to drain, as a command handed it over."""

    ledger: str
    env: dict
    cwd: str
    held: object | None  # the ledger's lock file, locked; None: another holds it (the drain waits for it)


class Writer:
    def __init__(self, path: Path, idle_s: float):
        self.path, self.idle_s = path, idle_s
        self.jobs: queue.Queue[Job] = queue.Queue()
        self.queued: dict[str, Job] = {}  # handed over, not begun: a second hand-over joins it
        self.guard = threading.RLock()  # queued, busy and closing, between the accepting thread and the drains
        self.busy = 0  # imports and jobs under way or queued: the machine's lock is held shared while > 0
        self.machine = None
        self.closing = False  # idle past its time: a hand-over from now on is refused (the command starts another)

    # the machine's projector lock, shared while there is work (a worker's measured steps wait for it)
    def _hold(self) -> None:
        from repro.tracking import handoff

        with self.guard:
            self.busy += 1
            if self.machine is None:
                self.machine = open(handoff.machine_lock(), "a")
                fcntl.flock(self.machine, fcntl.LOCK_SH)

    def _release(self) -> None:
        with self.guard:
            self.busy -= 1
            if self.busy == 0 and self.machine is not None:
                self.machine.close()  # the lock goes with the file
                self.machine = None

    def serve(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed: the writer is ending
            try:
                self._take(conn)
            except Exception as e:  # noqa: BLE001 - one bad hand-over never ends the writer
                print(f"repro writer: a hand-over was refused: {type(e).__name__}: {e}", flush=True)
                conn.close()

    def _take(self, conn: socket.socket) -> None:
        """One command's hand-over: the ledger's lock taken (where free), the machine's held, queued
        (or joined to the same ledger's queued job), and its pid said back."""
        from repro.tracking import handoff

        conn.settimeout(READ_S)
        request = HandOver.parse(conn.makefile("rb").readline())
        ledger, env = request.ledger, request.env
        self._hold()
        holds = True  # this hand-over's hold on the machine's lock, until a queued job owns it
        try:
            with self.guard:
                if self.closing:
                    conn.close()  # the writer is ending: the command starts another
                    return
                job = self.queued.get(ledger)
                if job is None:
                    handoff.folder(ledger).mkdir(parents=True, exist_ok=True)
                    held = open(handoff.folder(ledger) / handoff.LOCK, "a")
                    try:
                        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        held.close()
                        held = None  # a projector or `repro sync` at work on it: this drain waits for it
                    job = self.queued[ledger] = Job(ledger, env, request.cwd, held)
                    self.jobs.put(job)
                    holds = False  # the job's now: released when it is done
                else:
                    job.env, job.cwd = env, request.cwd  # joined: one hold per job
                self.idle_s = request.idle_s or self.idle_s
                handoff._register(os.getpid(), ledger)  # named from now on (the drain says so again)
        finally:
            if holds:
                self._release()
        with conn:
            try:
                conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
            except OSError:
                pass  # the command went away or gave up waiting: it starts a projector of its own

    def run(self) -> None:
        while True:
            try:
                job = self.jobs.get(timeout=self.idle_s)
            except queue.Empty:
                with self.guard:
                    if self.jobs.empty():
                        self.closing = True
                        return
                continue
            with self.guard:
                self.queued.pop(job.ledger, None)
            try:
                self._drain(job)
            finally:
                if job.held is not None:
                    job.held.close()
                with self.guard:
                    if not self.queued:
                        _unregister()
                self._release()

    def _drain(self, job: Job) -> None:
        """The job's drain, in its command's environment and folder, its lines in its ledger's log."""
        from repro import redaction
        from repro.tracking import drain, handoff, mlflow_tracker

        before = dict(os.environ)
        log = open(handoff.folder(job.ledger) / handoff.LOG, "ab")
        sys.stdout.flush(), sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(log.fileno(), 1), os.dup2(log.fileno(), 2)
        start = time.time()
        try:
            _swap_env(job.env)
            mlflow_tracker.apply_defaults()
            redaction.forget()  # the real URIs of an earlier command are not this one's
            mlflow_tracker.forget_changed_stores()
            try:
                os.chdir(job.cwd)
            except OSError:
                os.chdir("/")

            if job.held is None:
                job.held = open(handoff.folder(job.ledger) / handoff.LOCK, "a")
                fcntl.flock(job.held, fcntl.LOCK_EX)
            with handoff.at_work(job.ledger):
                counts = drain.drain(job.ledger)
            print(f"repro writer pid {os.getpid()} {time.strftime('%Y-%m-%dT%H:%M:%S')}: {counts['pushed']} run(s) and "
                  f"{counts['sweeps']} sweep(s) into MLflow, {counts['left']} left, {time.time() - start:.1f} s")
        except Exception as e:  # noqa: BLE001 - the entries stay for the next drain or `repro sync`
            print(f"repro writer pid {os.getpid()}: the drain of {job.ledger} failed: {type(e).__name__}: {e}; "
                  "its entries stay for the next command or `repro sync`")
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0]), os.close(saved[1])
            log.close()
            _swap_env(before)
            os.chdir("/")  # idle, it keeps no folder of anyone's in use


def _swap_env(new: dict) -> None:
    """os.environ made `new`, key by key: a key both hold alike is never absent meanwhile (the
    accepting thread reads REPRO_MACHINE_DIR, the same in every command that reaches this writer)."""
    for key in [k for k in os.environ if k not in new]:
        del os.environ[key]
    for key, value in new.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def _unregister() -> None:
    from repro.worker import machine_locks

    (machine_locks._registry() / f"{os.getpid()}.json").unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    from repro.console import guard_streams
    from repro.tracking import handoff

    guard_streams()  # its lines are redacted (a store's error names its URI, credentials and all)
    path, idle_s = Path(argv[0]), float(argv[1])
    with open(path.with_suffix(".lock"), "a") as alone:
        try:
            fcntl.flock(alone, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another writer of this code is alive (or starting): the command reaches it
        path.unlink(missing_ok=True)  # a killed writer's socket
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # only this user connects
        try:
            with address(path) as where:
                listener.bind(where)
        finally:
            os.umask(old)
        listener.listen(64)
        writer = Writer(path, idle_s)
        writer._hold()  # the import is work beside which no measured step runs
        threading.Thread(target=writer.serve, args=(listener,), daemon=True).start()
        start = time.time()
        try:
            with handoff.quiet_turn():
                import repro.tracking.mlflow_tracker  # noqa: F401 - MLflow, once for every drain to come
        finally:
            writer._release()
            os.chdir("/")  # it keeps no folder of anyone's in use
        print(f"repro writer pid {os.getpid()}: MLflow imported in {time.time() - start:.1f} s; "
              f"ends after {idle_s:g} s with nothing to write", flush=True)
        quiet = os.open(os.devnull, os.O_WRONLY)  # the first command's log is not held open for the writer's life
        os.dup2(quiet, 1), os.dup2(quiet, 2)
        os.close(quiet)
        try:
            writer.run()
        finally:
            path.unlink(missing_ok=True)
            listener.close()
            _unregister()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
