"""Every launcher behaves as the default one does: resume, Ctrl-C and (where it has a scheduler) a
cancel, each run through every registered launcher (loop/launchers.py `registered()`: the in-process
default, joblib, ray on a real Ray head, submitit_local, submitit_slurm on the real test cluster),
whose statuses and counts are compared with the default launcher's. A new adapter registers itself,
so it inherits these cases. Kept affordable: mlp tiny, a few steps, one framework.

Printed (`-s`): one line per launcher and case, `parity <case> <launcher>: {...}`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from repro.loop import launchers

pytestmark = pytest.mark.slow  # every test here starts `python -m repro`

LAUNCHERS = [r.name for r in launchers.registered()]
SIDE_BY_SIDE = "joblib+hydra.launcher.n_jobs=2"  # joblib's other path: the round's jobs in two workers at once
FAST = ("model=mlp", "framework=torch", "run.warmup=2", "verdict.max_reruns=0")
# resume's rounds leave their runs to the sweep's close (tracking.inline_drain_s=0: no MLflow import in a round's
# process, ~3.3 s of CPU a round); Ctrl-C keeps each launcher's own drain, interrupted as a user's would be
RESUME = ("-m", *FAST, "run.batch_size=16,32", "run.steps=6", "run.resume=true", "tracking.inline_drain_s=0")
CTRL_C = ("-m", *FAST, "run.steps=4,1000000")  # the second outlasts the test: Ctrl-C comes while it runs
_default: dict[str, dict] = {}  # case -> the default launcher's outcome (measured once per process)


def _launcher_args(request, sandbox, choice: str) -> list[str]:
    """The command line's launcher part; a SLURM one starts the real test cluster (tests/slurm_cluster.py),
    a Ray one a real Ray head (tests/ray_cluster.py)."""
    choice, *more = choice.split("+")
    args = [f"hydra/launcher={choice}", f"hydra.sweep.dir={sandbox.root / 'sweep'}", *more]
    if launchers.named(choice).scheduler == "slurm":
        request.getfixturevalue("slurm")
        args += ["hydra.launcher.timeout_min=10", "hydra.launcher.partition=both"]
    if choice == "ray":
        args += [f"hydra.launcher.ray.init.address={request.getfixturevalue('ray_head').address}"]
    return args


def _default_outcome(request, tmp_path_factory, case: str, measure) -> dict:
    if case not in _default:
        from conftest import Sandbox

        box = Sandbox(tmp_path_factory.mktemp(f"default_{case}"))
        _default[case] = measure(box, _launcher_args(request, box, launchers.default().name))
        print(f"\nparity {case} {launchers.default().name}: {_default[case]}")
    return _default[case]


def _outcome(request, sandbox, choice: str, expected: dict, measure) -> dict:
    """`choice`'s outcome; the default launcher's is `expected`, measured once (measured again, it was the
    same sweep twice: ~30 s of the suite's CPU for nothing)."""
    if choice == launchers.default().name:
        return expected
    return measure(sandbox, _launcher_args(request, sandbox, choice))


def _sweep_id(output: str) -> str:
    found = re.findall(r"repro compare --sweep (\S+) --wide", output)
    assert found, output[-3000:]
    return found[-1]


def _resume(sandbox, launcher: list[str]) -> dict:
    """A sweep of two configs, then the same with run.repeats=2 and run.resume=true: its first round is
    the first sweep's two records (said skipped), its second two new runs; four distinct records."""
    from repro.ledger import Ledger
    from repro.report.compare import sweep_runs

    first = sandbox.run(*RESUME, *launcher)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    before = {r["id"] for r in sandbox.records()}
    proc = sandbox.run(*RESUME, "run.repeats=2", *launcher)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    runs = sweep_runs(Ledger(sandbox.ledger), _sweep_id(proc.stdout))
    new = [r for r in sandbox.records() if r["id"] not in before and r.get("kind") == "run" and r["status"] != "started"]
    return {"statuses": sorted(r["status"] for r in runs), "records": len(runs),
            "distinct": len({r["id"] for r in runs}), "resumed": sum("resumed_from" in r for r in runs),
            "new runs": len(new), "skipped lines": len(re.findall(r"resume: .* skipped, already recorded ok", output)),
            "rounds": sorted((r["repeat"]["index"], "resumed_from" in r) for r in runs),
            "no verdict": "single sample, no verdict" in output}


def _ctrl_c(sandbox, launcher: list[str]) -> dict:
    """Ctrl-C as a terminal sends it (SIGINT to the command's process group) once the first run is
    recorded ok and the second has started."""
    out, err = sandbox.root / "stdout.txt", sandbox.root / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(sandbox.repro_cmd(*CTRL_C, *launcher), cwd=sandbox.root, env=sandbox.env(),
                                stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            deadline = time.time() + 300
            while time.time() < deadline and not (
                    any(h["status"] == "ok" for h in sandbox.heads())
                    and any(r["status"] == "started" and r["config"]["run"]["steps"] > 4 for r in sandbox.records())):
                assert proc.poll() is None, out.read_text()[-3000:] + err.read_text()[-3000:]
                time.sleep(0.3)
            time.sleep(2)
            os.killpg(proc.pid, signal.SIGINT)
            returncode = proc.wait(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    output, errors = out.read_text(), err.read_text()
    heads = sorted(sandbox.heads(), key=lambda h: h["sweep"]["job"])
    return {"rc": returncode, "statuses": [h["status"] for h in heads],
            "traceback": "Traceback" in output + errors,
            "last line": (errors.strip().splitlines() or [""])[-1].split(";")[0],
            "ok sweep records": sum(1 for r in sandbox.records() if r.get("kind") == "sweep" and r["status"] == "ok")}


@pytest.mark.parametrize("choice", LAUNCHERS)
def test_resume_counts_each_record_once_under_every_launcher(request, tmp_path_factory, sandbox, choice):
    expected = _default_outcome(request, tmp_path_factory, "resume", _resume)
    assert expected["distinct"] == expected["records"] == 4 and expected["resumed"] == 2, expected
    got = _outcome(request, sandbox, choice, expected, _resume)
    print(f"\nparity resume {choice}: {got}")
    assert got == expected


@pytest.mark.parametrize("choice", [*LAUNCHERS, SIDE_BY_SIDE])
def test_ctrl_c_records_interrupted_and_ends_in_one_line_under_every_launcher(request, tmp_path_factory, sandbox,
                                                                               choice):
    expected = _default_outcome(request, tmp_path_factory, "ctrl_c", _ctrl_c)
    assert expected == {"rc": 130, "statuses": ["ok", "interrupted"], "traceback": False,
                        "last line": "repro: interrupted", "ok sweep records": 0}, expected
    got = _outcome(request, sandbox, choice, expected, _ctrl_c)
    print(f"\nparity ctrl_c {choice}: {got}")
    assert got == expected


@pytest.mark.parametrize("when", ["pending", "starting", "running"])
@pytest.mark.parametrize("choice", [r.name for r in launchers.registered() if r.scheduler == "slurm"])
def test_a_cancelled_round_is_killed_naming_the_schedulers_state(request, sandbox, choice, when):
    """scancel of a round's job while it waits (its partition's one node held by another job), as it
    starts, or while its first run runs: every run of the round `killed`, naming SLURM's cancel (the
    runs that never started: read from `scontrol show job`, JobState=...), none `lost`, no traceback;
    the sweep ends 1 (a run not ok), as any sweep with a killed run does."""
    from repro.job import scheduler

    slurm = request.getfixturevalue("slurm")
    launcher = [a.replace("partition=both", "partition=one") for a in _launcher_args(request, sandbox, choice)]
    blocker = None
    if when == "pending":  # n1 taken: the round waits in the queue (Reason=Resources) until cancelled
        blocker = subprocess.run(["sbatch", "--parsable", "-p", "one", "--exclusive", "-o", "/dev/null", "--wrap",
                                  "sleep 600"], capture_output=True, text=True, env=slurm.env(), check=True).stdout.strip()
        slurm.wait_state(blocker, {"RUNNING"}, timeout=60)
    known = {j["id"] for j in slurm.squeue()}
    sweep = subprocess.Popen(sandbox.repro_cmd("-m", *FAST, "run.steps=100000,4", "tracking.experiment=slurm_cancel",
                                               *launcher),
                             cwd=sandbox.root, env=sandbox.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    try:
        deadline, job = time.time() + 180, None
        while time.time() < deadline and job is None:
            jobs = [j for j in slurm.squeue() if j["id"] not in known]
            if jobs and (when == "pending" or jobs[0]["state"] in ("RUNNING", "CONFIGURING", "COMPLETING")):
                job = jobs[0]
            time.sleep(0.05)
        assert job is not None, "the round's SLURM job did not appear"
        if when == "running":
            while time.time() < deadline and not [r for r in sandbox.records() if r["status"] == "started"]:
                time.sleep(0.1)
            time.sleep(2)
        state = slurm.scontrol_job(job["id"]).get("JobState")
        subprocess.run(["scancel", job["id"]], check=True, env=slurm.env())
        out, _ = sweep.communicate(timeout=300)
    finally:
        sweep.kill()
        if blocker:
            subprocess.run(["scancel", blocker], env=slurm.env())
    heads = sorted(sandbox.heads(), key=lambda h: h["sweep"]["job"])
    print(f"\nparity cancel {choice} ({when}, scancel while {state}): "
          f"{[(h['status'], h.get('error', {}).get('reason'), h['config']['run']['steps']) for h in heads]}")
    assert [h["status"] for h in heads] == ["killed", "killed"], out[-3000:]
    assert all(h["error"]["reason"].startswith("cancelled by SLURM (scancel)") for h in heads), heads
    assert all(f"SLURM job {job['id']}" in h["error"]["reason"] for h in heads)
    never_ran = [h for h in heads if "before this job of its round ran" in h["error"]["reason"]]
    # pending: neither ran; running: the second never ran; starting: either (the first may have begun)
    assert len(never_ran) == {"pending": 2, "running": 1}.get(when, len(never_ran)), heads
    assert all(re.search(r"\(JobState=[A-Z]+\)", h["error"]["reason"]) for h in never_ran)
    assert not re.search(r"\blost\b", out) and "Traceback" not in out and "UncompletedJobError" not in out, out[-3000:]
    table = out[out.index("mlp/tiny"):]
    assert "killed" in table, table
    assert sweep.returncode == 1
    if when == "running":
        assert heads[0]["config"]["run"]["steps"] == 100000 and scheduler.job_ref(heads[0]["scheduler"]) == job["id"]
