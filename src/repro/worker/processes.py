"""One run's processes on this node (JAX multi-process), supervised: all return, or all stop.

torch's ranks go through torch's elastic launcher (torch_distributed.launch). JAX has no
launcher: `jax.distributed` expects the cluster to start its processes. So a JAX run's local
processes are started here with the standard library's multiprocessing (spawn: a fresh
interpreter each, inheriting the worker's environment) and watched: the first that dies or
raises stops the others at once, and the error names it. Each process reports when it has
joined the others (`joined()`), so a process that dies before then is named as one that
never met its peers (a node not started, a wrong coordinator), not as a mere crash.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import traceback
from multiprocessing.connection import wait
from typing import Any, Callable


def _child(fn: Callable[[dict, int, Callable[[], None]], Any], spec: dict, index: int, conn) -> None:
    try:
        result = fn(spec, index, lambda: conn.send(("joined", None, "")))
    except BaseException as e:  # noqa: BLE001 - reported to the supervisor, which stops the rest
        tail = "".join(traceback.format_exc().splitlines(keepends=True)[-12:])
        conn.send(("error", f"{type(e).__name__}: {e}", tail))
        raise SystemExit(1) from None
    conn.send(("ok", result, ""))


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exited with code {code} without a result"


def _when(i: int, joined: set, not_joined: str) -> str:
    return f" {not_joined}" if not_joined and i not in joined else ""


class ProcessFailed(RuntimeError):
    def __init__(self, message: str, traceback_tail: str = ""):
        super().__init__(message)
        self.traceback_tail = traceback_tail


PEER_GRACE_S = 2.0  # how long an error waits to see whether a peer's death caused it


def _killed_peer(procs: dict, failed: int, results: dict) -> int | None:
    """A process killed by a signal, seen within PEER_GRACE_S of another's error: when one rank is
    killed, its peers fail in their next collective (gloo: "Connection reset by peer"), often before
    the killed one's exit is noticed, and the run must name the one that was killed."""
    others = [j for j in procs if j != failed and j not in results]
    ended = wait([procs[j].sentinel for j in others], timeout=PEER_GRACE_S)
    for j in others:  # its sentinel closes as it exits, a moment before it can be reaped: exitcode
        if procs[j].sentinel in ended:  # would still be None (a loaded machine widens the moment)
            procs[j].join(timeout=5)
    return next((j for j in others if (procs[j].exitcode or 0) < 0), None)


def _error_in(conn) -> str | None:
    """The error a process sent, read past what came before it (its `joined`, unread when another
    process's error stopped the supervisor's loop)."""
    while conn.poll():
        try:
            kind, value, _ = conn.recv()
        except EOFError:
            return None
        if kind == "error":
            return value
    return None


def _also(procs: dict, conns: dict, results: dict, named: set[int], name: Callable[[int], str]) -> str:
    """The other processes' failures, each named: those whose error has arrived, and those that
    ended by a signal or a non-zero exit (given PEER_GRACE_S to say so), besides those `named`."""
    others = [j for j in procs if j not in results and j not in named]
    wait([procs[j].sentinel for j in others], timeout=PEER_GRACE_S)
    said = []
    for j in others:
        code = procs[j].exitcode  # read before the pipe: what it sent before it exited is there by then
        error = _error_in(conns[j])
        if error is not None:
            said.append(f"{name(j)} failed: {error}")
        elif code not in (None, 0):
            said.append(f"{name(j)} {_exit_reason(code)}")
    return f"; also: {'; '.join(said)}" if said else ""


def launch(fn: Callable[[dict, int, Callable[[], None]], Any], spec: dict, count: int, name: Callable[[int], str],
           not_joined: str = "") -> dict[int, Any]:
    """Run `fn(spec, i, joined)` for i in range(count), each in its own process; {i: its return value}.

    `not_joined`: added to the error of a process that ends before calling `joined()`.
    """
    ctx = mp.get_context("spawn")
    procs, conns, joined = {}, {}, set()
    for i in range(count):
        recv, send = ctx.Pipe(duplex=False)
        procs[i] = ctx.Process(target=_child, args=(fn, spec, i, send), name=name(i))
        procs[i].start()
        send.close()
        conns[i] = recv
    results: dict[int, Any] = {}
    try:
        while len(results) < count:
            waiting = {conns[i]: i for i in procs if i not in results}
            waiting.update({procs[i].sentinel: i for i in procs if i not in results})
            for ready in wait(list(waiting)):
                i = waiting[ready]
                if i in results:
                    continue
                conn = conns[i]
                if conn.poll():
                    try:
                        kind, value, tail = conn.recv()
                    except EOFError:
                        kind, value, tail = "died", None, ""
                    if kind == "joined":
                        joined.add(i)
                        continue
                    if kind == "ok":
                        results[i] = value
                        continue
                    if kind == "error":
                        if (k := _killed_peer(procs, i, results)) is not None:  # the cause, not its echo
                            raise ProcessFailed(f"{name(k)} {_exit_reason(procs[k].exitcode)}"
                                                f"{_when(k, joined, not_joined)}, the run was stopped "
                                                f"({name(i)} then failed: {value})"
                                                + _also(procs, conns, results, {i, k}, name), tail)
                        raise ProcessFailed(f"{name(i)} failed{_when(i, joined, not_joined)}, the run was stopped: "
                                            f"{value}" + _also(procs, conns, results, {i}, name), tail)
                procs[i].join(timeout=5)
                raise ProcessFailed(f"{name(i)} {_exit_reason(procs[i].exitcode)}{_when(i, joined, not_joined)}, "
                                    "the run was stopped" + _also(procs, conns, results, {i}, name))
    finally:
        for p in procs.values():
            if p.is_alive():
                p.kill()
        for p in procs.values():
            p.join(timeout=10)
    return results
