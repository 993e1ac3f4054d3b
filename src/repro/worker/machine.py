"""The machine's state around a run's timed loop: was anything else using it?

The worker calls `before()` right before the first timed step and `after()` right after
the last, never inside the timed region. Recorded (the record's top-level `machine`):
load average (1/5/15 min) before and after, the share of CPU time other processes took
during the loop (all CPU time the kernel counted minus this command's own processes, in
cores: 1.0 = one whole core), host name, CPU frequency and governor where /sys shows them, and
per accelerator its utilisation, clocks and the compute processes that are not this run's
(each registered vendor's query, hardware.py `Vendor`: NVIDIA's through nvidia-smi; nothing on a
machine without one).

CPU time is counted in kernel ticks (10 ms): over a loop of a few milliseconds that is
noise, so the share is read over a window of MIN_WINDOW_S at least. A loop that long (every
`run.steps=auto` run: 1 s of steady steps at least) is its own window, from `before()` to
`after()`, which includes the worker's own work after the loop (results, hashes). A shorter
loop widens its window backwards to the worker's start (`early()`, taken before the data,
the framework import, the build and the compile), so a 10-step run does not wait half a second
for a figure; only where even that is shorter does `after()` wait out the rest. `window_from`
says which ("first step" or "worker start"). Before the first step the worker's own CPU and its
parent's tree are this command's, and MLflow projectors write between windows: their CPU
before the first step is not counted as other processes'; beside the steps it is (they pause
there: a projector that does not is a disturbance). "This command's own processes" are the
parent's process tree where a repro parent started the worker (nothing of it runs beside the
timed loop: worker/events.py Gate), else the worker's own tree. In a run of several processes on
one node (torch ranks, JAX processes) the record is rank 0's and the run's own tree is the
launching worker's (`run_root`): its sibling processes run the same steps, so their CPU is the
run's, not other processes' (they were counted as other, 1.0–1.5 cores, flagging every such run busy).

`repro_cpu_s`: the CPU seconds repro's own other processes used in the same window: the repro
parent and its other children (a next job's worker started early), and the MLflow projectors at
work on this machine (tracking/handoff.py registers them), the worker's own tree left out. The
goal is 0: the parent waits on blocking reads, the next job's worker has finished its start
before the window opens and waits on a read (job/warm.py), and projectors pause their
writes while a window is open (handoff.open_window, quiet_turn). `repro_cpu_parts_s` splits
it: "command" (the parent's tree) and "projectors" (those of any command on this machine, whose
writes an open window holds; a projector of an older repro does not know to). A process that started and ended inside the window, unreaped, is missed. `pinned`:
the cores the worker and its parent were pinned to (worker/pinning.py), where the host has enough.

Where the process ran, read at `before()` and `after()` only, never beside a step (issue 48: a
process slow for its whole life that no CPU share sees). `placement`, over the worker's threads that
ran in the window and live at its end ("threads_ran": their CPU time grew): the CPUs they were on at
the two reads ("cpus", a sample: the kernel keeps no list), the kernel's count of their moves between
CPUs ("migrations", /proc/self/task/*/sched `se.nr_migrations`) and of their involuntary context
switches ("involuntary_switches"), "source": "sched"; where that file is not readable, "migrations"
counts the threads found on another CPU at the second read (a lower bound), "source": "stat".
`page_faults`: the process's minor and major faults in the same window; `anon_huge_pages_kb`: its
anonymous memory in transparent huge pages at the window's end (/proc/self/smaps_rollup), beside the
host's THP setting (`thp_enabled`: "always", "madvise" or "never").
"""

from __future__ import annotations

import os
import resource
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from repro.worker import pinning

MIN_WINDOW_S = 0.5
TASKS = Path("/proc/self/task")
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
SCHED_KEYS = {"se.sum_exec_runtime": "run_ms", "se.nr_migrations": "migrations", "nr_involuntary_switches": "involuntary"}


def _busy_s() -> float:
    """CPU seconds every process together ran since boot (all CPUs)."""
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    # Linux counts guest time inside user time already.
    guest = getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
    return sum(t) - idle - guest


