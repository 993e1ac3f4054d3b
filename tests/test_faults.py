"""Faults on the run path, each with real processes, signals, stores and disks:
a tracking server that is down for a whole sweep (then `repro sync`), a disk that fills while
the worker runs, the parent killed (SIGKILL) or stopped (SIGTERM) mid-job, inputs refused
before anything is written, and runs started at once on a fresh sqlite store.

One `mlflow server` (sqlite backend) serves the module; every run is model=mlp, a few steps.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import Sandbox, free_port, mlflow_server as start_mlflow_server, tmpfs, worker_of
from repro.ledger import Ledger

pytestmark = pytest.mark.slow  # every test here starts a process

TINY = ("model=mlp", "framework=torch", "run.warmup=2")
ENDLESS = (*TINY, "run.steps=1000000")


def _start(box: Sandbox, *args: str) -> subprocess.Popen:
    return subprocess.Popen(box.repro_cmd(*args), cwd=box.root, env=box.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


# -- MLflow down for a whole sweep, then `repro sync` ---------------------------------------------

@pytest.fixture(scope="module")
def down_sweep(tmp_path_factory):
    """A 2-job sweep whose tracking server is not there (nothing listens on its port yet)."""
    box = Sandbox(tmp_path_factory.mktemp("down"))
    port = free_port()
    start = time.time()
    proc = box.run("-m", *TINY, "run.steps=6", "run.seed=0,1", f"tracking.uri=http://127.0.0.1:{port}",
                   "tracking.experiment=outage")
    return box, port, proc, time.time() - start


@pytest.fixture(scope="module")
def mlflow_server(down_sweep, tmp_path_factory):
    """The sweep's server, started after the sweep (sqlite behind it: one writer, the server)."""
    root = tmp_path_factory.mktemp("server")
    with start_mlflow_server(f"sqlite:///{root}/mlflow.db", root / "artifacts", port=down_sweep[1]) as url:
        yield url


def test_sweep_with_tracking_down_is_recorded_warned_once_and_fast(down_sweep):
    box, port, proc, seconds = down_sweep
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    heads = box.heads()
    assert [h["status"] for h in heads] == ["ok", "ok"]
    assert all(len(h["results"]["step_time_s"]) == 6 for h in heads)
    assert proc.stderr.count(f"repro: warning: MLflow at http://127.0.0.1:{port}") == 1, proc.stderr
    assert "2 runs not yet in MLflow: repro sync" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert seconds < 150, f"a sweep against a dead server took {seconds:.0f} s"  # it took 250 s per job


def test_sync_fills_the_server_then_adds_nothing_and_closes_lost_runs(down_sweep, mlflow_server, capsys):
    from mlflow.tracking import MlflowClient

    from repro.worker import lifeline
    from repro.tracking.mlflow_tracker import Tracker
    from repro.tracking.sync import sync

    box, _, _, _ = down_sweep
    heads = box.heads()
    # A run whose parent died before it ended (its `started` record never got a successor),
    # left RUNNING in MLflow.
    gone = subprocess.Popen(["true"])
    gone.wait()
    lost = Ledger(box.ledger).append({**{k: heads[0][k] for k in ("kind", "config", "config_hash", "git")},
                                      "sweep": {"id": "another", "job": 0, "multirun": False},
                                      "status": "started", "parent": {**lifeline.identity(), "pid": gone.pid}})
    tracker = Tracker(mlflow_server, "outage")
    stale = tracker.start_run("lost run", tags={"repro.ledger_id": lost["id"]})

    first = sync(str(box.ledger))
    assert (first["pushed"], first["closed"]) == (2, 2)  # the lost run, and the sweep's parent once filled
    client = MlflowClient(tracking_uri=mlflow_server)
    runs = client.search_runs([tracker.experiment_id])
    children = {r.data.tags["repro.ledger_id"]: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags and "repro.ledger_id" not in r.data.tags]
    assert set(children) == {h["id"] for h in heads} and len(parents) == 1
    assert {c.data.tags["mlflow.parentRunId"] for c in children.values()} == {parents[0].info.run_id}
    assert parents[0].info.status == "FINISHED" and parents[0].data.metrics["jobs_ok"] == 2
    for h in heads:
        child = children[h["id"]]
        assert child.info.status == "FINISHED" and child.data.tags["repro.projected"] == "complete"
        assert [m.value for m in client.get_metric_history(child.info.run_id, "loss")] == h["results"]["loss"][1:]  # after the compile step
        assert len(client.get_metric_history(child.info.run_id, "step_time_ms")) == 5  # after the compile step
        assert {"config.yaml", "ledger_record.json", "environment.json"} <= {
            a.path for a in client.list_artifacts(child.info.run_id)}
    assert client.get_run(stale).info.status == "FAILED"

    second = sync(str(box.ledger))
    assert (second["pushed"], second["closed"], second["present"]) == (0, 0, 2)
    assert len(client.search_runs([tracker.experiment_id])) == len(runs)
    assert "0 run(s) put into MLflow" in capsys.readouterr().out


