"""repro through a real SLURM (tests/slurm_cluster.py: munged, slurmctld, slurmd n1 and n2 on this
host): sweeps with hydra/launcher=submitit_slurm (each round of the sweep loop one SLURM job:
loop/submitit_rounds.py), the scheduler block in every record, what happens when SLURM ends a
job (scancel, time limit, requeue), and a run over two SLURM nodes."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Sandbox, free_port
from repro.job import scheduler
from repro.ledger import render

FAST = ("model=mlp", "run.steps=6", "run.warmup=2")
SLURM_SWEEP = ("hydra/launcher=submitit_slurm", "hydra.launcher.timeout_min=10")


def _sweep_dir(sandbox) -> str:
    return f"hydra.sweep.dir={sandbox.root / 'sweep'}"


def _wait_for(what, predicate, timeout: float = 120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if found := predicate():
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout:.0f} s")


def _started(sandbox, framework: str):
    return [r for r in sandbox.records() if r.get("kind") == "run" and r.get("status") == "started"
            and r["config"]["framework"]["name"] == framework]


@pytest.fixture(scope="module")
def timeout_job(slurm, tmp_path_factory):
    """Submitted first, checked last (its minute of time limit passes while the other tests run):
    a run far longer than its `sbatch --time=1`."""
    from conftest import Sandbox

    box = Sandbox(tmp_path_factory.mktemp("slurm_timeout"))
    cmd = " ".join(box.repro_cmd("framework=torch", "model=mlp", "run.steps=300000", "run.warmup=2",
                                 "tracking.experiment=slurm_timeout"))
    # The batch shell ignores SLURM's SIGTERM (repro handles its own) so that it can write repro's exit code.
    out = subprocess.run(["sbatch", "--parsable", "-p", "one", "--time=1", "-o", str(box.root / "job.out"),
                          f"--chdir={box.root}", "--wrap", f"trap '' TERM; {cmd}; echo $? > {box.root / 'rc'}"],
                         capture_output=True, text=True, env=box.env(), check=True)
    return box, out.stdout.strip()


def test_local_records_say_local():
    assert scheduler.block({}) == {"name": "local"}
    assert render.scheduler_tags(None) == {"repro.scheduler": "local"}


def test_a_job_slurm_ended_is_named_from_scontrol_else_from_submitits_watcher(monkeypatch):
    """A round's SLURM job that handed back no records: its end read from `scontrol show job` (which keeps
    JobState=CANCELLED for MinJobAge), else sacct, else submitit's watcher; nothing named where none says so."""
    shown = {"JobState": "CANCELLED", "Reason": "None", "Restarts": "0", "RunTime": "00:00:00", "TimeLimit": "00:10:00"}
    monkeypatch.setattr(scheduler, "final_state", lambda job, environ=None: None)
    monkeypatch.setattr(scheduler, "job_info", lambda job, environ=None: shown if job == "7" else {})
    assert scheduler.job_ended("7") == ("killed", "cancelled by SLURM (scancel) (JobState=CANCELLED)")
    assert scheduler.job_ended("8", "CANCELLED") == ("killed", "cancelled by SLURM (scancel) (JobState=CANCELLED)")
    assert scheduler.job_ended("8", "TIMEOUT")[0] == "timeout"
    assert scheduler.job_ended("8", "COMPLETED") is None and scheduler.job_ended("8") is None


