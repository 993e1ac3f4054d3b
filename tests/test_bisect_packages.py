"""Packages before commits (issue 56, src/repro/bisect/packages.py): what changed between two locks,
which changed packages move together (their wheels' Requires-Dist), the cumulative steps one group at
a time, and the guilty package's released versions between, from a wheelhouse with every index
unreachable, each checked to install before it is offered.

The wheelhouse is made here: real wheels (a zip with METADATA, WHEEL and a RECORD of sha256s, as
PEP 427 says) of a small pure-Python `slowpkg` 1.0 … 1.7 whose `work()` does extra work from 1.5
on, two innocent packages that changed too, a coupled pair (pkg-a 2.0 requires pkg-b==2.0), one
package BAD removed and one it added, and a slowpkg release for another platform only.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_env_pack import NOWHERE, OFFLINE  # every index and proxy at a closed port
from wheels import make_wheel, simple_index

from repro.bisect import packages
from repro.envs import lock


SLOW_FROM = "1.5"
SLOWPKG = '''"""A library a model calls once per step; from {slow_from} on, work() does more than it needs."""

__version__ = "{version}"
EXTRA = {extra}


def work(x, n=64):
    """Returns x; on the way it sums n squares (and EXTRA times as many from {slow_from} on)."""
    total = 0
    for i in range(n * (1 + EXTRA)):
        total += i * i
    return x
'''


SLOW_VERSIONS = [f"1.{i}" for i in range(8)]


def wheelhouse(folder: Path) -> Path:
    def wheel(name, version, requires=(), body=None):
        mod = name.replace("-", "_")
        return make_wheel(folder, name, version, {f"{mod}/__init__.py": body or f'__version__ = "{version}"\n'}, requires)

    for v in SLOW_VERSIONS:
        extra = 3 if packages._version(v) >= packages._version(SLOW_FROM) else 0
        wheel("slowpkg", v, body=SLOWPKG.format(version=v, extra=extra, slow_from=SLOW_FROM))
    windows = wheel("slowpkg", "1.4.1")  # released for Windows only: the tags its file name declares
    windows.rename(folder / "slowpkg-1.4.1-cp311-cp311-win_amd64.whl")
    for v in ("1.0", "1.1"):
        wheel("quietpkg", v)
    wheel("otherpkg", "3.0", requires=("quietpkg>=1.0", "steady"))  # loose: met at both ends
    wheel("otherpkg", "3.1", requires=("quietpkg>=1.1", "steady"))  # quietpkg 1.1 first, then otherpkg 3.1: an order
    for v in ("1.0", "1.5", "2.0"):
        wheel("pkg-b", v)
    wheel("pkg-a", "1.0", requires=("pkg-b==1.0", "olddep"))  # olddep: dropped by pkg-a 2.0, removed with it
    wheel("pkg-a", "1.5", requires=("pkg-b>=1.5,<2",))
    wheel("pkg-a", "2.0", requires=("pkg-b==2.0", "slowpkg; extra == 'fast'"))  # an extra: not a need
    for name, version in (("steady", "1.0"), ("oldpkg", "0.1"), ("newpkg", "0.2"), ("olddep", "0.3")):
        wheel(name, version)
    return folder


def make_lock(**pins: str) -> str:
    return lock.render([lock.Dist(lock.normalise(n), v) for n, v in sorted(pins.items())],
                       platform.python_version())


GOOD = make_lock(slowpkg="1.0", quietpkg="1.0", otherpkg="3.0", pkg_a="1.0", pkg_b="1.0", steady="1.0", oldpkg="0.1",
                 olddep="0.3")
BAD = make_lock(slowpkg="1.7", quietpkg="1.1", otherpkg="3.1", pkg_a="2.0", pkg_b="2.0", steady="1.0", newpkg="0.2")


@pytest.fixture(scope="module")
def house(tmp_path_factory) -> Path:
    return wheelhouse(tmp_path_factory.mktemp("wheelhouse"))


def test_changed_names_every_difference_and_refuses_two_pythons():
    found = packages.changed(GOOD, BAD)
    assert [(c.name, c.good, c.bad, c.kind) for c in found] == [
        ("newpkg", None, "0.2", "added"), ("olddep", "0.3", None, "removed"), ("oldpkg", "0.1", None, "removed"),
        ("otherpkg", "3.0", "3.1", "changed"),
        ("pkg-a", "1.0", "2.0", "changed"), ("pkg-b", "1.0", "2.0", "changed"), ("quietpkg", "1.0", "1.1", "changed"),
        ("slowpkg", "1.0", "1.7", "changed")]
    assert str(found[0]) == "newpkg (added: 0.2)" and str(found[-1]) == "slowpkg 1.0 → 1.7"
    # a workload installed from a folder is its source's business, not a package change; nor is repro
    local = BAD + "# editable: own-model==0.2 file:///x\nrepro==9.9\n"
    assert [c.name for c in packages.changed(GOOD, local)] == [c.name for c in found]
    other = GOOD.replace(f"# python {platform.python_version()}", "# python 3.12.1")
    with pytest.raises(packages.PackagesError, match=r"Python 3\.12\.1 and .*one interpreter"):
        packages.changed(other, BAD)


def test_coupled_reads_requires_dist_from_the_wheels(house):
    """An exact pin both ways is one group; a floor one end crosses is an order (quietpkg before otherpkg);
    a dependency one package dropped goes with it; the rest by name."""
    groups = packages.coupled(packages.changed(GOOD, BAD), [house])
    assert [g.names for g in groups] == [("newpkg",), ("oldpkg",), ("pkg-a", "olddep", "pkg-b"), ("quietpkg",),
                                         ("otherpkg",), ("slowpkg",)]
    pair = groups[2]
    assert pair.lead.name == "pkg-a" and str(pair) == "pkg-a 1.0 → 2.0 (olddep, pkg-b with it)"
    assert "pkg-a 2.0 requires pkg-b==2.0, which pkg-b 1.0 (GOOD) does not meet: pkg-b moves no later than pkg-a" \
        in pair.why
    assert "pkg-a 1.0 requires olddep, which BAD removes: olddep moves with pkg-a" in pair.why
    assert groups[4].why == ("otherpkg 3.1 requires quietpkg>=1.1, which quietpkg 1.0 (GOOD) does not meet: "
                             "quietpkg moves no later than otherpkg",)
    assert all(not g.unknown for g in groups)


def test_group_steps_apply_one_group_at_a_time_in_order(house):
    groups = packages.coupled(packages.changed(GOOD, BAD), [house])
    steps = packages.group_steps(GOOD, BAD, groups)
    assert len(steps) == len(groups) + 1 and steps[0] == GOOD and steps[-1] == BAD
    seen = [lock.versions(s) for s in steps]
    assert "newpkg" not in seen[0] and seen[1]["newpkg"] == "0.2" and seen[1]["slowpkg"] == "1.0"
    assert "oldpkg" in seen[1] and "oldpkg" not in seen[2]
    assert (seen[2]["pkg-a"], seen[2]["pkg-b"], seen[2]["olddep"]) == ("1.0", "1.0", "0.3")
    assert (seen[3]["pkg-a"], seen[3]["pkg-b"]) == ("2.0", "2.0") and "olddep" not in seen[3]  # in one step
    assert (seen[4]["quietpkg"], seen[4]["otherpkg"]) == ("1.1", "3.0") and seen[5]["otherpkg"] == "3.1"
    # the culprit is the first bad step: slowpkg's is the last, so steps 0..5 run 1.0 and 6 runs 1.7
    assert [s["slowpkg"] for s in seen] == ["1.0"] * 6 + ["1.7"]
    assert all(s["steady"] == "1.0" for s in seen)
    with pytest.raises(packages.PackagesError, match="do not cover every change"):
        packages.group_steps(GOOD, BAD, groups[:-1])


def test_a_moved_package_carries_the_content_its_end_recorded(house):
    """A step installs BAD's quietpkg 1.1 and names the content BAD's lock recorded for it (envs.lock), so the
    venv built for it is checked to hold that wheel's files; a removed package's content line goes with it."""
    def content(text, name, version):
        return text + f"# content: {name}=={version} sha256:{lock.wheel_content(house / f'{name}-{version}-py3-none-any.whl')}\n"

    good = content(content(GOOD, "quietpkg", "1.0"), "oldpkg", "0.1")
    bad = content(BAD, "quietpkg", "1.1")
    groups = packages.coupled(packages.changed(good, bad), [house])
    steps = packages.group_steps(good, bad, groups)
    assert lock.contents(steps[1])["quietpkg"] == lock.contents(good)["quietpkg"]
    assert "oldpkg" not in lock.contents(steps[2])
    assert lock.contents(steps[5])["quietpkg"] == lock.contents(bad)["quietpkg"] != lock.contents(good)["quietpkg"]


def test_version_steps_carry_the_coupled_member_along(house):
    src = packages.source([house])
    pair = packages.coupled(packages.changed(GOOD, BAD), src)[2]
    assert packages.members_at(pair, "1.5", src) == {"pkg-a": "1.5", "olddep": None, "pkg-b": "1.5"}
    steps = packages.version_steps(GOOD, pair, ["1.5"], src)
    assert [(lock.versions(s)["pkg-a"], lock.versions(s)["pkg-b"]) for s in steps] == [
        ("1.0", "1.0"), ("1.5", "1.5"), ("2.0", "2.0")]
    assert packages.describe(pair, steps[1]) == "pkg-a 1.5 (pkg-b 1.5 with it; without olddep)"


@pytest.mark.slow  # uv's dry runs
def test_versions_from_the_wheelhouse_with_every_index_unreachable(house, monkeypatch, tmp_path):
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("REPRO_ENV_CACHE", str(tmp_path / "cache"))
    src = packages.source([house])
    slow = packages.coupled(packages.changed(GOOD, BAD), src)[-1]
    # a package whose METADATA is nowhere (no wheel, not in uv's or pip's cache) couples with nothing, and says so
    ghost = packages.changed(make_lock(ghost="1.0"), make_lock(ghost="2.0"))
    assert packages.coupled(ghost, src)[0].unknown == ("ghost",)
    said = []
    assert packages.versions(slow, src, log=said.append) == ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6"]
    assert "1.4.1 (its wheels (slowpkg-1.4.1-cp311-cp311-win_amd64.whl) are not for Python" in said[0]
    steps = packages.version_steps(GOOD, slow, ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6"], src)
    assert [lock.versions(s)["slowpkg"] for s in steps] == SLOW_VERSIONS
    # a version the wheelhouse does not hold cannot be had: refused, naming it, the Python and the platform
    why = packages.installable(make_lock(slowpkg="1.9"), src)
    assert why and why.startswith("slowpkg==1.9 cannot be had for Python " + platform.python_version()) and \
        str(house) in why, why
    assert packages.installable(make_lock(slowpkg="1.6", pkg_b="1.5"), src) is None


@pytest.mark.slow  # uv's dry runs
def test_the_two_walks_the_driver_bisects(house, monkeypatch, tmp_path):
    """Groups first (slowpkg's is the last step), then slowpkg's versions between the steps around it."""
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    src = packages.source([house])
    walk = packages.group_walk(GOOD, BAD, src)
    assert walk.labels == ["GOOD", "newpkg (added: 0.2)", "oldpkg (removed: 0.1)", "pkg-a 1.0 → 2.0 (olddep, pkg-b with it)",
                           "quietpkg 1.0 → 1.1", "otherpkg 3.0 → 3.1", "slowpkg 1.0 → 1.7"]
    within = packages.version_walk(walk, walk.n, src, log=lambda _: None)
    assert within.labels == [f"slowpkg {v}" for v in SLOW_VERSIONS]
    assert within.locks[0] == walk.locks[-2] and within.locks[-1] == BAD
    assert {lock.versions(s)["quietpkg"] for s in within.locks} == {"1.1"}  # the groups before it stay moved
    flat = packages.flat_walk(GOOD, BAD, src, log=lambda _: None)  # one walk: the group and its version at once
    assert flat.labels[-7:] == [f"slowpkg {v} (of slowpkg 1.0 → 1.7)" for v in SLOW_VERSIONS[1:]]
    assert flat.labels[:4] == ["GOOD", "newpkg (added: 0.2)", "oldpkg (removed: 0.1)",
                               "pkg-a 1.5 (pkg-b 1.5 with it; without olddep) (of pkg-a 1.0 → 2.0 (olddep, pkg-b with it))"]
    assert flat.locks[-1] == BAD and flat.locks[-8] == walk.locks[-2]
    gone = BAD.replace("slowpkg==1.7", "slowpkg==1.9")  # BAD's version cannot be had here: refused before any probe
    with pytest.raises(packages.PackagesError, match=r"BAD's slowpkg==1\.9 cannot be had for Python"):
        packages.group_walk(GOOD, gone, src)


@pytest.mark.slow  # pip and uv against an index
def test_versions_from_the_index_pip_is_configured_with(house, monkeypatch, tmp_path):
    """No wheelhouse: the versions come from the index (`pip index versions`, pip's configuration, which uv
    is handed too); here a PEP 503 index on disk, the only one pip knows."""
    from repro.envs import pipconf

    index = simple_index(tmp_path / "index", sorted(house.glob("*.whl")))
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    for k in ("PIP_NO_INDEX", "UV_OFFLINE", "UV_INDEX_URL", "UV_DEFAULT_INDEX"):
        monkeypatch.delenv(k)
    monkeypatch.setenv("PIP_INDEX_URL", f"file://{index}")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")  # pip's own file would add this machine's folders
    pipconf.read.cache_clear()
    try:
        slow = packages.coupled(packages.changed(GOOD, BAD))[-1]
        assert packages.versions(slow, None) == ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6"]
        assert packages.installable(make_lock(slowpkg="1.9")).startswith("slowpkg==1.9 cannot be had for Python")
        monkeypatch.setenv("PIP_INDEX_URL", NOWHERE)  # an index out of reach: said, with what to do
        monkeypatch.setenv("PIP_RETRIES", "0")
        pipconf.read.cache_clear()
        with pytest.raises(packages.PackagesError, match="the index lists no versions of slowpkg .* give a wheelhouse"):
            packages.versions(slow, None)
    finally:
        pipconf.read.cache_clear()


@pytest.mark.slow  # uv builds a venv
def test_environment_builds_a_venv_that_imports_the_version(house, monkeypatch, tmp_path):
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("REPRO_ENV_CACHE", str(tmp_path / "cache"))
    src = packages.source([house])
    text = make_lock(slowpkg="1.5", quietpkg="1.1")
    python = packages.environment(text, src, log=lambda _: None)
    out = subprocess.run([python, "-c", "import slowpkg, quietpkg; print(slowpkg.__version__, slowpkg.EXTRA, "
                          "quietpkg.__version__)"], capture_output=True, text=True)
    assert out.stdout.split() == ["1.5", "3", "1.1"], out.stderr
    assert packages.environment(text, src, log=lambda _: None) == python  # content-keyed: reused
# ---- end to end with the driver: repro bisect names slowpkg, then 1.5, offline ----------------------------

MIX = '''"""A library a model calls in its forward; from 1.5 on, mix() does EXTRA matmuls more than it needs."""

__version__ = "{version}"
EXTRA = {extra}


def mix(h):
    """h; from 1.5 on also EXTRA w x w matmuls whose results are scaled to nothing (traced into the jitted step)."""
    if not EXTRA:
        return h
    import jax.numpy as jnp

    m = jnp.ones((h.shape[-1], h.shape[-1]), h.dtype) / h.shape[-1]
    for _ in range(EXTRA):
        h = h + 1e-6 * jnp.tanh(h @ m)
    return h
'''

MODEL = '''"""A user's own model that calls a library in its forward: slowpkg.mix between its two layers."""

from repro.models.api import Model


class SlowMLP(Model):
    name = "slowmlp"
    task = "classify"
    description = "two-layer MLP that calls slowpkg.mix between its layers"
    presets = {"tiny": dict(features=64, width=512, classes=8)}

    def input_shape(self, dims):
        return (dims["features"],)

    def flax_module(self, dims, rngs, *, dtype=None, param_dtype=None):
        import jax.numpy as jnp
        import slowpkg
        from flax import nnx

        kw = dict(dtype=dtype, param_dtype=param_dtype or jnp.float32, rngs=rngs)

        class Net(nnx.Module):
            def __init__(self):
                self.a = nnx.Linear(dims["features"], dims["width"], **kw)
                self.b = nnx.Linear(dims["width"], dims["classes"], **kw)

            def __call__(self, x):
                return self.b(slowpkg.mix(nnx.relu(self.a(x))))

        return Net()

    def torch_module(self, dims):
        from torch import nn

        return nn.Sequential(nn.Linear(dims["features"], dims["width"]), nn.ReLU(),
                             nn.Linear(dims["width"], dims["classes"]))
'''

RUN = ("framework=jax", "model=slowmlp", "run.steps=60", "run.warmup=5", "run.batch_size=32", "run.threads=1",
       "run.start=fork")  # each probe's runs of one environment forked by one server: the test's subject is not the start
# The bisection's walk: GOOD, otherpkg, quietpkg, then slowpkg's versions between in the wheelhouse (1.4 1.5 1.6 1.7),
# the culprit at position 4 of 6: a noiseless search takes 4 probes (all eight versions: 9 positions, 5 probes).
# EXTRA matmuls from 1.5 on: 12 made a 20x slower step (9-12 ms against 0.4-0.7 ms a step, 3 runs each at a load
# of 3 on 2 cores), 3 made 7.8x, where GOOD's own runs spread 1.7x at that load and one probe in two then ran
# 5-7 rounds to clear the midpoint (60 runs, 12 min alone); each extra matmul costs a BAD run ~50 ms.
E2E_VERSIONS, E2E_EXTRA = ("1.0", "1.4", "1.5", "1.6", "1.7"), 12
# no round run again (the test's time), up to 8 rounds a probe: at load 10-20 on 2 cores one round in five came out 20x
BISECT = ("verdict.max_reruns=0", "--max-rounds", "8", "--progress", "none")


class Offline:
    """repro's tree copied outside git, a user's model package in its own git repository that imports slowpkg,
    a wheelhouse of slowpkg 1.0, 1.4 … 1.7 (mix() does E2E_EXTRA matmuls more from 1.5 on), quietpkg and otherpkg; a run
    at slowpkg 1.0 and one at 1.7 (quietpkg and otherpkg moved too), each in a venv of what a JAX worker
    needs; the BAD record packed (`repro env pack`), so a bisection needs no index at all."""

    def __init__(self, root: Path):
        from importlib import metadata

        from test_env_replay import WORKER_NEEDS
        from test_own_model import fresh_venv

        from repro import paths
        from repro.envs import venvs

        self.root, self.house = root, root / "house"
        for v in E2E_VERSIONS:
            extra = E2E_EXTRA if packages._version(v) >= packages._version(SLOW_FROM) else 0
            make_wheel(self.house, "slowpkg", v, {"slowpkg/__init__.py": MIX.format(version=v, extra=extra)})
        for name, versions in (("quietpkg", ("1.0", "1.1")), ("otherpkg", ("3.0", "3.1"))):
            for v in versions:
                make_wheel(self.house, name, v, {f"{name}/__init__.py": f'__version__ = "{v}"\n'})
        self.repro = root / "repro"
        for part in ("src", "conf"):
            shutil.copytree(paths.repo_root() / part, self.repro / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        self.pkg = root / "slowmodel_pkg"
        (self.pkg / "conf" / "model").mkdir(parents=True)
        (self.pkg / "conf" / "model" / "slowmlp.yaml").write_text("_target_: slowmodel.SlowMLP\npreset: tiny\n")
        (self.pkg / "slowmodel.py").write_text(MODEL)
        git = ["git", "-C", str(self.pkg), "-c", "user.email=t@t", "-c", "user.name=t"]
        subprocess.run(["git", "init", "-q", str(self.pkg)], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", "the model"], check=True)
        uv = [sys.executable, "-m", "uv"]
        # the parent builds the model once in its preflight: it imports slowpkg too (any version)
        self.parent = fresh_venv(root / "parent")
        subprocess.run([*uv, "pip", "install", "-q", "--python", str(self.parent), "--no-deps", "--offline", "--no-index",
                        "--find-links", str(self.house), "slowpkg==1.0"], check=True)
        self.work = root / "work"
        self.work.mkdir()
        self.ledger = self.work / "ledger"
        self.env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "PYTHONPATH", "REPRO_SNAPSHOT")}
        self.env.update(PYTHONPATH=os.pathsep.join([str(self.repro / "src"), str(self.pkg)]), REPRO_ROOT=str(self.repro),
                        REPRO_ENV_CACHE=str(root / "cache"), PYTHONUNBUFFERED="1",
                        MLFLOW_TRACKING_URI=f"sqlite:///{self.work / 'mlflow.db'}")
        self.runs = {}
        for side, pins in (("good", ("slowpkg==1.0", "quietpkg==1.0", "otherpkg==3.0")),
                           ("bad", ("slowpkg==1.7", "quietpkg==1.1", "otherpkg==3.1"))):
            venv = root / side
            subprocess.run([*uv, "venv", "-q", "--python", sys._base_executable, str(venv)], check=True, env=venvs.uv_env())
            subprocess.run([*uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *pins,
                            *(f"{n}=={metadata.version(n)}" for n in WORKER_NEEDS), "--find-links", str(self.house),
                            *venvs.sources()], check=True, env=venvs.uv_env())
            out = self.repro_("--config-dir", str(self.pkg / "conf"), *RUN, f"framework.python={venv / 'bin' / 'python'}",
                              f"ledger.dir={self.ledger}", "progress.mode=none")
            assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
            self.runs[side] = self.records()[-1]
        self.pack = root / "pack-bad"
        packed = self.repro_("env", "pack", self.runs["bad"]["id"][:12], "--ledger", str(self.ledger), "--out", str(self.pack),
                             env={"PIP_FIND_LINKS": str(self.house)})
        assert packed.returncode == 0, packed.stdout[-2000:] + packed.stderr[-2000:]

    def repro_(self, *args: str, env: dict | None = None, timeout: int = 2400) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.parent), "-m", "repro", *args], cwd=self.work, env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=timeout)

    def records(self, kind: str = "run") -> list[dict]:
        out = [json.loads(p.read_text()) for p in self.ledger.glob("*/*.json")]
        return sorted((r for r in out if r.get("kind") == kind and r.get("status") != "started"), key=lambda r: r["created"])


@pytest.mark.slow
@pytest.mark.timeout(3600)  # two venvs, two runs, a pack, then the bisection's runs (about 30) on a loaded machine
def test_bisect_names_the_package_then_its_version_offline(tmp_path):
    o = Offline(tmp_path)
    good, bad = o.runs["good"], o.runs["bad"]
    assert good["config_hash"] == bad["config_hash"] and good["environment"]["env_hash"] != bad["environment"]["env_hash"]
    out = o.repro_("bisect", good["id"][:10], bad["id"][:10], *BISECT, "--ledger", str(o.ledger),
                   "--wheelhouse", str(o.pack), "--wheelhouse", str(o.house), env=OFFLINE)
    text = out.stdout
    print(text[-6000:], out.stderr[-3000:])
    # the candidates before the first probe: three packages, the guilty one's versions between
    for line in ("otherpkg 3.0 → 3.1", "quietpkg 1.0 → 1.1", "slowpkg 1.5 (of slowpkg 1.0 → 1.7)"):
        assert line in text and text.index(line) < text.index("the gap reproduces here"), line
    assert out.returncode == 0, text[-4000:] + out.stderr[-2000:]
    (record,) = [r for r in o.records("bisect") if r["status"] != "running"]
    b = record["bisect"]
    assert record["status"] == "decided" and b["result"]["label"] == "slowpkg 1.5 (of slowpkg 1.0 → 1.7)", b["result"]
    assert b["result"]["posterior"] >= 0.95
    # every probe ran in its position's packages: the run records name that venv's lock
    runs = {r["id"]: r for r in o.records()}
    probed = [runs[i] for q in b["probes"] for i in q["runs"]]
    assert probed and all(r["status"] == "ok" for r in probed)
