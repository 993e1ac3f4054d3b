"""The tutorial's pictures (docs/_static/tutorial-*.png), made as a new user would see them.

    .venv/bin/python scripts/docs_pictures.py [--keep DIR]

1. A fresh clone of this repository's HEAD in a temp folder (its .venv a link to this one's, its code the
   clone's through PYTHONPATH), where the tutorial's `repro +exp=quickstart` runs in a pseudo-terminal
   whose output is played on a pyte screen (a VT100 emulator, 120 x 52): the screen as it stands when the
   command returns is drawn to tutorial-terminal.png (matplotlib, monospace, the terminal's colours).
2. The report that run wrote: its steady-time plot, copied to tutorial-report.png.
3. The MLflow UI over the run's store: `mlflow server` and headless Chromium (tests/browser.py, as
   tests/test_report_browser.py drives it), the experiment's runs table expanded: tutorial-mlflow.png.

The pictures are committed (the manual shows them; `make docs` fetches and runs nothing); run this again
when the tutorial's output changes. It takes the quickstart's time (about a minute on a quiet 2-core box).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pty
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STATIC = REPO / "docs" / "_static"
COLUMNS, LINES = 120, 52


def clone(into: Path) -> Path:
    repo = into / "repro"
    subprocess.run(["git", "clone", "-q", str(REPO), str(repo)], check=True)
    (repo / ".venv").symlink_to((REPO / ".venv").resolve())
    return repo


def screen_of(data: bytes) -> "pyte.Screen":  # noqa: F821
    """What a terminal of COLUMNS x LINES shows after `data` was written to it."""
    import pyte

    screen = pyte.Screen(COLUMNS, LINES)
    pyte.ByteStream(screen).feed(data)
    return screen


def play(command: list[str], cwd: Path, env: dict) -> bytes:
    """Run `command` in a pseudo-terminal of COLUMNS x LINES; everything it wrote there."""
    written = bytearray()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, its terminal the pty
        os.chdir(cwd)
        os.execvpe(command[0], command, env)
    import fcntl
    import struct
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    while True:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            written += data
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: exit {os.waitstatus_to_exitcode(status)}")
    return bytes(written)


PALETTE = {"default": "#d0d0d0", "black": "#1e1e1e", "red": "#f07178", "green": "#9ece6a", "yellow": "#e0af68",
           "blue": "#7aa2f7", "magenta": "#bb9af7", "cyan": "#7dcfff", "white": "#e0e0e0", "brown": "#e0af68"}


def draw(screen, path: Path) -> None:
    """The screen's characters in their colours, one monospace cell each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    used = max((y for y in range(LINES) if "".join(screen.buffer[y][x].data for x in range(COLUMNS)).strip()),
               default=0) + 1
    size = 8.6  # points; a DejaVu Sans Mono cell is 0.6 em wide, so runs of text drawn apart stay in their columns
    cell_w, cell_h = 0.6 * size / 72, 0.16  # inches
    fig = plt.figure(figsize=(COLUMNS * cell_w + 0.3, used * cell_h + 0.3), dpi=110)
    fig.patch.set_facecolor("#1e1e1e")
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(-1, COLUMNS + 1)
    ax.set_ylim(used + 1, -1)
    for y in range(used):
        row, x = screen.buffer[y], 0
        while x < COLUMNS:  # runs of one colour and weight, drawn as one string
            start, fg, bold = x, row[x].fg, row[x].bold
            while x < COLUMNS and row[x].fg == fg and row[x].bold == bold:
                x += 1
            text = "".join(row[i].data for i in range(start, x))
            if text.strip():
                ax.text(start, y + 0.5, text, family="DejaVu Sans Mono", size=size, va="center", ha="left",
                        color=PALETTE.get(fg, "#" + fg if len(fg) == 6 else PALETTE["default"]),
                        weight="bold" if bold else "normal")
    fig.savefig(path, facecolor=fig.get_facecolor())
    plt.close(fig)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mlflow_picture(store: str, path: Path) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from browser import Chromium

    port = free_port()
    server = subprocess.Popen([str(REPO / ".venv/bin/mlflow"), "server", "--backend-store-uri", store,
                               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(0.5)

        async def look():
            async with Chromium() as page:
                # the quickstart's experiment (the store's first after Default), on its runs table (MLflow
                # 3.17 otherwise opens on its GenAI overview)
                await page.open(f"{url}/#/experiments/1/runs")
                await page.wait_text("quickstart sweep", "matching runs", timeout=180)
                await asyncio.sleep(3)
                expanders = 'button[data-component-id$="runnamecellrenderer.tsx_46"]'  # as test_report_browser
                await page.js(f"document.querySelectorAll('{expanders}').forEach(b => b.click())")
                await asyncio.sleep(3)
                await page.screenshot(path)
        asyncio.run(look())
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", help="work in this folder and keep it (default: a temp folder, removed)")
    parser.add_argument("--again", action="store_true",
                        help="with --keep: draw the pictures again from what the kept folder holds (the terminal's "
                             "bytes, the report, the MLflow store), running nothing")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="repro-docs-pictures-"))
    work.mkdir(parents=True, exist_ok=True)
    STATIC.mkdir(parents=True, exist_ok=True)
    repo = work / "repro" if args.again else clone(work)
    env = {"PATH": f"{repo / '.venv/bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
           "LANG": "C.UTF-8", "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(LINES),
           "PYTHONPATH": str(repo / "src"),
           # its own machine folder: the run waits for no other sweep's MLflow projector on this machine
           "REPRO_MACHINE_DIR": str(work / "machine")}
    captured = work / "terminal.bytes"
    if not args.again:
        captured.write_bytes(play(["repro", "+exp=quickstart"], repo, env))
    draw(screen_of(captured.read_bytes()), STATIC / "tutorial-terminal.png")
    reports = sorted((repo / "ledger" / ".reports").glob("*/steady_time.png"), key=lambda p: p.stat().st_mtime)
    shutil.copyfile(reports[-1], STATIC / "tutorial-report.png")
    mlflow_picture(f"sqlite:///{repo / 'mlflow.db'}", STATIC / "tutorial-mlflow.png")
    print("\n".join(str(p) for p in sorted(STATIC.glob("tutorial-*.png"))))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
