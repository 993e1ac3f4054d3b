"""The typed read side (ledger/record.py): a stored record read back as a `Config` and typed blocks,
old records at the schema's defaults, unknown keys kept and named, a bad field named with its
record; one verdict plan (report/verdict.py `Plan.of`) and one "is this sweep auto" (preflight/verdict.py)."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from conftest import shipped_ledger
from repro.config import schema
from repro.config.spec import ADDED_AT_DEFAULT, config_hash
from repro.cli import run_subcommand
from repro.ledger import Ledger, recordfile
from repro.ledger.record import Record, RecordError, read_config, view
from repro.ledger.store import record_id
from repro.preflight.verdict import auto_rounds
from repro.report import compare
from repro.report import verdict as V

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


def test_a_record_changed_after_its_view_reads_as_it_is_now():
    """A reader that edits a record it holds (a test's A/A trial made auto, a report's copy) reads the
    edit: the blocks are read on each access, the config again when it no longer equals what was read."""
    r = copy.deepcopy(_runs()[0])
    rec = view(r)
    assert rec.repeat.auto is None and rec.config.run.deterministic is True
    r["repeat"] = {"index": 0, "count": 2, "group": "s/0", "auto": {"max": 4}}
    r["config"]["run"]["deterministic"] = False
    assert view(r) is rec and rec.repeat.auto == {"max": 4} and rec.config.run.deterministic is False


def test_typed_blocks():
    r = {"id": "x", "repeat": {"index": 2, "count": 3, "group": "S/1", "auto": {"max": 6}, "discarded": True,
                    "rerun": 1, "replaces": ["a", "b"]},
         "results": {"steady_median_s": 0.5}, "sweep": {"id": "S", "job": 4},
         "scheduler": {"name": "slurm", "job_id": "7", "node": "n3"}}
    rec = Record(r)
    assert (rec.repeat.index, rec.repeat.group, rec.repeat.auto, rec.repeat.discarded) == (2, "S/1", {"max": 6}, True)
    assert rec.repeat.count == 3 and rec.results.steady_median_s == 0.5 and (rec.sweep.id, rec.sweep.job) == ("S", 4)
    assert (rec.scheduler.name, rec.scheduler.node) == ("slurm", "n3")
    assert (rec.repeat.rerun, rec.repeat.replaces) == (1, ("a", "b"))
    cal = Record({"id": "z", "calibration": {"trial": 3, "label": 0, "gap": 0.05}}).calibration
    assert (cal.trial, cal.label, cal.gap) == (3, "0", 0.05)
    empty = Record({"id": "y"})
    assert (empty.repeat.index, empty.repeat.count, empty.repeat.auto, empty.results.steady_median_s, empty.sweep.job,
            empty.scheduler.node, empty.calibration.trial) == (None, 1, None, None, 0, "", None)
    with pytest.raises(RecordError, match="record y: repeat"):
        Record({"id": "y", "repeat": 3}).repeat



def test_the_blocks_readers_read_typed_are_the_records_values_with_each_default_once():
    """Every block a reader reads typed holds the record's values; a record that lacks one reads its
    dataclass's defaults; `raw` keeps the node as written. Every shipped record reads each block."""
    for r in Ledger(SHIPPED).records():
        rec = view(r)
        for name in ("results", "machine", "environment", "git", "data", "canary", "wall_split", "effective", "bisect",
                     "sweep", "repeat", "scheduler", "calibration"):
            getattr(rec, name)
        if rec.status == "ok" and rec.kind == "run":
            res = r["results"]
            assert (rec.results.steady_p10_s, rec.results.loss_sha256, rec.results.loss) == \
                (res["steady_p10_s"], res["loss_sha256"], res["loss"])
            assert (rec.machine.host, rec.environment.fingerprint, rec.git.commit, rec.data.sha256) == \
                tuple((r.get(block) or {}).get(key) for block, key in (("machine", "host"), ("environment", "fingerprint"),
                                                                       ("git", "commit"), ("data", "sha256")))
    r = {"id": "p", "status": "ok", "kind": "run", "created": "2026-01-01T00:00:00Z", "wall_s": 3.0,
         "results": {"first_step_s": 1.0, "loss": [2.0, 1.0], "compile": {"trace_lower_s": 0.1, "xla_compiles_per_step": [3, 0]},
                     "profile": {"profiler": "torch.profiler", "step_ms": 2.5, "categories_ms": {"matmul/conv": 2.0},
                                 "ops": {"mm": {"ms": 2.0, "count": 1, "category": "matmul/conv"}}}},
         "wall_split": {"parts": {"start": 1.0}, "rest_s": 0.2, "window": [1.0, 2.0]},
         "effective": {"platform": "cpu", "determinism": {"torch": True}},
         "bisect": {"key": "k", "good": "g", "bad": "b", "n": 4, "confirmation": {"outcome": "reproduces", "ratio": 1.1},
                    "probes": [{"position": 2, "outcome": "good", "runs": ["x"], "level": 0.9}],
                    "result": {"position": 3, "label": "c3", "ratio": 1.1, "posterior": 0.9}}}
    rec = Record(r)
    assert (rec.status, rec.kind, rec.created, rec.wall_s, rec.config_hash) == ("ok", "run", "2026-01-01T00:00:00Z", 3.0, None)
    assert rec.results.first_step_s == 1.0 and rec.results.second_step_s is None and rec.results.loss == [2.0, 1.0]
    assert (rec.results.compile.trace_lower_s, rec.results.compile.xla_compiles_per_step, rec.results.compile.compile_s) \
        == (0.1, [3, 0], None)
    p = rec.results.profile
    assert (p.profiler, p.step_ms, p.categories_ms, p.unprofiled_ms, p.categories_ops) == \
        ("torch.profiler", 2.5, {"matmul/conv": 2.0}, None, {})
    assert (rec.wall_split.parts, rec.wall_split.rest_s, rec.wall_split.rest, rec.wall_split.window) == \
        ({"start": 1.0}, 0.2, "", [1.0, 2.0])
    assert (rec.effective.platform, rec.effective.determinism, rec.effective.program_sha256) == ("cpu", {"torch": True}, None)
    b = rec.bisect
    assert (b.n, b.confirmation.ratio, b.confirmation.level, b.confirmation.runs, b.spent_s) == (4, 1.1, 0.95, (), 0.0)
    assert (b.probes[0].position, b.probes[0].level, b.probes[0].runs, b.probes[0].label) == (2, 0.9, ("x",), "")
    assert (b.culprit.position, b.culprit.label, b.culprit.level) == (3, "c3", 0.95)
    assert rec.results.raw is r["results"] and rec.machine.raw == {}
    empty = Record({"id": "e"})
    assert (empty.results.profile, empty.wall_split, empty.effective, empty.bisect.culprit, empty.results.loss,
            empty.machine.host, empty.git.dirty, empty.data.md5, empty.canary.slow) == (None, None, None, None, [], None,
                                                                                        None, {}, None)
    with pytest.raises(RecordError, match="record e: machine"):
        Record({"id": "e", "machine": [1]}).machine