def _ppid_map() -> dict[int, int]:
    """{pid: its parent's pid} for every process on this machine, in one scan. psutil's own map: the
    one each `Process.children()` scans again on every call (1.5-2.5 ms a scan with 66 processes on
    the 2-core reference machine, growing with the host's process count). psutil does not export it;
    where a psutil lacks it, its public iteration stands in (a slower scan, still one)."""
    scan = getattr(psutil, "_ppid_map", None)
    if scan is not None:
        return scan()
    return {p.pid: p.info["ppid"] for p in psutil.process_iter(["ppid"])}


class _Tree:
    """The machine's processes by parent, from one scan: every process tree one snapshot reads
    (the run's, the command's, the projectors', this process's own) comes from the same moment and
    costs no scan of its own."""

    def __init__(self) -> None:
        self.kids: dict[int, list[int]] = {}
        for pid, ppid in _ppid_map().items():
            if pid != ppid:  # pid 0 is its own parent on some platforms
                self.kids.setdefault(ppid, []).append(pid)

    def descendants(self, root: int) -> list[int]:
        """`root`'s live descendants, at any depth (not `root`)."""
        out, todo = [], list(self.kids.get(root, ()))
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(self.kids.get(pid, ()))
        return out

    def processes(self, root: psutil.Process) -> list[psutil.Process]:
        """`root` and its live descendants (those that ended since the scan left out)."""
        found = [root]
        for pid in self.descendants(root.pid):
            try:
                found.append(psutil.Process(pid))
            except psutil.Error:  # ended since the scan
                continue
        return found


def _tree_s(root: psutil.Process, tree: _Tree) -> float:
    """CPU seconds of this process, its live descendants and the children it has reaped."""
    total = 0.0
    for p in tree.processes(root):
        try:
            t = p.cpu_times()
        except psutil.Error:  # ended between listing and reading
            continue
        total += t.user + t.system
    t = root.cpu_times()
    return total + t.children_user + t.children_system


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_frequency() -> dict:
    """Current/min/max MHz (psutil) and the scaling governor where the kernel exposes it: the CPU
    vendor member's telemetry (hardware.py `Cpu`)."""
    from repro import hardware

    return hardware.host_cpu().telemetry(set())[0]


def _own_pids(tree: _Tree) -> set[int]:
    me = os.getpid()
    return {me, *tree.descendants(me)}


def gpus(tree: _Tree | None = None) -> list[dict]:
    """Per accelerator (every registered vendor's: hardware.py `Vendor`): utilisation %, clocks (MHz),
    temperature and the processes on it that are not this run's (`tree`: the snapshot's scan, else one of its own)."""
    from repro import hardware

    return hardware.telemetry(_own_pids(tree or _Tree()))


def _root(pid: int | None) -> psutil.Process:
    """The root of a tree of this command's processes: `pid` (the repro parent; the worker that
    launched a run's several processes), or this process where there is none or it is gone (this
    process dies with it: worker/lifeline.py)."""
    if pid is not None:
        try:
            return psutil.Process(pid)
        except psutil.Error:
            pass
    return psutil.Process()


def _repro_others(parent_pid: int | None, tree: _Tree) -> tuple[dict[int, tuple[float, float, str]], float]:
    """repro's processes other than this worker's tree: {pid: (CPU seconds, create time, "command" |
    "projectors")}, and the CPU seconds of the parent's reaped children."""
    from repro.worker.machine_locks import projectors_at_work

    mine = _own_pids(tree)
    roots, reaped = [], 0.0
    if parent_pid is not None:
        try:
            parent = psutil.Process(parent_pid)
            t = parent.cpu_times()
            roots.append((parent, "command"))
            reaped = t.children_user + t.children_system
        except psutil.Error:
            pass
    for info in projectors_at_work():
        try:
            roots.append((psutil.Process(info["pid"]), "projectors"))
        except psutil.Error:
            continue
    out: dict[int, tuple[float, float, str]] = {}
    for root, part in roots:
        for p in tree.processes(root):
            if p.pid in mine or p.pid in out:
                continue
            try:
                t = p.cpu_times()
                out[p.pid] = (t.user + t.system, p.create_time(), part)
            except psutil.Error:
                continue
    return out, reaped


@dataclass(frozen=True)
class Counters:
    """The machine's counters at one moment (`early`; the start of `before`'s snapshot)."""

    busy_s: float  # every process's CPU seconds since boot
    steal_s: float  # the hypervisor's steal since boot
    own_s: float  # the run's own process tree's CPU seconds
    ours_s: float  # this command's (the repro parent's tree)
    t: float  # time.monotonic()
    wall: float  # time.time()
    others: tuple  # `_repro_others`: ({pid: (CPU seconds, create time, part)}, the parent's reaped children's seconds)


