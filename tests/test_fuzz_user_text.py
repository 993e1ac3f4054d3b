"""What users type, fuzzed (hypothesis): override values and run names holding rich markup, escape
sequences, control characters, quotes, Hydra's own syntax and any unicode. `--dry-run` (the
preflight's plan) ends in a plan or a one-line config error, never a traceback nor a hang; the
closing table, its verdicts and machine line, report.md and `repro compare` render every value
without crashing and without an escape sequence; the ledger keeps each value exactly and verifies.
Bounded (max_examples, deadline) to run in seconds; no process per example."""

from __future__ import annotations

import argparse
import io
from contextlib import redirect_stderr, redirect_stdout
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from conftest import shipped_ledger
from repro.ledger import Ledger
from repro.report import compare, comparison, markdown
from repro.report.table import print_comparison

FRAGMENTS = ["[/]", "[bold]", "[/bold]", "[link=http://x]", "[red]", "\\", "\\[", ":smile:", "\x1b[31m", "\x1b[2J",
             "\x1b]0;title\x07", "\x1b", "\r", "\n", "\t", "\x00", "\x07", "\x7f", "\x9b", "\x85", "'", '"', "$",
             "${oc.env:HOME}", "${", "}", "{", ",", "=", ":", "%", "[", "]", "(", ")", "×", "⚠", "\u202e", "é", " "]
VALUES = st.one_of(st.text(max_size=24),
                   st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=3), min_size=1, max_size=10).map("".join))
# What a terminal or a page may show of user text: no escape sequence, no control character but \n and \t.
FORBIDDEN = [chr(c) for c in [*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0)]]
# deadline: an example that takes longer fails (a hang would); derandomize: CI sees the examples seen here.
SETTINGS = dict(deadline=5000, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)


def _no_control(text: str) -> None:
    bad = sorted({repr(c) for c in text if c in FORBIDDEN})
    assert not bad, (bad, text[-500:])


def _quoted(value: str) -> str:
    """A value as Hydra's grammar reads one quoted string."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@pytest.fixture(scope="module")
def warm_preflight():
    """The first plan composes Hydra's config tree (seconds): done before the timed examples."""
    from repro import cli

    assert cli.dry_run(["framework=torch", "model=mlp", "model.preset=tiny", "run.steps=4", "run.warmup=2"]) == 0


@settings(max_examples=20, **{**SETTINGS, "deadline": 30000})  # a new value composes anew: ~0.5-2.5 s
@given(value=VALUES, quoted=st.booleans())
def test_dry_run_plans_or_refuses_in_one_line(warm_preflight, value, quoted):
    from repro import cli

    override = f"hardware.device_match={_quoted(value) if quoted else value}"
    with redirect_stdout(io.StringIO()) as out, redirect_stderr(io.StringIO()) as err:
        rc = cli.dry_run(["framework=torch", "model=mlp", "model.preset=tiny", "run.steps=4", "run.warmup=2", override])
    out, err = out.getvalue(), err.getvalue()
    assert rc in (0, 2), (rc, out, err)
    assert "Traceback" not in out + err
    if rc == 2:
        assert err.startswith("repro: invalid config, nothing was run:"), err
    _no_control(out)
    _no_control(err.replace("\n", ""))


def _sweep() -> list[dict]:
    """The shipped quickstart sweep's two mlp runs (jax, torch), as records."""
    runs = compare.newest_sweep(Ledger(shipped_ledger()), "quickstart")
    return [r for r in runs if r["config"]["model"]["name"] == "mlp"][:2]


SWEEP = _sweep()


def _with(records: list[dict], values: list[str]) -> list[dict]:
    """`records`, each with one value of `hardware.device_match` (command line and config) and a
    failure reason holding it too."""
    out = []
    for record, value in zip(records, values):
        r = {**record, "overrides": [*record["overrides"], f"hardware.device_match={value}"],
             "config": {**record["config"], "hardware": {**record["config"]["hardware"], "device_match": value}}}
        out.append(r)
    return out


@settings(max_examples=50, **SETTINGS)
@given(values=st.lists(VALUES, min_size=2, max_size=2, unique=True), width=st.sampled_from([60, 80, 200]))
def test_the_close_and_report_md_render_any_value(values, width):
    records = _with(SWEEP, values)
    built = comparison.build(records)
    buf = io.StringIO()
    print_comparison(Console(file=buf, force_terminal=True, width=width, color_system=None), built,
                     hint="every column: add --wide")
    _no_control(buf.getvalue())
    page = markdown.page(records, built, [], "results.csv")
    _no_control(page)


@settings(max_examples=25, **SETTINGS)
@given(values=st.lists(VALUES, min_size=2, max_size=2, unique=True))
def test_the_ledger_keeps_values_exactly_and_compare_reads_them(values):
    root = Path(tempfile.mkdtemp(prefix="repro-fuzz-"))
    try:
        ledger = Ledger(root / "ledger")
        for record in _with(SWEEP, values):
            ledger.append({k: v for k, v in record.items() if k not in ("id", "prev")})
        assert ledger.verify() == []
        kept = sorted(r["config"]["hardware"]["device_match"] for r in ledger.heads(kind="run"))
        assert kept == sorted(values)
        sweep = ledger.heads(kind="run")[0]["sweep"]["id"]
        with redirect_stdout(io.StringIO()) as out:
            assert compare.run(argparse.Namespace(ledger=str(ledger.root), ids=[], sweep=sweep, experiment=None,
                                                  wide=False)) == 0
        _no_control(out.getvalue())
    finally:
        shutil.rmtree(root, ignore_errors=True)
