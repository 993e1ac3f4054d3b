"""The ledger's readers (`ledger list/show/export/verify`, `compare`, `report`, `sync`) on a ledger
that is not as written: symlink loops, a record edited after it was written, a dangling `replay_of`,
foreign JSON files, a ledger path that is a file, an empty id; and `ledger schema`, which needs none.
Through the real CLI on a real run's ledger or on records appended by the real Ledger."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import Sandbox, finished_run, repro_cli
from repro.ledger import Ledger

TINY = ("model=mlp", "framework=torch", "run.warmup=2", "run.steps=4")


@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> Sandbox:
    """One real tiny run (torch, 4 steps) in its own ledger and sqlite store."""
    sandbox = Sandbox(tmp_path_factory.mktemp("one_run"))
    proc = sandbox.run(*TINY, "tracking.experiment=loose")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return sandbox

@pytest.fixture
def looped(one_run, tmp_path) -> tuple[Ledger, dict, list[Path]]:
    """A copy of a real run's ledger with two links pointing at each other in its root and a
    self-link in a date folder."""
    shutil.copytree(one_run.ledger, tmp_path / "ledger")
    ledger = Ledger(tmp_path / "ledger")
    ok = ledger.heads(kind="run")[0]
    date = next(ledger.root.rglob(f"{ok['id']}.json")).parent
    (ledger.root / "a").symlink_to("b")
    (ledger.root / "b").symlink_to("a")
    (date / "self.json").symlink_to("self.json")
    return ledger, ok, [ledger.root / "a", ledger.root / "b", date / "self.json"]

@pytest.mark.slow
@pytest.mark.parametrize("command", [("ledger", "list"), ("ledger", "show", "ID"), ("ledger", "export"),
                                     ("compare", "ID"), ("report", "--experiment", "loose"), ("sync",)])
def test_readers_skip_a_symlink_loop_with_one_line_naming_it(looped, tmp_path, command):
    ledger, ok, loops = looped
    args = [ok["id"] if a == "ID" else a for a in command]
    proc = repro_cli(*args, "--ledger", str(ledger.root), cwd=tmp_path)
    assert "Traceback" not in proc.stderr and "Errno 40" not in proc.stderr, proc.stderr
    assert "MLflow failed" not in proc.stderr
    for loop in loops:
        lines = [line for line in proc.stderr.splitlines() if str(loop) in line]
        assert len(lines) == 1 and "symlink loop" in lines[0], proc.stderr
    if command[:2] in (("ledger", "list"), ("ledger", "show")):
        assert proc.returncode == 0 and ok["id"] in proc.stdout

@pytest.mark.slow
def test_verify_names_each_symlink_loop_and_fails(looped):
    ledger, ok, loops = looped
    proc = repro_cli("ledger", "verify", "--ledger", str(ledger.root))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    fails = [line for line in proc.stderr.splitlines() if line.startswith("FAIL")]
    assert sorted(fails) == sorted(f"FAIL {p}: a symlink loop (it never reaches a file or folder): remove the link"
                                   for p in loops)

@pytest.mark.slow
def test_a_ledger_dir_that_is_a_symlink_loop_is_refused_by_the_preflight_and_by_readers(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "other")
    (tmp_path / "other").symlink_to(loop)
    proc = repro_cli(*TINY, f"ledger.dir={loop}", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"ledger.dir='{loop}' is a symlink loop ({loop} ->" in proc.stderr and "hydra.callbacks" not in proc.stderr
    proc = repro_cli("ledger", "list", "--ledger", str(loop / "sub"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and f"is a symlink loop ({loop} ->" in proc.stderr

@pytest.mark.slow
def test_show_and_compare_warn_of_a_record_whose_hash_does_not_match(one_run, tmp_path):
    shutil.copytree(one_run.ledger, tmp_path / "ledger")
    ledger = Ledger(tmp_path / "ledger")
    ok = ledger.heads(kind="run")[0]
    path = next(ledger.root.rglob(f"{ok['id']}.json"))
    path.write_text(path.read_text().replace('"steady_median_s": ', '"steady_median_s": 1'))  # a figure edited
    for command in (("ledger", "show", ok["id"][:8]), ("compare", ok["id"])):
        proc = repro_cli(*command, "--ledger", str(ledger.root))
        assert proc.returncode == 0, proc.stderr
        warned = [line for line in proc.stderr.splitlines() if "changed after it was written" in line]
        assert len(warned) == 1 and ok["id"] in warned[0] and str(path) in warned[0], proc.stderr
    assert repro_cli("ledger", "show", ok["prev"], "--ledger", str(ledger.root)).stderr == ""  # an intact one: silent

@pytest.mark.slow
def test_a_dangling_replay_of_fails_verify_naming_both_ids(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    original = finished_run(ledger, tmp_path / "mlflow.db")
    replay = finished_run(ledger, tmp_path / "mlflow.db", replay_of=original["id"])
    assert repro_cli("ledger", "verify", "--ledger", str(ledger.root)).returncode == 0
    for r in ledger.chain(original):
        next(ledger.root.rglob(f"{r['id']}.json")).unlink()
    proc = repro_cli("ledger", "verify", "--ledger", str(ledger.root))
    assert proc.returncode == 1
    fails = [line for line in proc.stderr.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 2  # the replay's started and ok records both name the original
    assert any(replay["id"] in f for f in fails) and all(original["id"] in f and "is a replay of" in f for f in fails)

@pytest.mark.slow
def test_a_large_foreign_json_file_with_an_id_is_not_a_record(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    ok = finished_run(ledger, tmp_path / "mlflow.db")
    folder = next(ledger.root.rglob(f"{ok['id']}.json")).parent
    big = folder / "dump.json"
    with open(big, "w") as f:  # 50 MB of someone's data that happens to carry an id
        f.write('{"id": "0123456789abcdef", "rows": [' + ",".join(["1234567890"] * 5_000_000) + "]}")
    small = folder / "note.json"
    small.write_text('{"id": "fedcba9876543210", "note": "not a run"}')
    proc = repro_cli("ledger", "list", "--ledger", str(ledger.root))
    assert proc.returncode == 0 and "0123456789abcdef" not in proc.stdout and "fedcba9876543210" not in proc.stdout
    assert f"skipping {big}: 52 MiB, larger than any record" in proc.stderr
    assert f"skipping {small}: not a record: it does not match the record schema" in proc.stderr
    proc = repro_cli("ledger", "show", "0123", "--ledger", str(ledger.root))
    assert proc.returncode == 2 and len(proc.stdout) == 0 and len(proc.stderr) < 2000

@pytest.mark.slow
def test_ledger_given_as_a_file_is_named_a_file(tmp_path):
    (tmp_path / "f").write_text("")
    proc = repro_cli("ledger", "list", "--ledger", str(tmp_path / "f"))
    assert proc.returncode == 2 and "is a file, not a folder" in proc.stderr and "no such folder" not in proc.stderr

@pytest.mark.slow
def test_show_refuses_an_empty_id_in_one_line(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    a, b = finished_run(ledger, tmp_path / "mlflow.db"), finished_run(ledger, tmp_path / "mlflow.db", note="other")
    proc = repro_cli("ledger", "show", "", "--ledger", str(ledger.root))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "give a record id" in proc.stderr
    assert a["id"] not in proc.stderr and b["id"] not in proc.stderr

def test_ledger_schema_needs_no_ledger(tmp_path, monkeypatch, capsys):
    from repro import cli, paths

    monkeypatch.setattr(paths, "default_ledger_dir", lambda: tmp_path / "no-ledger-here")
    assert cli.dispatch(["ledger", "schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "repro ledger record"
    assert cli.dispatch(["ledger", "list"]) == 2  # a command that reads one still says it is missing