@pytest.mark.slow
def test_submitit_slurm_sweep_records_its_jobs(slurm, sandbox, timeout_job):
    proc = sandbox.run("-m", "framework=jax,torch", *FAST, *SLURM_SWEEP, "hydra.launcher.partition=both",
                       _sweep_dir(sandbox), "tracking.experiment=slurm_sweep")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    heads = {h["config"]["framework"]["name"]: h for h in sandbox.heads()}
    assert set(heads) == {"jax", "torch"} and all(h["status"] == "ok" for h in heads.values())
    for h in heads.values():
        s = h["scheduler"]
        assert s["name"] == "slurm" and s["partition"] == "both" and s["attempt"] == 1
        assert s["node"] in ("n1", "n2") and s["step_id"] == "0"
        assert "array_task_id" not in s and s["resources"]["time_limit"] == "00:10:00"
        assert s["stdout"].startswith(str(sandbox.root / "sweep" / ".submitit"))
        assert "scheduler" not in h["config"]  # provenance, not part of the config hash
    # the sweep's one round is one SLURM job: both configs ran in it, on one node, one after the other
    assert len({(h["scheduler"]["job_id"], h["scheduler"]["node"]) for h in heads.values()}) == 1
    # every job a SLURM job: each record's job id is one slurmctld knows, ended COMPLETED (a job
    # reads RUNNING for a moment after its result reached the parent: its end is waited for)
    ended = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}
    assert {slurm.wait_state(scheduler.job_ref(h["scheduler"]), ended, timeout=60) for h in heads.values()} == {"COMPLETED"}
    runs = sandbox.mlflow_runs("slurm_sweep")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 2
    for child in children:
        head = next(h for h in heads.values() if h["id"] == child.data.tags["repro.ledger_id"])
        assert child.data.tags["repro.scheduler"] == "slurm"
        assert child.data.tags["repro.scheduler.job_id"] == head["scheduler"]["job_id"]
        assert child.data.tags["repro.scheduler.partition"] == "both"
    assert "mlp/tiny · batch 32" in proc.stdout and "report: " in proc.stdout  # closing table and report
    output = proc.stdout + proc.stderr
    assert "Bypassing sacct error" not in output and "accounting storage is disabled" not in output
    assert output.count("SLURM accounting (sacct) is off") == 1  # said once
    show = subprocess.run([sys.executable, "-m", "repro", "ledger", "show", heads["jax"]["id"], "--ledger",
                           str(sandbox.ledger)], capture_output=True, text=True, env=sandbox.env())
    assert f"ran under: slurm job {heads['jax']['scheduler']['job_id']}" in show.stdout


