"""A real `mlflow server` for tests: started in its own process group, ready when /health
answers, stopped with its workers (SIGTERM to the group, SIGKILL if it lingers)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(backend_store_uri: str, *extra: str, cwd: str | os.PathLike | None = None) -> Iterator[str]:
    """`mlflow server --backend-store-uri URI EXTRA...` on a free port; yields its URL."""
    port = free_port()
    mlflow = str(Path(sys.executable).parent / "mlflow")
    proc = subprocess.Popen([mlflow, "server", "--backend-store-uri", backend_store_uri, *extra, "--host",
                             "127.0.0.1", "--port", str(port), "--workers", "1"], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                break
        except OSError:
            time.sleep(0.5)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("mlflow server did not become healthy within 120 s")
    try:
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:  # the server holds no state of its own (the store does): no need to wait out its ~20 s shutdown
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
