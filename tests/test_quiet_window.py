"""The quiet measured window: repro's own other processes are counted (machine.repro_cpu_s) and
kept out of it (projectors write between windows, the next worker is ready, idle, before it opens),
and on hosts with enough cores the worker and its parent are pinned apart (machine.pinned)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from repro.report.progress import Display
from repro.worker import machine, pinning
from repro.tracking import handoff


def test_the_split_is_a_pure_function_of_the_usable_cores():
    assert pinning.split([0]) is None and pinning.split([0, 1]) is None and pinning.split([0, 1, 2]) is None
    assert pinning.split(range(4)) == {"worker": [1, 2, 3], "parent": [0]}
    assert pinning.split([9, 3, 5, 7, 3]) == {"worker": [5, 7, 9], "parent": [3]}  # a cpuset: its own cores, once each
    assert pinning.split(range(16))["worker"] == list(range(1, 16))


PIN_CHILD = """
import os, sys
from repro.worker import pinning
pinning.pin_worker()
print(sorted(os.sched_getaffinity(0)), pinning.recorded(), pinning.worker_cpus())
"""


@pytest.mark.slow  # starts a process
def test_a_worker_pins_itself_to_the_cores_its_parent_gave_it():
    plan = {"worker": [0], "parent": [1]} if len(os.sched_getaffinity(0)) > 1 else {"worker": [0], "parent": [0]}
    out = subprocess.run([sys.executable, "-c", PIN_CHILD], env={**os.environ, pinning.PIN_ENV: json.dumps(plan)},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"[0] {plan} [0]"


WINDOW_CHILD = """
import json, sys
from repro.worker import machine
start = machine.before(int(sys.argv[1]))
print("open", flush=True)
sys.stdin.readline()
print(json.dumps(machine.after(start, 1)), flush=True)
"""


PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(__import__("os").getpid())],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "open"
if sys.argv[2] == "busy":
    end = time.process_time() + 0.6
    while time.process_time() < end:
        pass
else:
    time.sleep(0.6)
print(child.communicate("\\n", timeout=60)[0], end="")
"""


