"""Progress of runs of several processes: global rank 0's step lines reach the parent's progress
(worker/rank_progress.py); the other ranks stay quiet."""

from __future__ import annotations

from types import SimpleNamespace

import multiprocessing as mp

import pytest

from repro.worker import rank_progress


def _rank(spec: dict, rank: int) -> None:
    emit = rank_progress.emitter(spec, rank == 0)
    for i in range(3):
        emit("step", step=i + 1, steps=3, step_s=0.01, loss=1.0, rank=rank)
    emit("result", ignored=True)


@pytest.mark.slow
def test_only_rank_0_steps_pass_the_relay(tmp_path):
    seen = []
    relay = rank_progress.Relay(str(tmp_path), lambda kind, **p: seen.append((kind, p)))
    spec = SimpleNamespace(progress_fifo=relay.start())  # the one field of WorkerSpec the emitter reads
    procs = [mp.get_context("spawn").Process(target=_rank, args=(spec, r)) for r in (1, 0)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    relay.stop()
    assert [(k, p["step"], p["rank"]) for k, p in seen] == [("step", 1, 0), ("step", 2, 0), ("step", 3, 0)]
    assert not (tmp_path / rank_progress.FIFO).exists()


def test_a_relay_whose_rank_0_never_wrote_stops(tmp_path):
    relay = rank_progress.Relay(str(tmp_path), lambda *a, **k: None)
    relay.start()
    relay.stop()
    assert not relay._thread.is_alive()


@pytest.mark.slow
def test_a_two_process_jax_run_prints_progress(sandbox):
    proc = sandbox.run("framework=jax", "model=mlp", "sharding=dp", "cluster.jax_processes=2", "run.steps=6",
                       "progress.interval_s=0.01")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    steps = [ln for ln in proc.stdout.splitlines() if "  step " in ln]
    assert steps[0].startswith("[1/1]   step 1/6 (compile)") and steps[-1].startswith("[1/1]   step 6/6")
    assert len({ln.split("step ")[1].split()[0] for ln in steps}) == len(steps)  # one line per step: rank 0's only


def _fails(spec: dict, index: int, joined) -> None:
    """Process 1 fails first; process 0 a moment later (however slowly either started)."""
    import time
    from pathlib import Path

    joined()
    mark = Path(spec["mark"])
    if index == 1:
        mark.touch()
    else:
        deadline = time.monotonic() + 120
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
    raise ValueError(f"rank {index} cannot go on")


@pytest.mark.slow
def test_every_failing_process_is_named(tmp_path):
    from repro.worker import processes

    with pytest.raises(processes.ProcessFailed) as failed:
        processes.launch(_fails, {"mark": str(tmp_path / "first")}, 2, lambda i: f"process {i}")
    message = str(failed.value)
    assert "rank 0 cannot go on" in message and "rank 1 cannot go on" in message, message
    assert "process 0" in message and "process 1" in message
