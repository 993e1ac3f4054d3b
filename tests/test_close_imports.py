"""The close's first table imports nothing on the command's path: what it needs was imported while
the first worker started (sweep_close.prepare), lazy imports of its libraries included."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO, shipped_ledger

# In a fresh interpreter, as a command has it: the test's own process imported most of these long ago.
PROGRAM = """
import json, sys
from repro import sweep_close
from repro.ledger import Ledger
from repro.report import compare
records = [r for r in compare.newest_sweep(Ledger(sys.argv[1]), "quickstart") if r["config"]["model"]["name"] == "mlp"]
sweep_close.prepare()
before = set(sys.modules)
from repro import report
from repro.report import comparison
from repro.report.table import print_comparison
print_comparison(report.console(), comparison.build(records))
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.slow
def test_the_first_closing_table_imports_nothing_after_prepare():
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(shipped_ledger())], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert "mlp" in proc.stdout  # the table was printed
    assert json.loads(lines[-1]) == []