# The two plans Plan.of replaced, as they were (report/comparison.py verdict_plan, report/noise.py _plan).
def _comparison_plan(records):
    node = next((r["config"].get("verdict") for r in records if r["config"].get("verdict")), None) or {}
    auto = [r["repeat"]["auto"] for r in records if (r.get("repeat") or {}).get("auto")]
    return V.Plan(band=node.get("band", V.BAND), sequential=bool(auto), trim=node.get("trim", V.TRIM),
                  statistic=node.get("statistic", V.STATISTIC),
                  max_repeats=auto[0]["max"] if auto else node.get("max_repeats", V.MAX_REPEATS))


def _noise_plan(records):
    auto = next(((r.get("repeat") or {}).get("auto") for r in records if (r.get("repeat") or {}).get("auto")), None)
    node = next(((r.get("config") or {}).get("verdict") for r in records if (r.get("config") or {}).get("verdict")),
                None) or {}
    band, trim, statistic = node.get("band", V.BAND), node.get("trim", V.TRIM), node.get("statistic", V.STATISTIC)
    if auto:
        return V.Plan(band=band, sequential=True, max_repeats=int(auto.get("max") or V.MAX_REPEATS), trim=trim,
                      statistic=statistic)
    return V.Plan(band=band, trim=trim, statistic=statistic)


def _judged(plan: V.Plan) -> tuple:
    """What a plan decides by: max_repeats is read only for sequential looks."""
    return dataclasses.replace(plan, max_repeats=0) if not plan.sequential else plan


