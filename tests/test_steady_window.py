"""The steady window (worker/window.py): run.steps=auto measures until the steady steps are many
and long enough, capped by run.max_steps; each run records its steady median's sampling SD
(moving-block bootstrap); bad window settings exit 2 naming the key."""

from __future__ import annotations

import time

import numpy as np
import pytest

from conftest import Sandbox
from repro.config import ConfigError
from repro.preflight import plan
from repro.worker import measure, window
from repro.worker.window import StepPlan


def _steps_taken(plan_: StepPlan, step_s: float) -> int:
    """How many steps the loop takes when every step lasts `step_s`."""
    taken, steady_s = 0, 0.0
    while not plan_.done(taken, steady_s):
        if taken >= plan_.warmup:
            steady_s += step_s
        taken += 1
    return taken


def test_the_window_stops_at_the_later_minimum_and_at_max_steps():
    adaptive = StepPlan(fixed=None, warmup=5, min_steady_steps=200, min_steady_s=1.0, max_steps=10000)
    assert _steps_taken(adaptive, 0.010) == 5 + 200  # 200 steps of 10 ms: 2 s, the count is the later one
    assert _steps_taken(adaptive, 0.002) == 5 + 500  # 200 steps are 0.4 s: on until 1 s, 500 steps
    assert _steps_taken(adaptive, 0.0001) == 10000  # 1 s would need 10 000 steady steps: capped
    assert _steps_taken(StepPlan(None, 5, 200, 1.0, 2000), 0.0001) == 2000
    assert _steps_taken(StepPlan(fixed=20, warmup=5, min_steady_steps=200, min_steady_s=1.0, max_steps=10), 1.0) == 20


class _SleepingWorkload:
    """A workload whose step sleeps a fixed time: the loop's own rule, with real clock reads."""

    def step(self, i):
        time.sleep(0.001)
        return i

    def sync(self, out):
        return out

    def loss(self, out):
        return float(out)


def test_the_timed_loop_closes_the_window_once_both_minimums_are_met():
    plan_ = StepPlan(fixed=None, warmup=3, min_steady_steps=10, min_steady_s=0.05, max_steps=100000)
    events = []
    times, losses = measure.timed_loop(_SleepingWorkload(), plan_, lambda kind, **kw: events.append(kw))
    steady = times[plan_.warmup:]
    assert len(steady) >= 10 and sum(steady) >= 0.05
    assert sum(steady[:-1]) < 0.05 or len(steady) == 10  # it stopped at the first step that met both
    assert losses == [float(i) for i in range(len(times))]
    assert events[-1]["step"] == events[-1]["steps"] == len(times)
    summary = measure.summarise(times, losses, plan_.warmup, batch_size=8)
    assert summary["steady_steps"] == len(steady) and summary["steps"] == len(times)
    assert summary["steady_median_sd_s"] >= 0 and summary["steady_block_len"] >= 1


def _ar1(rng, n: int, rho: float, count: int) -> np.ndarray:
    """`count` series of `n` step times: 1 ms plus an AR(1) noise of lag-1 correlation `rho`."""
    e = rng.normal(0, 1e-4, size=(count, n))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0] / np.sqrt(1 - rho * rho)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + e[:, t]
    return 1e-3 + x


def test_the_bootstrap_sd_of_the_median_matches_its_true_sd_on_autocorrelated_steps():
    rng = np.random.default_rng(7)
    n, rho = 400, 0.4
    truth = float(np.median(_ar1(rng, n, rho, 4000), axis=1).std())  # the SD over independent runs
    series = _ar1(rng, n, rho, 24)
    estimates, blocks = zip(*(window.median_sd(s) for s in series))
    assert all(b > 1 for b in blocks)  # the measured autocorrelation gives blocks longer than one step
    assert abs(np.mean(estimates) / truth - 1) < 0.25, (np.mean(estimates), truth)
    iid = np.mean([window.median_sd(s, block=1)[0] for s in series])
    assert iid < np.mean(estimates)  # single-step resampling understates it


