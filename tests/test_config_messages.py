"""What a refused config says: the key a misspelt one meant, the fix for too long a warm-up."""

from __future__ import annotations

import pytest

from conftest import repro_cli

TINY = ("model=mlp", "framework=torch", "run.warmup=2", "run.steps=4")


@pytest.mark.slow
def test_a_misspelt_key_gets_the_key_it_meant(tmp_path):
    for override, meant in (("run.stpes=3", "run.steps"), ("modle.width=8", "model.width")):
        proc = repro_cli(*TINY, override, f"ledger.dir={tmp_path / 'ledger'}", "--dry-run")
        assert proc.returncode == 2 and f"{override.split('=')[0]} is not a config key: did you mean {meant}?" \
            in proc.stderr, proc.stderr
        assert "To append to your config" not in proc.stderr


def test_the_warmup_error_suggests_the_fix():
    from repro.config import ConfigError
    from repro.preflight import plan

    with pytest.raises(ConfigError, match=r"set run\.warmup=4 or fewer, or run\.steps=6 or more"):
        plan(["run.steps=5"])
    for overrides, fix in ((["run.warmup=1", "run.steps=3"], "set run.warmup=2"), (["run.warmup=0", "run.steps=2"],
                           "set run.warmup=2 and run.steps=3 or more"), (["run.steps=2"], "set run.steps=6 or more")):
        with pytest.raises(ConfigError) as e:
            plan(overrides)
        assert str(e.value).endswith(fix) and "or fewer" not in str(e.value), (overrides, str(e.value))
