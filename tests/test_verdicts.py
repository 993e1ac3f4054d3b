"""Verdicts that survive noise: interleaved repeats, CIs, the machine's state in records and audit.

One sandbox (one ledger, one MLflow store) for the module: a repeats=3 sweep of jax and torch
(model=mlp, 10 steps) with a CPU-burning child process during one jax repeat, a batch sweep,
and a replay of two repeat records. The statistics and the audit are also checked in-process
on records built here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from argparse import Namespace

import psutil
import pytest

from conftest import Sandbox, shipped_ledger
from repro import hardware
from repro.config import ConfigError, config_hash
from repro.preflight import plan
from repro.ledger import Ledger
from repro.report import audit, compare, comparison, stats, verdict
from repro.loop import sweep
from repro.worker import machine

STEPS = ("model=mlp", "run.steps=10", "run.warmup=2")
BURNED_JOB = 4  # the first job of the third round (each round in its random order)


def _workers(parent: psutil.Process) -> list[psutil.Process]:
    try:
        return [p for p in parent.children(recursive=True) if "repro.worker.worker" in " ".join(p.cmdline())]
    except psutil.Error:
        return []


def _sweep_with_burner(box: Sandbox, *args: str) -> tuple[str, int]:
    """Run `python -m repro -m ARGS`; burn a core in a child process of ours while the worker of
    job BURNED_JOB runs. Returns the output and the burner's pid."""
    proc = subprocess.Popen(box.repro_cmd("-m", *args), cwd=box.root, env=box.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    parent, seen, burner = psutil.Process(proc.pid), [], None
    try:
        while proc.poll() is None:
            for w in _workers(parent):
                if w.pid not in [s.pid for s in seen]:
                    seen.append(w)
            if burner is None and len(seen) > BURNED_JOB:
                burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            if burner is not None and not seen[BURNED_JOB].is_running():
                break
            time.sleep(0.1)
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    assert burner is not None, "the burned job's worker never appeared"
    return out, burner.pid


@pytest.fixture(scope="module")
def box(tmp_path_factory) -> Sandbox:
    return Sandbox(tmp_path_factory.mktemp("verdicts"))


@pytest.fixture(scope="module")
def repeats(box):
    # verdict.max_reruns=0: the burned round stays as measured (its rerun is tests/test_sweep_loop.py's)
    out, _ = _sweep_with_burner(box, "framework=jax,torch", *STEPS, "run.repeats=3", "tracking.experiment=rep",
                                "verdict.max_reruns=0")
    runs = [r for r in box.heads() if r["sweep"]["experiment"] == "rep"]
    return out, sorted(runs, key=lambda r: r["sweep"]["job"])


def _compare(box: Sandbox, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "repro", "compare", *args, "--ledger", str(box.ledger)],
                          capture_output=True, text=True, timeout=120, env=box.env())
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_repeats_run_interleaved_with_ci_and_ratio(box, repeats):
    out, runs = repeats
    started = sorted((r for r in box.records() if r["status"] == "started" and r["sweep"]["experiment"] == "rep"),
                     key=lambda r: r["created"])
    assert [r["repeat"]["index"] for r in started] == [0, 0, 1, 1, 2, 2]
    seed = started[0]["repeat"]["order_seed"]  # each round in its own random order, drawn from the recorded seed
    assert [int(r["repeat"]["group"].rsplit("/", 1)[1]) for r in started] == \
        [c for k in range(3) for c in sweep.order(2, seed, k)]
    assert [r["repeat"]["position"] for r in started] == [0, 1] * 3
    assert all(sorted(r["config"]["framework"]["name"] for r in started[2 * k:2 * k + 2]) == ["jax", "torch"]
               for k in range(3))
    assert all(r["status"] == "ok" and r["repeat"]["count"] == 3 for r in runs)
    groups = comparison.by_config(runs)
    assert len(groups) == 2 and all(len(g) == 3 for g in groups.values())
    for group in groups.values():  # a repeat is its config: one hash, and run.repeats is not in it
        assert len({r["config_hash"] for r in group}) == 1
        one = {**group[0]["config"], "run": {**group[0]["config"]["run"], "repeats": 1}}
        assert config_hash(one) == group[0]["config_hash"]
    rows = re.findall(r"^(jax|torch) +ok", out, re.M)  # the closing table's rows (report/table.py)
    assert sorted(rows) == ["jax", "torch"]  # one row per config
    flat = " ".join(out.split())  # verdict lines wrap at the width (report/table.py)
    assert "95 % CI (ms)" in out and "3 repeats each, interleaved" in flat
    assert [row.n for row in comparison.build(runs).rows] == [3, 3]
    (judged,) = comparison.build(runs).tables[0].verdicts  # the one engine's sentence, as the close printed it
    assert judged.outcome in (verdict.FASTER, verdict.EQUIVALENT, verdict.UNDECIDED), judged.text
    assert judged.mode == "in deterministic mode (run.deterministic=true)"  # the condition, named in the sentence
    assert judged.text.split(" (")[0] in flat, (judged.text, flat[-3000:])
    mlflow = [r for r in box.mlflow_runs("rep") if "mlflow.parentRunId" in r.data.tags]
    assert len(mlflow) == 6
    assert sorted(r.data.tags["repro.repeat.index"] for r in mlflow) == ["0", "0", "1", "1", "2", "2"]
    assert {r.data.tags["repro.repeat.group"] for r in mlflow} == set(groups)
    assert all(r.data.tags["machine.host"] == runs[0]["machine"]["host"] for r in mlflow)


