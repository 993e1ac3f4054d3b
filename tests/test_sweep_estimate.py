"""A sweep that knows its cost (preflight/estimate.py): the estimate from the ledger's past runs of
the same config on this hardware, part by part; "no history" where there is none, never a guess;
`--dry-run`'s one line per config; verdict.budget_s refusing a sweep it cannot hold, before its
first job (exit 2), naming the estimate and the rounds that would fit."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import Sandbox
from repro import cli, preflight
from repro.config import ConfigError, config_hash
from repro.config.schema import as_dict
from repro.ledger import Ledger
from repro.preflight import estimate

HERE = ("Test CPU 9000", 2, ())  # this machine, as the tests tell the estimate (estimate.hardware_here)
SWEEP = ("-m", "framework=jax,torch", "model=mlp", "model.preset=tiny", "run.steps=20", "run.warmup=2")
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def here(monkeypatch):
    """The dry run asks the estimate of this machine: it is HERE."""
    monkeypatch.setattr(estimate, "hardware_here", lambda: HERE)


def _plan(ledger: Path, *more: str):
    return preflight.plan([*SWEEP, f"ledger.dir={ledger}", *more])


def _iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _past_run(ledger: Ledger, config, at: float, parts: dict | None, wall_s: float, job: int = 1,
              cpu: str = HERE[0], status: str = "ok", parent_s: float = 0.0) -> dict:
    """A past run of `config` as the runner records one: a started record, then its end `wall_s`
    + `parent_s` later, its wall split into `parts` (None: recorded before the split)."""
    base = {"kind": "run", "config_hash": config_hash(as_dict(config)), "sweep": {"id": f"s{at}", "job": job}}
    started = ledger.append({**base, "status": "started", "created": _iso(at)})
    end = {**base, "status": status, "prev": started["id"], "created": _iso(at + wall_s + parent_s), "wall_s": wall_s,
           "environment": {"cpu": {"model": cpu, "cores": 2, "affinity": 2}, "gpus": []}}
    if parts is not None:
        end["wall_split"] = {"parts": parts, "measured_s": sum(parts.values()), "rest_s": wall_s - sum(parts.values())}
    return ledger.append(end)


def _record_files(ledger: Path) -> list[Path]:
    return sorted(p for p in ledger.glob("*/*.json") if not p.parent.name.startswith("."))


def _split(start: float, build: float, first: float, steady: float) -> dict:
    return {"start": start, "data": 0.0, "build": build, "setup": 0.1, "first_step": first, "steady": steady,
            "results": 0.0, "handover": 0.0}


def test_a_configs_run_is_the_median_of_each_part_over_its_past_runs_on_this_hardware(tmp_path):
    plan = _plan(tmp_path, "run.repeats=3")
    jax, torch = (c for c, _ in plan.configs)
    ledger = Ledger(tmp_path)
    for i, (build, steady) in enumerate([(1.0, 2.0), (3.0, 1.0), (2.0, 9.0)]):  # medians: build 2, steady 2
        _past_run(ledger, jax, 100 * i, _split(0.0, build, 0.5, steady), wall_s=0.6 + build + steady + 0.2,
                  parent_s=0.1)
    _past_run(ledger, jax, 400, _split(0.0, 50.0, 0.5, 50.0), wall_s=101.0, cpu="Another CPU")  # other hardware
    _past_run(ledger, jax, 500, _split(0.0, 50.0, 0.5, 50.0), wall_s=101.0, status="failed")  # not ok
    _past_run(ledger, torch, 600, None, wall_s=3.0)  # from before the wall was split: one part
    _past_run(ledger, torch, 700, None, wall_s=5.0)

    est = estimate.of(plan, here=HERE)
    jax_cost, torch_cost = est.configs
    assert jax_cost.past == 3 and torch_cost.past == 2
    assert jax_cost.parts["build"] == 2.0 and jax_cost.parts["steady"] == 2.0 and jax_cost.parts["first_step"] == 0.5
    assert jax_cost.parts["rest"] == pytest.approx(0.2) and jax_cost.parts["parent"] == pytest.approx(0.1, abs=2e-3)
    assert torch_cost.parts["worker"] == 4.0 and torch_cost.per_run_s == pytest.approx(4.0, abs=2e-3)
    assert est.jobs == 6 and est.unknown_jobs == 0
    assert est.total_s == pytest.approx(3 * (jax_cost.per_run_s + torch_cost.per_run_s))
    assert est.summary() == f"estimate {estimate.duration(est.total_s)} for 6 jobs, medians of 5 past runs on " \
                            "this hardware"
    assert estimate.of(plan, here=("Another CPU", 2, ())).configs[0].past == 1  # that machine's own history


def test_the_first_job_of_a_sweep_starts_cold_once(tmp_path):
    plan = _plan(tmp_path)
    jax, torch = (c for c, _ in plan.configs)
    ledger = Ledger(tmp_path)
    for i in range(3):  # later jobs: their worker was started ahead (start ~0); first jobs: 1.5 s
        _past_run(ledger, jax, 100 * i, _split(0.0, 1.0, 0.5, 1.0), wall_s=2.6)
        _past_run(ledger, torch, 100 * i + 50, _split(1.5 if i else 1.7, 1.0, 0.5, 1.0), wall_s=4.2, job=0)
    est = estimate.of(plan, here=HERE)
    assert est.configs[0].first_start_s is None and est.configs[1].first_start_s == 1.5
    assert est.first_extra_s == 0.0  # torch's runs were all first jobs: its usual start is the cold one
    _past_run(ledger, jax, 900, _split(1.2, 1.0, 0.5, 1.0), wall_s=3.8, job=0)
    est = estimate.of(plan, here=HERE)
    assert est.first_extra_s == pytest.approx(0.6)  # the median of (jax 1.2 - 0, torch 1.5 - 1.5)
    assert est.total_s == pytest.approx(est.round_s + 0.6) and est.parts_s()["start"] == pytest.approx(0 + 1.5 + 0.6)


def test_no_history_is_said_and_never_guessed(tmp_path, capsys, here):
    plan = _plan(tmp_path / "none", "run.repeats=3")
    est = estimate.of(plan, here=HERE)
    assert est.known == () and est.summary() == "no history for 6 of 6 jobs on this hardware: no estimate"
    ledger = Ledger(tmp_path)
    plan = preflight.plan(["-m", "framework=jax,torch,torch_compile", *SWEEP[2:], "run.repeats=3",
                           f"ledger.dir={tmp_path}", "verdict.budget_s=1000"])
    for c, _ in plan.configs[:2]:
        _past_run(ledger, c, 0, _split(0.0, 1.0, 0.5, 1.0), wall_s=2.6)
    est = estimate.of(plan, here=HERE)
    assert [bool(c.parts) for c in est.configs] == [True, True, False]
    assert est.summary() == ("estimate 16 s for the 6 jobs with history, no history for 3 of 9 jobs; medians of 2 "
                             "past runs on this hardware; verdict.budget_s=1000 cannot be checked")
    assert est.refusal() is None  # a budget it cannot check is said, never a refusal

    assert cli.dry_run(["-m", "framework=jax,torch,torch_compile", *SWEEP[2:], "run.repeats=3",
                        f"ledger.dir={tmp_path}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "repro --dry-run: 3 configs × 3 runs = 9 jobs, checked; nothing run or written"
    assert out[1] == f"ledger {tmp_path}" and out[2].startswith("mlflow ")  # said once for every config
    lines = [line for line in out if line.startswith("[")]
    assert len(lines) == 3 and all(len(line) <= 80 for line in lines[:2]), lines  # a short name fits 80 columns
    for line, (config, _), cost in zip(lines, plan.configs, est.configs):
        assert f"config {config_hash(as_dict(config))[:12]} · ×3 · " in line and "ledger" not in line
    assert lines[2].endswith("· no history") and re.search(r"· \d\.\d s/run$", lines[0]), lines
    assert any(line.startswith("estimate 16 s for the 6 jobs with history, no history for 3 of 9 jobs") for line in out)


def test_a_budget_below_the_fixed_rounds_is_refused_naming_the_rounds_that_fit(tmp_path, capsys, here):
    plan = _plan(tmp_path, "run.repeats=4", "verdict.budget_s=10")
    ledger = Ledger(tmp_path)
    for c, _ in plan.configs:  # 2.5 s a run, 5 s a round, 20 s for the sweep
        _past_run(ledger, c, 0, _split(0.0, 1.0, 0.5, 0.9), wall_s=2.5)
    est = estimate.of(plan, here=HERE)
    assert est.round_s == pytest.approx(5.0) and est.total_s == pytest.approx(20.0)
    assert est.rerun_note() == "a round telemetry flags runs again: +5.0 s each, at most verdict.max_reruns=2"
    with pytest.raises(ConfigError) as refused:
        estimate.admit(plan, here=HERE)
    assert str(refused.value) == (
        "verdict.budget_s=10 cannot hold this sweep: 4 rounds take about 20 s (5.0 s a round of its 2 configs, "
        "medians of past runs on this hardware); run.repeats=2 fits, or raise verdict.budget_s to 20")
    assert "run.steps" not in str(refused.value)  # fewer rounds, never fewer steps
    assert estimate.admit(_plan(tmp_path, "run.repeats=2", "verdict.budget_s=10"), here=HERE).total_s <= 10

    with pytest.raises(ConfigError, match=r"run.repeats=1 fits \(one run per config: no verdict\)"):
        estimate.admit(_plan(tmp_path, "run.repeats=4", "verdict.budget_s=7"), here=HERE)
    with pytest.raises(ConfigError) as refused:
        estimate.admit(_plan(tmp_path, "run.repeats=4", "verdict.budget_s=3"), here=HERE)
    assert str(refused.value) == (
        "verdict.budget_s=3 is less than one round of this sweep: about 5.0 s (its 2 configs once each, medians "
        "of past runs on this hardware); raise verdict.budget_s to 5 or more, or sweep fewer configs")

    # the dry run lists the sweep, then refuses it as the run would: exit 2, one line
    assert cli.dry_run([*SWEEP, f"ledger.dir={tmp_path}", "run.repeats=4", "verdict.budget_s=10"]) == cli.EXIT_CONFIG_ERROR
    captured = capsys.readouterr()
    assert "s/run" in captured.out
    assert captured.err.startswith("repro: nothing would run: verdict.budget_s=10 cannot hold this sweep: 4 rounds")


def test_auto_keeps_its_budget_rule_but_refuses_a_budget_below_one_round(tmp_path):
    ledger = Ledger(tmp_path)
    for c, _ in _plan(tmp_path).configs:
        _past_run(ledger, c, 0, _split(0.0, 1.0, 0.5, 0.9), wall_s=2.5)
    est = estimate.admit(_plan(tmp_path, "run.repeats=auto", "verdict.budget_s=12"), here=HERE)
    assert est.auto and est.rounds == 10 and est.refusal() is None  # it stops before a round past the budget
    assert est.summary() == ("estimate 5.0 s a round, 50 s at auto's 10 rounds, medians of 2 past runs on this "
                             "hardware; verdict.budget_s=12 allows about 2 rounds")
    with pytest.raises(ConfigError, match=r"^verdict.budget_s=4 is less than one round of this sweep: about 5.0 s"):
        estimate.admit(_plan(tmp_path, "run.repeats=auto", "verdict.budget_s=4"), here=HERE)
    # without history it cannot be checked: said, not refused
    est = estimate.admit(_plan(tmp_path / "none", "run.repeats=auto", "verdict.budget_s=4"), here=HERE)
    assert est.summary().endswith("no estimate; verdict.budget_s=4 cannot be checked")


def test_the_saved_index_is_read_without_a_stat_a_file_only_while_no_record_came(tmp_path, monkeypatch):
    from repro.ledger import index

    monkeypatch.setattr(index, "RACY_NS", 0)  # the file system's clock tick, 2 s by default: none here
    ledger = Ledger(tmp_path)
    ledger.append({"kind": "run", "status": "started"})
    assert index.Index(tmp_path).saved_entries() is None  # no index saved yet
    time.sleep(0.05)
    full = index.Index(tmp_path).entries()  # saves it
    assert index.Index(tmp_path).saved_entries() == full
    time.sleep(0.05)
    ledger.append({"kind": "run", "status": "started", "n": 2})  # a record came since: its folder changed
    assert index.Index(tmp_path).saved_entries() is None
    time.sleep(0.05)
    ledger.append({"kind": "run", "status": "started", "created": "2026-01-02T00:00:00Z"})  # a new folder
    assert index.Index(tmp_path).saved_entries() is None
    time.sleep(0.05)
    assert index.Index(tmp_path).saved_entries() is None  # the folder is new to the saved index...
    full = index.Index(tmp_path).entries()
    time.sleep(0.05)
    assert index.Index(tmp_path).saved_entries() == full and len(full) == 3  # ...until a reader saved it


def test_durations_read_as_a_person_would_say_them():
    assert [estimate.duration(s) for s in (0.04, 4.14, 52.4, 200, 3900)] == \
        ["0.0 s", "4.1 s", "52 s", "3 min 20 s", "1 h 05 min"]


@pytest.mark.slow
def test_a_tiny_sweep_run_twice_knows_its_cost_the_second_time(tmp_path):
    box = Sandbox(tmp_path)
    args = ("-m", "framework=jax,torch", "model=mlp", "model.preset=tiny", "run.steps=20", "run.repeats=2",
            "verdict.max_reruns=0")
    first = box.run(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0] == "sweep: no history for 4 of 4 jobs on this hardware: no estimate"

    second = box.run(*args)
    assert second.returncode == 0, second.stderr
    start = second.stdout.splitlines()[0]
    # the duration as `estimate.duration` says it (a loaded machine can pass a minute)
    assert re.fullmatch(r"sweep: estimate (?:[\d.]+ s|\d+ min \d+ s|\d+ h \d+ min) for 4 jobs, medians of 4 past runs "
                        r"on this hardware", start), start

    dry = box.run(*args, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = [line for line in dry.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 2 and all(re.search(r"· ×2 · [\d.]+ s/run$", line) for line in lines), dry.stdout
    assert "no history" not in dry.stdout

    records = _record_files(box.ledger)
    refused = box.run(*args, "verdict.budget_s=0.5")  # below one round: refused before its first job
    assert refused.returncode == 2
    assert refused.stderr.startswith("repro: nothing was run: verdict.budget_s=0.5 is less than one round of "
                                     "this sweep: about "), refused.stderr
    assert _record_files(box.ledger) == records  # nothing written
    heads = [json.loads(p.read_text()) for p in records]
    assert sum(r["kind"] == "run" and r["status"] == "ok" for r in heads) == 8
