"""The derived index (`<ledger>/.index/`): what list, compare and report read instead of every
record. It is never the truth: deleted, it is rebuilt; records another process appended, or a
git merge brought, are seen; a file changed in place is read again; and what the commands print
is the same with it, without it, and as the records themselves say."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shipped_ledger
from repro.cli import dispatch
from repro.ledger import Ledger, recordfile, state_of
from repro.ledger.index import FOLDER
from repro.ledger.store import record_id
from repro.report import compare

EXPERIMENTS = ("alpha", "beta", "gamma")


def write(root: Path, body: dict) -> dict:
    """A record file as Ledger.append writes it, with the `created` the body names."""
    body = {k: v for k, v in body.items() if k != "id"}
    body["id"] = record_id(body)
    folder = root / body["created"][:10]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{body['id']}.json").write_bytes(recordfile.dumps(body))
    return body


def grow(root: Path, runs: int) -> Path:
    """A ledger of `runs` runs (a started and an ok record each, 2 per run): copies of the shipped
    runs over three experiments, sweeps of 4 jobs over 3 days, a replay sweep among them."""
    shipped = [r for r in Ledger(shipped_ledger()).records() if r.get("kind") == "run" and r.get("config")]
    oks = [r for r in shipped if r["status"] == "ok" and r.get("prev")]
    for i in range(runs):
        ok = copy.deepcopy(oks[i % len(oks)])
        sweep = {**ok["sweep"], "id": f"2026112{i // 4 % 3}T{i // 4:06d}Z", "job": i % 4,
                 "experiment": EXPERIMENTS[i // 4 % len(EXPERIMENTS)]}
        created = f"2026-11-2{i // 4 % 3}T{i // 60 % 24:02d}:{i % 60:02d}:00.000Z"
        ok["config"]["run"]["seed"] = i
        started = {k: v for k, v in ok.items() if k not in ("results", "prev", "machine")}
        started.update(status="started", sweep=sweep, created=created)
        started = write(root, started)
        ok.update(sweep=sweep, prev=started["id"], created=created.replace(":00.000Z", ":30.000Z"))
        if ok.get("results"):
            ok["results"]["steady_median_s"] = 0.001 * (1 + i % 7)
        if i // 4 == 5:  # one sweep of replays (of the first sweep's runs)
            ok["replay_of"] = started["id"]
        write(root, ok)
    return root


def _out(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert dispatch(list(argv)) == 0
    return capsys.readouterr().out


def _rows_from_records(root: Path) -> list[list[str]]:
    """`ledger list`'s rows as the records themselves say (how list made them before the index)."""
    out = []
    for r in Ledger(root).heads():
        cfg, med = r.get("config", {}), (r.get("results") or {}).get("steady_median_s")
        out.append([r["id"], r.get("created", "")[:19], str(state_of(r)), r.get("kind", ""),
                    (r.get("sweep") or {}).get("experiment", ""), cfg.get("framework", {}).get("name", ""),
                    f"{cfg.get('model', {}).get('name', '')}/{cfg.get('model', {}).get('preset', '')}",
                    f"{med * 1e3:.2f}" if med else "-", r.get("config_hash", "")[:12]])
    return out


def _newest_from_records(root: Path, experiment: str) -> list[str]:
    """compare --experiment's runs as the records say (every head read, as before the index)."""
    runs = [r for r in Ledger(root).heads(kind="run") if "config" in r
            and (r.get("sweep") or {}).get("experiment") == experiment]
    sweeps: dict[str, list[dict]] = {}
    for r in runs:
        sweeps.setdefault(r["sweep"]["id"], []).append(r)
    own = [s for s in sweeps.values() if not all("replay_of" in r for r in s)]
    newest = max(own or sweeps.values(), key=lambda s: max(r["created"] for r in s))
    return [r["id"] for r in sorted(newest, key=lambda r: r["sweep"]["job"])]


@pytest.fixture(scope="module")
def grown(tmp_path_factory) -> Path:
    return grow(tmp_path_factory.mktemp("grown") / "ledger", 150)  # 300 records


