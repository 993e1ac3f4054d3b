"""The job path's records keep their bytes: a job's `started` and `finished` records, built by job/job.py
from a fixed worker's events (ok, failed, killed in its steps, profiled, its canary decided against a
history), are written to a ledger and compared, byte for byte and by id, with the records the same
inputs made before (tests/data/job_records.json). The record hash and every shipped record depend
on those bytes: a refactor of how a record is built (typed blocks, serialised once) must not move one.

REPRO_WRITE_GOLDEN=1 rewrites the file (only where a change of the records is meant), made by the tree
before the change (PYTHONPATH=OLD/src), its test functions the same."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from repro.config import schema
from repro.config.workerspec import Rendezvous
from repro.job import canary, job, launch, scheduler, wall_split
from repro.ledger import Ledger, store
from repro.ledger.record import view
from repro.worker import envcapture, lifeline

GOLDEN = Path(__file__).parent / "data" / "job_records.json"
T0 = 1_700_000_000.0
RDZV = Rendezvous(1, 0, "127.0.0.1", 29555, 1, 120.0, "local")


class Display:
    def job_finished(self, job_no, record, in_ledger=True):
        pass


class Host:
    """What job.py asks of its host for the records (fixed: the sweep, the code, a projector beside it)."""

    git = {"commit": "0" * 40, "dirty": False, "diff_sha256": None}
    code = {"kind": "checkout", "path": "/src"}
    display = Display()

    def __init__(self, beside=None):
        self.beside, self.said, self.done = beside, [], []

    def sweep_info(self, job_no):
        return {"id": "s-fixed", "job": job_no, "jobs": 2, "experiment": "bytes", "multirun": True, "swept": ["framework"]}

    def say(self, line):
        self.said.append(line)

    def finished(self, record):
        self.done.append(record)


def _events(*, result=True, profile=False, error=None, steps_end=True) -> dict:
    """A worker's last event of each kind (worker/worker.py `execute`), at fixed clock times."""
    ev = {"hello": {"event": "hello", "pid": 4242, "at": T0 + 0.8},
          "environment": {"event": "environment", "at": T0 + 3.1,
                          "environment": {"fingerprint": "f" * 16, "python": {"version": "3.12.3"},
                                          "packages": {"numpy": "2.1.0"}, "cpu": {"model": "Fixed CPU", "cores": 2}},
                          "seeds": {"python": 1, "numpy": 2, "data": 3}, "data": {"name": "synthetic", "seed": 3}},
          "canary": {"event": "canary", "at": T0 + 3.2, "seconds": 0.0031, "framework": "jax", "threads": 2,
                     "processes": 1, "version": 2},
          "measure_start": {"event": "measure_start", "at": T0 + 3.3},
          "step": {"event": "step", "step": 6, "at": T0 + 4.9}}
    if steps_end:
        ev["measure_end"] = {"event": "measure_end", "at": T0 + 5.0}
    if result:
        setup = {"import_s": 1.25, "build_s": 0.5, "data_s": 0.125, "imported_ahead": False, "waited_ahead_s": None,
                 "results_s": 0.2}
        results = {"steady_median_s": 0.1, "steady_steps": 4, "first_step_s": 0.9, "second_step_s": 0.15,
                   "final_loss": 2.25, "loss_sha256": "a" * 64, "params_sha256": "b" * 64,
                   "init_params_sha256": "c" * 64, "peak_memory": {"bytes": 1024},
                   "compile": {"trace_lower_s": 0.25, "compile_s": 0.5,
                               "build": {"compiled": [{"for": "init", "s": 0.1}]}},
                   "compile_cache": {"mode": "cold", "state": "cold"}, "setup": setup, "param_count": 100}
        files = []
        if profile:
            setup["profile_s"] = 0.75
            results["profile"] = {"profiler": "jax", "step_ms": 99.0, "files": ["trace.json.gz"]}
        ev["result"] = {"event": "result", "at": T0 + 5.4, "results": results,
                        "series": {"loss": [2.5, 2.25], "step_time_s": [0.9, 0.15]},
                        "effective": {"platform": "cpu", "threads": 2}, "ir_files": [], "profile_files": files,
                        "machine": {"host": "fixed-host", "cores": 2, "other_cpu_share": 0.05},
                        "canary": {k: v for k, v in ev["canary"].items() if k not in ("event", "at")}}
    if error:
        ev["error"] = {"event": "error", "at": T0 + 4.0, "status": error, "type": "RuntimeError", "message": "boom",
                       "requested_bytes": 4096 if error == "oom" else None, "traceback": ["line 1", "line 2"]}
    return ev


CASES = {  # name -> (outcome status, events, extra record fields, run.env_hash, host.beside)
    "ok": ("ok", _events(), None, "e" * 16, None),
    "ok_profiled_beside": ("ok", _events(profile=True), {"repeat": {"index": 1, "count": 3, "group": "g"},
                                                        "calibration": {"trial": 0, "label": "a", "gap": 0.25}},
                           None, {"waited_s": 1.5}),
    "failed": ("failed", _events(result=False, error="failed"), {"replay_of": "r" * 16}, "e" * 16, None),
    "oom": ("oom", _events(result=False, error="oom"), None, None, None),
    "killed_in_steps": ("killed", _events(result=False, steps_end=False), {"steps_resolved": {"count": 7}}, None, None),
    "never_started": ("failed", {}, None, None, None),
}


