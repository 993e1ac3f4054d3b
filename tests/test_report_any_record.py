"""Reports never fail on a record: a sweep that holds every status a run can end in and every
schema version the ledger has had (src/repro/ledger/schema.py), and the shipped ledger, render
as report.md and as `repro compare`; what a record lacks reads "—"."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from conftest import shipped_ledger
from repro.cli import run_subcommand
from repro.config.spec import ADDED_AT_DEFAULT
from repro.ledger import Ledger, recordfile, schema
from repro.ledger.record import view
from repro.ledger.store import record_id
from repro.report import comparison, compare, sweep_report

SHIPPED = shipped_ledger()  # the git-tracked records (conftest): not what a user ran since
STATUSES = ("ok", "failed", "oom", "killed", "timeout", "interrupted", "started")  # started: a lost run


NEWER_KEY = "from_a_newer_repro"


def _without_keys_added_since(config: dict) -> None:
    """A record's config as a record written before every key config/spec.py ADDED_AT_DEFAULT names
    (and the `verdict` group) existed, where it holds the value those records had: each reads at the
    schema's default."""
    config.pop("verdict", None)
    for dotted, default in ADDED_AT_DEFAULT.items():
        group, _, key = dotted.partition(".")
        node = config.get(group, {})
        if key and node.get(key, default) == default:
            node.pop(key, None)
        elif not key and all(node.get(k, v) == v for k, v in default.items()):
            config.pop(group, None)


def _write(root: Path, body: dict) -> dict:
    """A record file as the ledger writes it, with the body as given (a version-0 record has no
    `schema_version`, which Ledger.append would add)."""
    body = {k: v for k, v in body.items() if k != "id"}
    body["id"] = record_id(body)
    folder = root / body["created"][:10]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{body['id']}.json").write_bytes(recordfile.dumps(body))
    return body


def _every_kind(ledger: Path) -> str:
    """A sweep in `ledger` (a copy of the shipped one): per status one run, per schema version
    one ok run; the machine's governor unset in one, absent with the GPUs in another."""
    base = compare.newest_sweep(Ledger(SHIPPED), "quickstart")
    ok = next(r for r in base if r["status"] == "ok" and r.get("machine"))
    sweep = {**ok["sweep"], "id": "29991231T000000Z", "experiment": "everything"}
    out = []
    for job, status in enumerate(STATUSES):
        r = copy.deepcopy(ok)
        r.update(status=status, sweep={**sweep, "job": job}, created=f"2999-12-31T00:00:{job:02d}Z",
                 schema_version=schema.SCHEMA_VERSION)
        r["config"]["framework"]["name"], r["config_hash"] = f"fw{job}", f"hash-{job}"  # a row each
        r.pop("repeat", None)
        if status != "ok":
            r.pop("results", None)
            r.pop("machine", None) if job % 2 else r["machine"].pop("cpu_frequency", None)
            r["error"] = {"reason": f"{status} on purpose"}
        out.append(r)
    for version in range(schema.SCHEMA_VERSION + 1):
        r = copy.deepcopy(ok)
        r.update(sweep={**sweep, "job": 10 + version}, created=f"2999-12-31T00:01:{version:02d}Z")
        r["config"]["framework"]["name"], r["config_hash"] = f"v{version}", f"hash-v{version}"
        r.pop("repeat", None)
        r.pop("schema_version", None)
        if version:
            r["schema_version"] = version
        if version < 3:
            r.pop("scheduler", None)
        if version < 2:
            (r.get("environment") or {}).pop("env_hash", None)
        if version == 0:  # before the machine's capture, the ISA, the GPU list, and the config keys added since
            r.pop("machine", None)
            r["environment"].pop("gpus", None)
            r["environment"].get("cpu", {}).pop("isa", None)
            _without_keys_added_since(r["config"])
        else:
            r["machine"]["cpu_frequency"] = {"current_mhz": None, "governor": None}
        if version == schema.SCHEMA_VERSION:  # a key a newer repro writes: read, kept, named (ledger/record.py)
            r["config"]["tracking"][NEWER_KEY] = 1  # (in a group the hash leaves out: the row is the same config)
        out.append(r)
    for r in out:
        _write(ledger, r)
    return sweep["id"]


