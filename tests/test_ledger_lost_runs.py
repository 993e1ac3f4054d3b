"""Lost runs: a `started` record whose parent is gone (SIGKILL) is warned of by `ledger verify` and
marked superseded by a later ok run of the same config, by `ledger recover` or by a sweep run with
`run.resume=true`; append-only, the lost record itself stays as written."""

from __future__ import annotations

import pytest

from conftest import Sandbox, dead_parent, finished_run, repro_cli
from repro.ledger import Ledger

pytestmark = pytest.mark.slow  # every test here starts a process

TINY = ("model=mlp", "framework=torch", "run.warmup=2", "run.steps=4")


def test_recover_marks_a_lost_run_superseded_by_its_later_ok_run(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    lost = ledger.append({"kind": "run", "status": "started", "config_hash": "c" * 64, "parent": dead_parent()})
    warned = repro_cli("ledger", "verify", "--ledger", str(ledger.root))
    assert warned.returncode == 0 and f"WARN {next(ledger.root.rglob(lost['id'] + '.json'))}" in warned.stderr
    again = finished_run(ledger, tmp_path / "mlflow.db")
    proc = repro_cli("ledger", "recover", "--ledger", str(ledger.root))
    assert proc.returncode == 0 and f"marked the lost run {lost['id']} superseded by run {again['id']}" in proc.stdout
    mark = ledger.current(lost)
    assert (mark["kind"], mark["status"], mark["prev"], mark["superseded_by"]) == \
           ("supersession", "superseded", lost["id"], again["id"])
    assert ledger.get(lost["id"]) == lost  # append-only: the lost record is still there, unchanged
    verified = repro_cli("ledger", "verify", "--ledger", str(ledger.root))
    assert verified.returncode == 0 and "WARN" not in verified.stderr, verified.stderr
    assert "nothing to recover" in repro_cli("ledger", "recover", "--ledger", str(ledger.root)).stdout  # once only

def test_a_resumed_sweep_marks_the_lost_run_of_its_job_superseded(tmp_path):
    """The lost `started` record is the one a SIGKILLed parent leaves (a dead parent pid, the job's
    config hash); then `run.resume=true` runs that job for real."""
    from repro.config import config_hash
    from repro import preflight
    from repro.config.schema import as_dict

    sandbox = Sandbox(tmp_path)
    args = [*TINY, f"ledger.dir={sandbox.ledger}", "run.resume=true"]
    chash = config_hash(as_dict(preflight.plan(args).jobs[0]))
    ledger = Ledger(sandbox.ledger)
    lost = ledger.append({"kind": "run", "status": "started", "config_hash": chash, "parent": dead_parent()})
    proc = sandbox.run(*TINY, "run.resume=true")
    assert proc.returncode == 0, proc.stderr[-2000:]
    ok = next(h for h in sandbox.heads() if h["status"] == "ok")
    assert f"the lost run {lost['id']} is superseded by run {ok['id']}" in proc.stdout
    assert ledger.current(lost)["superseded_by"] == ok["id"]
    verified = repro_cli("ledger", "verify", "--ledger", str(sandbox.ledger))
    assert verified.returncode == 0 and "WARN" not in verified.stderr, verified.stderr
