"""Facts kept between processes under a stamp (repro.kept): the run's package versions
(worker/envcapture.py) follow an install, an upgrade, an edit and a removal, and the same state
again is read from the kept copy, not from the packages' metadata."""

from __future__ import annotations

import os
import shutil
from importlib import metadata

import pytest

from repro import kept
from repro.worker import envcapture


def _dist(site, name: str, version: str):
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return info


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_package_versions_follow_an_install_an_upgrade_an_edit_and_a_removal(site, monkeypatch):
    assert "triton" not in envcapture.package_versions()  # not installed in the suite's CPU venv
    _dist(site, "triton", "9.0")
    assert envcapture.package_versions()["triton"] == "9.0"
    shutil.rmtree(site / "triton-9.0.dist-info")
    info = _dist(site, "triton", "9.1")
    assert envcapture.package_versions()["triton"] == "9.1"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: triton\nVersion: 9.1.post1\n")  # same folder
    os.utime(info / "METADATA", ns=((info / "METADATA").stat().st_mtime_ns + 10**9,) * 2)
    assert envcapture.package_versions()["triton"] == "9.1.post1"
    ours = envcapture.package_versions()
    with monkeypatch.context() as m:
        m.setattr(metadata, "version", lambda name: pytest.fail("read the metadata again: the kept copy was not"))
        assert envcapture.package_versions() == ours
    shutil.rmtree(info)
    assert "triton" not in envcapture.package_versions()


def test_the_kept_versions_are_those_the_metadata_reads(site):
    """Whatever kept copy exists, the answer equals importlib.metadata's, package by package."""
    for _ in range(2):  # the first computes and keeps, the second reads the kept copy
        assert envcapture.package_versions() == {
            n: metadata.version(n) for n in envcapture.PACKAGES if _installed(n)}


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def test_an_unreadable_kept_copy_is_a_miss_and_is_written_again(site):
    stamp = ["a stamp"]
    assert kept.load("things", stamp) is None
    kept.keep("things", stamp, {"x": 1})
    assert kept.load("things", stamp) == {"x": 1}
    path = next((site.parent / "cache" / "repro" / "things").glob("*.json"))
    path.write_text("{half")
    assert kept.load("things", stamp) is None
    kept.keep("things", stamp, {"x": 2})
    assert kept.load("things", stamp) == {"x": 2} and [p.name for p in path.parent.iterdir()] == [path.name]
    for i in range(5):
        kept.keep("things", [i], i, newest=3)
    assert len(list(path.parent.glob("*.json"))) == 3