def _window_beside(work: str) -> dict:
    """A worker's window (machine.before .. after, in a child whose repro parent is a process of the test's
    own, not pytest's: its threads are not the test's to count) while that parent spins 0.6 s of CPU
    (`busy`) or sleeps (`sleep`); the child's `machine` record."""
    out = subprocess.run([sys.executable, "-c", PARENT, WINDOW_CHILD, work], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.slow  # starts a process
def test_repro_cpu_counts_what_the_parent_did_in_the_window():
    loud = _window_beside("busy")
    quiet = _window_beside("sleep")
    assert loud["repro_cpu_parts_s"]["command"] >= 0.4 and loud["repro_cpu_s"] >= 0.4, loud
    assert quiet["repro_cpu_parts_s"]["command"] < 0.1, quiet


@pytest.fixture
def own_machine(tmp_path, monkeypatch):
    """This machine's projector locks in a folder of the test's own."""
    monkeypatch.setenv("REPRO_MACHINE_DIR", str(tmp_path))
    return {**os.environ, "REPRO_MACHINE_DIR": str(tmp_path)}


TURN_CHILD = """
from repro.tracking import handoff
with handoff.quiet_turn():
    print("turn", flush=True)
"""


@pytest.mark.slow  # starts a process
def test_a_projector_waits_for_an_open_window(own_machine):
    window = handoff.open_window(1.0)
    assert window is not None
    child = subprocess.Popen([sys.executable, "-c", TURN_CHILD], env=own_machine, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(2.0)
        assert child.poll() is None, "the projector's turn began inside an open window"
    finally:
        window.close()
    out, _ = child.communicate(timeout=60)
    assert out.strip() == "turn"


HOLD_CHILD = """
import sys
from repro.tracking import handoff
with handoff.quiet_turn():
    print("holding", flush=True)
    sys.stdin.readline()
"""


@pytest.mark.slow  # starts a process
def test_a_window_waits_for_a_projectors_turn_at_most_its_limit(own_machine):
    child = subprocess.Popen([sys.executable, "-c", HOLD_CHILD], env=own_machine, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "holding"
        assert handoff.open_window(0.2) is None  # given up: the window opens anyway (and the record says it)
    finally:
        child.communicate("\n", timeout=60)
    window = handoff.open_window(0.2)
    assert window is not None
    window.close()


def test_the_live_display_slows_its_redraws_inside_a_window():
    display = Display("rich", jobs=1)
    try:
        display.job_started(0, "jax", "auto")
        assert not display._redraws.window_open
        display.event(0, {"event": "measure_start", "at": 0})
        assert display._redraws.window_open
        display.event(0, {"event": "step", "step": 3, "steps": 205, "step_s": 0.001, "loss": 1.0})
        display.event(0, {"event": "window_end", "at": 0})
        assert not display._redraws.window_open
    finally:
        display.close()


@pytest.mark.slow
def test_a_real_run_records_its_window(sandbox):
    proc = sandbox.run("framework=jax", "model=mlp", "model.preset=tiny", "run.min_steady_steps=30",
                       "run.min_steady_s=0.2", "tracking.experiment=quiet_window")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (record,) = sandbox.heads()
    res, machine = record["results"], record["machine"]
    assert res["steady_steps"] >= 30 and res["steps"] == res["steady_steps"] + record["config"]["run"]["warmup"]
    assert sum(res["step_time_s"][record["config"]["run"]["warmup"]:]) > 0
    assert res["steady_median_sd_s"] > 0 and res["steady_block_len"] >= 1
    assert len(res["loss"]) == len(res["step_time_s"]) == min(res["steps"], 256)
    # the parent waited on its pipe (projectors of other commands on a shared machine are theirs to count)
    assert 0 <= machine["repro_cpu_parts_s"]["command"] < 0.1 and machine["repro_cpu_s"] >= 0, machine
    assert ("pinned" in machine) == (pinning.split(os.sched_getaffinity(0)) is not None)
    # where the process ran and its memory, read at the window's ends (worker/machine.py)
    place = machine["placement"]
    assert place["threads_ran"] >= 1 and place["migrations"] >= 0 and place["source"] in ("sched", "stat")
    assert place["cpus"] and set(place["cpus"]) <= set(range(machine["cores"])), place
    assert machine["page_faults"]["minor"] >= 0 and machine["page_faults"]["major"] >= 0
    assert machine["anon_huge_pages_kb"] is None or machine["anon_huge_pages_kb"] >= 0
    assert machine["thp_enabled"] in (None, "always", "madvise", "never")
    # its canary, before the window, on an empty history: recorded, not judged, and said (job/canary.py)
    canary = record["canary"]
    assert canary["seconds"] > 0 and canary["framework"] == "jax" and canary["repeats"] == 5
    assert canary["slow"] is None and canary["history"] == 0 and canary["threshold_s"] is None
    said = f"jax, {canary['threads']} threads: canary history 0 of 5 on this host: no run flagged (building it)"
    assert said in proc.stdout + proc.stderr


SHORT_LOOP_CHILD = """
import json, sys, time
from repro.worker import machine
first = machine.early(None)
end = time.monotonic() + 0.6
while time.monotonic() < end:  # the data, the framework import, the build: this process's own CPU
    pass
start = machine.before(None, first)
time.sleep(float(sys.argv[1]))  # the timed loop
waits = []  # machine.after's one way to wait for its window: time.sleep, counted here instead of timed
real_sleep, time.sleep = time.sleep, lambda s: (waits.append(s), real_sleep(s))
record = machine.after(start, 1)
print(json.dumps({"machine": record, "waits": waits}))
"""


@pytest.mark.slow  # starts processes
def test_a_short_loop_reads_other_processes_from_the_worker_start_without_waiting():
    """A loop shorter than MIN_WINDOW_S widens its window back to the worker's start instead of
    waiting half a second after its last step; another process busy meanwhile is still seen."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # not the child's: other
    try:
        short, long = (subprocess.run([sys.executable, "-c", SHORT_LOOP_CHILD, loop], capture_output=True,
                                      text=True, timeout=60) for loop in ("0.01", "0.6"))
    finally:
        burner.kill()
        burner.wait()
    assert short.returncode == long.returncode == 0, short.stderr[-2000:] + long.stderr[-2000:]
    short, long = json.loads(short.stdout), json.loads(long.stdout)
    m = short["machine"]
    assert m["window_from"] == "worker start" and m["window_s"] >= machine.MIN_WINDOW_S, m
    assert short["waits"] == [], short  # no wait for the window: it reaches back to the worker's start
    # the build's CPU is its own, the burner's other: both seen (their size depends on what else
    # shares the machine: a loaded 2-core machine read 0.10 where a quiet one reads near a core)
    assert m["own_cpu_share"] > 0 and m["other_cpu_share"] > 0, m
    assert long["machine"]["window_from"] == "first step" and long["machine"]["other_cpu_share"] > 0, long


SIBLINGS = """
import json, multiprocessing as mp, os, sys, time

def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def measure(run_root, started, done, out):
    from repro.worker import machine
    start = machine.before(None, None, run_root)
    started.set()
    done.wait(60)
    out.put(machine.after(start, 1, 1 if run_root is None else 2))

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    found = {}
    for label, root in (("alone", None), ("run", os.getpid())):
        started, done, out = ctx.Event(), ctx.Event(), ctx.Queue()
        rank0 = ctx.Process(target=measure, args=(root, started, done, out))
        rank0.start()
        started.wait(60)
        sibling = ctx.Process(target=burn, args=(0.6,))  # another process of the same run, reaped in the window
        sibling.start()
        sibling.join()
        done.set()
        found[label] = out.get(timeout=60)
        rank0.join()
    print(json.dumps(found))
"""


@pytest.mark.slow  # starts processes
def test_a_sibling_process_of_the_run_is_the_runs_own_cpu_not_other_processes(tmp_path):
    """machine, in one of a run's several processes (torch ranks, JAX processes: rank 0 records):
    with `run_root` the launching worker, a sibling's CPU in the window is the run's own
    (own_cpu_share); without it, it was other processes' (the busy flag on every sharded torch run)."""
    script = tmp_path / "siblings.py"  # a file: spawned children import their target from it
    script.write_text(SIBLINGS)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    seconds = {label: {k: m[k] * m["window_s"] for k in ("own_cpu_share", "other_cpu_share")}
               for label, m in found.items()}
    assert seconds["run"]["own_cpu_share"] >= 0.5, seconds  # the sibling's 0.6 s, in the run's tree
    assert seconds["alone"]["own_cpu_share"] < 0.3 <= seconds["alone"]["other_cpu_share"], seconds
    assert (found["run"]["processes"], found["alone"]["processes"]) == (2, 1)  # the load they make themselves



def test_the_hypervisors_steal_is_recorded_apart(monkeypatch):
    """Steal time (/proc/stat's 8th field: another tenant had this core) was read by nothing; it is now
    a share of its own in every record's `machine`, counted inside other processes' share as before."""
    start = machine.before()
    assert machine.after(start, 1)["steal_share"] >= 0  # recorded on this machine (its size is the host's)
    clock = iter([100.0, 100.6])  # 0.6 s stolen over a window of at least MIN_WINDOW_S
    monkeypatch.setattr(machine, "_steal_s", lambda: next(clock))
    m = machine.after(machine.before(), 1)
    assert 0 < m["steal_share"] <= 0.6 / machine.MIN_WINDOW_S
