"""No credential leaves a run: distinct secrets planted in every place a user keeps one (the
tracking URI on the command line and in MLFLOW_TRACKING_URI, pip's index and extra index, the
HTTPS proxy, a captured TORCH* variable, the repo's git remote and its DVC remote), then a sweep
against a real `mlflow server`, a run whose store is down, a failing run, `repro sync`, `repro
report` and a failing `repro replay --as-recorded`: every byte under the ledger, the MLflow
store (database and artifacts), the reports, the pending queue, the logs and the captured
terminal output is searched for each secret, and none is found. The runs still reach the
server: the MLflow client is given the real URI, credentials and all."""

from __future__ import annotations

import base64
import http.client
import os
import shutil
import subprocess
import sys
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from conftest import REPO, free_port, mlflow_server
from wheels import QuietServer

SECRETS = {
    "tracking.uri": "CFG-S3CRET-11",
    "MLFLOW_TRACKING_URI": "ENV-S3CRET-22",
    "PIP_INDEX_URL": "PIP-S3CRET-33",
    "PIP_EXTRA_INDEX_URL": "XTRA-S3CRET-44",
    "HTTPS_PROXY": "PROXY-S3CRET-55",
    "git remote": "GIT-S3CRET-66",
    "DVC remote": "DVC-S3CRET-77",
    "TORCH_HUB_MIRROR": "HUB-S3CRET-88",
    "sync --tracking-uri": "SYNC-S3CRET-99",
}
TINY = ("model=mlp", "model.preset=tiny", "run.steps=6", "run.warmup=2")


def _checkout_copy(dest: Path) -> Path:
    """This checkout's tracked files (as they are on disk) in a git repo of their own, committed,
    with a git remote and a DVC remote that carry credentials."""
    names = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, text=True,
                           check=True).stdout.split("\0")
    for name in filter(None, names):
        src = REPO / name
        if name.startswith("ledger/") or not src.is_file():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / name)
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "copy"], check=True)
    subprocess.run([*git, "remote", "add", "origin",
                    f"https://gituser:{SECRETS['git remote']}@git.example.invalid/repro.git"], check=True)
    with open(dest / ".dvc" / "config", "a") as f:
        f.write(f"['remote \"store\"']\n    url = https://dvcuser:{SECRETS['DVC remote']}@dvc.example.invalid/store\n"
                "[core]\n    remote = store\n")
    return dest


