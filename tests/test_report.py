"""A sweep's report (markdown, CSV, PNGs) and its MLflow runs, from one small real sweep
(conftest's `report_sweep`): the sweep writes its report and prints where; `repro report`
rebuilds the same bytes from the ledger alone; the MLflow runs carry what the UI expects;
`repro ledger export` gives one row per run."""

from __future__ import annotations

import copy
import csv
import filecmp
import json
from pathlib import Path

import pandas as pd
import pytest

from repro.cli import run_subcommand
from repro.report import comparison, published
from repro.report.plots import PLOTS
from repro.tracking import content

FILES = {"report.md", "results.csv", *PLOTS}


def _report_dir(proc) -> Path:
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("report: "))
    return Path(line.removeprefix("report: ").split(" (")[0]).parent


@pytest.mark.slow
def test_sweep_writes_its_report_and_the_ledger_alone_rebuilds_it(report_sweep, tmp_path):
    box, proc = report_sweep
    folder = _report_dir(proc)
    assert folder.parent == box.ledger / ".reports"  # inside the sweep's ledger, never shared between ledgers
    assert {p.name for p in folder.iterdir()} == FILES
    sweep_id = box.heads()[0]["sweep"]["id"]
    assert folder.name == sweep_id
    assert run_subcommand(["report", "--sweep", sweep_id[:12], "--out", str(tmp_path / "a"), "--ledger", str(box.ledger)]) == 0
    assert run_subcommand(["report", "--experiment", "reporttest", "--out", str(tmp_path / "b"), "--ledger", str(box.ledger)]) == 0
    for other in (tmp_path / "a", tmp_path / "b"):
        match, mismatch, errors = filecmp.cmpfiles(folder, other, sorted(FILES), shallow=False)
        assert sorted(match) == sorted(FILES), (mismatch, errors)
    assert all((folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in PLOTS)


@pytest.mark.slow
def test_report_page_and_table(report_sweep):
    box, proc = report_sweep
    folder = _report_dir(proc)
    heads = box.heads()
    page = (folder / "report.md").read_text()
    assert "## Verdicts" in page and " on mlp/tiny in deterministic mode (run.deterministic=true): single sample, no verdict (time ratio " in page
    assert " faster than " not in page  # one run per side never says "faster"
    assert "python -m repro -m model=mlp run.steps=8 tracking.experiment=reporttest" in page
    assert "framework=jax,torch" in page
    assert str(heads[0]["git"]["commit"]) in page
    assert "## Fairness audit" in page and "the runs differ only in the framework" in page
    assert "## Machine" in page and heads[0]["environment"]["cpu"]["model"] in page
    assert all(f"![{name}]({name})" in page for name in PLOTS)
    assert "Published figures" not in page  # no publication for this experiment
    assert "## First step" in page and "no recompilation: the compiled executable is called directly" in page
    assert "## Where the time goes" not in page  # run.profile=false: no breakdown, no where_time_goes.png
    table = list(csv.DictReader((folder / "results.csv").open()))
    assert [r["run"] for r in table] == ["jax", "torch"]  # the run names: as the terminal and MLflow say
    for row in table:
        head = next(h for h in heads if h["id"] == row["ledger_ids"])
        assert float(row["steady_median_ms"]) == pytest.approx(head["results"]["steady_median_s"] * 1e3, rel=1e-4)
        assert row["ci_low_ms"] == "" and float(row["p10_ms"]) == pytest.approx(head["results"]["steady_p10_s"] * 1e3, rel=1e-4)
    assert min(float(r["x_best"]) for r in table) == 1.0
    verdict = next(line[2:] for line in page.splitlines() if "single sample, no verdict" in line)
    assert {r["verdicts"] for r in table} == {verdict}  # the CSV carries the page's sentence, as it is


@pytest.mark.slow
def test_child_runs_as_the_mlflow_ui_expects(report_sweep):
    from mlflow.tracking import MlflowClient

    box, _ = report_sweep
    client = MlflowClient(tracking_uri=box.uri)
    heads = {h["id"]: h for h in box.heads()}
    children = [r for r in box.mlflow_runs("reporttest") if "mlflow.parentRunId" in r.data.tags]
    assert sorted(r.info.run_name for r in children) == ["jax", "torch"]
    keys = [set(r.data.params) for r in children]
    assert keys[0] == keys[1], keys[0] ^ keys[1]  # one param set for every framework
    assert not [k for k in keys[0] if k.split(".")[0] in ("tracking", "ledger", "progress", "cluster")]
    assert {k for k in keys[0] if k.startswith("effective.")} == {f"effective.{k}" for k in content.EFFECTIVE_KEYS}
    for run in children:
        head = heads[run.data.tags["repro.ledger_id"]]
        res, tags, metrics = head["results"], run.data.tags, run.data.metrics
        assert metrics["steady_median_ms"] == pytest.approx(res["steady_median_s"] * 1e3)
        assert metrics["first_step_ms"] == pytest.approx(res["first_step_s"] * 1e3)
        assert metrics["first_step_loss"] == pytest.approx(res["loss"][0])
        # the UI's Duration is the run's (its worker's wall time), not the projection's
        assert run.info.end_time - run.info.start_time == pytest.approx(head["wall_s"] * 1e3, abs=2)
        assert not [k for k in metrics if k.endswith("_s") and not k.endswith("per_s")]
        loss = client.get_metric_history(run.info.run_id, "loss")
        times = client.get_metric_history(run.info.run_id, "step_time_ms")
        assert [m.step for m in loss] == [m.step for m in times] == list(range(1, 8))
        assert [m.value for m in times] == pytest.approx([s * 1e3 for s in res["step_time_s"][1:]])
        stamps = [m.timestamp for m in times]
        assert stamps == sorted(stamps) and stamps[-1] - stamps[0] >= sum(res["step_time_s"][2:]) * 1e3 - 2
        assert tags["mlflow.source.git.commit"] == str(head["git"]["commit"])
        assert tags["mlflow.source.name"].startswith("python -m repro framework=")
        assert tags["mlflow.user"] and tags["mlflow.note.content"].startswith("steady ")
        (dataset,) = run.inputs.dataset_inputs
        assert dataset.dataset.name == "synthetic" and dataset.dataset.digest == head["data"]["sha256"][:32]
        log = [a.path for a in client.list_artifacts(run.info.run_id)]
        assert "worker.log" in log and "ledger_record.json" in log


@pytest.mark.slow
def test_parent_run_holds_the_report(report_sweep):
    from mlflow.tracking import MlflowClient

    box, proc = report_sweep
    client = MlflowClient(tracking_uri=box.uri)
    (parent,) = [r for r in box.mlflow_runs("reporttest") if "mlflow.parentRunId" not in r.data.tags]
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} == FILES
    note = parent.data.tags["mlflow.note.content"]
    assert note.startswith("Verdicts:") and "| jax |" in note and "Fairness audit" in note
    assert parent.data.params == {"jobs": "2", "swept.framework": "jax,torch"}
    # the report's command without its paths (MLflow's Source column shows the last path component)
    assert parent.data.tags["mlflow.source.name"] == (
        "python -m repro -m model=mlp run.steps=8 framework=jax,torch")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_ledger_export_one_row_per_run(report_sweep, tmp_path, fmt):
    box, _ = report_sweep
    out = tmp_path / f"runs.{fmt}"
    assert run_subcommand(["ledger", "export", "--format", fmt, "--out", str(out), "--ledger", str(box.ledger)]) == 0
    df = {"csv": pd.read_csv, "json": pd.read_json, "parquet": pd.read_parquet}[fmt](out)
    assert sorted(df["id"]) == sorted(h["id"] for h in box.heads())
    assert {"config.framework.name", "results.steady_median_s", "environment.cpu.model", "git.commit"} <= set(df.columns)
    assert set(df["config.framework.name"]) == {"jax", "torch"}