def test_resume_skips_what_is_recorded_ok_and_tables_it(down_sweep, mlflow_server):
    box, port, _, _ = down_sweep

    def runs():
        return [r for r in box.records() if r["kind"] == "run"]

    before = len(runs())
    proc = box.run("-m", *TINY, "run.steps=6", "run.seed=0,1,2", f"tracking.uri=http://127.0.0.1:{port}",
                   "tracking.experiment=outage", "run.resume=true")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count("skipped, already recorded ok on this environment") == 2
    assert len(runs()) == before + 2  # only the third seed ran: started + finished
    sweep = max((r for r in box.records() if r["kind"] == "sweep"), key=lambda r: r["created"])
    assert len(sweep["reused"]) == 2  # the sweep's record names the runs it took as its own
    for h in box.heads()[:2]:
        assert h["id"] in proc.stdout  # the skipped jobs' records are in the closing table


def test_ctrl_c_while_projecting_closes_the_run_and_sync_replaces_it(down_sweep, tmp_path):
    """The second Ctrl-C window: the record is in the ledger, MLflow is being written. The
    projection runs in a process of its own, pressed until a Ctrl-C lands, as a user's would be:
    an interrupted sqlite write can hold the store's lock until its process ends."""
    box_head = down_sweep[0].heads()[0]
    record = _dump(tmp_path, {**box_head, "results": {**box_head["results"], "loss": [0.5] * 20_000}})  # seconds of log_batch
    store = f"sqlite:///{tmp_path}/mlflow.db"
    projecting = subprocess.Popen([sys.executable, "-c", f"""
import json, signal, sys, time
from repro.tracking.mlflow_tracker import Tracker
from repro.tracking.project import project_run
record = json.load(open(sys.argv[1]))
tracker = Tracker("{store}", "ctrl-c")
start_run, caught = tracker.start_run, []
def start_run_then_say_so(*args, **kwargs):
    run_id = start_run(*args, **kwargs)
    print("created", flush=True)
    return run_id
def on_sigint(signum, frame):  # Python's own, minus the presses that come after the first lands
    if not caught:
        raise KeyboardInterrupt
tracker.start_run = start_run_then_say_so
signal.signal(signal.SIGINT, on_sigint)
try:
    project_run(tracker, record, "ctrl-c")
except KeyboardInterrupt:
    caught.append(time.time())
    print("caught", flush=True)
    sys.exit(0)
sys.exit("the projection ended before Ctrl-C came")
""", str(record)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert projecting.stdout.readline().strip() == "created", projecting.communicate(timeout=120)[1][-3000:]
    while True:  # again until one lands (one that hits a GC callback is swallowed), none once it says so
        projecting.send_signal(signal.SIGINT)  # (one in its shutdown would meet Python's default handler)
        if select.select([projecting.stdout], [], [], 0.3)[0]:
            break
    out, err = projecting.communicate()
    assert projecting.returncode == 0 and out.strip() == "caught", err[-3000:]
    # In a fresh process, as a user's next command would be: the run was cut short, and sync replaces it.
    check = subprocess.run([sys.executable, "-c", f"""
from repro.tracking.mlflow_tracker import Tracker
from repro.tracking.drain import sync_store
import json, sys
record = json.load(open(sys.argv[1]))
tracker = Tracker("{store}", "ctrl-c")
[cut] = tracker.find_runs("repro.ledger_id")
assert cut.info.status in ("KILLED", "RUNNING") and "repro.projected" not in cut.data.tags, cut.info.status
counts = sync_store(tracker, [record], {{record["id"]: record}})
assert (counts["pushed"], counts["replaced"]) == (1, 1), counts
[run] = tracker.find_runs("repro.ledger_id")
assert run.info.status == "FINISHED" and run.data.tags["repro.projected"] == "complete"
""", str(record)], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr[-3000:]

def _dump(folder: Path, record: dict) -> Path:
    path = folder / "record.json"
    path.write_text(json.dumps(record))
    return path


# -- a disk that fills while the worker works -----------------------------------------------------

def test_disk_full_at_the_end_keeps_the_results_in_the_spool(sandbox):
    with tmpfs(sandbox.ledger, "size=24m"):
        parent = _start(sandbox, *TINY, "run.steps=8", "tracking.experiment=diskfull")
        deadline = time.time() + 120  # `started` and the spool's reservation are written: now fill the disk
        while not list((sandbox.ledger / ".spool").glob("*.reserved")) and time.time() < deadline:
            time.sleep(0.02)
        with open(sandbox.ledger / "filler", "wb") as f, pytest.raises(OSError):
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        out, _ = parent.communicate(timeout=300)
        assert parent.returncode == 1, out
        assert [h["status"] for h in sandbox.heads()] == ["started"], out
        spooled = list((sandbox.ledger / ".spool").glob("*.json"))
        assert len(spooled) == 1 and str(spooled[0]) in out and "repro ledger recover" in out, out
        (ok_line,) = [line for line in out.splitlines() if "] ok: " in line]  # the run's own line, not a projector's
        assert "(spooled, not yet in the ledger; run `repro ledger recover`)" in ok_line and "(ledger " not in ok_line, out
        assert "Traceback" not in out
        (sandbox.ledger / "filler").unlink()
        recovered = [record for _, record in Ledger(sandbox.ledger).recover().recovered]  # repro ledger recover
        [head] = sandbox.heads()
        assert head["id"] == recovered[0]["id"] and head["status"] == "ok"
        assert len(head["results"]["loss"]) == len(head["results"]["step_time_s"]) == 8
        assert head["prev"] == spooled[0].stem


# -- the parent killed or stopped mid-job ---------------------------------------------------------

def test_parent_sigkill_takes_its_worker_and_temp_folder_along(sandbox):
    parent = _start(sandbox, *ENDLESS)
    try:
        worker = worker_of(parent)  # a single run's worker starts ahead of its session (cli.py: warm.ahead_of_session),
        run_dir = Path(worker.cmdline()[-1]).parent  # so before its `started` record: killed mid-job is after both
        deadline = time.time() + 120
        while not sandbox.heads() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1)
    finally:
        parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=30)
    gone, alive = psutil.wait_procs([worker], timeout=5)
    assert not alive, "the worker outlived its parent"
    deadline = time.time() + 5
    while run_dir.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert not run_dir.exists(), f"{run_dir} left behind"
    [started] = sandbox.heads()
    assert started["status"] == "started" and started["parent"]["pid"] == parent.pid


def test_sigterm_right_after_started_ends_interrupted_and_closed(sandbox):
    parent = _start(sandbox, "-m", *ENDLESS, "run.seed=0,1", "tracking.experiment=sigterm")
    deadline = time.time() + 120
    while not list(sandbox.ledger.glob("*/*.json")) and time.time() < deadline:
        time.sleep(0.01)
    parent.send_signal(signal.SIGTERM)  # just after `started` (or as the worker starts: either ends recorded)
    out, _ = parent.communicate(timeout=300)
    assert parent.returncode == 130, out
    [head] = sandbox.heads()
    assert head["status"] == "interrupted" and head["prev"], out
    runs = sandbox.mlflow_runs("sigterm")
    assert len(runs) == 2 and {r.info.status for r in runs} == {"KILLED"}, [(r.info.status, r.data.tags) for r in runs]
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(sandbox.root) in " ".join(p.info["cmdline"] or [])]


