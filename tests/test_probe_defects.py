"""Defects a probe of hostile input found (issue: every sweep proves its own determinism), each
reproduced first: refused at the edge with one line naming the key or variable and the fix, and
nothing written. In this process: no worker."""

from __future__ import annotations

import pytest

from repro.config.schema import ConfigError
from repro.preflight import plan


@pytest.mark.parametrize("override, says", [
    ("run.min_steady_s=inf", "run.min_steady_s=inf must be a finite number"),
    ("run.lr=nan", "run.lr=nan must be a finite number"),
    ("verdict.band=inf", "verdict.band=inf must be a finite number"),
    ("run.min_steady_s=1e308", "run.min_steady_s=1e+308 is not below run.timeout_s=3600: the steady window could never end"),
])
def test_numbers_no_run_can_hold_are_refused_before_it_starts(override, says):
    """run.min_steady_s=inf passed the preflight and the run was recorded failed (OverflowError)."""
    with pytest.raises(ConfigError, match=None) as e:
        plan([override])
    assert says in str(e.value)


@pytest.mark.parametrize("place, says", [
    ("file", "is a file, not a folder"),
    ("/proc/self/x", "lies under /proc"),
])
def test_a_machine_dir_that_cannot_take_locks_is_named_in_the_preflight(tmp_path, monkeypatch, place, says):
    """REPRO_MACHINE_DIR set to a file or /proc: every job started and was recorded failed
    ("could not prepare the run: [Errno 30] ..."), the variable never named."""
    if place == "file":
        (tmp_path / "file").write_text("")
        place = str(tmp_path / "file")
    monkeypatch.setenv("REPRO_MACHINE_DIR", place)
    with pytest.raises(ConfigError) as e:
        plan(["run.steps=5", "run.warmup=2", f"ledger.dir={tmp_path / 'ledger'}"])
    text = str(e.value)
    assert text.startswith(f"REPRO_MACHINE_DIR={place!r} {says}") and "set REPRO_MACHINE_DIR to a folder" in text
    assert "ledger.dir" not in text and not (tmp_path / "ledger").exists()
