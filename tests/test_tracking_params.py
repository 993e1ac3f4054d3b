"""The parameters a run shows in MLflow (tracking/content.py), read from the shipped ledger: a setting
that does not apply reads "n/a" in every run, and what a person compares by sorts first."""

from __future__ import annotations

import copy

from conftest import shipped_ledger
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

def test_what_a_person_compares_by_sorts_first_in_mlflow():
    records = compare.newest_sweep(Ledger(shipped_ledger()), "quickstart")
    keys = sorted(content.params(records[0]))  # MLflow's compare view sorts param keys so
    assert keys[:4] == ["Batch size", "Framework", "Model", "Precision"]
    assert content.params(records[0])["Framework"] == records[0]["config"]["framework"]["name"]