@pytest.mark.slow
def test_scancel_records_killed_and_the_sweep_goes_on(slurm, sandbox, timeout_job):
    """Two jobs of one array: the long one is cancelled while it runs, the short one ends ok."""
    sweep = subprocess.Popen(sandbox.repro_cmd("-m", "framework=torch", "model=mlp", "run.warmup=2",
                                               "run.steps=6,100000", *SLURM_SWEEP, "hydra.launcher.partition=both",
                                               _sweep_dir(sandbox), "tracking.experiment=slurm_cancel"),
                             cwd=sandbox.root, env=sandbox.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    try:
        long = _wait_for("started record of the long run", lambda: [
            r for r in sandbox.records() if r["kind"] == "run" and r["status"] == "started" and r["config"]["run"]["steps"] > 6])[0]
        time.sleep(3)  # into its timed loop
        subprocess.run(["scancel", scheduler.job_ref(long["scheduler"])], check=True, env=slurm.env())
        out, _ = sweep.communicate(timeout=180)
    finally:
        sweep.kill()
    heads = {h["config"]["run"]["steps"]: h for h in sandbox.heads()}
    assert heads[6]["status"] == "ok", out[-3000:]
    killed = heads[100000]
    assert killed["status"] == "killed", out[-3000:]
    assert killed["error"]["reason"].startswith("cancelled by SLURM (scancel); SLURM job "
                                                f"{scheduler.job_ref(long['scheduler'])}")
    assert sweep.returncode == 1  # a run did not end ok: the sweep says so
    assert "killed" in out and "mlp/tiny" in out  # the closing table lists both
    # the cancelled job is not drained inline (SLURM kills what is left): its own log says what sync must do
    job_log = Path(killed["scheduler"]["stderr"]).read_text()
    assert re.search(rf"[12] run\(s\) of this round not yet in MLflow: repro sync --ledger {re.escape(str(sandbox.ledger))}",
                     job_log), job_log[-2000:]  # the killed run, and the short one where it ran first in the round


@pytest.mark.slow
def test_time_limit_records_timeout(slurm, timeout_job):
    box, job_id = timeout_job
    slurm.wait_state(job_id, {"TIMEOUT", "COMPLETED", "FAILED", "CANCELLED"}, timeout=150)
    (head,) = box.heads()
    assert head["status"] == "timeout", head.get("error")
    assert head["error"]["reason"].startswith("ended by SLURM: the job's time limit (00:01:00) was reached; "
                                              f"SLURM job {job_id}")
    assert head["scheduler"]["resources"]["time_limit"] == "00:01:00" and head["scheduler"]["step_id"] == "batch"
    assert _wait_for("exit code", lambda: (box.root / "rc").exists() and (box.root / "rc").read_text().strip(),
                     timeout=60) == "130"


@pytest.fixture(scope="module")
def one_node(tmp_path_factory) -> dict[str, list[float]]:
    """{framework: the loss trajectory of the same global batch on one node, one device}."""
    from conftest import Sandbox, one_device_losses

    return one_device_losses(Sandbox(tmp_path_factory.mktemp("slurm_one_node")), FAST)


def _srun_two_nodes(sandbox, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(["srun", "-N2", "--ntasks-per-node=1", "-p", "both", *sandbox.repro_cmd(*args)],
                          cwd=sandbox.root, env=sandbox.env(), capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.parametrize("framework, sharding", [("jax", ["sharding=dp_tp"]), ("torch", ["sharding=dp"])],
                         ids=["jax-dp_tp", "torch-gloo"])  # JAX's dp alone is dp_tp's data axis: one JAX run
def test_two_slurm_nodes_record_one_run(slurm, sandbox, one_node, timeout_job, framework, sharding):
    proc = _srun_two_nodes(sandbox, f"framework={framework}", *sharding, *FAST, "cluster=slurm",
                           f"cluster.port={free_port()}", "tracking.experiment=slurm_two")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "node 1 of 2" in proc.stdout and "joins the run at 127.0.0.1:" in proc.stdout  # NodeAddr, not "n1"
    (head,) = sandbox.heads()  # one record: node 0's
    assert head["status"] == "ok", head.get("error")
    assert head["cluster"]["nodes"] == 2 and head["cluster"]["host"] == "127.0.0.1"
    assert head["scheduler"]["nodes"] == "n[1-2]" and head["scheduler"]["node"] == "n1"
    assert {(r["node"], r["slurm_node"]) for r in head["results"]["ranks"]} == {(0, "n1"), (1, "n2")}
    base = one_node[framework]
    assert len(base) == len(head["results"]["loss"])
    assert all(abs(a - b) <= 1e-5 * abs(a) for a, b in zip(base, head["results"]["loss"]))


@pytest.mark.slow
def test_a_node_that_cannot_join_fails_at_once_naming_host_and_port(slurm, sandbox, timeout_job):
    start = time.time()
    proc = _srun_two_nodes(sandbox, "framework=jax", "sharding=dp", *FAST, "cluster=slurm",
                           "cluster.coordinator=nosuchnode.invalid:29555", timeout=120)
    took = time.time() - start
    assert proc.returncode != 0
    assert "cannot join the run at nosuchnode.invalid:29555: the host 'nosuchnode.invalid' does not resolve" in (
        proc.stdout + proc.stderr), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert took < 30, took
    assert sandbox.heads() == []


@pytest.mark.slow
def test_requeued_job_runs_again_as_its_next_attempt_and_resumes(slurm, sandbox, timeout_job):
    """A sweep in one batch job (run.resume=true) is requeued while its second run works: the first
    run, recorded ok, is not run again; the second is recorded killed (requeued), then ok as attempt 2."""
    cmd = " ".join(sandbox.repro_cmd("-m", "framework=jax,torch", "model=mlp", "run.steps=60", "run.warmup=2",
                                     "run.resume=true", "tracking.experiment=slurm_requeue"))
    job_id = subprocess.run(["sbatch", "--parsable", "--requeue", "-p", "one", "--open-mode=append",
                             "-o", str(sandbox.root / "job.out"), f"--chdir={sandbox.root}",
                             "--wrap", f"trap '' TERM; {cmd}; echo $? >> {sandbox.root / 'rc'}"],
                            capture_output=True, text=True, env=sandbox.env(), check=True).stdout.strip()
    _wait_for("torch's started record", lambda: _started(sandbox, "torch"), timeout=600)
    subprocess.run(["scontrol", "requeue", job_id], check=True, env=slurm.env())

    def attempt() -> tuple[str, int]:
        """SLURM's own account of the job: its state and its attempt (Restarts + 1)."""
        info = slurm.scontrol_job(job_id)
        return info.get("JobState", ""), int(info.get("Restarts", "0") or 0) + 1

    def second_attempt_under_way() -> bool:
        state, number = attempt()
        if number >= 2 and state == "PENDING":  # a requeued job waits 2 min (BeginTime) before it runs again
            subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], capture_output=True,
                           env=slurm.env())
        return number >= 2 and state not in ("PENDING", "REQUEUED", "REQUEUE_HOLD")

    # followed by SLURM's account, not by the clock: a busy machine delays each step, never fails the test
    _wait_for("attempt 2 started (Restarts=1)", second_attempt_under_way, timeout=900)
    rc = sandbox.root / "rc"  # each attempt's batch script appends its exit code
    _wait_for("attempt 2 ended", lambda: attempt() in (("COMPLETED", 2), ("FAILED", 2))
              and rc.exists() and len(rc.read_text().split()) == 2, timeout=900)
    runs = sorted((r for r in sandbox.records() if r["kind"] == "run" and r["status"] != "started"),
                  key=lambda r: r["created"])
    seen = [(r["config"]["framework"]["name"], r["status"], r["scheduler"]["attempt"]) for r in runs]
    assert seen == [("jax", "ok", 1), ("torch", "killed", 1), ("torch", "ok", 2)], seen
    assert runs[1]["error"]["reason"].startswith(f"requeued by SLURM (scontrol requeue); it runs again "
                                                 f"as attempt 2; SLURM job {job_id}")
    assert len(_started(sandbox, "jax")) == 1  # jax ran once
    out = (sandbox.root / "job.out").read_text()
    assert "resume: jax" in out and "skipped, already recorded ok" in out
    assert (sandbox.root / "rc").read_text().split() == ["130", "0"]  # attempt 1 ended by SLURM, attempt 2 ok


@pytest.mark.slow
def test_a_node_that_dies_under_a_run_is_recorded_as_a_node_failure(slurm, sandbox, timeout_job):
    """n2's slurmd killed under a running job, the node then marked DOWN as slurmctld does once
    it stops answering (after SlurmdTimeout; done here at once), SLURM requeues the job; the run's parent
    ends (SIGTERM, as the node's end brings). Recorded as a node failure, not a scancel or a requeue."""
    cmd = " ".join(sandbox.repro_cmd("framework=torch", "model=mlp", "run.steps=300000", "run.warmup=2",
                                     "tracking.experiment=slurm_node_fail"))
    pid_file = sandbox.root / "repro.pid"
    job_id = subprocess.run(["sbatch", "--parsable", "-p", "both", "-w", "n2", "-o", str(sandbox.root / "job.out"),
                             f"--chdir={sandbox.root}", "--wrap", f"{cmd} & echo $! > {pid_file}; wait $!"],
                            capture_output=True, text=True, env=sandbox.env(), check=True).stdout.strip()
    try:
        _wait_for("torch's started record", lambda: _started(sandbox, "torch"), timeout=180)
        time.sleep(2)  # into its timed loop
        slurmd = slurm.procs["slurmd-n2"]
        slurmd.kill()
        slurmd.wait(timeout=30)
        subprocess.run(["scontrol", "update", "NodeName=n2", "State=DOWN", "Reason=slurmd-killed"], check=True,
                       env=slurm.env())
        slurm.wait_state(job_id, {"PENDING", "NODE_FAIL"}, timeout=60)  # requeued (or failed) by slurmctld
        os.kill(int(pid_file.read_text()), signal.SIGTERM)
        (head,) = _wait_for("the run's end", lambda: [h for h in sandbox.heads() if h["status"] != "started"],
                            timeout=120)
    finally:
        subprocess.run(["scancel", job_id], env=slurm.env())
        slurm._start("slurmd-n2", ["slurmd", "-D", "-N", "n2", "-f", str(slurm.conf)])
        subprocess.run(["scontrol", "update", "NodeName=n2", "State=RESUME"], env=slurm.env())
    assert head["status"] == "killed", head.get("error")
    reason = head["error"]["reason"]
    assert reason.startswith("ended by SLURM: node failure (node n2 DOWN"), reason
    assert "slurmd-killed" in reason and f"SLURM job {job_id}" in reason
    assert "cancelled" not in reason and "scancel" not in reason
    assert head["scheduler"]["node"] == "n2"
    _wait_for("n2 back", lambda: subprocess.run(["sinfo", "-h", "-n", "n2", "-o", "%t"], capture_output=True,
                                                text=True, env=slurm.env()).stdout.strip() == "idle", timeout=90)
    print(f"\nrecorded: {head['status']}: {reason}")


def _runs_of(sandbox, experiment: str) -> list[dict]:
    return sorted((r for r in sandbox.records() if r.get("kind") == "run" and r["status"] != "started"
                   and r["sweep"]["experiment"] == experiment), key=lambda r: r["sweep"]["job"])


@pytest.mark.slow
def test_auto_repeats_on_slurm_run_each_round_on_one_node_and_rerun_a_flagged_one(slurm, sandbox, timeout_job):
    """run.repeats=auto under submitit_slurm (refused before the loop handed rounds to launchers): each
    round is one SLURM job whose configs ran one after another on one node, in the round's recorded
    order, windows apart. hydra.launcher.array_parallelism=2: the two rounds up to auto's only look
    (verdict.max_repeats=2) go to SLURM at once, each a job with a node of its own (--exclusive), or
    one after the other on one node where another test's job holds the other. A round made busy on
    purpose (a core burnt while it runs) runs again as a new SLURM job; the sweep ends decided or
    undecided at verdict.max_repeats, never refused."""
    proc = subprocess.Popen(sandbox.repro_cmd("-m", "framework=jax,torch", "model=mlp", "run.steps=6", "run.warmup=2",
                                              "run.repeats=auto", "verdict.max_repeats=2", "verdict.max_reruns=1",
                                              "verdict.canary=false", "tracking.inline_drain_s=0",  # MLflow: the close's
                                              *SLURM_SWEEP, "hydra.launcher.partition=both",
                                              "hydra.launcher.array_parallelism=2", _sweep_dir(sandbox),
                                              "tracking.experiment=slurm_auto"),
                            cwd=sandbox.root, env=sandbox.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    burner = None
    try:
        _wait_for("the first round's start", lambda: _started(sandbox, "jax") or _started(sandbox, "torch"), timeout=180)
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # others' CPU in the first rounds
        _wait_for("the first rounds' end", lambda: len(_runs_of(sandbox, "slurm_auto")) >= 4, timeout=180)
        burner.kill()
        out, _ = proc.communicate(timeout=400)
    finally:
        proc.kill()
        if burner is not None:
            burner.kill()
            burner.wait()
    assert proc.returncode == 0, out[-4000:]
    assert "rounds 1–2 at the same time (submitit_slurm: 2 allocations, each round on one node)" in out, out[-4000:]
    assert re.search(r"round [12] runs again \(1 of verdict.max_reruns=1\)", out), out[-4000:]
    assert "stopped: every pair decided" in out or "verdict.max_repeats=2 reached, undecided" in out, out[-4000:]
    runs = _runs_of(sandbox, "slurm_auto")
    assert all(r["status"] == "ok" for r in runs) and len(runs) == 6, [r["status"] for r in runs]  # 2 rounds, 1 rerun
    rerun = [r for r in runs if r["repeat"].get("rerun")]
    assert len(rerun) == 2 and rerun[0]["repeat"]["replaces"] == [r["id"] for r in runs
                                                                  if r["repeat"]["index"] == rerun[0]["repeat"]["index"]
                                                                  and not r["repeat"].get("rerun")]
    spans = []
    for k in range(0, len(runs), 2):  # a round (job numbers in pairs): one SLURM job, one node, its order, windows apart
        a, b = runs[k], runs[k + 1]
        assert a["scheduler"]["job_id"] == b["scheduler"]["job_id"] and a["scheduler"]["node"] == b["scheduler"]["node"]
        assert [a["repeat"]["position"], b["repeat"]["position"]] == [0, 1]
        assert a["repeat"]["index"] == b["repeat"]["index"]
        assert a["wall_split"]["window"][1] <= b["wall_split"]["window"][0]
        spans.append((a["scheduler"]["node"], a["wall_split"]["window"][0], b["wall_split"]["window"][1]))
    (n1, s1, e1), (n2, s2, e2) = spans[:2]  # the two rounds handed over at once
    assert n1 != n2 or e1 <= s2 or e2 <= s1, spans  # never at the same time on one node
    assert len({r["scheduler"]["job_id"] for r in runs}) == len(runs) // 2  # one SLURM job per round
    (stop,) = [r for r in sandbox.records() if r.get("kind") == "repeats"]
    # the stop record keeps run and queue time apart (bookkeeping: both recorded, as numbers; what
    # they read is the machine's, not a test's claim)
    assert all(isinstance(stop[k], (int, float)) for k in ("run_s", "queue_s")), stop


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two sweeps here, then about 9 rounds as SLURM jobs and one probe again here
def test_a_bisection_runs_its_rounds_as_slurm_jobs_and_resumes_in_this_process(slurm, tmp_path):
    """repro bisect with hydra/launcher=submitit_slurm, as a sweep takes it: the confirmation's and every
    probe's rounds are SLURM jobs, each run in its position's commit (a worktree that travels with the job).
    The launcher is not part of which bisection it is: cut short, the same command without it resumes here."""
    from test_bisect import Planted

    # positions 0..2; commit 2 (position 1) is ~6x slower: the search's one probe is position 1, 3 to 5 rounds
    # (at 3, a suite's load once left the ~5x gap undecided: BAD/GOOD 4.55, 95 % CI 0.81-25.45, 2026-11-30), each
    # round a SLURM job. One probe is what this test needs of the search (test_bisect.py walks longer ones); with
    # four commits (two probes) it cost the suite 165 s of CPU, its longest single test (2026-12-01)
    p = Planted(tmp_path, commits=3, culprit=2, start="fresh")  # each round its own SLURM job: no server would serve two runs
    p.good, p.bad = p.sweep_at(1), p.sweep_at(3)
    args = ("bisect", p.good["id"][:10], p.bad["id"][:10], "verdict.max_reruns=0", "bisect.max_rounds=5",
            "--progress", "none", "--ledger", str(p.ledger))
    # tracking.inline_drain_s=0: no round's job imports MLflow to project its two runs (3.3 s of CPU each, 11
    # rounds: 36 s of the suite's CPU, 2026-12-01); each probe's close hands them over, as shown at the end
    on_slurm = ("hydra/launcher=submitit_slurm", "hydra.launcher.timeout_min=10", "hydra.launcher.partition=both",
                f"hydra.sweep.dir={tmp_path / 'sweep'}", "tracking.inline_drain_s=0")
    out = p.repro_(*args, *on_slurm, timeout=1500)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-3000:]
    (done,) = [r for r in p.records("bisect") if r["status"] != "running"]
    b = done["bisect"]
    assert done["status"] == "decided" and b["result"]["position"] == 1 and b["result"]["commits"]["model"] == p.commits[1]
    runs = {r["id"]: r for r in p.records()}
    measured = [runs[i] for i in done["runs"]]
    assert len(measured) == 2 * (b["confirmation"]["rounds"] + sum(q["rounds"] for q in b["probes"]))
    assert all(r["status"] == "ok" and r["scheduler"]["name"] == "slurm" and r["scheduler"]["job_id"] for r in measured)
    assert len({r["scheduler"]["job_id"] for r in measured}) == len(measured) // 2  # a round a job, GOOD and candidate in it
    for r in measured:
        at = b["positions"][r["bisect_probe"]["position"]]["commits"]["model"]
        assert r["workload_source"]["git"]["commit"] == at
    Sandbox(p.work).projected()  # each round left its runs to its probe's close, which handed them to MLflow
    # cut back to before the last probe ended; the same command without the launcher resumes it here
    chain = p.records("bisect")
    for record in chain[-2:]:
        next(p.ledger.glob(f"*/{record['id']}.json")).unlink()
    shutil.rmtree(p.ledger / ".index", ignore_errors=True)
    before = set(runs)
    again = p.repro_(*args, timeout=900)
    assert again.returncode == 0 and f"resuming bisection {chain[-3]['id']}" in again.stdout, \
        again.stdout[-3000:] + again.stderr[-2000:]
    new = [r for r in p.records() if r["id"] not in before]
    assert new and all(r["scheduler"]["name"] == "local" for r in new)
    # from the last probe on only: what the kept record holds is not run again (where the probe run again
    # reads otherwise under load, the search may go on from it: more probes, never an earlier one)
    assert all(r["bisect_probe"]["probe"] >= len(b["probes"]) - 1 for r in new)
    ended = p.records("bisect")[-1]["bisect"]
    assert ended["confirmation"]["runs"] == b["confirmation"]["runs"]
    assert [q["runs"] for q in ended["probes"][:len(b["probes"]) - 1]] == [q["runs"] for q in b["probes"][:-1]]
    assert ended["result"]["position"] == 1
