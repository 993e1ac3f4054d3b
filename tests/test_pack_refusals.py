"""`repro env pack` refuses early and in one line (exit 2), and an interrupted pack leaves nothing behind
(issue 59 item 4 and the pack's lows).

Each refusal the probe met after minutes (a file, a read-only mount, a full disk, Python 3.99, an unreachable
index) is now one line before the first download, or, for the disk, before the first byte is written there.
The packs here come from a real index served on 127.0.0.1 by this test (its wheels made by tests/wheels.py),
one of whose wheels can be made slow, so that a signal or a second pack arrives while pip downloads.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from wheels import QuietServer, make_wheel, simple_index

from repro.envs import lock, pack

pytestmark = pytest.mark.slow


class _Index(http.server.SimpleHTTPRequestHandler):
    slow_s = 0.0

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path.endswith(".whl") and "slow" in self.path:
            time.sleep(self.slow_s)
        super().do_GET()


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A PEP 503 index on 127.0.0.1: a small wheel, an 8 MiB one (random bytes: it does not compress) and a slow one."""
    root = tmp_path_factory.mktemp("index")
    wheels = [make_wheel(root / "w", "tiny-pkg", "1.0", {"tiny_pkg/__init__.py": "X = 1\n"}),
              make_wheel(root / "w", "slow-pkg", "1.0", {"slow_pkg/__init__.py": "X = 1\n"})]
    big = make_wheel(root / "w", "big-pkg", "1.0", {"big_pkg/__init__.py": "X = 1\n"})
    import zipfile

    with zipfile.ZipFile(big, "a", zipfile.ZIP_STORED) as z:  # 8 MiB the RECORD need not list: pip does not care
        z.writestr("big_pkg/blob.bin", os.urandom(8 << 20))
    simple_index(root / "served", [*wheels, big])
    handler = type("Handler", (_Index,), {"slow_s": 30.0})
    server = QuietServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(root / "served")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()


class Packer:
    def __init__(self, tmp: Path, index_url: str):
        self.tmp, self.ledger = tmp, tmp / "ledger"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
        self.env.update(PIP_INDEX_URL=index_url, PIP_CONFIG_FILE=os.devnull, REPRO_ENV_CACHE=str(tmp / "cache"),
                        PIP_NO_CACHE_DIR="1")

    def lock(self, *names: str) -> str:
        return lock.store(self.ledger, lock.render([lock.Dist(n, "1.0", "index") for n in names],
                                                   "3.11.7"))[:12]

    def cmd(self, what: str, *args: str) -> list[str]:
        return [sys.executable, "-m", "repro", "env", "pack", what, "--ledger", str(self.ledger), *args]

    def run(self, what: str, *args: str) -> tuple[subprocess.CompletedProcess, float]:
        start = time.perf_counter()
        out = subprocess.run(self.cmd(what, *args), capture_output=True, text=True, env=self.env, timeout=300)
        return out, time.perf_counter() - start


def _one_line(out: subprocess.CompletedProcess, *words: str) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    line = out.stderr.strip()
    assert "\n" not in line and line.startswith("repro env pack: ") and "Traceback" not in out.stderr, out.stderr
    for w in words:
        assert w in line, line


