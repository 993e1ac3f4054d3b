"""User text is data: override values, run names, paths and error reasons print as typed, in the
live progress, the closing table, the verdicts, the machine line, `--dry-run`, `repro compare` and
report.md: never read as rich markup (`[/]` made the close and `repro compare` fail with
MarkupError), never an escape sequence reaching the terminal; the ledger keeps them exactly."""

from __future__ import annotations

import argparse
import io
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from conftest import shipped_ledger
from repro.ledger import Ledger
from repro.report import compare, comparison, markdown
from repro.report.progress import Display
from repro.report.table import print_comparison

MARKUP = "a[/]b [bold red]x[/bold red] [link=http://e]y"
ESCAPES = "\x1b[31mRED\x1b[0m\rCR\x1b]0;title\x07\x07\x9b2J!"
CONTROL = ("\x1b", "\r", "\x07", "\x9b")


def hostile_ledger(root: Path, values: list[str]) -> Ledger:
    """The shipped quickstart sweep's first runs copied into a ledger at `root`, each with one
    hostile value of `hardware.device_match` (typed on its command line, in its config): the
    records a sweep with those overrides writes, linked as the originals are."""
    shipped = Ledger(shipped_ledger())
    runs = compare.newest_sweep(shipped, "quickstart")[:len(values)]
    ledger = Ledger(root)
    for run, value in zip(runs, values):
        prev = None
        for record in reversed(shipped.chain(run)):  # oldest first
            body = {k: v for k, v in record.items() if k not in ("id", "prev")}
            body["overrides"] = [*record.get("overrides", []), f"hardware.device_match={value}"]
            body["config"] = {**record["config"], "hardware": {**record["config"]["hardware"], "device_match": value}}
            body["sweep"] = {**record["sweep"], "swept": [*record["sweep"].get("swept", []), "hardware.device_match"]}
            if prev:
                body["prev"] = prev
            prev = ledger.append(body)["id"]
    return ledger


def _clean(text: str) -> None:
    for c in CONTROL:
        assert c not in text, (c, text[-2000:])


def test_compare_prints_markup_and_escapes_as_typed(tmp_path, capsys):
    """`repro compare` of a sweep whose override values hold `[/]` and escape sequences."""
    ledger = hostile_ledger(tmp_path / "ledger", [MARKUP, ESCAPES])
    sweep = ledger.heads(kind="run")[0]["sweep"]["id"]
    rc = compare.run(argparse.Namespace(ledger=str(ledger.root), ids=[], sweep=sweep, experiment=None, wide=False))
    out = capsys.readouterr().out
    assert rc == 0
    assert "a[/]b [bold" in out and "[link=http://e]y" in out and "REDCR!" in out  # the OSC title left out
    _clean(out)
    values = {r["config"]["hardware"]["device_match"] for r in Ledger(ledger.root).heads(kind="run")}
    assert values == {MARKUP, ESCAPES} and ledger.verify() == []  # the ledger keeps them exactly


def test_the_closing_table_in_a_terminal(tmp_path):
    """The close's table, verdicts, audit and machine line on a terminal console (colours on)."""
    ledger = hostile_ledger(tmp_path / "ledger", [MARKUP, ESCAPES])
    buf = io.StringIO()
    term = Console(file=buf, force_terminal=True, width=200, color_system=None)
    print_comparison(term, comparison.build(ledger.heads(kind="run")), hint="every column: add --wide")
    out = buf.getvalue()
    assert f"device_match {MARKUP}" in out and "device_match REDCR!" in out and "machine:" in out
    _clean(out)


def test_report_md_keeps_the_text_without_control_characters(tmp_path):
    ledger = hostile_ledger(tmp_path / "ledger", [MARKUP, ESCAPES])
    records = ledger.heads(kind="run")
    page = markdown.page(records, comparison.build(records), [], "results.csv")
    assert MARKUP in page and "REDCR!" in page
    _clean(page)


