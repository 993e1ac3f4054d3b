"""The process canary (backends/canary.py, job/canary.py): a fixed kernel timed before the measured
window, judged against the host's earlier canaries in the ledger, flagging a slow process's round for
a rerun (loop/rerun.py); and the window's placement telemetry (worker/machine.py)."""

from __future__ import annotations

import pytest

from conftest import finished_run
from repro import cli
from repro.ledger import Ledger
from repro.job import canary
from repro.loop import rerun
from repro.worker import machine

HOST = {"host": "host-a", "cores": 2}
CPU = {"cpu": {"model": "Test CPU @ 2.6GHz"}}


def block(seconds: float | None, framework: str = "jax", threads: int = 2) -> dict:
    return {"seconds": seconds, "kernels": {"matmul_s": seconds, "sweep_s": 0.0}, "repeats": 5,
            "framework": framework, "threads": threads, "processes": 1, "version": 1}


def ok_run(seconds: float | None, host: str = "host-a", **kw) -> dict:
    return {"kind": "run", "status": "ok", "canary": block(seconds, **kw), "machine": {**HOST, "host": host},
            "environment": CPU}


def test_no_history_flags_nothing_and_says_it_is_building_one():
    for n in (0, 4):
        judged = canary.decide(block(9.0), [0.001] * n, 0.25)
        assert judged["slow"] is None and judged["threshold_s"] is None and judged["history"] == n
        assert judged["reason"] == f"canary history {n} of 5 on this host: no run flagged (building it)"
        assert rerun.flag({"canary": judged}) is None


RERUNS = {"config": {"verdict": {"canary_reruns": True}}}


def test_a_canary_slower_than_the_hosts_median_by_the_margin_is_slow_and_flags_its_run_where_asked():
    history = [0.0030, 0.0029, 0.0031, 0.0030, 0.0045]  # median 3 ms: one slow process does not move it
    slow = canary.decide(block(0.0040), history, 0.25)
    assert slow["slow"] is True and slow["median_s"] == 0.003 and slow["threshold_s"] == pytest.approx(0.00375)
    why = "its canary took 4.00 ms against this host's median 3.00 ms over 5 runs (margin 0.25)"
    assert slow["reason"] == why and rerun.flag({"canary": slow, **RERUNS}) == why
    # by default recorded, not rerun (verdict.canary_reruns=false: docs/explanation/recorded.md, a slow process)
    assert rerun.flag({"canary": slow}) is None
    assert rerun.flag({"canary": slow, "config": {"verdict": {"canary_reruns": False}}}) is None
    fine = canary.decide(block(0.0037), history, 0.25)
    assert fine["slow"] is False and rerun.flag({"canary": fine, "results": {"steady_median_s": 99.0}, **RERUNS}) is None
    both = rerun.flag({"canary": slow, "machine": {"other_cpu_share": 0.5}, **RERUNS})
    assert both.startswith("other processes took 0.50 of a core") and both.endswith(why)


