"""Defects a probe of hostile input found (issue: every sweep proves its own determinism), each
reproduced first: refused at the edge with one line naming the key or variable and the fix, and
nothing written. In this process: no worker."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


def _tampered_ledger(tmp_path):
    """The shipped ledger, copied, with one quickstart run's steady median edited by hand (0.5456 -> 0.0456 ms)."""
    import shutil

    from conftest import shipped_ledger
    from repro.ledger import Ledger
    from repro.report.compare import newest_sweep

    root = tmp_path / "ledger"
    shutil.copytree(shipped_ledger(), root)
    record = newest_sweep(Ledger(root), "quickstart")[0]
    path = next(root.rglob(f"{record['id']}.json"))
    text = path.read_text()
    value = json.dumps(record["results"]["steady_median_s"])
    assert text.count(value) >= 1
    path.write_text(text.replace(value, json.dumps(record["results"]["steady_median_s"] / 12), 1))
    return root, record["id"]


def test_report_refuses_and_list_marks_a_record_edited_after_it_was_written(tmp_path, capsys):
    """`repro report` published a hand-edited steady median with exit 0 and a ratio computed from it."""
    from repro.cli import dispatch

    root, rid = _tampered_ledger(tmp_path)
    out = tmp_path / "report"
    assert dispatch(["report", "--ledger", str(root), "--experiment", "quickstart", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"repro report: not written: record {rid} (") and "was changed after it was written" in err
    assert not out.exists()
    assert dispatch(["ledger", "list", "--ledger", str(root)]) == 0
    captured = capsys.readouterr()
    assert "⚠ changed" in captured.out and "1 record(s) marked '⚠ changed'" in captured.err


def test_export_marks_and_compare_refuses_a_record_edited_after_it_was_written(tmp_path, capsys):
    """`repro ledger export` and `repro.compare()` published a hand-edited record with no word (issue 59)."""
    import pandas as pd

    import repro
    from repro.cli import dispatch
    from repro.ledger import LedgerError

    root, rid = _tampered_ledger(tmp_path)
    out = tmp_path / "runs.csv"
    assert dispatch(["ledger", "export", "--ledger", str(root), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "1 record(s) changed after they were written, exported with verified=false: " + rid in err
    df = pd.read_csv(out)
    assert list(df.loc[~df["verified"], "id"]) == [rid] and df["verified"].sum() == len(df) - 1
    with pytest.raises(LedgerError, match=f"repro.compare: record {rid} .*was changed after it was written"):
        repro.compare(experiment="quickstart", ledger=str(root))


def test_a_config_dir_model_that_shadows_a_zoo_name_is_refused(tmp_path):
    """A user's --config-dir with model/mlp.yaml silently ran the zoo's mlp (`--cfg job` showed the zoo's fields)."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "mlp.yaml").write_text("name: mlp\npreset: tiny\nwidth: 7\n")
    with pytest.raises(ConfigError, match=r"model=mlp is ambiguous: your .*model/mlp.yaml and the zoo both declare"):
        plan(["--config-dir", str(tmp_path), "model=mlp"])
    assert plan(["--config-dir", str(tmp_path), "model=vit"]).jobs[0].model.name == "vit"  # only the name it shadows


def test_a_config_dirs_fingerprint_reads_its_config_files_only(tmp_path):
    """Every file under --config-dir was read in full on every command (a 400 MB file: 840 MB peak)."""
    from repro.preflight import search

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "mine.yaml").write_text("name: mine\n")
    args = search.normalise(["--config-dir", str(tmp_path)])
    before = search.fingerprint(args)
    (tmp_path / "weights.bin").write_bytes(b"x" * 1000)
    (tmp_path / "notes.txt").write_text("anything")
    assert search.fingerprint(args) == before
    (tmp_path / "model" / "mine.yaml").write_text("name: mine\npreset: tiny\n")
    assert search.fingerprint(args) != before


def test_a_model_removed_from_a_folder_outside_site_packages_changes_the_compose_key(tmp_path, monkeypatch):
    """A removed entry-point model ran from a stale compose cache: its distribution lived on a sys.path
    folder the key did not look at (PYTHONPATH, a wheel unpacked by hand)."""
    import shutil
    import sys

    from repro.preflight import search

    dist = tmp_path / "mine_models-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mine-models\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[repro.models]\nmine = mine_models:conf\n")
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    installed = search.fingerprint([])
    assert search.fingerprint([]) == installed  # the key is stable while nothing changes
    shutil.rmtree(dist)
    assert search.fingerprint([]) != installed


def test_the_compose_cache_keeps_no_credential_and_trusts_no_edited_entry(tmp_path, monkeypatch):
    """A quoted credentialed override was stored in plain text, mode 0644; a well-formed but wrong entry
    was used silently, and `configs: []` gave an IndexError traceback."""
    from repro.config import compose_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    secret = "tracking.uri='http://bob:s3cret@h'"
    plan(["run.steps=5", "run.warmup=2", secret])
    plan(["run.steps=5", "run.warmup=2"])
    files = list((tmp_path / "repro" / "compose").glob("*.json"))
    assert len(files) == 1 and all("s3cret" not in f.read_text() for f in files)  # the secret one: not kept
    assert files[0].stat().st_mode & 0o777 == 0o600
    entry = json.loads(files[0].read_text())
    k = files[0].stem
    monkeypatch.setattr(compose_cache, "key", lambda args, extra=b"": k)
    assert compose_cache.load(["x"])[1] is not None
    for wrong in ({**entry, "launcher": "somebody.elses.Launcher"}, {**entry, "configs": [], "overrides": []}):
        files[0].write_text(json.dumps(wrong))
        assert compose_cache.load(["x"])[1] is None  # a miss: composed again
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (job,) = plan(["run.steps=5", "run.warmup=2"]).jobs  # the edited entry is composed again, not a traceback
    assert job.run.steps == 5



@pytest.mark.parametrize("name", ["a,b", "it's", "[x]", "plain"])
def test_config_dir_takes_any_path(tmp_path, name):
    """--config-dir paths containing `,`, `'` or `[` failed with an error about an override."""
    folder = tmp_path / name
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "mine.yaml").write_text("name: mine\n")
    from repro.preflight import search

    args = search.normalise(["--config-dir", str(folder), "model=vit"])
    assert search.searched(args) == [f"file://{folder}"]
    assert plan(["--config-dir", str(folder), "model=vit"]).jobs[0].model.name == "vit"


NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30),
                    st.sampled_from([0, -1, 1e308, 5e-324, "1e999", "-0.0"]))


@settings(max_examples=30, deadline=30000, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["run.lr", "run.min_steady_s", "run.timeout_s", "verdict.band", "run.memory_limit_gb",
                            "run.batch_size", "run.steps", "verdict.budget_s", "tracking.projector_wait_s"]),
       value=NUMBERS)
def test_any_number_for_a_numeric_key_plans_or_is_refused_in_one_line(key, value):
    """Hostile numbers found by a machine, not by hand: a plan, or a ConfigError naming the key."""
    try:
        (job,) = plan([f"{key}={value}", "run.warmup=2"]).jobs
    except ConfigError as e:
        assert key in str(e) and "\n" not in str(e).strip(), str(e)
        return
    group, name = key.split(".")
    got = getattr(getattr(job, group), name)
    assert got is None or got == "auto" or math.isfinite(float(got))


def test_calibrate_says_its_runs_and_their_wall_before_it_starts(tmp_path):
    """`calibrate --trials 1000 --repeats 1000` started 2,000,000 runs with no estimate (the estimate
    itself, from the ledger's past runs, is preflight/estimate.py's: tests/test_sweep_estimate.py)."""
    from argparse import Namespace

    from repro import calibrate

    p = plan(["framework=jax", "model=mlp", "model.preset=tiny", "run.steps=20", f"ledger.dir={tmp_path}"])
    assert calibrate.planned(p, Namespace(trials=1000, repeats=1000, auto=False)) == (
        "calibrate: 1000 trials × 1000 rounds × 2 sides = 2,000,000 runs; no history of this config on this "
        "hardware: no estimate")
    assert calibrate.planned(p, Namespace(trials=4, repeats=5, auto=True)).startswith(
        "calibrate: 4 trials × at most 10 rounds × 2 sides = at most 80 runs")


def test_every_shipped_record_plans_for_a_replay_or_is_refused_in_one_line():
    """A replay of an H100 record on this CPU ran ViT-B/16 at 20 s a step; now a record whose config
    today's preflight or this machine refuses is refused before any worker starts, in one line."""
    from pathlib import Path

    from conftest import shipped_ledger
    from repro import replay
    from repro.config.schema import from_dict
    from repro.ledger import Ledger

    root = Path(__file__).resolve().parent.parent
    found = {"planned": 0, "hardware": 0, "changed": 0}
    for ledger in [shipped_ledger(), *sorted((root / "experiments").glob("*/ledger"))]:
        for record in Ledger(ledger).heads(kind="run"):
            config = from_dict(record["config"])
            why = replay.refusal(config, record=record)
            assert why is None or "\n" not in why, (record["id"], why)
            if why and f"hardware={config.hardware.name}" in why:
                found["hardware"] += 1
                assert replay.refusal(config, as_recorded=True, record=record) == why
            elif why:  # made before a change to what today's code computes for it: its own code replays it
                found["changed"] += 1
                assert why.endswith(f"repro replay {record['id'][:16]} --as-recorded"), why
                assert "differently since 2026-11-23" in why and record["created"] < "2026-11-23T14:14"
                assert replay.refusal(config, as_recorded=True, record=record) is None
            else:
                found["planned"] += 1
    from repro import hardware

    # the CPU records: the 2026-11-22/23 ones of JAX and of torch's ViT refused for today's maths, the rest plan;
    # on a machine without a GPU the H100 pass's are refused for their hardware
    assert found["changed"] == 12 and found["planned"] >= 12, found
    assert found["hardware"] >= 40 or hardware.accelerators(), found


def test_resume_never_reuses_an_attempt_a_rerun_replaced(tmp_path):
    """run.repeats=auto + run.resume=true after a rerun counted two discarded attempts among its six runs."""
    from repro.config import config_hash
    from repro.config.schema import as_dict
    from repro.ledger import Ledger
    from repro.job import resume
    from repro.ledger.record import Environment
    from repro.worker import seeding

    (config,) = plan(["run.resume=true", "run.steps=5", "run.warmup=2", f"ledger.dir={tmp_path}"]).jobs
    chash, env = config_hash(as_dict(config)), seeding.worker_env(config)
    recorded = {"variables": {}, "framework": {"devices": ["cpu"]}}
    recorded["fingerprint"] = resume.fingerprint_here(env, Environment(framework=recorded["framework"], variables={}))
    ledger = Ledger(tmp_path)
    base = {"kind": "run", "status": "ok", "config_hash": chash, "environment": recorded}
    flagged = ledger.append({**base, "repeat": {"index": 0, "count": 3, "group": "s/0"}})
    again = ledger.append({**base, "repeat": {"index": 0, "count": 3, "group": "s/0", "rerun": 1,
                                              "replaces": [flagged["id"]]}})
    assert resume.recorded_ok(config, chash, ledger, env)["id"] == again["id"]
    assert resume.recorded_ok(config, chash, ledger, env, {again["id"]}) is None  # the flagged attempt: never
