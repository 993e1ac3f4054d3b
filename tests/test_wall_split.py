"""Where each job's wall goes: every record splits its worker's wall into its parts (start and
imports, data, build, setup, first step, steady steps, results, hand-over), the first step as the
closing table's; a worker that ended before its parts were said leaves a rest that says where."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from repro.job import wall_split

PARTS = ["start", "data", "build", "setup", "first_step", "steady", "results", "handover"]


@pytest.mark.slow
def test_every_record_of_a_cpu_sweep_splits_its_wall(sandbox):
    proc = sandbox.run("-m", "framework=jax,torch", "model=mlp", "run.steps=6", "run.warmup=2",
                       "tracking.experiment=wall")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    heads = sandbox.heads()
    assert len(heads) == 2
    for h in heads:
        wall = h["wall_split"]
        assert set(wall["parts"]) == set(PARTS)  # the ledger keeps keys sorted: the report orders them
        assert wall["parts"]["first_step"] == pytest.approx(h["results"]["first_step_s"], abs=1e-4)
        assert math.isclose(sum(wall["parts"].values()) + wall["rest_s"], h["wall_s"], abs_tol=1e-2)
        assert abs(wall["rest_s"]) <= wall_split.REST_SHARE * h["wall_s"] and "rest" not in wall
        assert all(v >= 0 for v in wall["parts"].values())
        start, end = wall["window"]  # the measured steps on the host's clock: the runs never overlap
        assert end - start == pytest.approx(wall["parts"]["first_step"] + wall["parts"]["steady"], abs=2e-3)
    first_window, second_window = sorted(h["wall_split"]["window"] for h in heads)
    assert first_window[1] <= second_window[0]
    jax = next(h for h in heads if h["config"]["framework"]["name"] == "jax")
    first = jax["wall_split"]["first_step"]  # JAX's AOT lower / compile, and the execution left over
    assert first["compile_s"] > 0 and first["execute_s"] >= 0
    out = sandbox.root / "report"  # rebuilt from the ledger alone
    report = subprocess.run([sys.executable, "-m", "repro", "report", "--ledger", str(sandbox.ledger),
                             "--experiment", "wall", "--out", str(out)], capture_output=True, text=True, timeout=300,
                            env=sandbox.env())
    assert report.returncode == 0, report.stderr
    page = (out / "report.md").read_text()
    assert "## Where each job's wall goes" in page
    assert "| run | wall | start | data | build | setup | first step | steady | results | handover | rest |" in page


def test_a_worker_killed_in_its_steps_says_where_the_rest_lies():
    """The last events of a worker SIGKILLed in its 40th step, 30 s after its steps began."""
    t0 = 1_000.0
    events = {"hello": {"event": "hello", "at": t0 + 1.5}, "environment": {"event": "environment", "at": t0 + 4.0},
              "measure_start": {"event": "measure_start", "at": t0 + 4.2},
              "step": {"event": "step", "step": 40, "at": t0 + 34.2}}
    wall = wall_split.split(events, t0, 60.0)
    assert wall["parts"] == {"start": 1.5, "setup": 0.2} and "window" not in wall  # its steps never ended
    assert wall["rest_s"] == pytest.approx(58.3)
    assert wall["rest"] == ("2.5 s of data, framework import and build (not itemised: no result came); "
                            "30.0 s of steps (up to step 40); "
                            "25.8 s after the worker's last 'step' event until it ended (no further event)")
    assert wall_split.split({}, t0, 60.0) is None  # a worker that never said hello: no split, no false parts
