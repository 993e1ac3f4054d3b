"""Issue 32's small things: a setting that does not apply reads "n/a" in every MLflow run, the
warm-up error names the fix, `repro.Ledger()` is the CLI's ledger."""

from __future__ import annotations

import copy

import pytest

from conftest import shipped_ledger
from repro import paths
from repro.ledger import Ledger
from repro.report import compare
from repro.tracking import content


def test_a_setting_that_does_not_apply_reads_the_same_in_every_run():
    records = compare.newest_sweep(Ledger(shipped_ledger()), "quickstart")
    torch = copy.deepcopy(next(r for r in records if r["config"]["framework"]["name"] == "torch"))
    jax = next(r for r in records if r["config"]["framework"]["name"] == "jax")
    torch["effective"]["autocast"] = None  # what torch_backend records without autocast
    jax_eff = {k: v for k, v in jax["effective"].items() if k != "autocast"}  # JAX has no such knob
    assert content.params(torch)["effective.autocast"] == "n/a"
    assert content.params({**jax, "effective": jax_eff})["effective.autocast"] == "n/a"


def test_the_warmup_error_suggests_the_fix():
    from repro.config import ConfigError
    from repro.preflight import plan

    with pytest.raises(ConfigError, match=r"set run\.warmup=4 or fewer, or run\.steps=6 or more"):
        plan(["run.steps=5"])


def test_the_default_ledger_is_the_clis():
    assert Ledger().root == paths.default_ledger_dir()


def test_what_a_person_compares_by_sorts_first_in_mlflow():
    records = compare.newest_sweep(Ledger(shipped_ledger()), "quickstart")
    keys = sorted(content.params(records[0]))  # MLflow's compare view sorts param keys so
    assert keys[:4] == ["Batch size", "Framework", "Model", "Precision"]
    assert content.params(records[0])["Framework"] == records[0]["config"]["framework"]["name"]


def test_the_api_writes_a_report_in_the_foreground(tmp_path):
    import repro

    page = repro.write_report(experiment="quickstart", ledger=str(shipped_ledger()), out=str(tmp_path / "r"))
    assert page == tmp_path / "r" / "report.md" and page.read_text().startswith("# quickstart: sweep ")
    from repro import report  # the package, not an API name that shadows it

    assert hasattr(report, "__path__")