@pytest.mark.slow
def test_bad_report_and_export_requests_say_what_to_do(report_sweep, capsys):
    box, _ = report_sweep
    assert run_subcommand(["report", "--sweep", "nosuchsweep", "--ledger", str(box.ledger)]) == 2
    assert "no sweep 'nosuchsweep'" in capsys.readouterr().err
    assert run_subcommand(["report", "--experiment", "nosuchexp", "--ledger", str(box.ledger)]) == 2
    assert "no recorded runs of experiment 'nosuchexp'" in capsys.readouterr().err
    assert run_subcommand(["ledger", "export", "--format", "parquet", "--ledger", str(box.ledger)]) == 2
    assert "give --out" in capsys.readouterr().err


@pytest.mark.slow
def test_published_figures_beside_ours(report_sweep):
    """The sweep's records relabelled as the Stack Wars GEMM workload: both sides' ratios."""
    box, _ = report_sweep
    records = copy.deepcopy(box.heads())
    for r in records:
        r["config"]["model"]["name"] = "gemm"
    comp = comparison.build(records)
    text = "\n".join(published.section("stack_wars_cpu", comp))
    ours = {c.framework: c.median_s * 1e3 for c in comp.rows}
    row = next(line for line in text.splitlines() if line.startswith("| GEMM |"))
    assert row.split(" | ")[1:4] == ["0.192", "0.055", f"{0.192 / 0.055:.3g}"]
    assert row.rstrip(" |").endswith(f"{ours['jax'] / ours['torch']:.3g}")
    assert published.NOT_COMPARABLE in text and "REFERENCES.md B" in text
    assert published.section("quickstart", comp) == []


def test_dvc_data_as_mlflow_datasets():
    """A digits record's files → one dataset each, digest = dvc.lock's md5, source = the path."""
    from repro import paths
    from repro.data import dvc_check

    files = ["data/digits/test_x.npy", "data/digits/train_x.npy"]
    md5 = {f: dvc_check.recorded_md5(paths.repo_root(), f) for f in files}
    assert all(md5.values())
    found = content.datasets({"data": {"name": "digits", "md5": md5, "sha256": "x" * 64}})
    assert [(d["name"], d["digest"], d["source"], d["context"]) for d in found] == [
        ("digits/test_x.npy", md5[files[0]], files[0], "test"), ("digits/train_x.npy", md5[files[1]], files[1], "train")]
    assert json.dumps(found)  # plain data: no MLflow object in content.py


@pytest.mark.slow
def test_a_sweep_with_runs_that_did_not_end_ok_still_reports(report_sweep, tmp_path):
    """An oom run: every file is written, the table and the verdict name its status."""
    from repro.report import sweep_report

    box, _ = report_sweep
    records = copy.deepcopy(box.heads())
    torch = next(r for r in records if r["config"]["framework"]["name"] == "torch")
    torch.update(status="oom", error={"reason": "out of memory"})
    del torch["results"]
    files = sweep_report.write(records, tmp_path)
    assert {p.name for p in files} == FILES
    table = {r["run"]: r for r in csv.DictReader((tmp_path / "results.csv").open())}
    assert table["torch"]["status"].startswith("oom") and table["torch"]["steady_median_ms"] == ""  # (⚠ busy: a busy machine)
    assert f"| torch | {table['torch']['status']} | 0 | — |" in (tmp_path / "report.md").read_text()  # what it lacks: —