@pytest.fixture
def everything(tmp_path) -> tuple[Path, str]:
    ledger = tmp_path / "ledger"
    shutil.copytree(SHIPPED, ledger)
    return ledger, _every_kind(ledger)


def test_the_governor_keyerror_is_gone(everything, tmp_path):
    """The record that made report/markdown.py raise KeyError('cpu_frequency.governor'): a
    killed run first (no machine), the others with the governor unset."""
    ledger, sweep_id = everything
    records = compare.sweep_runs(Ledger(ledger), sweep_id)
    assert records[0]["status"] == "ok" and records[1]["status"] == "failed" and "machine" not in records[1]
    first_killed = [records[1], *records[:1], *records[2:]]
    files = sweep_report.write(first_killed, tmp_path / "r")
    page = (tmp_path / "r" / "report.md").read_text()
    assert "- cpu_frequency.governor: —" in page and {f.name for f in files} >= {"report.md", "results.csv"}


def test_every_status_and_schema_version_renders(everything, capsys):
    ledger, sweep_id = everything
    assert run_subcommand(["report", "--sweep", sweep_id, "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    folder = Path(out.split("report: ")[1].split(" ")[0]).parent
    assert folder == ledger / ".reports" / sweep_id  # under the ledger it comes from
    page = (folder / "report.md").read_text()
    for status in STATUSES:
        assert f"| {status} |" in page or f"| {status} ⚠" in page, status
    assert "| fw3 | killed | 0 | — | — | — |" in page  # what a killed run lacks reads "—"
    assert all(f"| v{v} |" in page for v in range(schema.SCHEMA_VERSION + 1))
    records = {r["config"]["framework"]["name"]: view(r) for r in compare.sweep_runs(Ledger(ledger), sweep_id)}
    assert not records["v0"].recorded("verdict") and not records["v0"].recorded("cluster")
    old, new = records["v0"].config, records["v1"].config  # what v0 lacks reads as v1 holds it
    assert (old.cluster, old.run, old.env, vars(old.model)) == (new.cluster, new.run, new.env, vars(new.model))
    assert records[f"v{schema.SCHEMA_VERSION}"].unknown_keys == (f"tracking.{NEWER_KEY}",)
    csv_rows = (folder / "results.csv").read_text().splitlines()
    assert len(csv_rows) == 1 + len(STATUSES) + schema.SCHEMA_VERSION + 1 and "—" not in "".join(csv_rows)

    assert run_subcommand(["compare", "--sweep", sweep_id, "--ledger", str(ledger), "--wide"]) == 0
    out = capsys.readouterr().out
    assert all(s in out for s in ("killed", "timeout", "started", "v0", "v3")) and "Traceback" not in out


def test_the_shipped_ledger_renders(tmp_path, capsys):
    runs = [r for r in Ledger(SHIPPED).heads(kind="run") if "config" in r]
    sweeps = sorted({r["sweep"]["id"] for r in runs if r.get("sweep")})
    assert sweeps
    for sweep_id in sweeps:
        assert run_subcommand(["report", "--sweep", sweep_id, "--ledger", str(SHIPPED), "--out",
                               str(tmp_path / sweep_id)]) == 0
        assert run_subcommand(["compare", "--sweep", sweep_id, "--ledger", str(SHIPPED)]) == 0
    assert run_subcommand(["compare", "--experiment", "quickstart", "--ledger", str(SHIPPED)]) == 0
    out = capsys.readouterr().out
    assert "steady median" in out and "Traceback" not in out
    assert not (SHIPPED / ".reports").exists()  # --out named the folder: nothing written into the shipped ledger


def test_a_comparison_of_records_without_results_has_dashes():
    base = compare.newest_sweep(Ledger(SHIPPED), "quickstart")
    bare = [{k: v for k, v in copy.deepcopy(r).items() if k not in ("results", "machine", "environment")}
            | {"status": "killed"} for r in base]
    for row in comparison.build(bare).rows:
        cells = row.cells()
        assert cells["median"] == cells["first"] == cells["peak_mib"] == comparison.MISSING
        assert json.dumps(cells)
