"""Time to first result, the MLflow hand-over: the parent's MLflow work never runs beside a worker's measured
steps, MLflow holds every run once the command has returned, and a parent killed while projecting
loses nothing that `repro sync` cannot put back."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Sandbox
from repro.preflight import plan
from repro.config.workerspec import WorkerSpec
from repro.job import cluster, launch
from repro.worker import seeding


def as_jobs(configs) -> list:
    """The jobs the loop hands the warm start (job/warm.py `upcoming`): these configs, each in this environment."""
    from repro.loop.sweep import Job

    return [Job(config, (), f"job {i}") for i, config in enumerate(configs)]


pytestmark = pytest.mark.slow  # every test here starts a process

TINY = ("framework=jax", "model=mlp", "model.preset=tiny", "run.steps=6", "run.warmup=2")

READ_MLFLOW = """
import json, sys, time
from mlflow.tracking import MlflowClient
uri, experiment, wanted, deadline = sys.argv[1], sys.argv[2], set(json.loads(sys.argv[3])), time.time() + 90
done = {}
while True:  # a bounded wait: a store that is behind gets 90 s (the projector: ~5 s on a quiet 2-core machine), then the test fails naming what is missing
    try:  # the projector may be creating a fresh store (its tables) right now: read again
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(experiment)
        runs = client.search_runs([exp.experiment_id], max_results=1000) if exp else []
        done = {r.data.tags.get("repro.ledger_id"): r.data.tags.get("repro.projected") for r in runs}
    except Exception as e:
        print("store not ready:", type(e).__name__, file=sys.stderr)
    if all(done.get(i) == "complete" for i in wanted) or time.time() > deadline:
        break
    time.sleep(0.5)
print(json.dumps({"complete": sorted(i for i in wanted if done.get(i) == "complete"),
                  "ledger_ids": sorted(filter(None, done))}))