def test_the_history_is_this_hosts_quiet_canaries_of_the_same_framework_and_threads(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    for n in range(4):  # records of one content are one record: each its own job number
        ledger.append({**ok_run(0.003), "job": n})
    for other in (ok_run(0.001, host="host-b"), ok_run(0.001, threads=1), ok_run(0.001, framework="torch"),
                  {**ok_run(0.001), "status": "failed"}, ok_run(None),
                  {**ok_run(0.009), "machine": {**HOST, "other_cpu_share": 0.5}}):  # a busy window: no history
        ledger.append(other)
    finished_run(ledger, tmp_path / "mlflow.db")  # recorded before canaries existed: none
    said = []

    def judged(record: dict) -> dict:  # the record as job.py writes it: its canary block replaced by the judged one
        block = canary.judge(record, ledger.root, 0.25, said.append)
        return record if block is None else {**record, "canary": block}

    first = judged(ok_run(0.009))  # 4 of its kind so far: building, not flagged however slow
    assert first["canary"]["slow"] is None and first["canary"]["history"] == 4
    assert said == ["jax, 2 threads: canary history 4 of 5 on this host: no run flagged (building it)"]
    second = judged(ok_run(0.0036))  # the first one judged is history now: 5, median 3 ms
    assert second["canary"]["history"] == 5 and second["canary"]["slow"] is False and len(said) == 1
    third = judged(ok_run(0.0038))
    assert third["canary"]["history"] == 6 and third["canary"]["slow"] is True
    assert canary.QUIET_SHARE == rerun.OTHER_CPU_SHARE
    assert "against this host's median 3.00 ms over 6 runs" in rerun.flag({**third, **RERUNS})
    busy = judged({**ok_run(0.009), "machine": {**HOST, "other_cpu_share": 0.11}})  # judged (the rerun rule names its busy window too), not kept
    assert busy["canary"]["slow"] is True and busy["canary"]["history"] == 7
    failed = {**ok_run(0.5), "status": "failed"}
    assert canary.judge(failed, ledger.root, 0.25, said.append) is None  # a failed run is neither judged nor history
    assert "slow" not in failed["canary"] and canary.history(ledger.root, canary.kind_of(third)) == \
        [0.003] * 4 + [0.009, 0.0036, 0.0038]

@pytest.mark.parametrize("margin", ["0", "-0.1", "nan", "inf"])
def test_a_canary_margin_of_no_positive_finite_share_is_refused_naming_the_key(tmp_path, capsys, margin):
    rc = cli.dry_run(["framework=jax", "model=mlp", "model.preset=tiny", f"verdict.canary_margin={margin}",
                      f"ledger.dir={tmp_path / 'ledger'}"])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[0] == "repro: invalid config, nothing was run:" and len(lines) == 2
    assert "verdict.canary_margin=" in lines[1], lines
    assert not (tmp_path / "ledger").exists()


def test_the_canary_runs_after_the_build_and_before_the_window_and_leaves_the_compile_counts(tmp_path):
    """The worker's events in order (the canary's own, then measure_start, then the steps), the record's
    block as the event said it, and JAX's persistent-cache counts as they were before the canary."""
    from repro import preflight
    from repro.backends import canary as kernels, compile_cache
    from repro.config.workerspec import Rendezvous, WorkerSpec
    from repro.worker import worker

    config = preflight.plan(["framework=jax", "model=mlp", "model.preset=tiny", "run.steps=6", "run.warmup=2"]).jobs[0]
    spec = WorkerSpec(config, "c" * 64, str(tmp_path), str(tmp_path / "cache"),
                      Rendezvous(1, 0, "127.0.0.1", 0, 1, 60.0, "local"))
    events = []
    out = worker.execute(spec, lambda kind, **payload: events.append((kind, payload)))
    kinds = [k for k, _ in events]
    assert kinds.index("environment") < kinds.index("canary") < kinds.index("measure_start") < kinds.index("step")
    assert kinds.count("canary") == 1 and kinds.index("measure_end") < kinds.index("window_end")
    said = dict(events)["canary"]
    recorded = out.result.canary
    assert recorded == {k: v for k, v in said.items() if k != "at"}
    assert recorded["seconds"] > 0 and recorded["repeats"] == kernels.REPEATS and recorded["framework"] == "jax"
    assert recorded["version"] == kernels.VERSION
    assert all(v > 0 for v in recorded["kernels"].values()) and recorded["threads"] >= 1 and recorded["processes"] == 1
    import jax

    before, min_s = compile_cache.counts("jax"), jax.config.jax_persistent_cache_min_compile_time_secs
    kernels.run("jax")
    assert compile_cache.counts("jax") == before and jax.config.jax_persistent_cache_min_compile_time_secs == min_s
    m = out.result.machine
    assert m["placement"]["source"] in ("sched", "stat") and m["placement"]["threads_ran"] >= 1
    assert set(m["placement"]["cpus"]) <= set(range(m["cores"])) and m["placement"]["migrations"] >= 0
    assert m["page_faults"]["minor"] >= 0 and m["page_faults"]["major"] >= 0


def test_verdict_canary_false_runs_no_canary_and_says_so():
    from repro import preflight
    from repro.worker import worker

    config = preflight.plan(["framework=torch", "model=mlp", "verdict.canary=false"]).jobs[0]
    assert worker.canary_of(config, 2, 1) == {"seconds": None, "framework": "torch", "threads": 2, "processes": 1,
                                               "slow": None, "reason": "verdict.canary=false: no canary ran"}
    judged = {"status": "ok", "canary": worker.canary_of(config, 2, 1), "machine": HOST}
    assert canary.kind_of(judged) is None and rerun.flag(judged) is None  # nothing to judge


def test_placement_counts_the_threads_that_ran_from_the_kernels_counters_or_their_cpus():
    Task = machine.Task
    start = {"1": Task(cpu=0, ticks=10, run_ms=100.0, migrations=3, involuntary=5),
             "2": Task(cpu=1, ticks=4, run_ms=40.0, migrations=1, involuntary=0)}  # idle in the window
    now = {"1": Task(cpu=1, ticks=30, run_ms=300.0, migrations=7, involuntary=9),
           "2": Task(cpu=1, ticks=4, run_ms=40.0, migrations=1, involuntary=0),
           "3": Task(cpu=0, ticks=1, run_ms=5.0, migrations=2, involuntary=1)}  # born in the window
    assert machine.placement(start, now) == {"cpus": [0, 1], "threads_ran": 2, "migrations": 6,
                                             "involuntary_switches": 5, "source": "sched"}
    bare = {tid: Task(cpu=t.cpu, ticks=t.ticks) for tid, t in now.items()}  # /proc/*/task/*/sched unreadable
    assert machine.placement({tid: Task(cpu=t.cpu, ticks=t.ticks) for tid, t in start.items()}, bare) == \
        {"cpus": [0, 1], "threads_ran": 2, "migrations": 1, "source": "stat"}


@pytest.fixture
def kept_in(tmp_path, monkeypatch):
    """JAX's canary executables kept in a cache root of the test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from repro.backends import canary as kernels

    return tmp_path / "repro" / kernels.EXECUTABLES


def test_jaxs_canary_kernels_compile_once_then_load_and_time_the_same_work(kept_in):
    from repro.backends import canary as kernels

    first = kernels.run("jax")
    assert first["executables"] == "compiled"
    files = sorted(p.name for p in kept_in.iterdir())
    assert [f.split("-")[0] for f in files] == ["matmul", "sweep"] and not any(f.endswith(".tmp") for f in files)
    again = kernels.run("jax")
    assert again["executables"] == "loaded" and sorted(p.name for p in kept_in.iterdir()) == files
    for block in (first, again):  # the same measurement either way: its fields, not its figures
        assert isinstance(block["seconds"], float) and block["repeats"] == kernels.REPEATS
        assert block["version"] == kernels.VERSION and block["framework"] == "jax"
        assert set(block["kernels"]) == {"matmul_s", "sweep_s"} and all(isinstance(v, float) for v in block["kernels"].values())
    assert "executables" not in kernels.run("torch")  # eager: nothing compiled, nothing kept


def test_a_kept_executable_that_cannot_be_loaded_is_compiled_again_and_replaced(kept_in):
    from repro.backends import canary as kernels

    kernels.run("jax")
    for path in kept_in.iterdir():
        path.write_bytes(b"not an executable")
    assert kernels.run("jax")["executables"] == "compiled"
    assert all(p.read_bytes() != b"not an executable" for p in kept_in.iterdir())
    assert kernels.run("jax")["executables"] == "loaded"


def test_other_xla_flags_or_several_processes_never_load_anothers_executable(kept_in, monkeypatch):
    import jax

    from repro.backends import canary as kernels

    kernels.run("jax")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")  # read at the key, not by this process's XLA
    assert kernels.run("jax")["executables"] == "compiled"  # kept under a key of its own
    assert len(list(kept_in.iterdir())) == 4
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    assert kernels.run("jax")["executables"] == "compiled" and len(list(kept_in.iterdir())) == 4


def test_an_executable_that_cannot_be_kept_costs_the_canary_nothing(kept_in, monkeypatch):
    from jax.experimental import serialize_executable

    from repro.backends import canary as kernels

    def refuse(_compiled):
        raise RuntimeError("this backend does not serialise")

    monkeypatch.setattr(serialize_executable, "serialize", refuse)
    for _ in range(2):  # nothing kept: each run compiles its own
        block = kernels.run("jax")
        assert block["executables"] == "compiled" and isinstance(block["seconds"], float)
    assert not kept_in.exists() or list(kept_in.iterdir()) == []
