"""The typed read side (ledger/record.py): a stored record read back as a `Config` and typed blocks,
old records at the schema's defaults, unknown keys kept and named, a bad field named with its record."""

from __future__ import annotations

import copy

import pytest

from conftest import shipped_ledger
from repro.config import schema
from repro.config.spec import ADDED_AT_DEFAULT, config_hash
from repro.ledger import Ledger
from repro.ledger.record import Record, RecordError, read_config, view

SHIPPED = shipped_ledger()


def _runs() -> list[dict]:
    return [r for r in Ledger(SHIPPED).heads(kind="run") if "config" in r]


def _drop(config: dict, dotted: str) -> None:
    *parents, leaf = dotted.split(".")
    for p in parents:
        config = config[p]
    config.pop(leaf)


def test_every_shipped_record_reads_typed_with_no_unknown_key():
    runs = _runs()
    assert runs
    for r in runs:
        rec = view(r)
        assert isinstance(rec.config, schema.Config) and rec.unknown_keys == (), r["id"]
        assert rec.config.run.deterministic is r["config"]["run"]["deterministic"]


def test_an_old_record_gets_the_defaults_of_the_keys_added_since():
    """Every key ADDED_AT_DEFAULT names (and the whole `verdict` group, younger than the first records)
    dropped: the typed read gives each its schema default, which is the value the hash rule assumes."""
    new = copy.deepcopy(next(r for r in _runs() if "cluster" in r["config"]))
    old = copy.deepcopy(new)
    for dotted in ADDED_AT_DEFAULT:
        group, _, key = dotted.partition(".")
        if key and group in old["config"] and key in old["config"][group]:
            _drop(old["config"], dotted)
        elif not key:
            old["config"].pop(group, None)
    old["config"].pop("verdict", None)
    rec = Record(old)
    assert rec.unknown_keys == () and not rec.recorded("verdict") and not rec.recorded("cluster")
    assert rec.config.verdict == schema.VerdictConfig() and rec.config.cluster == schema.ClusterConfig()
    assert (rec.config.run.init, rec.config.run.profile, rec.config.model.impl) == ("native", False, "native")
    for dotted, default in ADDED_AT_DEFAULT.items():  # the hash's rule and the schema agree
        group, _, key = dotted.partition(".")
        node = getattr(rec.config, group)
        assert (getattr(node, key) if key else {k: getattr(node, k) for k in default}) == default, dotted
    assert config_hash(old["config"]) == config_hash(new["config"]) == new["config_hash"]


def test_an_unknown_key_is_kept_and_named():
    r = copy.deepcopy(_runs()[0])
    r["config"]["run"]["from_a_newer_repro"] = 3
    r["config"]["brand_new_group"] = {"x": 1}
    rec = Record(r)
    assert rec.unknown_keys == ("run.from_a_newer_repro", "brand_new_group")
    assert rec.raw["config"]["run"]["from_a_newer_repro"] == 3  # kept in the record, never dropped
    assert rec.config.run.seed == r["config"]["run"]["seed"]


@pytest.mark.parametrize("where, value, field", [
    ("run.deterministic", "yes", "config.run.deterministic"),
    ("run.seed", 1.5, "config.run.seed"),
    ("verdict.band", True, "config.verdict.band"),
    ("run", 3, "config.run"),
])
def test_a_bad_field_names_the_record_and_the_field(where, value, field):
    runs = copy.deepcopy(_runs()[:2])
    bad = runs[0]
    group, _, key = where.partition(".")
    if key:
        bad["config"].setdefault(group, {})[key] = value
    else:
        bad["config"][group] = value
    with pytest.raises(RecordError) as e:
        Record(bad).config
    assert e.value.record_id == bad["id"] and e.value.field == field
    assert bad["id"] in str(e.value) and field in str(e.value) and "\n" not in str(e.value)
    assert Record(runs[1]).config.run.deterministic in (True, False)  # every other record still reads
    with pytest.raises(RecordError, match="config is list"):
        read_config([], "abc")


def test_the_view_is_made_once_per_record_dict():
    r = _runs()[0]
    first = view(r)
    assert view(r) is first and view(first) is first and first.config is view(r).config
    assert view(copy.deepcopy(r)) is not first


def test_typed_blocks():
    r = {"id": "x", "repeat": {"index": 2, "count": 3, "group": "S/1", "auto": {"max": 6}, "discarded": True},
         "results": {"steady_median_s": 0.5}, "sweep": {"id": "S", "job": 4}}
    rec = Record(r)
    assert (rec.repeat.index, rec.repeat.group, rec.repeat.auto, rec.repeat.discarded) == (2, "S/1", {"max": 6}, True)
    assert rec.results.steady_median_s == 0.5 and (rec.sweep.id, rec.sweep.job) == ("S", 4)
    empty = Record({"id": "y"})
    assert (empty.repeat.index, empty.repeat.auto, empty.results.steady_median_s, empty.sweep.job) == (None, None, None, 0)
    with pytest.raises(RecordError, match="record y: repeat"):
        Record({"id": "y", "repeat": 3}).repeat