@contextmanager
def basic_auth_gate(target: str, users: dict[str, str]):
    """An HTTP front for the server at `target` that forwards only requests carrying one of
    `users`' basic-auth credentials (401 otherwise), as a tracking server behind a login does;
    yields (its URL, counts of requests let through and refused)."""
    allowed = {"Basic " + base64.b64encode(f"{u}:{p}".encode()).decode() for u, p in users.items()}
    host, port = target.removeprefix("http://").split(":")
    counts = {"through": 0, "refused": 0}

    class Gate(BaseHTTPRequestHandler):
        def forward(self) -> None:
            if self.headers.get("Authorization") not in allowed:
                counts["refused"] += 1
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            counts["through"] += 1
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            conn = http.client.HTTPConnection(host, int(port), timeout=120)
            conn.request(self.command, self.path, body=body, headers={
                k: v for k, v in self.headers.items() if k.lower() not in ("host", "authorization", "connection")})
            answer = conn.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            for k, v in answer.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            conn.close()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = forward

        def log_message(self, *args) -> None:
            pass

    server = QuietServer(("127.0.0.1", 0), Gate)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", counts
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_no_planted_credential_is_written_or_printed_anywhere(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    repo = _checkout_copy(tmp_path / "repo")
    ledger, cache = root / "ledger", root / "cache"
    dead = free_port()  # nothing listens there: a store (and an index, a proxy) that is down
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "MLFLOW_", "HTTP", "REPRO_"))}
    env.update(
        PYTHONPATH=str(repo / "src"), REPRO_ROOT=str(repo), XDG_CACHE_HOME=str(cache), PYTHONUNBUFFERED="1",
        MLFLOW_TRACKING_URI=f"http://envuser:{SECRETS['MLFLOW_TRACKING_URI']}@127.0.0.1:{dead}",
        PIP_INDEX_URL=f"http://pipuser:{SECRETS['PIP_INDEX_URL']}@127.0.0.1:{dead}/simple",
        PIP_EXTRA_INDEX_URL=f"http://127.0.0.1:{dead}/extra/simple?token={SECRETS['PIP_EXTRA_INDEX_URL']}",
        HTTPS_PROXY=f"http://proxyuser:{SECRETS['HTTPS_PROXY']}@127.0.0.1:{dead}",
        TORCH_HUB_MIRROR=f"https://{SECRETS['TORCH_HUB_MIRROR']}@hub.example.invalid/models",
    )
    terminal: list[str] = []

    def repro(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "repro", *args], cwd=root, env=env, capture_output=True,
                              text=True, timeout=timeout)
        terminal.append(f"$ repro {args[0]} ...\n{proc.stdout}{proc.stderr}")  # what repro printed, not what was typed
        return proc

    def projected() -> None:
        from repro.tracking import handoff

        import time
        deadline = time.time() + 180
        while handoff.busy(ledger) and time.time() < deadline:
            time.sleep(0.2)

    store = root / "mlflow"
    store.mkdir()
    with mlflow_server(f"sqlite:///{store / 'mlflow.db'}", store / "artifacts", cwd=store) as url, \
            basic_auth_gate(url, {"cfguser": SECRETS["tracking.uri"], "syncuser": SECRETS["sync --tracking-uri"]}) \
            as (gate, counts):
        # the runs reach the server only through the gate, only with the real credentials
        live = gate.replace("http://", f"http://cfguser:{SECRETS['tracking.uri']}@")
        sweep = repro("-m", "framework=jax,torch", *TINY, f"tracking.uri={live}", "tracking.experiment=secrets",
                      f"ledger.dir={ledger}", "progress.mode=plain")
        assert sweep.returncode == 0, terminal[-1][-3000:]
        projected()
        # a run whose store (MLFLOW_TRACKING_URI) is down, and one that fails (its time limit)
        down = repro("framework=torch", *TINY, "tracking.experiment=down", f"ledger.dir={ledger}",
                     "progress.mode=plain")
        assert down.returncode == 0, terminal[-1][-3000:]
        failing = repro("framework=jax", *TINY, "run.timeout_s=0.01", "tracking.experiment=down",
                        f"ledger.dir={ledger}", "progress.mode=plain")
        assert failing.returncode != 0, terminal[-1][-3000:]
        projected()
        assert "failed" in down.stderr + failing.stderr + (ledger / ".mlflow-pending" / "projector.log").read_text()
        down_sync = repro("sync", "--ledger", str(ledger))  # the down store: fails, naming it redacted
        assert down_sync.returncode == 1, terminal[-1][-3000:]
        synced = repro("sync", "--ledger", str(ledger), "--tracking-uri",
                       gate.replace("http://", f"http://syncuser:{SECRETS['sync --tracking-uri']}@"))
        assert synced.returncode == 0, terminal[-1][-3000:]

        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=url)
        exp = client.get_experiment_by_name("secrets")
        runs = client.search_runs([exp.experiment_id])
        assert len([r for r in runs if "mlflow.parentRunId" in r.data.tags]) == 2  # the projector connected
        assert counts["through"] > 0 and counts["refused"] == 0, counts  # always with the real credentials

    from repro.ledger import Ledger

    heads = [h for h in Ledger(ledger).heads(kind="run")]
    sweep_id = next(h["sweep"]["id"] for h in heads if h["config"]["tracking"]["experiment"] == "secrets")
    report = repro("report", "--ledger", str(ledger), "--sweep", sweep_id)
    assert report.returncode == 0, terminal[-1][-3000:]
    assert {h["config"]["tracking"]["uri"] for h in heads} >= {f"http://***@127.0.0.1:{dead}"}
    assert Ledger(ledger).verify() == []
    ok = next(h for h in heads if h["status"] == "ok")
    replay = repro("replay", ok["id"], "--as-recorded", "--ledger", str(ledger), "--progress", "plain", timeout=900)
    assert replay.returncode != 0, terminal[-1][-3000:]

    places = [ledger, store, cache, repo / ".dvc" / "tmp"]
    found = []
    for place in places:
        for path in [place] if place.is_file() else place.rglob("*") if place.exists() else []:
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                found += [f"{name} in {path}" for name, secret in SECRETS.items() if secret.encode() in data]
    said = "\n".join(terminal)
    found += [f"{name} in the terminal output" for name, secret in SECRETS.items() if secret in said]
    assert found == [], "\n".join(found) + "\n" + said[-4000:]
    assert "***@" in said  # the stores are still named, their credentials masked