@dataclass(frozen=True)
class Task:
    """One thread of this process (`_tasks`): the CPU it last ran on, its CPU ticks and, where the kernel
    shows them, its `sched` counters (SCHED_KEYS' names; None: not shown)."""

    cpu: int
    ticks: int
    run_ms: float | None = None
    migrations: float | None = None
    involuntary: float | None = None

    @property
    def ran(self) -> float:
        """How much it has run: the scheduler's runtime where shown, else its ticks."""
        return self.ticks if self.run_ms is None else self.run_ms


@dataclass(frozen=True)
class Snapshot:
    """The machine right before the first timed step (`before`): its counters, load, GPUs, threads and faults."""

    load: list
    gpus: list
    counters: Counters
    parent_pid: int | None
    run_root: int | None
    early: Counters | None  # the worker's snapshot at its start, if it took one
    tasks: dict[str, Task]
    faults: tuple[int, int]


def repro_cpu_s(start: Counters, now: tuple[dict[int, tuple[float, float, str]], float]) -> dict[str, float]:
    """CPU seconds repro's other processes used between the snapshot `start` and `now`: this
    command's (the parent and its other children) and the projectors' (any ledger's, on this machine)."""
    before, reaped_before = start.others
    after, reaped_after = now
    used = {"command": max(0.0, reaped_after - reaped_before), "projectors": 0.0}
    for pid, (cpu, created, part) in after.items():
        if pid in before:
            used[part] += max(0.0, cpu - before[pid][0])
        elif created >= start.wall - 0.01:  # started in the window: all of it (one that was not is unknown)
            used[part] += cpu
    return used


def _steal_s() -> float:
    """CPU seconds the hypervisor gave this VM's CPUs to another tenant since boot (/proc/stat's 8th field
    of `cpu`; 0 where the platform has none). `_busy_s` counts them among other processes' time."""
    return getattr(psutil.cpu_times(), "steal", 0.0)