def test_list_and_compare_read_the_same_with_and_without_the_index_as_the_records_say(grown, tmp_path, capsys):
    root = Path(shutil.copytree(grown, tmp_path / "ledger"))
    shutil.rmtree(root / FOLDER, ignore_errors=True)
    cold = {a: _out(capsys, *a.split(), "--ledger", str(root))
            for a in ("ledger list", "ledger list --all", "compare --experiment beta", "compare --sweep 20261121T000004")}
    assert (root / FOLDER / "files.json").is_file()
    warm = {a: _out(capsys, *a.split(), "--ledger", str(root)) for a in cold}
    assert warm == cold and "(300 records)" in cold["ledger list --all"] and "(150 records)" in cold["ledger list"]
    listed = [[c.strip() for c in line.strip("│").split("│")] for line in cold["ledger list"].splitlines()
              if line.startswith("│")]
    assert listed == _rows_from_records(root)
    for experiment in EXPERIMENTS:
        assert [r["id"] for r in compare.newest_sweep(Ledger(root), experiment)] == _newest_from_records(root, experiment)
    picked = compare.newest_sweep(Ledger(root), "gamma")
    assert picked[0]["sweep"]["id"] == "20261122T000035Z" and not any("replay_of" in r for r in picked)


def test_the_index_is_rebuilt_after_it_is_deleted_or_damaged(grown, tmp_path):
    root = Path(shutil.copytree(grown, tmp_path / "ledger"))
    before = Ledger(root).entries()
    index = root / FOLDER / "files.json"
    for damage in (lambda: shutil.rmtree(root / FOLDER), lambda: index.write_text('{"format": 2, "files": {"a": 1}}'),
                   lambda: index.write_bytes(index.read_bytes()[:1000])):
        damage()
        assert Ledger(root).entries() == before
        assert index.is_file() and (root / FOLDER / ".gitignore").read_text().splitlines()[-1] == "*"


@pytest.mark.slow  # starts a process
def test_records_another_process_appends_appear_in_list(grown, tmp_path, capsys):
    root = Path(shutil.copytree(grown, tmp_path / "ledger"))
    reader = Ledger(root)
    heads = reader.head_entries()
    code = (f"from repro.ledger import Ledger; l = Ledger({str(root)!r}); "
            f"print(l.append({{'kind': 'run', 'status': 'failed', 'prev': {heads[0].id!r}}})['id'])")
    new = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    after = reader.head_entries()  # the same reader: its index (in memory and on disk) predates the record
    assert len(after) == len(heads) and new in {e.id for e in after} and heads[0].id not in {e.id for e in after}
    assert new in _out(capsys, "ledger", "list", "--ledger", str(root))


def test_a_record_changed_in_place_is_read_again(grown, tmp_path):
    root = Path(shutil.copytree(grown, tmp_path / "ledger"))
    head = Ledger(root).head_entries(kind="run")[0]
    record = recordfile.load(head.path)
    head.path.write_bytes(recordfile.dumps({**record, "status": "failed"}))  # not how a ledger changes: verify fails it
    assert next(e for e in Ledger(root).entries() if e.id == head.id).status == "failed"


def test_two_branches_that_both_appended_merge_without_conflict_and_list_both(grown, tmp_path, capsys):
    root = Path(shutil.copytree(grown, tmp_path / "ledger"))
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], check=True, capture_output=True, text=True)  # noqa: E731
    git("init", "-q", "-b", "main")
    git("-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "ledger")
    assert git("status", "--porcelain").stdout == ""  # the index is not tracked: its folder ignores itself
    Ledger(root).entries()
    ids = {}
    for branch in ("a", "b"):
        git("checkout", "-q", "-b", branch, "main")
        ids[branch] = Ledger(root).append({"kind": "run", "status": "ok", "note": branch})["id"]
        git("-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
        git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", branch)
    listed = _out(capsys, "ledger", "list", "--ledger", str(root))
    assert ids["b"] in listed and ids["a"] not in listed  # on branch b: a's record is not checked out
    git("-c", "user.email=t@t", "-c", "user.name=t", "merge", "-q", "--no-edit", "a")
    listed = _out(capsys, "ledger", "list", "--ledger", str(root))
    assert ids["a"] in listed and ids["b"] in listed and "(152 records)" in listed
    assert Ledger(root).verify() == []