def test_the_out_folder_python_index_and_names_are_refused_before_any_download(tmp_path, index):
    p = Packer(tmp_path, index)
    digest = p.lock("tiny-pkg")
    (tmp_path / "a-file").write_text("x")
    full = tmp_path / "full"
    (full / "old").mkdir(parents=True)
    cases = {
        "file": (["--out", str(tmp_path / "a-file")], ["is a file"]),
        "not empty": (["--out", str(full)], ["is not empty"]),
        "inside the ledger": (["--out", str(p.ledger / "packs" / "p")], ["is inside the ledger"]),
        "python": (["--out", str(tmp_path / "p1"), "--python", "3.99"], ["--python 3.99 is no CPython release"]),
        "leave-out": (["--out", str(tmp_path / "p2"), "--leave-out", "tiny-pgk"],
                      ["--leave-out tiny-pgk: no such distribution in environment"]),
    }
    for name, (args, words) in cases.items():
        out, took = p.run(digest, *args)
        _one_line(out, *words)
        print(f"{name}: rc {out.returncode} in {took:.1f} s: {out.stderr.strip()}")
    # an index that does not answer, with a password in its URL: named, masked
    p.env["PIP_INDEX_URL"] = "http://user:pw4secret@127.0.0.1:9/simple"
    out, took = p.run(digest, "--out", str(tmp_path / "p3"))
    _one_line(out, "the index http://***@127.0.0.1:9/simple does not answer", "PIP_INDEX_URL")
    assert "pw4secret" not in out.stderr
    print(f"index: rc 2 in {took:.1f} s: {out.stderr.strip()}")
    # an id prefix two records share: named as ambiguous, not as "no such id"
    from repro.ledger import Ledger

    ledger = Ledger(p.ledger)
    ids = []
    while len({i[:1] for i in ids}) == len(ids):
        ids.append(ledger.append({"kind": "note", "status": "ok", "text": str(len(ids))})["id"])
    prefix = next(i[:1] for i in ids if sum(j[:1] == i[:1] for j in ids) > 1)
    out, _ = p.run(prefix, "--out", str(tmp_path / "p4"))
    _one_line(out, f"id {prefix!r} is ambiguous", "give more of the id")
    assert not any((tmp_path / f"p{i}").exists() for i in range(1, 5))  # nothing written


def test_a_read_only_mount_and_a_full_disk_are_refused_before_anything_is_written(tmp_path, index):
    p = Packer(tmp_path, index)
    ro, small = tmp_path / "ro", tmp_path / "small"
    ro.mkdir()
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(small)], check=True)
    try:
        out, took = p.run(p.lock("tiny-pkg"), "--out", str(ro / "pack"))
        _one_line(out, f"--out {ro / 'pack'}: {ro} cannot be written")
        print(f"read-only: rc 2 in {took:.1f} s")
        out, took = p.run(p.lock("big-pkg", "tiny-pkg"), "--out", str(small / "pack"))
        _one_line(out, "MiB free: give a folder on a larger disk (nothing was written there)")
        print(f"full disk: rc 2 in {took:.1f} s: {out.stderr.strip()}")
        assert list(small.iterdir()) == []  # not even the temporary folder
    finally:
        subprocess.run(["umount", str(ro)])
        subprocess.run(["umount", str(small)])


def _pip_children(marker: str) -> list[str]:
    """Processes whose command line names `marker` (a pack's cache folder): pip downloads left running."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and "pip" in cmdline:
            found.append(cmdline)
    return found


@pytest.mark.parametrize("sig,rc,how", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")])
def test_a_signal_mid_pack_leaves_nothing_half_made_and_no_child(tmp_path, index, sig, rc, how):
    p = Packer(tmp_path, index)
    out_dir = tmp_path / "pack"
    proc = subprocess.Popen(p.cmd(p.lock("slow-pkg", "tiny-pkg"), "--out", str(out_dir)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=p.env)
    deadline = time.monotonic() + 120
    while not _pip_children(str(tmp_path / "cache")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _pip_children(str(tmp_path / "cache")), "pip download never started"
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == rc, stdout + stderr
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1] == (
        f"repro env pack: interrupted ({how}): nothing was written to {out_dir} and no download is left running")
    assert not out_dir.exists() and not [f for f in tmp_path.iterdir() if f.name.startswith(".pack.")]
    assert not [f for f in (tmp_path / "cache").iterdir() if f.name.startswith("repro-pack-")]
    time.sleep(0.5)
    assert _pip_children(str(tmp_path / "cache")) == []


def test_two_packs_into_one_folder_one_wins_the_other_is_refused_in_one_line(tmp_path, index):
    p = Packer(tmp_path, index)
    digest, out_dir = p.lock("slow-pkg"), tmp_path / "pack"
    first = subprocess.Popen(p.cmd(digest, "--out", str(out_dir)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=p.env)
    deadline = time.monotonic() + 120
    while not _pip_children(str(tmp_path / "cache")) and time.monotonic() < deadline:
        time.sleep(0.2)
    second, took = p.run(digest, "--out", str(out_dir))
    _one_line(second, f"--out {out_dir}: another `repro env pack` is writing it now (pid {first.pid})")
    print(f"second pack: rc 2 in {took:.1f} s")
    first.send_signal(signal.SIGTERM)  # the slow wheel would take 30 s: the first's end is the signal test's
    first.communicate(timeout=60)