def _fixed(monkeypatch):
    monkeypatch.setattr(store, "now_iso", lambda: "2026-01-02T03:04:05.000006+00:00")
    monkeypatch.setattr(job, "now_iso", lambda: "2026-01-02T03:04:06.000007+00:00")
    monkeypatch.setattr(lifeline, "identity", lambda: {"host": "fixed-host", "pid": 1, "create_time": T0})
    monkeypatch.setattr(job, "__version__", "0.0.fixed")
    for var in [v for v in os.environ if v.startswith("SLURM")]:
        monkeypatch.delenv(var)


def _records(tmp_path: Path, monkeypatch) -> dict[str, str]:
    """{case/started|finished: the record file's text} of every case, written to a fresh ledger each."""
    _fixed(monkeypatch)
    config = schema.Config()
    out = {}
    for name, (status, events, extra, env_hash, beside) in CASES.items():
        ledger = Ledger(tmp_path / name)
        host = Host(beside)
        run = job._Run(config, host, 1, name, ledger, "h" * 16, {}, RDZV, {})
        run.base = job._base(run, ["framework=jax"], extra)
        job._start(run).release()
        run.env_hash = env_hash
        run.outcome = launch.WorkerOutcome(status, 0 if status == "ok" else 1, dict(events),
                                           reason="" if status == "ok" else f"it ended {status}",
                                           log_tail=["last line"], wall_s=6.0, started_at=T0)
        final, written, ended = job._finish(run, None)
        assert written and ended is None
        for label, rid in (("started", run.started["id"]), ("finished", final["id"])):
            path = next(ledger.root.glob(f"*/{rid}.json"))
            out[f"{name}/{label}"] = path.read_text()
    return out


def _decided() -> dict[str, str]:
    """The canary's verdicts and the wall's split, as the blocks a record holds."""
    block = {"seconds": 0.004, "framework": "jax", "threads": 2, "processes": 1, "version": 2}
    history = [0.003, 0.0031, 0.0029, 0.003, 0.0032, 0.0030]
    out = {"canary/slow": canary.decide(block, history, 0.2), "canary/within": canary.decide(block, history, 0.5),
           "canary/building": canary.decide(block, history[:2], 0.2),
           "wall/profiled": wall_split.split(_events(profile=True), T0, 6.0),
           "wall/killed": wall_split.split(_events(result=False, steps_end=False), T0, 60.0),
           "wall/failed": wall_split.split(_events(result=False, error="failed"), T0, 6.0)}
    return {k: json.dumps(v, sort_keys=True) for k, v in out.items()}


def _slurm(monkeypatch) -> dict[str, str]:
    """The scheduler block of a SLURM array task, from its variables and a fixed `scontrol show job`."""
    env = {"SLURM_JOB_ID": "101", "SLURM_ARRAY_JOB_ID": "100", "SLURM_ARRAY_TASK_ID": "1", "SLURM_JOB_NODELIST": "n[1-2]",
           "SLURMD_NODENAME": "n1", "SLURM_JOB_PARTITION": "debug", "SLURM_CPUS_ON_NODE": "4", "SLURM_RESTART_COUNT": "1"}
    info = {"NumCPUs": "8", "MinMemoryNode": "16G", "TimeLimit": "00:10:00", "TRES": "cpu=8,mem=16G,gres/gpu=2",
            "StdOut": "/out/%j.out", "Account": "acct", "QOS": "(null)"}
    monkeypatch.setattr(scheduler, "job_info", lambda job_id, environ=None: info if job_id == "100_1" else {})
    out = {"scheduler/slurm": scheduler.block(env), "scheduler/bare": scheduler.block({"SLURM_JOB_ID": "7"}),
           "scheduler/local": scheduler.block({})}
    return {k: json.dumps(v, sort_keys=True) for k, v in out.items()}


def _fingerprints() -> dict[str, str]:
    """The environment fingerprint (it decides whether two runs' outputs must match) of fixed blocks."""
    env = {"python": {"version": "3.12.3", "implementation": "CPython", "executable": "/py"},
           "os": {"system": "Linux", "release": "6.1", "machine": "x86_64"},
           "cpu": {"model": "Fixed CPU", "cores": 2, "affinity": [0, 1], "isa": "avx2"},
           "gpus": [{"name": "H100", "driver": "550.1", "memory": 80}], "packages": {"numpy": "2.1.0", "repro": "9"},
           "variables": {"XLA_FLAGS": "--x", "JAX_CACHE_DIR": "/c", "PYTHONHASHSEED": "3"},
           "framework": {"devices": ["cpu:0"], "threads": 2}}
    bare = {**env, "cpu": {"model": "Fixed CPU", "affinity": [0]}, "gpus": [], "framework": {}}
    return {"fingerprint/full": envcapture.fingerprint(env), "fingerprint/bare": envcapture.fingerprint(bare)}


def test_the_job_paths_records_keep_their_bytes(tmp_path, monkeypatch):
    made = {**_records(tmp_path, monkeypatch), **_decided(), **_slurm(monkeypatch), **_fingerprints()}
    if os.environ.get("REPRO_WRITE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(made, indent=1, sort_keys=True) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert sorted(made) == sorted(golden)
    for key in golden:
        assert made[key] == golden[key], key


def test_the_finished_records_read_back_typed(tmp_path, monkeypatch):
    """The records the bytes test compares are real records: the typed read side reads each."""
    made = _records(tmp_path, monkeypatch)
    for key, text in made.items():
        rec = view(json.loads(text))
        assert rec.status and rec.sweep.id == "s-fixed" and rec.config.run is not None, key
    ok = view(json.loads(made["ok/finished"]))
    assert ok.results.loss == [2.5, 2.25] and ok.environment.env_hash == "e" * 16
    assert ok.canary.slow is None and ok.wall_split.parts["first_step"] == pytest.approx(0.9)
