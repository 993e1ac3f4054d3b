"""The MLflow UI as a person sees it: a real `mlflow server` over the small report sweep's store
(conftest's `report_sweep`) and headless Chromium (Debian's `chromium`, installed by `make
test`). Screenshots go to the test's temp dir; assertions read the rendered page (its text
and DOM) and MLflow's REST API."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from browser import Chromium, chromium_binary
from conftest import mlflow_server
from repro.report.plots import PLOTS

pytestmark = pytest.mark.slow  # every test here starts a process

EXPANDERS = 'button[data-component-id$="runnamecellrenderer.tsx_46"]'  # the +/- before a parent run's name
ROW_IDS = "[...new Set([...document.querySelectorAll('[role=row][row-id]')].map(r => r.getAttribute('row-id')))]"


@pytest.fixture(scope="module")
def ui(report_sweep, tmp_path_factory):
    """(server URL, experiment id, {run name: run id}, the sweep's sandbox)."""
    if not chromium_binary():
        pytest.fail("chromium not found: `make test` installs Debian's chromium (or: apt-get install chromium)")
    box, _ = report_sweep
    runs = box.mlflow_runs("reporttest")
    with mlflow_server(box.uri, cwd=box.root) as url:
        yield url, runs[0].info.experiment_id, {r.info.run_name: r.info.run_id for r in runs}, box


@pytest.fixture(scope="module")
def browse(ui):
    """`browse(coroutine_fn)`: run `await coroutine_fn(page)` in one headless Chromium tab that the
    module's tests share (after the first page load, moving between MLflow's views is a hash change)."""
    loop = asyncio.new_event_loop()
    browser = Chromium()
    page = loop.run_until_complete(browser.__aenter__())
    yield lambda look: loop.run_until_complete(look(page))
    loop.run_until_complete(browser.__aexit__(None, None, None))
    loop.close()


def _api(url: str, path: str) -> dict:
    return json.loads(urllib.request.urlopen(f"{url}/api/2.0/mlflow/{path}", timeout=30).read())


def test_runs_table_lists_the_sweep_and_expands_to_its_children(ui, browse, tmp_path):
    url, exp, ids, _ = ui
    parent = next(name for name in ids if name.startswith("reporttest sweep "))

    async def look(page):
        await page.open(f"{url}/#/experiments/{exp}/runs")
        await page.wait_text(parent, "3 matching runs")
        folded = await page.js(ROW_IDS)
        await page.screenshot(tmp_path / "runs_folded.png")
        assert await page.js(f"(() => {{ const b = document.querySelectorAll('{EXPANDERS}'); "
                             "b.forEach(x => x.click()); return b.length; })()") == 1
        text = await page.wait_text("framework=jax", "framework=torch")
        await page.screenshot(tmp_path / "runs_expanded.png")
        return folded, await page.js(ROW_IDS), text

    folded, expanded, text = browse(look)
    assert folded == [ids[parent]]  # the children are folded under their parent
    assert sorted(expanded) == sorted(ids.values())
    assert text.count("synthetic (") == 2  # the Dataset column of each child
    assert "python -m repro" in text  # the Source column
    print(f"screenshots: {tmp_path}")


def test_child_page_shows_steady_median_ms_and_the_loss_chart(ui, browse, tmp_path):
    url, exp, ids, _ = ui
    run_id = ids["jax"]  # MLflow names a run as every view does (report/varied.run_name)
    metrics = {m["key"]: m["value"] for m in _api(url, f"runs/get?run_id={run_id}")["run"]["data"]["metrics"]}

    async def look(page):
        await page.open(f"{url}/#/experiments/{exp}/runs/{run_id}")
        overview = await page.wait_text("steady_median_ms", "first_step_ms", "Parameters (")
        await page.screenshot(tmp_path / "child_overview.png")
        await page.open(f"{url}/#/experiments/{exp}/runs/{run_id}/model-metrics")
        await page.wait_text("Auto-refresh", "Add chart")  # the charts view (its search box has no text)
        await page.js("document.querySelector('input[placeholder=\"Search metric charts\"]').focus()")
        await page.send("Input.insertText", text="loss")
        charts = await page.wait_text("first_step_loss", "Step")
        await asyncio.sleep(1)  # let plotly finish drawing before the screenshot
        await page.screenshot(tmp_path / "child_loss_chart.png")
        return overview, charts, await page.js("[...document.querySelectorAll('.main-svg')].length")

    overview, charts, plots = browse(look)
    assert f"{metrics['steady_median_ms']}" in overview.replace("\n", " ")
    assert "\nloss\n" in charts and "jax (loss)" in charts  # a line chart of loss over steps
    assert plots >= 3  # final_loss, first_step_loss and loss are drawn


def test_parent_artifacts_hold_the_report(ui, browse, tmp_path):
    url, exp, ids, box = ui
    run_id = next(v for k, v in ids.items() if k.startswith("reporttest sweep "))
    listed = {f["path"] for f in _api(url, f"artifacts/list?run_id={run_id}")["files"]}
    assert set(PLOTS) | {"report.md", "results.csv"} == listed
    png = urllib.request.urlopen(f"{url}/get-artifact?path=steady_time.png&run_uuid={run_id}", timeout=30).read()
    report_dir = box.ledger / ".reports" / box.heads()[0]["sweep"]["id"]
    assert png == (report_dir / "steady_time.png").read_bytes()

    async def look(page):
        await page.open(f"{url}/#/experiments/{exp}/runs/{run_id}/artifacts")
        text = await page.wait_text(*PLOTS)
        await page.screenshot(tmp_path / "parent_artifacts.png")
        return text

    assert "report.md" in browse(look)