def test_plan_of_is_what_both_old_paths_built_on_a_shipped_sweep():
    ledger = Ledger(SHIPPED)
    sweeps = sorted({r["sweep"]["id"] for r in _runs() if r.get("sweep")})
    assert sweeps
    for sweep_id in sweeps:
        records = compare.sweep_runs(ledger, sweep_id)
        variants = [records]
        tuned = copy.deepcopy(records)  # the same sweep as auto with its own verdict config
        for i, r in enumerate(tuned):
            r["config"]["verdict"] = {"band": 0.05, "trim": 0.1, "statistic": "trimmed", "max_repeats": 8}
            r["repeat"] = {"index": i, "count": 1, "group": f"{sweep_id}/{i}", "auto": {"max": 6}}
        mixed = copy.deepcopy(records)  # an old record first (no verdict), then one with it
        mixed[-1]["config"]["verdict"] = {"band": 0.03}
        variants += [tuned, mixed]
        for rs in variants:
            plan = V.Plan.of(rs)
            assert plan == _comparison_plan(rs), sweep_id
            assert _judged(plan) == _judged(_noise_plan(rs)), sweep_id
        assert V.Plan.of(tuned) == V.Plan(band=0.05, sequential=True, max_repeats=6, trim=0.1, statistic="trimmed")
        assert V.Plan.of(mixed).band == 0.03


def test_the_verdict_defaults_are_the_schemas():
    d = schema.VerdictConfig()
    assert (V.BAND, V.MAX_REPEATS, V.TRIM, V.STATISTIC) == (d.band, d.max_repeats, d.trim, d.statistic)
    assert V.Plan.of([{"id": "old", "config": {}}]) == V.Plan()


def test_is_this_sweep_auto_one_answer():
    def jobs(n, repeats):
        return tuple(dataclasses.replace(schema.Config(), run=schema.RunConfig(repeats=repeats)) for _ in range(n))

    assert auto_rounds(jobs(2, "auto")) and not auto_rounds(jobs(1, "auto"))
    assert not auto_rounds(jobs(2, 3)) and not auto_rounds(())


def _written(root, body: dict) -> str:
    """A record file as the ledger writes it, body as given: its id."""
    body = {k: v for k, v in body.items() if k != "id"}
    body["id"] = record_id(body)
    folder = root / body["created"][:10]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{body['id']}.json").write_bytes(recordfile.dumps(body))
    return body["id"]


def test_ledger_show_names_an_unknown_key_and_a_bad_field_exits_2(tmp_path, capsys):
    base = copy.deepcopy(_runs()[0])
    newer = copy.deepcopy(base)
    newer["config"]["tracking"]["from_a_newer_repro"] = 1
    bad = copy.deepcopy(base)
    bad["config"]["run"]["deterministic"] = "yes"
    ledger = tmp_path / "ledger"
    ids = [_written(ledger, r) for r in (base, newer, bad)]
    assert run_subcommand(["ledger", "show", ids[0], "--ledger", str(ledger)]) == 0
    assert "does not know" not in capsys.readouterr().out
    assert run_subcommand(["ledger", "show", ids[1], "--ledger", str(ledger)]) == 0
    assert "does not know (kept as written): tracking.from_a_newer_repro" in capsys.readouterr().out
    assert run_subcommand(["ledger", "show", ids[2], "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err.strip()
    assert ids[2] in err and "config.run.deterministic" in err and "\n" not in err


def test_replay_refuses_a_config_it_cannot_read_whole_in_one_line_exit_2(tmp_path, capsys):
    """A recorded config with a key this repro does not know is not replayed without it; one it cannot
    read typed names the record and the field. Both before anything runs (nothing is written)."""
    newer = copy.deepcopy(_runs()[0])
    newer["config"]["run"]["from_a_newer_repro"] = 1
    bad = copy.deepcopy(_runs()[0])
    bad["config"]["run"]["deterministic"] = "yes"
    ledger = tmp_path / "ledger"
    ids = [_written(ledger, r) for r in (newer, bad)]
    count = len(Ledger(ledger).entries())
    assert run_subcommand(["replay", ids[0], "--ledger", str(ledger), "--progress", "none"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and ids[0] in err and "run.from_a_newer_repro" in err and "repro that wrote it" in err
    assert run_subcommand(["replay", ids[1], "--ledger", str(ledger), "--progress", "none"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and ids[1] in err and "config.run.deterministic" in err
    assert len(Ledger(ledger).entries()) == count