INTERRUPT_INSIDE_AN_IMPORT = """
import json, os, signal, sys, time
from pathlib import Path
from repro.preflight import plan
from repro.config.workerspec import WorkerSpec
from repro.job import cluster, launch
from repro.worker import lifeline, seeding

signal.signal(signal.SIGTERM, lifeline.interrupt)  # as the CLI does
out = Path(sys.argv[1])
config = plan(["model=mlp", "framework=torch", "run.steps=1000000"]).jobs[0]
spec = out / "spec.json"
WorkerSpec(config, "test", str(out), str(out / "cache"), cluster.resolve(config.cluster)).write(spec)


class Slow:  # SIGTERM while Python runs a class body's __set_name__, as an import does
    def __set_name__(self, owner, name):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)


def beside_start():
    type("Owner", (), {"slow": Slow()})


outcome = launch.run_worker(spec, out / "worker.log", None, seeding.worker_env(config), 300, lambda ev: None,
                            beside_start=beside_start)
print(json.dumps({"status": outcome.status, "reason": outcome.reason, "worker_ended": outcome.returncode is not None}))
"""


def test_sigterm_inside_an_import_beside_the_worker_start_interrupts(tmp_path):
    """Python 3.11 wraps an interrupt raised in a class body's __set_name__ (an import under way
    in the parent while the worker starts) in RuntimeError: the run still ends interrupted, its
    worker killed, not failed with the sweep going on (CI's 300 s hang)."""
    proc = subprocess.run([sys.executable, "-c", INTERRUPT_INSIDE_AN_IMPORT, str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    outcome = json.loads(proc.stdout.splitlines()[-1])
    assert outcome == {"status": "interrupted", "reason": "interrupted (Ctrl-C)", "worker_ended": True}, outcome


# -- refused before anything runs -----------------------------------------------------------------

@pytest.mark.parametrize("override, message", [
    ("tracking.uri=garbage://x", "no store for the scheme 'garbage'"),
])
def test_refused_by_the_cli_with_nothing_written(tmp_path, override, message):
    sandbox = Sandbox(tmp_path, store_template=False)  # nothing in its folder: no store copied in either
    proc = sandbox.run(*TINY, override)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert list(sandbox.root.iterdir()) == []


def test_refused_places_and_names(tmp_path):
    from repro.config import ConfigError
    from repro import preflight

    a_file = tmp_path / "a-file"
    a_file.write_text("")
    read_only = tmp_path / "ro"
    with tmpfs(read_only, "size=1m,ro"):
        cases = [(f"ledger.dir={a_file}", "is a file"), ("ledger.dir=/proc/self/ledger", "lies under /proc"),
                 (f"ledger.dir={read_only}/ledger", "is not writable"),
                 ("tracking.experiment=" + "x" * 10_000, "bytes long"), ("tracking.experiment=" + "x" * 300, "bytes long"),
                 ("tracking.experiment=../../escaped", "not a plain name"), ("tracking.experiment=a/b", "not a plain name")]
        for override, message in cases:
            with pytest.raises(ConfigError, match=message):
                preflight.plan([*TINY, override])
    assert list(tmp_path.iterdir()) == [a_file, read_only] or set(tmp_path.iterdir()) == {a_file, read_only}


# -- runs started at once on a fresh sqlite store -------------------------------------------------

def test_four_runs_at_once_on_a_fresh_store_all_land(tmp_path):
    sandbox = Sandbox(tmp_path, store_template=False)  # no store yet: the four create it at once
    procs = [_start(sandbox, *TINY, "run.steps=3", f"run.seed={i}", "tracking.experiment=rush") for i in range(4)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, "\n".join(o[-1500:] for o in outs)
    heads = sandbox.heads()
    assert len(heads) == 4 and {h["status"] for h in heads} == {"ok"}
    runs = sandbox.mlflow_runs("rush")
    assert {r.data.tags["repro.ledger_id"] for r in runs} == {h["id"] for h in heads}
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert not any("warning: MLflow" in o for o in outs)


def test_sweep_on_a_ledger_with_damaged_and_foreign_files(sandbox):
    """A truncated record and stray JSON that is no record (`{}`, `[1,2]`, text) in the ledger:
    the sweep runs, names each file once as skipped, prints its table, exits by its jobs' fate
    (a job that fails: 1) and closes its MLflow parent."""
    day = sandbox.ledger / "2026-01-01"
    day.mkdir(parents=True)
    for name, text in {"empty.json": "{}", "list.json": "[1,2]", "text.json": "not json", "cut.json": '{"id": "ab'}.items():
        (day / name).write_text(text)
    proc = sandbox.run("-m", "model=mlp", "framework=jax,torch", "run.steps=4", "run.warmup=2",
                       "run.timeout_s=0.01,3600", "tracking.experiment=damaged")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # the timed-out jobs failed
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    assert "mlp/tiny" in proc.stdout and "\njax " in proc.stdout  # the closing table (a row starts with its run name)
    for name in ("empty.json", "list.json", "text.json", "cut.json"):
        assert name in out
    assert sorted(h["status"] for h in sandbox.heads()) == ["failed", "failed", "ok", "ok"]
    parents = [r for r in sandbox.mlflow_runs("damaged") if "mlflow.parentRunId" not in r.data.tags]
    assert [p.info.status for p in parents] == ["FAILED"]
