"""Pipes, closed streams and encodings behave as in git: a reader that goes away (`| head -1`)
never fails a run or stops a sweep (the rest of the output is dropped, the ledger and MLflow get
everything), a read command with a closed stdout ends quietly with exit 0, an ASCII terminal gets
ASCII glyphs (× -> x, ⚠ -> !, ─ -> -) and no UnicodeEncodeError, and the files repro writes are
UTF-8 whatever the locale."""

from __future__ import annotations

import csv
import io
import subprocess
import sys

import pytest

from conftest import Sandbox


def _gone_reader(box: Sandbox, args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    """`repro ARGS | head -0`: the pipe's reader is gone before the command writes its first byte."""
    proc = subprocess.Popen(args, cwd=box.root, env=env or box.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    return subprocess.CompletedProcess(args, proc.wait(timeout=600), "", err)


@pytest.fixture(scope="module")
def piped(tmp_path_factory):
    """Issue probe: "`repro -m ... | head -1` records the first run `failed` ("Broken pipe") and
    stops the sweep with nothing said"."""
    box = Sandbox(tmp_path_factory.mktemp("pipes"))
    proc = _gone_reader(box, box.repro_cmd("-m", "framework=jax,torch", "model=mlp", "model.preset=tiny",
                                           "run.steps=6", "run.warmup=2", "tracking.experiment=pipes"))
    return box, proc


@pytest.mark.slow
def test_a_sweep_whose_reader_went_away_runs_and_records_every_job(piped):
    box, proc = piped
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Broken pipe" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    heads = box.heads()
    assert sorted((h["config"]["framework"]["name"], h["status"]) for h in heads) == [("jax", "ok"), ("torch", "ok")]
    assert sorted(r.data.tags["repro.ledger_id"] for r in box.mlflow_runs("pipes")
                  if "mlflow.parentRunId" in r.data.tags) == sorted(h["id"] for h in heads)


@pytest.mark.slow
@pytest.mark.parametrize("command", [["ledger", "list"], ["ledger", "list", "--json"], ["compare", "--sweep", "SWEEP"],
                                     ["ledger", "verify"]])
def test_a_read_command_whose_reader_went_away_ends_quietly_with_exit_0(piped, command):
    """Issue probe: "read commands with a closed stdout end in tracebacks"."""
    box, _ = piped
    sweep = box.heads()[0]["sweep"]["id"]
    args = [sys.executable, "-m", "repro", *[sweep if a == "SWEEP" else a for a in command], "--ledger", str(box.ledger)]
    proc = _gone_reader(box, args)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr[-3000:]
    closed = subprocess.run(["bash", "-c", " ".join(f"'{a}'" for a in args) + " >&-"], cwd=box.root, env=box.env(),
                            capture_output=True, text=True, timeout=300)  # stdout closed, not a pipe
    assert (closed.returncode, closed.stderr) == (0, ""), closed.stderr[-3000:]


@pytest.mark.slow
def test_an_ascii_terminal_gets_ascii_glyphs_and_files_stay_utf8(piped):
    """Issue probe: "`PYTHONIOENCODING=ascii` or a C locale without UTF-8 gives UnicodeEncodeError
    tracebacks and leaves `results.csv` truncated"."""
    box, _ = piped
    sweep = box.heads()[0]["sweep"]["id"]
    ascii_env = box.env(PYTHONIOENCODING="ascii", LANG="C", LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    compare = subprocess.run([sys.executable, "-m", "repro", "compare", "--sweep", sweep, "--ledger", str(box.ledger)],
                             cwd=box.root, env=ascii_env, capture_output=True, timeout=300)
    assert compare.returncode == 0 and b"Traceback" not in compare.stderr, compare.stderr.decode()[-3000:]
    out = compare.stdout.decode("ascii")  # nothing but ASCII reached the terminal
    assert "x best" in out and "--------" in out, out
    report = subprocess.run([sys.executable, "-m", "repro", "report", "--sweep", sweep, "--ledger", str(box.ledger)],
                            cwd=box.root, env=ascii_env, capture_output=True, timeout=300)
    assert report.returncode == 0 and b"Traceback" not in report.stderr, report.stderr.decode()[-3000:]
    folder = box.ledger / ".reports" / sweep
    page = (folder / "report.md").read_bytes().decode("utf-8")
    assert "× best" in page
    rows = list(csv.reader(io.StringIO((folder / "results.csv").read_bytes().decode("utf-8"))))
    assert len(rows) == 3 and all(len(r) == len(rows[0]) for r in rows), rows  # header + 2 runs, whole
