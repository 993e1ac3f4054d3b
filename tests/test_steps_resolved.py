"""run.steps=auto is resolved once per config in a sweep (loop/sweep.py StepCounts): its first ok run
takes as many steps as the machine allows, every later run of it takes that count and says so, so a
sweep's repeats can be compared bit for bit. A fixed count and a replay's own count are left alone."""

from __future__ import annotations

from repro.preflight import plan
from repro.loop.sweep import Job, StepCounts


def _job(config, group: str, **fields) -> Job:
    return Job(config, (), "jax", {"repeat": {"group": group, "index": 0}, **fields})


def test_two_labels_of_one_config_share_its_count():
    """calibrate's A/A: labels A and B are one config in two repeat groups; with a count each, a
    trial's two labels took different steps for its whole life (2 of 6 A/A trials called 'faster')."""
    (auto,) = plan(["run.steps=auto"]).jobs
    counts = StepCounts()
    counts.resolve(_job(auto, "s/0"), _ok("a", 1465))
    assert counts.take(_job(auto, "s/1")).fields["steps_resolved"] == {"count": 1465, "from": "a"}


def _ok(rid: str, steps: int) -> dict:
    return {"id": rid, "status": "ok", "results": {"steps": steps}}


def test_the_first_ok_run_resolves_the_count_for_its_config_only():
    (auto,) = plan(["run.steps=auto"]).jobs
    counts = StepCounts()
    first = _job(auto, "s/0")
    assert counts.take(first) is first  # nothing resolved yet: the machine decides
    counts.resolve(first, {"id": "f", "status": "failed", "results": {}})  # a failed run resolves nothing
    assert counts.take(first) is first
    counts.resolve(first, _ok("a", 1465))
    counts.resolve(first, _ok("b", 2000))  # later runs never move it
    assert counts.take(_job(auto, "s/0")).fields["steps_resolved"] == {"count": 1465, "from": "a"}
    (other,) = plan(["run.steps=auto", "run.lr=0.01"]).jobs
    assert "steps_resolved" not in counts.take(_job(other, "s/1")).fields  # another config: its own
    replayed = _job(auto, "s/0", replay_steps=300)  # a replay takes the count its record took
    assert counts.take(replayed) is replayed


def test_a_fixed_count_and_a_single_run_are_unchanged():
    (fixed,) = plan(["run.steps=20"]).jobs
    counts = StepCounts()
    job = _job(fixed, "s/0")
    counts.resolve(job, _ok("a", 20))
    assert counts.take(job) is job and counts.resolved == {}
    (auto,) = plan([]).jobs
    alone = Job(auto, (), "jax", {})
    counts.resolve(alone, _ok("b", 999))
    assert counts.take(alone) is alone and counts.resolved == {}
