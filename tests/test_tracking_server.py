"""Parallel sweeps against a real tracking server: `mlflow server` on a PostgreSQL database
(Debian's postgresql, started here on 127.0.0.1), 4 jobs at once through joblib: every run
in MLflow, every record in the ledger, none lost or corrupted. (One sqlite file locks under
concurrent writers; a server with a SQL database is what parallel sweeps should use.)"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import free_port, mlflow_server as start_mlflow_server
from repro.ledger import Ledger

pytestmark = pytest.mark.slow  # every test here starts a process


def _pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _as_postgres(*cmd: str, **kw) -> subprocess.CompletedProcess:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, *cmd], check=True, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.fail("PostgreSQL server binaries not found: `make test` installs Debian's postgresql "
                    "(or: apt-get install postgresql)")
    # Not under pytest's tmp tree: it is root-only, and the server runs as the postgres user.
    root = Path(tempfile.mkdtemp(prefix="repro-pg-"))
    data = root / "data"
    data.mkdir()
    if os.geteuid() == 0:
        for path in (root, data):
            shutil.chown(path, "postgres", "postgres")
    port = free_port()
    _as_postgres(initdb, "-D", str(data), "-U", "postgres", "--auth=trust")
    _as_postgres(pg_ctl, "-D", str(data), "-w", "-l", str(data / "log"), "-o",
                 f"-h 127.0.0.1 -p {port} -k {data}", "start", timeout=120)
    _as_postgres("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "mlflow")
    yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/mlflow"  # SQLAlchemy 2.1's default is psycopg 3
    _as_postgres(pg_ctl, "-D", str(data), "-m", "fast", "stop", timeout=120)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def mlflow_server(postgres, tmp_path_factory):
    with start_mlflow_server(postgres, tmp_path_factory.mktemp("artifacts")) as url:
        yield url


def test_four_concurrent_jobs_against_postgres_server(sandbox, mlflow_server):
    env = {"MLFLOW_TRACKING_URI": mlflow_server}
    cmd = [*sandbox.repro_cmd("-m", "model=mlp", "framework=jax,torch", "run.seed=0,1", "run.steps=6",
                              "run.warmup=2", "hydra/launcher=joblib", "hydra.launcher.n_jobs=4",
                              "tracking.experiment=parallel")]
    proc = subprocess.run(cmd, cwd=sandbox.root, env={**sandbox.env(), **env}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "warning: MLflow" not in proc.stderr, proc.stderr[-3000:]  # a live server: nothing left for `repro sync`
    heads = sandbox.heads()
    assert len(heads) == 4 and all(h["status"] == "ok" for h in heads)
    assert Ledger(sandbox.ledger).verify() == [] and len([r for r in sandbox.records() if r["kind"] == "run"]) == 8  # 4 × (started, finished)
    assert {h["config"]["tracking"]["uri"] for h in heads} == {mlflow_server}

    from mlflow.tracking import MlflowClient

    sandbox.projected()  # the command returned; its projector writes MLflow in the background
    client = MlflowClient(tracking_uri=mlflow_server)
    exp = client.get_experiment_by_name("parallel")
    runs = client.search_runs([exp.experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(runs) == 5 and len(children) == 4
    assert {c.data.tags["repro.ledger_id"] for c in children} == {h["id"] for h in heads}
    for c in children:
        # steps 1-5 of the 6: step 0 (compile) is the metric first_step_loss
        assert c.info.status == "FINISHED" and len(client.get_metric_history(c.info.run_id, "loss")) == 5