@pytest.mark.slow
def test_machine_state_in_every_record(repeats):
    _, runs = repeats
    for r in runs:
        m = r["machine"]
        assert m["host"] and len(m["load_before"]) == len(m["load_after"]) == 3
        assert m["window_s"] >= machine.MIN_WINDOW_S and m["other_cpu_share"] >= 0 and m["own_cpu_share"] > 0
        if hardware.accelerators():
            assert len(m["gpus_before"]) == len(m["gpus_after"]) == len(hardware.accelerators())
        else:
            assert m["gpus_before"] == m["gpus_after"] == []  # no nvidia-smi: skipped cleanly


MEASURE_THE_WINDOW = """
import json, sys, time
import psutil
from repro.loop import sweep
from repro.worker import machine

def burner_s():
    t = psutil.Process(int(sys.argv[2])).cpu_times()
    return t.user + t.system

start = machine.before(int(sys.argv[1]))
b0 = burner_s()
time.sleep(1.0)  # inside the window: after() below reads at once
b1 = burner_s()
print(json.dumps({"machine": machine.after(start, 1), "burner_s": b1 - b0}))
"""


@pytest.mark.slow
def test_the_commands_own_processes_are_not_other_processes():
    """The window that ends after the loop counts the repro parent's process tree as the
    command's: a process the parent started (the next job's worker) is not "other". The burner's
    CPU time, read inside the window, is the least the window counts as the command's beyond the
    measuring process's own (on a loaded machine the burner gets less than a core)."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # a child of this test: its tree
    try:
        measured = subprocess.run([sys.executable, "-c", MEASURE_THE_WINDOW, str(os.getpid()), str(burner.pid)],
                                  capture_output=True, text=True, timeout=120)
    finally:
        burner.kill()
        burner.wait()
    assert measured.returncode == 0, measured.stderr[-2000:]
    out = json.loads(measured.stdout)
    m, burner_s = out["machine"], out["burner_s"]
    assert m["window_s"] >= machine.MIN_WINDOW_S
    assert burner_s > 0.1, out  # it ran
    counted_s = (m["command_cpu_share"] - m["own_cpu_share"]) * m["window_s"]
    assert counted_s >= burner_s - 0.05, out  # the burner, counted as the command's (10 ms ticks, rounding)


@pytest.mark.slow
def test_busy_run_named_and_quiet_pair_called_equal(box, repeats):
    _, runs = repeats
    jax = [r for r in runs if r["config"]["framework"]["name"] == "jax"]
    burned = next(r for r in runs if r["sweep"]["job"] == BURNED_JOB)
    assert burned["machine"]["other_cpu_share"] > 0.5  # the burner took a core
    out = _compare(box, jax[0]["id"], burned["id"])
    # one machine line for the comparison (each run's detail: report.md's audit)
    worst = max((jax[0], burned), key=lambda r: r["machine"]["other_cpu_share"])  # the burner's, unless others outdid it
    assert f"(worst: {worst['config']['framework']['name']}, {worst['machine']['other_cpu_share']:.1f} cores)" in out
    assert "⚠ busy" in out  # marked in the table
    pair = jax[:2]  # no burner: equal, and busy exactly when other processes (other tests) were busy then
    quiet = " ".join(_compare(box, *(r["id"] for r in pair)).split())  # lines wrap at 120 columns off a terminal
    assert "WARNING" not in quiet and "fairness audit: the runs are equal" in quiet
    wide = [r for r in pair if audit.spread(r) > audit.WIDE_SPREAD]  # sub-ms steps may still spread
    assert ("details in the report" in quiet) == (any(audit.busy(r) for r in pair) or bool(wide))
    assert ("machine: quiet" in quiet) == (not any(audit.busy(r) for r in pair) and not wide)


@pytest.mark.slow
def test_compare_by_sweep_and_experiment(box, repeats):
    _, runs = repeats
    by_experiment = _compare(box, "--experiment", "rep", "--wide")  # --wide: the ledger ids too
    by_sweep = _compare(box, "--sweep", runs[0]["sweep"]["id"][:18], "--wide")
    for out in (by_experiment, by_sweep):
        assert "3 repeats each, interleaved" in " ".join(out.split()) and runs[0]["id"] in out  # lines wrap


@pytest.mark.slow
def test_batch_sweep_labelled_by_batch_ranked_by_throughput(box):
    proc = box.run("-m", "framework=jax", "run.batch_size=16,64", *STEPS, "tracking.experiment=batch")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "mlp/tiny · fp32 · cpu · train step · × best by samples/s" in out and "mlp/tiny · batch" not in out
    assert re.search(r"^jax · batch 16 ", out, re.M) and re.search(r"^jax · batch 64 ", out, re.M)
    assert "varied on purpose: run.batch_size" in out and "WARNING" not in out
    runs = [r for r in box.heads() if r["sweep"]["experiment"] == "batch"]
    best = max(runs, key=lambda r: r["results"]["samples_per_s"])
    row = next(line for line in out.splitlines() if f"batch {best['config']['run']['batch_size']} " in line)
    assert " 1.00 " in row  # × best: the highest throughput, whatever its step time
    names = sorted(r.info.run_name for r in box.mlflow_runs("batch") if "mlflow.parentRunId" in r.data.tags)
    assert names == ["jax · batch 16", "jax · batch 64"]  # MLflow runs named as the table names them


@pytest.mark.slow
def test_repeat_records_replay_exact_and_experiment_keeps_groups(box, repeats):
    from repro.replay import originals_for

    _, runs = repeats
    whole = originals_for(Ledger(box.ledger), [], "rep")  # `repro replay --experiment rep`: every repeat, in order
    assert [r["id"] for r in whole] == [r["id"] for r in runs]
    picked = [runs[0], runs[3]]  # jax repeat 0, torch repeat 1
    proc = subprocess.run([sys.executable, "-m", "repro", "replay", *(r["id"] for r in picked), "--ledger",
                           str(box.ledger), "--progress", "plain"], capture_output=True, text=True, timeout=300,
                          cwd=box.root, env=box.env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    verdicts = Ledger(box.ledger).heads(kind="replay")
    assert sorted(v["of"] for v in verdicts) == sorted(r["id"] for r in picked)
    assert all(v["status"] == "exact" for v in verdicts)
    replays = [Ledger(box.ledger).get(v["replay"]) for v in verdicts]
    assert sorted(r["repeat"]["group"] for r in replays) == sorted(r["repeat"]["group"] for r in picked)
    assert {r["sweep"]["experiment"] for r in replays} == {"rep"}  # the replays are the newest runs of "rep"...
    after = originals_for(Ledger(box.ledger), [], "rep")  # ...but --experiment still means the sweep a person ran
    assert [r["id"] for r in after] == [r["id"] for r in runs]


@pytest.mark.slow
def test_shipped_avx512_and_avx2_records_name_the_isa(capsys):
    compare.run(Namespace(ids=["d97209714a789bed", "08447f06a1b4ca15"], sweep=None, experiment=None, ledger=str(shipped_ledger())))
    out = capsys.readouterr().out
    assert "CPU ISA (vector extensions)" in out and "WARNING: unequal comparison" in out
    assert "not recorded" in out and "(no avx512)" in out


def test_the_plan_holds_each_config_once_and_the_rounds_once():
    p = plan(["-m", "framework=jax,torch", "run.repeats=3", "run.steps=10"])
    assert [j.framework.name for j in p.jobs] == ["jax", "torch"] and p.repeats == 3 and p.runs == 6
    one = plan(["run.repeats=3"])  # one run, three repeats (no -m)
    assert len(one.jobs) == 1 and one.runs == 3
    with pytest.raises(ConfigError, match="run.repeats cannot be swept"):
        plan(["-m", "run.repeats=1,2"])
    with pytest.raises(ConfigError, match="run.repeats=0 must be > 0"):
        plan(["run.repeats=0"])


def test_shipped_records_keep_their_hash():
    runs = Ledger(shipped_ledger()).heads(kind="run")  # (a sweep's own record has no config)
    assert len(runs) >= 18
    for r in runs:
        assert config_hash(r["config"]) == r["config_hash"]


def _record(rid: str, framework: str, medians: float, **extra) -> dict:
    return {"id": rid, "status": "ok", "config": {"framework": {"name": framework}, "run": {"batch_size": 32},
                                                   "sharding": {"name": "dp", "mesh": {"data": 2, "model": 1}}},
            "results": {"steady_median_s": medians, "steady_p10_s": medians * 0.9, "steady_p90_s": medians * 1.1},
            "overrides": [f"framework={framework}"], **extra}


def test_statistics_are_seeded_and_honest():
    fast = [_record(f"a{i}", "torch", m) for i, m in enumerate([1.00, 1.02, 0.98, 1.01, 0.99])]
    slow = [_record(f"b{i}", "jax", m) for i, m in enumerate([1.80, 1.85, 1.78, 1.83, 1.82])]
    for r in fast + slow:
        r["config"].update(model={"name": "mlp", "preset": "tiny"}, precision={"name": "fp32"}, hardware={"name": "cpu"})
        r["config"]["run"]["task"] = "train"
        r["sweep"], r["repeat"] = {"id": "s", "job": 0}, {"index": 0, "count": 5, "group": "g"}
    s = comparison.row(fast, "torch", {})
    assert s.n == 5 and s.median_s == 1.0 and s.ci_s[0] <= 1.0 <= s.ci_s[1]
    assert stats.bootstrap_ci([1, 2, 3, 4]) == stats.bootstrap_ci([1, 2, 3, 4])  # seeded
    rows = [comparison.row(slow, "jax", {}), s]
    (v,) = comparison._verdicts("vit/tiny", rows, ["framework"])
    assert v.faster == "torch" and 1.7 < v.ci[0] <= v.speedup <= v.ci[1] < 1.9
    assert v.text.startswith("torch is 1.82× faster than jax on vit/tiny in deterministic mode (run.deterministic=true) "
                             "(95 % CI 1.")
    assert v.text.endswith(", 5 repeats each, interleaved, Yuen's trimmed t, 20 % trimmed, rounds incomplete; recomputed by this "
                            "version's verdict engine)")
    noisy = [_record(f"c{i}", "jax", m) for i, m in enumerate([0.9, 1.1, 1.05, 0.95, 1.2])]
    for r in noisy:
        r["config"].update(model={"name": "mlp", "preset": "tiny"})
    (v,) = comparison._verdicts("mlp/tiny", [comparison.row(noisy, "jax", {}), s], ["framework"])
    assert v.text.startswith("jax vs torch on mlp/tiny in deterministic mode (run.deterministic=true): cannot tell yet: "
                             "about ")
    (single,) = comparison._verdicts("mlp/tiny", [comparison.row(slow[:1], "jax", {}), comparison.row(fast[:1], "torch", {})],
                                     ["framework"])
    assert single.ci is None and "single sample, no verdict" in single.text and "faster" not in single.text
    assert comparison.row(fast[:1], "torch", {}).ci_s is None


def audit_name(record: dict) -> str:
    return record["id"]


def test_audit_compares_values_not_repr_and_lists_swept_keys():
    a = _record("a", "jax", 1.0)
    b = _record("b", "torch", 1.0)
    b["config"]["sharding"] = {"mesh": {"model": 1, "data": 2}, "name": "dp"}  # same value, other key order
    assert audit.audit([a, b], audit_name).differences == []
    c = _record("c", "torch", 1.0, overrides=["framework=torch", "run.batch_size=64"])
    c["config"]["run"] = {"batch_size": 64}
    found = audit.audit([a, c], audit_name)
    assert found.differences == [] and found.swept == ["framework", "run.batch_size"]
    assert [label for label, _, _ in found.varied] == ["batch size"]
    d = _record("d", "torch", 1.0, machine={"other_cpu_share": 0.3, "threads": 2, "load_before": [0.5] * 3,
                                             "load_after": [0.6] * 3, "host": "h"})
    assert "0.30 of a core" in audit.busy(d) and audit.busy(a) is None
    quiet = {"other_cpu_share": 0.0, "threads": 1, "load_before": [3.5] * 3, "load_after": [3.5] * 3, "host": "h"}
    alone = _record("e", "torch", 1.0, machine=quiet)  # one process, one thread: a load of 3.5 is others'
    ranks = _record("f", "torch", 1.0, machine={**quiet, "processes": 4})  # 4 ranks of 1 thread make that load themselves
    assert "load 3.50 before the loop with 1 thread(s)" in audit.busy(alone) and audit.busy(ranks) is None


@pytest.mark.slow
def test_auto_repeats_stop_when_decided_and_say_why(box):
    """run.repeats=auto: rounds A B, B A, ... until the pair is decided or verdict.max_repeats; the
    records say they are auto repeats, a `repeats` record says how many rounds and why it stopped,
    and the verdict sentence printed is the one the ledger's records give."""
    proc = box.run("-m", "framework=jax,torch", *STEPS, "run.repeats=auto", "verdict.max_repeats=4",
                   "tracking.experiment=auto", "verdict.max_reruns=0")  # reruns: tests/test_sweep_loop.py
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    runs = sorted((r for r in box.heads() if r["sweep"]["experiment"] == "auto"), key=lambda r: r["sweep"]["job"])
    rounds = len(runs) // 2
    assert 2 <= rounds <= 4 and len(runs) == 2 * rounds
    seed = runs[0]["repeat"]["order_seed"]  # each round in its own random order, drawn from the recorded seed
    assert [int(r["repeat"]["group"].rsplit("/", 1)[1]) for r in runs] == \
        [c for k in range(rounds) for c in sweep.order(2, seed, k)]
    assert all(r["repeat"]["auto"]["max"] == 4 and r["repeat"]["index"] == r["sweep"]["job"] // 2 for r in runs)
    (stop,) = [r for r in Ledger(box.ledger).heads(kind="repeats") if r["sweep"]["experiment"] == "auto"]
    assert stop["rounds"] == rounds and sorted(stop["repeats"].values()) == [rounds, rounds]
    flat = " ".join(proc.stdout.split())  # lines wrap at the width (report/table.py)
    assert f"run.repeats=auto: {rounds} rounds ({rounds} repeats per config, each round in a random order); " \
           f"stopped: {stop['reason']}" in flat
    (v,) = [v for t in comparison.build(runs).tables for v in t.verdicts]
    assert " ".join(v.text.split()) in flat and "auto: " in v.text
    assert (stop["reason"] == "every pair decided") == v.decided


def test_nodes_are_a_level_of_the_interval_when_rounds_ran_on_several():
    """Rounds on two nodes whose ratio differs by node (node 2 makes b 10 % slower still): the
    between-node component (one-way ANOVA, method of moments) widens the paired interval and takes
    nodes - 1 degrees of freedom for its part; rounds whose node does not move the ratio leave the
    interval as the rounds give it, and the sentence says which."""
    base = [1.00, 1.02, 0.99, 1.01, 1.00, 1.03, 0.98, 1.01]
    a = [1.0] * 8
    nodes = ["n1", "n2"] * 4
    rounds = tuple(range(8))
    b_split = [x * (1.5 if n == "n1" else 1.65) for x, n in zip(base, nodes)]
    sigma2, extra, k = verdict.between_nodes([__import__("math").log(y / x) for x, y in zip(a, b_split)], nodes)
    assert k == 2 and sigma2 > 0 and extra == pytest.approx(sigma2 * (4 ** 2 + 4 ** 2) / 8 ** 2)
    one = verdict.judge(verdict.Side("a", tuple(a), rounds=rounds), verdict.Side("b", tuple(b_split), rounds=rounds), trim=0)
    two = verdict.judge(verdict.Side("a", tuple(a), rounds=rounds, nodes=tuple(nodes)),
                        verdict.Side("b", tuple(b_split), rounds=rounds, nodes=tuple(nodes)), trim=0)
    assert one.node_sd is None and two.node_sd > 0.05  # the nodes' own gap, about 10 %
    assert two.d == one.d and two.se > one.se and two.df < one.df  # same estimate, a wider interval
    assert (two.interval[1] - two.interval[0]) > (one.interval[1] - one.interval[0])
    # where the node does not move the ratio, nothing is added
    b_same = [1.5 * x for x in base]
    flat = verdict.judge(verdict.Side("a", tuple(a), rounds=rounds, nodes=tuple(nodes)),
                         verdict.Side("b", tuple(b_same), rounds=rounds, nodes=tuple(nodes)), trim=0)
    plain = verdict.judge(verdict.Side("a", tuple(a), rounds=rounds), verdict.Side("b", tuple(b_same), rounds=rounds), trim=0)
    assert (flat.se, flat.df) == (plain.se, plain.df) if flat.node_sd == 0 else flat.se > plain.se
    one_node = verdict.judge(verdict.Side("a", tuple(a), rounds=rounds, nodes=("n1",) * 8),
                             verdict.Side("b", tuple(b_split), rounds=rounds, nodes=("n1",) * 8), trim=0)
    assert one_node.node_sd is None and (one_node.se, one_node.df) == (one.se, one.df)


def test_the_sentence_names_the_node_spread_counted():
    from test_determinism_condition import V, WOBBLE, _sweep

    records = _sweep({("jax", False, None): WOBBLE, ("torch", False, None): [1.5 * w for w in WOBBLE]}, ("framework",))
    for r in records:  # one sweep's rounds (its groups one family: paired), odd rounds on n2, where torch is slower
        n = 1 + r["repeat"]["index"] % 2
        r["repeat"]["group"] = f"s/{r['config']['framework']['name']}"
        r["scheduler"] = {"name": "slurm", "node": f"n{n}"}
        if n == 2 and r["config"]["framework"]["name"] == "torch":
            r["results"]["steady_median_s"] *= 1.2
    (v,) = comparison.build(records).tables[0].verdicts
    assert v.outcome in (V.FASTER, V.UNDECIDED) and v.paired == 5 and v.nodes == 2 and v.node_sd > 0
    assert f"rounds on 2 nodes, node-to-node spread {100 * v.node_sd:.3g} % counted" in v.text, v.text