"""


def mlflow_from_a_fresh_process(box: Sandbox, experiment: str, ledger_ids: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", READ_MLFLOW, box.uri, experiment, json.dumps(ledger_ids)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_measured_steps_wait_for_the_parents_work(tmp_path):
    """The worker's measured steps begin only once the parent's work beside its start has ended."""
    config = plan([*TINY]).jobs[0]
    rdzv = cluster.resolve(config.cluster)
    spec = _worker_spec(tmp_path, config, rdzv)
    done = []

    def beside_start() -> None:  # longer than the worker's start: its steps must wait for it
        time.sleep(8)
        done.append(time.time())

    outcome = launch.run_worker(spec, tmp_path / "worker.log", None, seeding.worker_env(config), 300,
                                lambda ev: None, beside_start=beside_start)
    assert outcome.status == "ok", outcome.reason + "\n".join(outcome.log_tail)
    start, end = outcome.events["measure_start"]["at"], outcome.events["measure_end"]["at"]
    assert done and done[0] <= start < end, (done, start, end)


def test_mlflow_holds_the_run_when_the_command_returns(sandbox):
    """The command never imports MLflow (-X importtime lists every module it imported); a fresh
    process finds the run complete in MLflow within a bounded wait, without `repro sync`."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *sandbox.repro_cmd(*TINY, "tracking.experiment=ttfr")[1:]],
                          cwd=sandbox.root, env=sandbox.env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    imported = [line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    assert len(imported) > 100 and not [m for m in imported if m.split(".")[0] in ("mlflow", "sqlalchemy")]
    assert "being written in the background" in proc.stdout
    (record,) = sandbox.heads()
    assert record["status"] == "ok"
    seen = mlflow_from_a_fresh_process(sandbox, "ttfr", [record["id"]])
    log = sandbox.ledger / ".mlflow-pending" / "projector.log"
    assert seen["complete"] == [record["id"]], (seen, log.read_text() if log.exists() else "no projector log")


def test_projector_killed_loses_nothing(sandbox):
    """SIGKILL to what took the hand-over (the machine's MLflow writer) before it has written anything
    (the test holds the ledger's projection lock meanwhile): its entry stays in the ledger, and
    `repro sync` puts the run into MLflow complete, worker log included, once."""
    from conftest import at_work_on
    from repro.tracking import handoff

    with handoff.lock(sandbox.ledger):
        proc = sandbox.run(*TINY, "tracking.experiment=killed_projector")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        taken = at_work_on(sandbox.ledger)
        assert "repro.tracking.writer" in " ".join(taken.cmdline())  # the default: the machine's writer
        taken.kill()
        taken.wait(timeout=30)
    (record,) = sandbox.heads()
    assert [data.id for _, data in handoff.entries(sandbox.ledger)] == [record["id"]]
    assert not handoff.busy(sandbox.ledger)  # the kernel dropped the dead projector's lock
    sync = subprocess.run([sys.executable, "-m", "repro", "sync", "--ledger", str(sandbox.ledger)], cwd=sandbox.root,
                          env=sandbox.env(), capture_output=True, text=True, timeout=300)
    assert sync.returncode == 0, sync.stdout[-2000:] + sync.stderr[-2000:]
    assert "1 run(s) and 0 sweep(s) handed over by earlier commands put into MLflow" in sync.stdout
    assert handoff.entries(sandbox.ledger) == []
    seen = mlflow_from_a_fresh_process(sandbox, "killed_projector", [record["id"]])
    assert seen["complete"] == [record["id"]] and seen["ledger_ids"] == [record["id"]], seen
    run = next(r for r in sandbox.mlflow_runs("killed_projector") if r.data.tags.get("repro.ledger_id") == record["id"])
    from mlflow.tracking import MlflowClient

    assert "worker.log" in {a.path for a in MlflowClient(sandbox.uri).list_artifacts(run.info.run_id)}


def test_parent_killed_while_projecting_loses_nothing(sandbox):
    """SIGKILL to the parent once the ledger holds the finished record (its projection into MLflow
    under way or not yet begun): `repro sync` from a fresh process puts the run in, complete, once."""
    parent = subprocess.Popen(sandbox.repro_cmd(*TINY, "tracking.experiment=killproj"), cwd=sandbox.root,
                              env=sandbox.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and not any(r["status"] == "ok" for r in sandbox.heads()):
        time.sleep(0.02)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=30)
    (record,) = sandbox.heads()
    assert record["status"] == "ok"
    sync = subprocess.run([sys.executable, "-m", "repro", "sync", "--ledger", str(sandbox.ledger)], cwd=sandbox.root,
                          env=sandbox.env(), capture_output=True, text=True, timeout=300)
    assert sync.returncode == 0, sync.stdout[-2000:] + sync.stderr[-2000:]
    seen = mlflow_from_a_fresh_process(sandbox, "killproj", [record["id"]])
    assert seen["complete"] == [record["id"]] and seen["ledger_ids"] == [record["id"]], seen


def _worker_spec(run_dir: Path, config, rdzv) -> Path:
    """The spec file a repro parent hands its worker (its one writer, WorkerSpec), for `config`."""
    return WorkerSpec(config, "test", str(run_dir), str(run_dir / "cache"), rdzv).write(run_dir / "spec.json")


def test_a_worker_started_ahead_runs_its_job_and_one_not_needed_ends(tmp_path):
    """launch.warm_start: the next job's interpreter, started with that job's env while the last
    job ends, waits for its spec; handed one, it runs the job as a fresh worker would. One that
    is not needed (an interrupted sweep) ends, its folder removed."""
    config = plan([*TINY]).jobs[0]
    rdzv = cluster.resolve(config.cluster)
    env = seeding.worker_env(config)
    run_dir = tmp_path / "ahead"
    run_dir.mkdir()
    warm = launch.warm_start(run_dir, None, env, backend="jax")
    spec = _worker_spec(run_dir, config, rdzv)
    assert warm.proc.poll() is None and warm.key == launch.warm_key(None, env, None, "jax")
    assert warm.key != launch.warm_key(None, env, None, "torch")  # another backend's job starts its own
    assert warm.wait_ready(120) and warm.proc.poll() is None  # imported, waiting for its spec
    time.sleep(0.3)
    outcome = launch.run_worker(spec, run_dir / "worker.log", None, env, 300, lambda ev: None, warm=warm)
    assert outcome.status == "ok", outcome.reason + "\n".join(outcome.log_tail)
    assert len(outcome.events["result"]["series"]["loss"]) == config.run.steps
    setup = outcome.events["result"]["results"]["setup"]
    assert setup["imported_ahead"] is True and setup["import_s"] > 0.05, setup  # the import, timed while it waited
    assert setup["waited_ahead_s"] > 0, setup  # ready, it waited for its spec (how long is the clock's, not asserted)
    spare = tmp_path / "spare"
    spare.mkdir()
    unused = launch.warm_start(spare, None, env)
    unused.discard()
    assert unused.proc.returncode is not None and not spare.exists()
    orphan_dir = tmp_path / "orphan"  # its parent gone (EOF on its stdin) before its job: it ends, its folder removed
    orphan_dir.mkdir()
    orphan = launch.warm_start(orphan_dir, None, env)
    assert orphan.wait_ready(120)
    orphan.proc.stdin.close()
    assert orphan.proc.wait(timeout=60) == 0 and not orphan_dir.exists()


@pytest.mark.slow  # starts a worker
def test_a_single_runs_worker_starts_before_its_session_and_a_sweeps_from_its_loop():
    """cli: once a single run's plan is checked, its worker starts (job/warm.py `ahead_of_session`),
    before the session is made; that worker is the one the job takes. A sweep's, or a run handed to
    another launcher, starts from the loop, where the order of its jobs is known."""
    from repro.job.warm import WarmStart

    single = plan([*TINY])
    warm = WarmStart()
    warm.ahead_of_session(single)
    try:
        started = warm._warm
        assert started is not None and started.proc.poll() is None and warm.upcoming == []
        config = single.jobs[0]
        env = seeding.worker_env(config)
        assert warm.take(config.framework.python, env, None, config.framework.backend) is started
    finally:
        started.discard()
    assert started.proc.returncode is not None
    for others in (["-m", *TINY, "run.seed=0,1"], [*TINY, "run.repeats=2"], [*TINY, "hydra/launcher=joblib"]):
        later = WarmStart()
        later.ahead_of_session(plan(others))
        assert later._warm is None, others


@pytest.mark.slow  # starts workers
def test_a_first_jobs_worker_starts_before_its_plan_only_as_that_plan_asks(tmp_path, monkeypatch):
    """job/warm.py `before_plan`: a command line whose first job was planned before in this folder
    starts that job's worker before it is planned, from its hint. The plan still decides: the worker
    is kept where the plan asks for that very worker, in the environment the hint was made in, and
    ended otherwise (one for the plan then starts); a changed environment starts nothing early. A
    sweep in this process keeps it until its loop starts the first job; another launcher ends it."""
    from repro import kept
    from repro.job import warm as warm_module
    from repro.job.warm import WarmStart

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    argv = [*TINY, f"ledger.dir={tmp_path / 'ledger'}"]
    single = plan(argv)

    def early(warm: WarmStart):
        return warm._early[0]

    def hint(args):
        return kept.load(warm_module.HINTS, warm_module.hint_stamp(args))

    first = WarmStart()
    first.before_plan(argv)
    assert early(first) is None and hint(argv) is None  # never planned here
    first.ahead_of_session(single)
    started = first._warm
    first.discard()
    assert started.proc.returncode is not None and hint(argv)["spawn"]["backend"] == "jax"
    assert hint([*TINY, f"ledger.dir={tmp_path / 'elsewhere'}"]) == hint(argv)  # another ledger: the same worker

    second = WarmStart()
    second.before_plan(argv)
    ahead = early(second)
    assert ahead is not None and ahead.proc.poll() is None
    second.ahead_of_session(single)
    assert second._warm is ahead  # the plan's own worker: kept
    config = single.jobs[0]
    assert second.take(config.framework.python, seeding.worker_env(config), None, config.framework.backend) is ahead
    ahead.discard()

    third = WarmStart()  # the same command line, a plan that asks for another worker (another hash seed)
    third.before_plan(argv)
    ahead = early(third)
    other = plan([*argv, "run.seed=7"])
    third.ahead_of_session(other)
    assert ahead.proc.returncode is not None  # ended
    assert third._warm is not None and third._warm is not ahead
    assert dict(third._warm.key[1])["PYTHONHASHSEED"] == seeding.worker_env(other.jobs[0])["PYTHONHASHSEED"]
    third.discard()

    monkeypatch.setenv("REPRO_TEST_CHANGED", "1")  # the parent's environment, which a worker inherits
    fourth = WarmStart()
    fourth.before_plan(argv)
    assert early(fourth) is None
    fourth.ahead_of_session(single)  # started after the plan, as before, and the hint made anew
    assert fourth._warm is not None
    fourth.discard()
    fifth = WarmStart()
    fifth.before_plan(argv)
    ahead = early(fifth)
    assert ahead is not None
    fifth.ahead_of_session(plan(["-m", *TINY, "hydra/launcher=joblib", "run.seed=0,1"]))  # another launcher's sweep
    assert ahead.proc.returncode is not None and fifth._warm is None

    # a sweep in this process: its first job's worker (both jobs ask for the same one: only the steps differ)
    swept = ["-m", *TINY, "run.steps=6,7", f"ledger.dir={tmp_path / 'ledger'}"]
    sweep = plan(swept)

    def loop_starts(warm: WarmStart):  # what loop/sweep.py does before its first round
        warm.upcoming = as_jobs(sweep.jobs[:1])
        warm.start_next()
        return warm._warm

    never = WarmStart()
    never.before_plan(swept)
    assert early(never) is None  # never planned here
    never.ahead_of_session(sweep)
    assert never._warm is None  # the loop starts it
    assert loop_starts(never) is not None and hint(swept)["spawn"]["backend"] == "jax"
    never.discard()
    again = WarmStart()
    again.before_plan(swept)
    ahead = early(again)
    assert ahead is not None
    again.ahead_of_session(sweep)
    assert ahead.proc.poll() is None and again._warm is None  # it waits for the loop
    assert loop_starts(again) is ahead and again._early is None
    again.upcoming = as_jobs(sweep.jobs[1:2])
    again.start_next()  # the second job: one is running ahead already, none other starts
    assert again._warm is ahead
    again.discard()

    secret = [*TINY, "tracking.uri=http://bob:s3cret!@localhost:1"]  # a credential: no hint, nor its hash
    assert warm_module.hint_stamp(secret) is None
    sixth = WarmStart()
    sixth.before_plan(secret)
    sixth.ahead_of_session(single)
    assert sixth._warm is not None  # started after the plan, as before
    sixth.discard()
    hints = list((tmp_path / "cache" / "repro" / warm_module.HINTS).iterdir())
    assert len(hints) == 2 and not any("s3cret" in p.read_text() for p in hints)  # TINY's and the sweep's, whole


@pytest.mark.slow  # starts workers
def test_the_next_jobs_workers_start_two_at_a_time():
    """job/warm.py `start_next`: where no worker is waiting for the next job, the next job's and the
    one's after it start together (their imports share the cores while the running job builds); at
    the next job's start none starts, and the one started beside it is the next job's. A job whose
    worker is not the one started for it starts its own; the rest stay."""
    from repro.job.warm import WarmStart

    jobs = plan(["-m", *TINY, "run.seed=0,1,2,3"]).jobs  # four workers: each its own hash seed

    def key(config):
        return config.framework.python, seeding.worker_env(config), None, config.framework.backend

    warm = WarmStart()
    first = second = third = fourth = warm  # what the end below ends, whatever was started
    try:
        warm.upcoming = as_jobs(jobs[:2])
        warm.start_next()  # the sweep's start: the first job's worker and the second's
        first, second = warm._warm, warm._later
        assert first is not None and second is not None and first.key != second.key
        assert warm.take(*key(jobs[0])) is first
        warm.upcoming = as_jobs(jobs[1:3])
        warm.start_next()  # the first job starts: the second's worker is there, none starts
        assert warm._warm is second and warm._later is None
        warm.settle()
        assert second.wait_ready(0) and warm.take(*key(jobs[1])) is second
        warm.upcoming = as_jobs(jobs[2:4])
        warm.start_next()  # the second job starts: the third's and the fourth's
        third, fourth = warm._warm, warm._later
        assert third is not None and fourth is not None and len({first.key, second.key, third.key, fourth.key}) == 4
        assert warm.take(*key(jobs[0])) is None and third.proc.poll() is not None  # not the third job: ended
        warm.upcoming = as_jobs(jobs[3:])
        warm.start_next()
        assert warm._warm is fourth and warm._later is None  # the fourth job's, kept
        warm.upcoming = []
        assert warm.take(*key(jobs[3])) is fourth
        warm.start_next()  # the last job starts: nothing after it
        assert warm._warm is None and warm._later is None
    finally:
        warm.discard()
        for started in {id(w): w for w in (first, second, third, fourth) if w is not warm}.values():
            if started.proc.returncode is None:  # taken, or still waiting: not ended yet
                started.discard()


@pytest.mark.slow  # starts a worker
def test_the_next_jobs_worker_imports_while_a_projector_at_work_is_waited_for(tmp_path):
    """job/job.py `beside_start`: the next job's worker starts before the wait for a projector still at
    work (held here as a projector holds it: the machine lock, shared), so its imports run during the
    wait, not after it. Here the projector ends only once that worker is ready: with the wait first,
    the worker would not start until the wait gave up."""
    import fcntl
    import threading

    from repro.job import job
    from repro.job.warm import WarmStart
    from repro.tracking import handoff

    config = plan([*TINY]).jobs[0]
    said, order = [], []

    class Host:  # what beside_start asks of its sweep (job/host.py JobHost)
        warm, beside = WarmStart(), None

        def prepare_tracking(self, config) -> None:
            self.beside = handoff.wait_for_projectors(30, said.append)
            order.append("waited")

    host = Host()
    host.warm.upcoming = as_jobs([config])
    with open(handoff.machine_lock(), "a") as projector:
        fcntl.flock(projector, fcntl.LOCK_SH)

        def projector_at_work() -> None:  # until the next worker is ready, or the wait has given up
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline and not (host.warm._warm and host.warm._warm.wait_ready(0.1)):
                time.sleep(0.05)
            order.append("ready" if host.warm._warm else "none started")
            fcntl.flock(projector, fcntl.LOCK_UN)

        at_work = threading.Thread(target=projector_at_work)
        at_work.start()
        try:
            job.beside_start(host, config)
        finally:
            at_work.join()
    ready = host.warm._warm
    try:
        assert order == ["ready", "waited"] and host.beside is None, (order, host.beside, said)
        assert ready is not None and ready.proc.poll() is None  # kept for the next job
    finally:
        host.warm.discard()


def test_the_next_jobs_worker_is_ready_before_the_running_jobs_steps_and_idle_beside_them(sandbox):
    """In a sweep, each job's worker is started while the job before it starts (the first: as the
    sweep starts), and that job's measured steps wait until it has imported its framework: the
    next job then starts from its build, and nothing of it ran beside the steps."""
    proc = sandbox.run("-m", *TINY[:3], "run.steps=auto", "run.min_steady_s=0.6", "run.seed=0,1,2",
                       "tracking.experiment=ahead")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = sorted(sandbox.heads(), key=lambda h: h["sweep"]["job"])  # in the order they ran (a round's is random)
    assert [h["status"] for h in runs] == ["ok"] * 3
    for before, after in zip(runs, runs[1:]):
        steps_s = before["results"]["steady_median_s"] * before["results"]["steady_steps"]
        # it was ready before the steps began: it waited at least their length for its spec
        setup = after["results"]["setup"]
        assert setup["imported_ahead"] and setup["waited_ahead_s"] >= 0.9 * steps_s, (setup, steps_s)
        assert before["machine"]["repro_cpu_parts_s"]["command"] < 0.1, before["machine"]  # and idle beside them
    assert runs[0]["results"]["setup"]["imported_ahead"]  # the first: started as the sweep started


@pytest.mark.slow  # starts a worker
def test_code_from_before_the_worker_main_module_starts_its_worker_as_it_did(tmp_path):
    """A replay in the recorded code (`launch.run_worker(src=...)`) starts its worker as that code
    did: a tree from before the run path was split into rooms at runner/worker_main.py, one from
    before worker_main existed at runner/worker.py (here a module of that name over today's worker,
    so it runs); today's code starts at worker/worker_main.py."""
    import shutil

    from repro import paths

    old = tmp_path / "src"
    shutil.copytree(paths.src_dir() / "repro", old / "repro", ignore=shutil.ignore_patterns("__pycache__"))
    (old / "repro" / "worker" / "worker_main.py").unlink()
    (old / "repro" / "runner").mkdir()
    (old / "repro" / "runner" / "__init__.py").write_text("")
    (old / "repro" / "runner" / "worker_main.py").write_text("")
    assert launch.worker_command(None, "spec.json", src=old)[2] == "repro.runner.worker_main"
    (old / "repro" / "runner" / "worker_main.py").unlink()
    (old / "repro" / "runner" / "worker.py").write_text(
        "from repro.worker.worker import main\n\nif __name__ == '__main__':\n    main()\n")
    assert launch.worker_command(None, "spec.json", src=old)[2] == "repro.runner.worker"
    assert launch.worker_command(None, "spec.json", src=tmp_path / "own_package")[2] == "repro.worker.worker_main"
    assert launch.worker_command(None, "spec.json")[2] == launch.worker_command(None, "spec.json", src=paths.src_dir())[2] \
        == "repro.worker.worker_main"
    config = plan([*TINY]).jobs[0]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = _worker_spec(run_dir, config, cluster.resolve(config.cluster))
    outcome = launch.run_worker(spec, run_dir / "worker.log", None, seeding.worker_env(config), 300,
                                lambda ev: None, src=old)
    assert outcome.status == "ok", outcome.reason + "\n".join(outcome.log_tail)


def test_a_backend_that_fails_to_import_ahead_fails_its_job_as_a_recorded_error(tmp_path):
    """A worker started ahead whose backend import fails keeps waiting; its job's own import
    raises the error again inside the worker's recorded-error path, as a cold start would."""
    config = plan([*TINY]).jobs[0]
    env = seeding.worker_env(config)
    run_dir = tmp_path / "ahead"
    run_dir.mkdir()
    warm = launch.warm_start(run_dir, None, env, backend="no_such_backend")
    assert warm.wait_ready(120)  # the failed import is its job's to report: it waits like any other
    config.framework.backend = "no_such_backend"  # past the preflight, as a stale spec could be
    spec = _worker_spec(run_dir, config, cluster.resolve(config.cluster))
    outcome = launch.run_worker(spec, run_dir / "worker.log", None, env, 300, lambda ev: None, warm=warm)
    assert outcome.status == "failed", outcome
    error = outcome.events["error"]
    assert error["type"] == "KeyError" and "unknown backend 'no_such_backend'" in error["message"], error


def test_an_eager_forward_run_imports_no_compiler_and_is_deterministic(tmp_path):
    """torch.use_deterministic_algorithms imports torch._inductor (dynamo, sympy,
    FSDP: ~1.4 s) for a setting only torch.compile reads. An eager run that builds no optimizer
    (torch.optim's constructor imports dynamo itself) now imports none of it, and still runs
    with deterministic algorithms on (read back into `effective`); a compiled run still sets
    inductor's own switch."""
    config = plan(["framework=torch", "model=mlp", "model.preset=tiny", "run.task=forward",
                   "run.steps=4", "run.warmup=2"]).jobs[0]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = _worker_spec(run_dir, config, cluster.resolve(config.cluster))
    env = {**seeding.worker_env(config), "PYTHONPROFILEIMPORTTIME": "1"}  # every import to the worker's log
    outcome = launch.run_worker(spec, run_dir / "worker.log", None, env, 300, lambda ev: None)
    assert outcome.status == "ok", outcome.reason + "\n".join(outcome.log_tail)
    imported = [line.split("|")[-1].strip() for line in (run_dir / "worker.log").read_text().splitlines()
                if line.startswith("import time:")]
    assert "torch.nn" in imported and not [m for m in imported if m.startswith(("torch._dynamo", "torch._inductor"))]
    assert outcome.events["result"]["effective"]["deterministic_algorithms"] is True
    compiled = subprocess.run([sys.executable, "-c", "import torch, torch._inductor.config as c\n"
                               "from repro.backends.torch_backend import deterministic_algorithms\n"
                               "deterministic_algorithms(compiled=True)\n"
                               "print(c.deterministic, torch.are_deterministic_algorithms_enabled())"],
                              capture_output=True, text=True, timeout=120)
    assert compiled.stdout.split() == ["True", "True"], compiled.stderr[-2000:]
