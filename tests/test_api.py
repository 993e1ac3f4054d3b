"""The Python API: `repro.Ledger()` is the CLI's ledger, `repro.write_report` writes in the foreground
and leaves the `repro.report` package reachable."""

from __future__ import annotations

from conftest import shipped_ledger
from repro import paths
from repro.ledger import Ledger


def test_the_default_ledger_is_the_clis():
    assert Ledger().root == paths.default_ledger_dir()

def test_the_api_writes_a_report_in_the_foreground(tmp_path):
    import repro

    page = repro.write_report(experiment="quickstart", ledger=str(shipped_ledger()), out=str(tmp_path / "r"))
    assert page == tmp_path / "r" / "report.md" and page.read_text().startswith("# quickstart: sweep ")
    from repro import report  # the package, not an API name that shadows it

    assert hasattr(report, "__path__")
