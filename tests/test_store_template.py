"""A new sqlite MLflow store starts as a copy of the empty store kept for this MLflow version
(tracking/store_template.py): the first new store makes the template, later ones copy it, and what
they hold is what MLflow makes from scratch (the same tables and rows; the Default experiment with
the same artifact location, made by MLflow's own first open). A template MLflow does not open as
its own is not used: that store is made by MLflow, and the template is made anew by the next."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

mlflow = pytest.importorskip("mlflow")

from repro.tracking import mlflow_tracker, store_template  # noqa: E402


def _statement(sql: str | None) -> tuple[str, ...]:
    """A CREATE statement's clauses, in any order: MLflow's migrations write a table's constraints in
    an order that varies from one process to the next (two stores it made from scratch differ so)."""
    return tuple(sorted(line.strip().rstrip(",") for line in (sql or "").splitlines()))


def _contents(db: Path) -> tuple[list, dict[str, list]]:
    """The store's schema and every table's rows, the experiments' times left out."""
    with closing(sqlite3.connect(db)) as c:
        schema = sorted((kind, name, table, _statement(sql))
                        for kind, name, table, sql in c.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
        tables = [name for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = {t: sorted(map(tuple, c.execute(f'SELECT * FROM "{t}"'))) for t in tables if t != "experiments"}
        rows["experiments"] = sorted(c.execute("SELECT experiment_id, name, artifact_location, lifecycle_stage "
                                               "FROM experiments"))
    return schema, rows


def _new_store(folder: Path) -> Path:
    db = folder / "mlflow.db"
    tracker = mlflow_tracker.Tracker(f"sqlite:///{db}", "repro")
    tracker.close()
    return db


def test_a_new_store_is_the_template_copied_and_holds_what_mlflow_makes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # a store made from scratch puts the Default experiment's artifacts under ./mlruns
    template = store_template.template_path(mlflow.__version__)
    assert not template.exists()
    template.parent.mkdir(parents=True)
    killed = template.with_name(f".{template.name}.999999.tmp")  # what a maker killed midway left
    killed.write_bytes(b"half a store")

    first = _new_store(tmp_path / "first")
    assert template.exists() and not killed.exists()
    with closing(sqlite3.connect(template)) as c:
        assert c.execute("SELECT COUNT(*) FROM experiments").fetchone() == (0,)  # no Default: each store's own
    made_at = template.stat().st_mtime_ns
    second = _new_store(tmp_path / "second")
    assert template.stat().st_mtime_ns == made_at  # copied, not made again

    scratch = tmp_path / "scratch.db"  # MLflow's own creation, then repro's experiment as a Tracker makes it
    mlflow_tracker._make_store(scratch)
    mlflow_tracker.Tracker(f"sqlite:///{scratch}", "repro").close()
    schema, rows = _contents(scratch)
    for db in (first, second):
        theirs_schema, theirs = _contents(db)
        assert theirs_schema == schema
        assert {t: r for t, r in theirs.items() if t != "experiments"} == {t: r for t, r in rows.items() if t != "experiments"}
        (default, repro_experiment) = theirs["experiments"]
        assert default == rows["experiments"][0] and default[:2] == (0, "Default")
        assert repro_experiment[:2] == (1, "repro") and repro_experiment[2].startswith(db.parent.as_uri())
    assert sorted(p.name for p in (tmp_path / "second").iterdir() if p.name != "mlflow.db.lock") == ["mlflow.db"]


def test_a_template_mlflow_does_not_open_is_not_used_and_is_made_anew(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    template = store_template.template_path(mlflow.__version__)
    template.parent.mkdir(parents=True)
    template.write_bytes(b"not a database")

    db = _new_store(tmp_path / "one")  # made by MLflow, and the template removed
    tracker = mlflow_tracker.Tracker(f"sqlite:///{db}", "repro")
    assert {e.name for e in tracker.client.search_experiments()} == {"Default", "repro"}
    tracker.close()
    assert not template.exists()

    _new_store(tmp_path / "two")  # the next new store makes it anew
    with closing(sqlite3.connect(template)) as c:
        assert c.execute("SELECT COUNT(*) FROM experiments").fetchone() == (0,)
