"""Small refusals a hostile but fair user meets: a package model that would be shadowed by the zoo's,
a model whose forward returns NaN, `repro env prune --older-than` of no positive duration, and the
calibration floor of a moved or copied ledger."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from repro import models, paths
from repro.ledger import Ledger
from repro.report import floor
from repro.report import verdict as V

GOOD = (paths.repo_root() / "examples" / "own_model" / "own_model.py").read_text()


def _installed(site: Path, dist: str, entry: str, module: str, source: str) -> None:
    """A distribution `dist` on `site` (its dist-info as pip writes it) declaring a `repro.models`
    entry point `entry` -> `module:ResConvNet`, its module beside it."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[repro.models]\n{entry} = {module}:ResConvNet\n")
    (site / f"{module}.py").write_text(source)


def test_a_package_model_named_like_a_zoo_model_is_refused_naming_both(tmp_path, monkeypatch, capsys):
    from repro import cli

    _installed(tmp_path / "site", "shadow-pkg", "mlp", "shadow_mlp", GOOD)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    rc = cli.dry_run(["framework=torch", "model=mlp", "model.preset=tiny", "run.steps=4", "run.warmup=2"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "model=mlp is ambiguous: the installed package shadow-pkg 0.1 declares a model 'mlp' (entry point " \
           "shadow_mlp:ResConvNet) and the zoo has its own 'mlp'" in err
    assert "_target_: shadow_mlp.ResConvNet" in err and "--config-dir" in err  # how to pick either
    assert [ln for ln in err.splitlines() if ln.strip()][0] == "repro: invalid config, nothing was run:"


def test_a_package_model_of_its_own_name_still_runs(tmp_path, monkeypatch):
    _installed(tmp_path / "site", "own-pkg", "mine_only", "own_mine", GOOD)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    models.refuse_shadowing("mlp")  # no package declares mlp here: the zoo's, without a word
    assert models.get("mine_only").source == "entry point mine_only (own-pkg 0.1)"


def test_the_kept_entry_point_scan_follows_an_install_an_edit_and_a_removal(tmp_path, monkeypatch):
    """models._entry_points_on keeps its scan on disk under the distributions' metadata (names and
    entry_points.txt mtimes): a package installed, its entry points edited, then removed, is seen
    each time without a stale answer; the same state again reads the kept scan, not the packages."""
    import os
    import shutil

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))

    def declared() -> dict:
        models._entry_points_on.cache_clear()  # a new process: only the disk remembers
        return models._entry_points_on(tuple(__import__("sys").path))

    assert "mlp" not in declared()
    _installed(site, "shadow-pkg", "mlp", "shadow_mlp", GOOD)
    assert declared()["mlp"] == ("shadow_mlp:ResConvNet", "shadow-pkg 0.1")
    points = site / "shadow-pkg-0.1.dist-info" / "entry_points.txt"
    points.write_text("[repro.models]\nother = shadow_mlp:ResConvNet\n")
    os.utime(points, ns=(points.stat().st_mtime_ns + 10**9,) * 2)  # an edit within one mtime tick is still an edit
    assert "mlp" not in declared() and "other" in declared()
    scan = models.entry_points
    monkeypatch.setattr(models, "entry_points", lambda: pytest.fail("scanned again: the kept scan was not read"))
    assert "other" in declared()
    monkeypatch.setattr(models, "entry_points", scan)
    shutil.rmtree(site / "shadow-pkg-0.1.dist-info")
    assert "other" not in declared() and str(site) in __import__("sys").path


def test_a_forward_returning_nan_is_named_nan(tmp_path, monkeypatch):
    from repro.preflight import workload

    source = GOOD.replace("return self.head(x.mean(axis=(1, 2)))", "return self.head(x.mean(axis=(1, 2))) * jnp.nan") \
        .replace("return self.fc(x.mean(dim=(2, 3)))", "return self.fc(x.mean(dim=(2, 3))) * float('nan')")
    assert source.count("nan") == 2
    (tmp_path / "nan_model.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(workload.Problem) as found:
        workload.probe("nan_model.ResConvNet", models.load("nan_model.ResConvNet").dims())
    message = str(found.value)
    assert "forward returns NaN" in message and "weight converter" not in message, message


@pytest.mark.parametrize("value", ["-1", "nan", "0", "inf", "-inf", "soon"])
def test_prune_older_than_takes_only_a_positive_duration(value, tmp_path, monkeypatch, capsys):
    from repro import cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("REPRO_ENV_CACHE", raising=False)
    with pytest.raises(SystemExit) as ended:
        cli.dispatch(["env", "prune", f"--older-than={value}"])
    err = capsys.readouterr().err
    assert ended.value.code == 2
    assert f"argument --older-than: '{value}' is not a positive number of days" in err and "--all" in err


def test_the_floor_is_found_in_the_ledger_being_read(tmp_path):
    """Runs recorded in a ledger since moved: their `ledger.dir` names a folder that is gone."""
    moved = Ledger(tmp_path / "copy")
    moved.append({"kind": floor.KIND, "status": "ok", "host": "h1", "floor": {"3": 0.30, "5": 0.2, "10": 0.1}})
    v = V.judge(V.Side("a", (1.0, 1.001, 0.999)), V.Side("b", (1.1, 1.101, 1.099)))
    runs = [{"machine": {"host": "h1"}, "config": {"ledger": {"dir": str(tmp_path / "original")}}}]
    assert v.outcome == V.FASTER
    assert floor.below(v, runs, moved.root) == (3, 0.30)
    assert floor.below(v, runs) is None  # without the ledger being read: the record's own folder, gone