def test_the_block_length_rule():
    assert window.block_length(200, 0.0) == window.block_length(200, -0.2) == 1
    assert window.block_length(200, 0.4) == 7
    assert window.block_length(20, 0.95) == 4  # never above n/5


def test_the_bootstrap_is_deterministic():
    x = list(_ar1(np.random.default_rng(1), 300, 0.3, 1)[0])
    assert window.median_sd(x) == window.median_sd(x)


def test_auto_is_the_default_and_a_fixed_count_keeps_its_meaning():
    (auto,) = plan(["model=mlp"]).jobs
    assert (auto.run.steps, auto.run.min_steady_steps, auto.run.min_steady_s, auto.run.max_steps) == ("auto", 200, 1.0, 10000)
    (fixed,) = plan(["model=mlp", "run.steps=7"]).jobs
    assert StepPlan.of(fixed.run).fixed == 7 and window.most_steps(fixed.run) == 7


BAD = [
    (["run.min_steady_s=0"], "run.min_steady_s=0"),
    (["run.min_steady_s=-1.5"], "run.min_steady_s=-1.5"),
    (["run.min_steady_steps=9"], "run.min_steady_steps=9"),
    (["run.max_steps=100"], "run.max_steps=100"),  # below warm-up 5 + 200
    (["run.steps=abc"], "run.steps='abc'"),
]


@pytest.mark.parametrize("args,key", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_window_settings_are_refused_naming_the_key(args, key):
    with pytest.raises(ConfigError) as err:
        plan(["model=mlp", *args])
    message = str(err.value)
    assert message.startswith(key) and ("set run." in message or "run.steps=20" in message), message
    assert "\n" not in message


@pytest.mark.slow
@pytest.mark.parametrize("args", [["run.min_steady_s=0"], ["run.min_steady_steps=3"], ["run.max_steps=50"]])
def test_cli_exit_2_and_nothing_written(tmp_path, args):
    sandbox = Sandbox(tmp_path, store_template=False)  # the store too must not be created
    proc = sandbox.run("model=mlp", *args)
    assert proc.returncode == 2, proc.stderr
    assert args[0].split("=")[0] in proc.stderr and "invalid config, nothing was run" in proc.stderr
    assert not sandbox.ledger.exists() and not sandbox.db.exists()


@pytest.mark.slow
def test_a_replay_of_an_adaptive_run_takes_the_steps_it_took_and_is_exact(sandbox):
    import subprocess
    import sys

    from repro.ledger import Ledger

    proc = sandbox.run("framework=jax", "model=mlp", "model.preset=tiny", "run.min_steady_steps=20",
                       "run.min_steady_s=0.1", "tracking.experiment=adaptive_replay")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (original,) = sandbox.heads()
    assert original["config"]["run"]["steps"] == "auto" and original["results"]["steady_steps"] >= 20
    proc = subprocess.run([sys.executable, "-m", "repro", "replay", original["id"], "--ledger", str(sandbox.ledger),
                           "--progress", "plain"], capture_output=True, text=True, timeout=300, cwd=sandbox.root,
                          env=sandbox.env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (verdict,) = Ledger(sandbox.ledger).heads(kind="replay")
    replayed = Ledger(sandbox.ledger).get(verdict["replay"])
    assert replayed["replay_steps"] == replayed["results"]["steps"] == original["results"]["steps"]
    assert verdict["status"] == "exact", verdict["reasons"]


@pytest.mark.slow
def test_the_processes_of_a_sharded_adaptive_run_take_one_shared_count(sandbox):
    """Two JAX processes meet in collectives every step: under run.steps=auto both take the warm-up
    plus run.min_steady_steps (each stopping on its own clock could leave one waiting forever)."""
    proc = sandbox.run("framework=jax", "model=mlp", "sharding=fsdp", "sharding.mesh.data=2", "cluster.jax_processes=2",
                       "run.warmup=2", "run.min_steady_steps=10", "run.timeout_s=240", "tracking.experiment=shared_count")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (record,) = sandbox.heads()
    assert record["status"] == "ok" and record["results"]["steps"] == 12 and record["results"]["steady_steps"] == 10
