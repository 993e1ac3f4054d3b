"""Shell completion (Hydra's `-sc query=bash`): it offers `+exp=` and the config groups."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # every test here starts a process


def test_completion_offers_plus_exp(tmp_path):
    for line in ("repro ", "repro run ", "repro ex"):
        proc = subprocess.run([sys.executable, "-m", "repro", "-sc", "query=bash"], capture_output=True, text=True,
                              env={**os.environ, "COMP_LINE": line}, timeout=120)
        words = proc.stdout.split()
        assert proc.returncode == 0 and "exp=" not in words, (line, words)
        assert "+exp=" in words and "model=" in words or line == "repro ex", (line, words)
