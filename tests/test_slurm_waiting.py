"""A SLURM job cancelled while it waits before its measured steps (for an MLflow projector at work on
the machine) is recorded `killed`, naming the scheduler: a submitit job process ignores SIGTERM, and
it waited on until SLURM's SIGKILL left its run `lost` (job/scheduler.py `interrupt_on_sigterm`)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time

from repro.job import scheduler

from repro.worker import lifeline

SLURM_SWEEP = ("hydra/launcher=submitit_slurm", "hydra.launcher.timeout_min=10")


def test_sigterm_interrupts_only_until_restored():
    bypass = lambda signum, frame: None  # noqa: E731 - submitit's handler: logs and ignores
    saved = signal.signal(signal.SIGTERM, bypass)
    try:
        assert scheduler.interrupt_on_sigterm({"name": "local"})() is None  # not under SLURM: nothing changes
        assert signal.getsignal(signal.SIGTERM) is bypass
        restore = scheduler.interrupt_on_sigterm({"name": "slurm", "job_id": "1"})
        assert signal.getsignal(signal.SIGTERM) is lifeline.interrupt
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
            raise AssertionError("SIGTERM did not interrupt")
        except KeyboardInterrupt:
            pass
        finally:
            lifeline.forget_interrupt()
        restore()
        assert signal.getsignal(signal.SIGTERM) is bypass
    finally:
        signal.signal(signal.SIGTERM, saved)


def test_scancel_while_waiting_for_a_projector_records_killed(slurm, sandbox):
    machine = sandbox.root / "machine"
    lock = machine / "projectors.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_SH)  # a projector at work on this machine, as far as the job can tell
        sweep = subprocess.Popen(sandbox.repro_cmd("-m", "framework=torch", "model=mlp", "run.steps=6", "run.warmup=2",
                                                   "tracking.projector_wait_s=600", *SLURM_SWEEP,
                                                   "hydra.launcher.partition=both",
                                                   f"hydra.sweep.dir={sandbox.root / 'sweep'}",
                                                   "tracking.experiment=slurm_wait"),
                                 cwd=sandbox.root, env=sandbox.env(REPRO_MACHINE_DIR=str(machine)), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        try:
            deadline, started = time.time() + 180, []
            while time.time() < deadline and not started:
                started = [r for r in sandbox.records() if r.get("kind") == "run" and r.get("status") == "started"]
                time.sleep(0.2)
            assert started, "the job did not start"
            time.sleep(8)  # importing, building, then waiting for the projector
            subprocess.run(["scancel", scheduler.job_ref(started[0]["scheduler"])], check=True, env=slurm.env())
            out, _ = sweep.communicate(timeout=240)
        finally:
            sweep.kill()
    (head,) = sandbox.heads()
    assert head["status"] == "killed", (head["status"], head.get("error"), out[-3000:])
    assert head["error"]["reason"].startswith("cancelled by SLURM (scancel); SLURM job "
                                              f"{scheduler.job_ref(started[0]['scheduler'])}"), head["error"]