def test_live_progress_and_its_lines(capsys):
    """A run's name and its failure's reason in the live display (drawn in the main thread here)."""
    display = Display("rich", 2)
    try:
        display.job_started(0, f"torch · device_match {MARKUP}", 10)
        display._progress.refresh()
        display.job_finished(0, {"status": "failed", "id": "abc", "error": {"reason": f"boom {MARKUP} {ESCAPES}"}})
        display._progress.refresh()
    finally:
        display.close()
    out = capsys.readouterr().out
    assert "device_match a[/]b" in out and "boom a[/]b" in out
    _clean(out)


def test_plain_progress_drops_escapes(capsys):
    display = Display("plain", 1)
    display.job_started(0, f"torch · {ESCAPES}", 4)
    display.job_finished(0, {"status": "failed", "id": "abc", "error": {"reason": ESCAPES}})
    out = capsys.readouterr().out
    assert "RED" in out
    _clean(out)


def test_dry_run_prints_values_without_escapes(capsys):
    from repro import cli

    value = "\x1b[31mRED\x1b[0m[/]"
    rc = cli.dry_run(["framework=torch", "model=mlp", "model.preset=tiny", f"hardware.device_match='{value}'",
                      "run.steps=4", "run.warmup=2"])
    out = capsys.readouterr().out
    assert rc == 0 and "device_match='RED[/]'" in out, out
    _clean(out)


def test_a_notice_reaches_the_terminal_without_escapes(capsys):
    from repro.console import say

    say(f"the checkout changed ({ESCAPES})")
    err = capsys.readouterr().err
    assert err.startswith("repro: the checkout changed (RED")
    _clean(err.rstrip("\n"))


LIVE_NOTICE = r'''
import time
from repro.console import say
from repro.report.progress import Display
display = Display("rich", 1)
display.job_started(0, "torch", 10)
for step in range(1, 7):
    display.event(0, {"event": "step", "step": step, "steps": 10, "step_s": 0.01, "loss": 1.0})
    if step == 3:
        say("waiting for the MLflow projector pid 1 to finish before the measured steps")
    time.sleep(0.3)
display.close()
'''


@pytest.mark.slow
def test_a_notice_goes_above_the_live_progress_not_into_it():
    """In a terminal (a pty): the projector-wait notice is printed where rich clears the live lines
    (it then draws them again below it), never after the live line's own text on the same line."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal of 100 columns
        os.environ["COLUMNS"] = "100"
        os.execv(sys.executable, [sys.executable, "-c", LIVE_NOTICE])
    out, deadline = b"", time.time() + 60
    while time.time() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    before = text[:text.index("repro: waiting for the MLflow projector")]
    assert before.endswith("\x1b[2K") or before.endswith("\n"), repr(before[-200:])
    after = text[text.index("repro: waiting"):]
    assert "\n" in after and " 6/10" in after  # the live lines drawn again below the notice


@pytest.mark.slow
def test_a_sweep_with_markup_and_escapes_in_its_values_closes(sandbox):
    """The issue's probe: a sweep whose override values hold `[/]` and an escape sequence; its close
    (table, verdicts, machine line) and `repro compare` of it end well, the ledger keeps the bytes."""
    proc = sandbox.run("-m", "framework=torch", "model=mlp", "model.preset=tiny", "run.steps=4", "run.warmup=2",
                       "hardware.device_match='a[/]b','\x1b[31mRED'", "tracking.experiment=hostile_text")
    assert proc.returncode == 0 and "closing step failed" not in proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "device_match a[/]b" in proc.stdout and "device_match RED" in proc.stdout
    _clean(proc.stdout + proc.stderr)
    assert {h["config"]["hardware"]["device_match"] for h in sandbox.heads()} == {"a[/]b", "\x1b[31mRED"}
    shown = subprocess.run([sys.executable, "-m", "repro", "compare", "--experiment", "hostile_text", "--ledger",
                            str(sandbox.ledger)], capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0 and "a[/]b" in shown.stdout, shown.stdout[-2000:] + shown.stderr[-2000:]
    _clean(shown.stdout)