def _tasks() -> dict[str, Task]:
    """Per thread of this process: the CPU it last ran on (/proc/self/task/*/stat field 39), its CPU
    ticks (fields 14 and 15) and, where the kernel shows them, its `sched` counters (SCHED_KEYS)."""
    out: dict[str, Task] = {}
    try:
        tids = os.listdir(TASKS)
    except OSError:
        return out
    for tid in tids:
        try:
            stat = (TASKS / tid / "stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # from field 3 (its name may hold spaces)
        sched = {}
        try:
            lines = (TASKS / tid / "sched").read_text().splitlines()
        except OSError:
            lines = []
        for line in lines:
            key, _, value = line.partition(":")
            if (name := SCHED_KEYS.get(key.strip())) is not None:
                sched[name] = float(value)
        out[tid] = Task(int(fields[36]), int(fields[11]) + int(fields[12]), **sched)
    return out


def placement(start: dict[str, Task], now: dict[str, Task]) -> dict:
    """Where the threads that ran between the two reads of `_tasks()` ran (module docstring)."""
    def ran(tid: str, t: Task) -> bool:
        was = start.get(tid)
        return t.ran > (-1 if was is None else was.ran)

    def grew(counter) -> int:  # a sched counter's rise over the moving threads (0 where a read lacks it)
        return int(sum((counter(t) or 0) - (counter(start[tid]) or 0 if tid in start else 0) for tid, t in moving.items()))

    moving = {tid: t for tid, t in now.items() if ran(tid, t)}
    cpus = {t.cpu for t in moving.values()} | {start[tid].cpu for tid in moving if tid in start}
    out: dict = {"cpus": sorted(cpus), "threads_ran": len(moving)}
    if all(t.migrations is not None for t in moving.values()):
        return {**out, "migrations": grew(lambda t: t.migrations), "involuntary_switches": grew(lambda t: t.involuntary),
                "source": "sched"}
    return {**out, "migrations": sum(tid in start and start[tid].cpu != t.cpu for tid, t in moving.items()),
            "source": "stat"}


def _faults() -> tuple[int, int]:
    """The process's minor and major page faults so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_majflt


def memory_pages() -> dict:
    """The process's anonymous memory in transparent huge pages (kB) and the host's THP setting."""
    huge = None
    for line in (_read(Path("/proc/self/smaps_rollup")) or "").splitlines():
        if line.startswith("AnonHugePages:"):
            huge = int(line.split()[1])
    setting = _read(THP) or ""
    chosen = setting[setting.find("[") + 1:setting.find("]")] if "[" in setting else None
    return {"anon_huge_pages_kb": huge, "thp_enabled": chosen}


def _counters(parent_pid: int | None, run_root: int | None, tree: _Tree | None = None) -> Counters:
    tree = tree or _Tree()
    return Counters(busy_s=_busy_s(), steal_s=_steal_s(), own_s=_tree_s(_root(run_root), tree),
                    ours_s=_tree_s(_root(parent_pid), tree), t=time.monotonic(), wall=time.time(),
                    others=_repro_others(parent_pid, tree))


def early(parent_pid: int | None = None, run_root: int | None = None) -> Counters:
    """A snapshot taken when the worker starts its pipeline: where the window of a loop shorter
    than MIN_WINDOW_S begins instead of the first step (module docstring)."""
    return _counters(parent_pid, run_root)


def before(parent_pid: int | None = None, early: Counters | None = None, run_root: int | None = None) -> Snapshot:
    """A snapshot taken right before the first timed step. `parent_pid`: the repro parent that
    started this worker (its tree's CPU time is this command's, not other processes'); `early`:
    the worker's `early()` snapshot, if it took one; `run_root`: in one of a run's several
    processes, the worker that launched them (their CPU is the run's own)."""
    tree = _Tree()
    load, gpus_now, counters = list(os.getloadavg()), gpus(tree), _counters(parent_pid, run_root, tree)
    return Snapshot(load, gpus_now, counters, parent_pid, run_root, early, _tasks(), _faults())


def after(start: Snapshot, threads: int, processes: int = 1) -> dict:
    """The record's `machine`: what happened on this machine between `start` (or, for a loop
    shorter than MIN_WINDOW_S, the worker's early snapshot) and now; repro's own CPU beside the
    steps is counted from `start`. `processes`: the run's processes on this host, each with
    `threads` compute threads (the load a run of several makes itself)."""
    first_step = start.counters
    base = first_step
    if (first := start.early) and time.monotonic() - first_step.t < MIN_WINDOW_S:
        base = first
    if (wait := MIN_WINDOW_S - (time.monotonic() - base.t)) > 0:
        time.sleep(wait)
    tasks, (minor, major) = _tasks(), _faults()  # where this process ran: from the first step (`start`)
    tree = _Tree()
    own_s, ours_s, others, busy_s, now = (_tree_s(_root(start.run_root), tree), _tree_s(_root(start.parent_pid), tree),
                                          _repro_others(start.parent_pid, tree), _busy_s(), time.monotonic())
    window = now - base.t
    # The worker's reaped children count in its own tree, not in the parent's (live descendants only)
    command_s = max(own_s - base.own_s, ours_s - base.ours_s)
    # projectors write between windows: before the first step theirs is repro's CPU, not other processes'
    projectors_before_s = repro_cpu_s(base, first_step.others)["projectors"] if base is not first_step else 0.0
    other = max(0.0, (busy_s - base.busy_s) - command_s - projectors_before_s)
    return {
        "host": socket.gethostname(),
        "cores": os.cpu_count(),
        "threads": threads,
        "processes": processes,
        "load_before": [round(x, 2) for x in start.load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "window_s": round(window, 3),
        "window_from": "first step" if base is first_step else "worker start",
        "other_cpu_share": round(other / window, 3),
        # of which the hypervisor's steal: another tenant had these cores (in cores over the window)
        "steal_share": round(max(0.0, _steal_s() - base.steal_s) / window, 3),
        "own_cpu_share": round((own_s - base.own_s) / window, 3),
        "command_cpu_share": round(command_s / window, 3),
        "repro_cpu_s": round(sum((repro := repro_cpu_s(first_step, others)).values()), 3),
        "repro_cpu_parts_s": {k: round(v, 3) for k, v in repro.items()},
        **({"pinned": pinned} if (pinned := pinning.recorded()) else {}),
        "placement": placement(start.tasks, tasks),
        "page_faults": {"minor": minor - start.faults[0], "major": major - start.faults[1]},
        **memory_pages(),
        "cpu_frequency": cpu_frequency(),
        "gpus_before": start.gpus,
        "gpus_after": gpus(tree),
    }
