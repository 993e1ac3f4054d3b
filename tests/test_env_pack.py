"""`repro env pack` and `repro replay --as-recorded --wheelhouse`: an environment and its code carried to a
machine with no index, and installed there offline.

The recorded run uses test_env_replay's small venv (what a JAX MLP run imports), so its pack is
about 30 wheels; the offline replay runs with every index and proxy unreachable.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_env_replay import RUN, Checkout, make_venv
from test_pack_trust import _rebuilt

from repro.envs import lock, pack

# No index, no network: pip and uv told to stay offline, every index and proxy at a closed port.
NOWHERE = "http://127.0.0.1:9/simple"
OFFLINE = {"PIP_NO_INDEX": "1", "UV_OFFLINE": "1", "UV_INDEX_URL": NOWHERE, "UV_DEFAULT_INDEX": NOWHERE,
           "PIP_INDEX_URL": NOWHERE, "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "ALL_PROXY": "http://127.0.0.1:9", "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": ""}


def fake_pack(root: Path, files: dict[str, bytes]) -> Path:
    """A wheelhouse as `make` writes one, of the given wheel files."""
    (root / pack.WHEELS).mkdir(parents=True)
    dists = []
    for name, data in files.items():
        (root / pack.WHEELS / name).write_bytes(data)
        dist, version = name.split("-")[:2]
        dists.append({"name": lock.normalise(dist), "version": version, "file": name,
                      "sha256": pack.sha256(root / pack.WHEELS / name), "bytes": len(data), "source": {"index": "x"}})
    (root / pack.MANIFEST).write_text(json.dumps({"what": "test", "target": {}, "distributions": dists}))
    return root


def test_a_changed_extra_or_missing_wheel_is_refused_naming_it(tmp_path):
    house = fake_pack(tmp_path / "house", {"six-1.17.0-py2.py3-none-any.whl": b"six",
                                           "omegaconf-2.3.1-py3-none-any.whl": b"omegaconf"})
    text = lock.render([lock.Dist("six", "1.17.0", "index"),
                        lock.Dist("omegaconf", "2.3.1", "index")], "3.11.7")
    pack.check(house, text, "record r1")  # intact and complete: no error
    missing = lock.render([lock.Dist("six", "1.17.0", "index"),
                           lock.Dist("rich", "15.0.0", "index")], "3.11.7")
    with pytest.raises(pack.PackError, match=r"record r1: wheelhouse .* has no wheel for rich==15.0.0 \("):
        pack.check(house, missing, "record r1")
    wheel = house / pack.WHEELS / "six-1.17.0-py2.py3-none-any.whl"
    wheel.write_bytes(b"six, changed")
    with pytest.raises(pack.PackError, match=f"{wheel} does not match its manifest"):
        pack.check(house, text, "record r1")
    wheel.write_bytes(b"six")
    extra = house / pack.WHEELS / "evil-1.0-py3-none-any.whl"
    extra.write_bytes(b"")
    with pytest.raises(pack.PackError, match=f"{extra} is not in its manifest"):
        pack.verify(house)
    extra.unlink()
    wheel.unlink()
    with pytest.raises(pack.PackError, match=f"{wheel} is missing"):
        pack.verify(house)
    with pytest.raises(pack.PackError, match="has no readable manifest.json"):
        pack.verify(tmp_path)


def test_targets_and_have_lists_are_checked():
    args = pack.target("3.12", "manylinux_2_28_x86_64").pip_args()
    assert args[:10] == ["--implementation", "cp", "--python-version", "3.12", "--abi", "cp312", "--abi", "abi3",
                         "--abi", "none"]
    platforms = [args[i + 1] for i, a in enumerate(args) if a == "--platform"]
    assert platforms[0] == "manylinux_2_28_x86_64" and platforms[-2:] == ["manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    assert pack.target(None, None).here and pack.target(None, None).pip_args() == []
    for python, plat, key in [("3.12", "linux-gpu", "--platform 'linux-gpu'"), ("312", None, "--python '312'"),
                              (None, "manylinux_2_28", "--platform")]:
        with pytest.raises(pack.PackError, match=key):
            pack.target(python, plat)


def test_have_list_reads_pip_freeze(tmp_path):
    have = tmp_path / "have.txt"
    have.write_text("# the image\nTorch==2.11.0+cu130\njax_cuda13_plugin==0.11.2\nmine @ file:///src\n")
    assert pack.read_have(have) == {"torch": "2.11.0+cu130", "jax-cuda13-plugin": "0.11.2", "mine": "file:///src"}
    have.write_text("torch 2.11.0\n")
    with pytest.raises(pack.PackError, match=r"--have .*'torch 2.11.0' is not a `name==version` line"):
        pack.read_have(have)
    with pytest.raises(pack.PackError, match="--have .*No such file"):
        pack.read_have(tmp_path / "nope.txt")


@pytest.mark.slow
def test_bad_input_exits_2_naming_it(tmp_path):
    co = Checkout(tmp_path)
    co.ledger.mkdir()
    ledger = ["--ledger", str(co.ledger)]
    unknown = co.repro("env", "pack", "d00d1e5", *ledger, "--out", str(tmp_path / "p"))
    assert unknown.returncode == 2 and "'d00d1e5' is no environment hash, sweep or record id" in unknown.stderr
    plat = co.repro("env", "pack", "current", *ledger, "--out", str(tmp_path / "p"), "--python", "3.12",
                    "--platform", "linux_gpu")
    assert plat.returncode == 2 and "--platform 'linux_gpu' is not a platform tag" in plat.stderr, plat.stderr
    keep = co.repro("env", "pack", "current", *ledger, "--out", str(tmp_path / "p"), "--keep", "torch")
    assert keep.returncode == 2 and "--keep goes with --have" in keep.stderr
    plain = co.repro("replay", "d00d1e5", *ledger, "--wheelhouse", str(tmp_path))
    assert plain.returncode == 2 and "--wheelhouse goes with --as-recorded" in plain.stderr
    for out in (unknown, plat, keep, plain):
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "p").exists() and not any(co.ledger.iterdir())  # nothing written


@pytest.mark.slow
def test_a_record_packed_replays_exact_offline_and_its_code_travels(tmp_path):
    co = Checkout(tmp_path)
    original = co.record(make_venv(tmp_path / "venv"))
    house = tmp_path / "pack"
    made = co.repro("env", "pack", original["id"][:10], "--ledger", str(co.ledger), "--out", str(house))
    assert made.returncode == 0, made.stdout + made.stderr
    manifest = json.loads((house / pack.MANIFEST).read_text())
    wanted = lock.parse(lock.load(co.ledger, original["environment"]["env_hash"])).requirements
    assert len(manifest["distributions"]) == len(wanted) == len(list((house / pack.WHEELS).iterdir()))
    assert manifest["records"] == [original["id"]] and manifest["commit"] == original["git"]["commit"]
    assert all(len(d["sha256"]) == 64 and d["source"] for d in manifest["distributions"])
    assert f"pack {house}: {len(wanted)} wheels" in made.stdout
    # the commit travels: a clone of the bundle is that commit
    clone = tmp_path / "from-pack"
    subprocess.run(["git", "clone", "-q", str(house / pack.BUNDLE), str(clone)], check=True)
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert head == original["git"]["commit"]
    # a second pack of the same lock shares its files (the content store)
    again = co.repro("env", "pack", original["environment"]["env_hash"][:12], "--ledger", str(co.ledger),
                     "--out", str(tmp_path / "pack2"))
    assert again.returncode == 0, again.stderr
    first = {f.name: f.stat().st_ino for f in (house / pack.WHEELS).iterdir()}
    assert {f.name: f.stat().st_ino for f in (tmp_path / "pack2" / pack.WHEELS).iterdir()} == first

    co.env.update(OFFLINE, REPRO_ENV_CACHE=str(tmp_path / "offline-cache"))
    runs = len(co.records("run"))
    exact, _ = co.replay(original["id"], "--as-recorded", "--wheelhouse", str(house))
    assert exact.returncode == 0 and "verdict: exact" in exact.stdout, exact.stdout + exact.stderr
    assert f"the wheelhouse {house} only, offline" in exact.stdout
    verdict = co.records("replay")[-1]
    assert verdict["as_recorded"]["sources"] == {"wheelhouse": str(house), "offline": True}
    assert verdict["parts"]["packages"] == "restored" and not verdict["as_recorded"]["venv_reused"]
    assert len(co.records("run")) == runs + 1
    # a run (a sweep's job) in the pack's environment: env.wheelhouse, offline too
    run = co.repro("env.wheelhouse=" + str(house), *RUN, f"ledger.dir={co.ledger}", "progress.mode=plain")
    assert run.returncode == 0, run.stdout + run.stderr
    assert co.records("run")[-1]["environment"]["env_hash"] == original["environment"]["env_hash"]
    runs += 1

    wheel = next(house.glob(f"{pack.WHEELS}/omegaconf-*.whl"))
    wheel.unlink()  # a broken link into the content store first: the store's file stays as it was
    wheel.write_bytes(b"not omegaconf")
    tampered, _ = co.replay(original["id"], "--as-recorded", "--wheelhouse", str(house))
    assert tampered.returncode == 2 and f"{wheel} does not match its manifest" in tampered.stderr, tampered.stderr
    assert len(tampered.stderr.strip().splitlines()) == 1 and len(co.records("run")) == runs + 1  # nothing ran
    refused = co.repro("env.wheelhouse=" + str(house), *RUN, f"ledger.dir={co.ledger}", "progress.mode=plain")
    assert refused.returncode == 2 and f"env.wheelhouse: wheelhouse {house}: {wheel} does not match" in refused.stderr, \
        refused.stdout + refused.stderr
    assert len(co.records("run")) == runs + 1  # refused before any worker

    # the probe's high defect: the wheel rebuilt with one line added (its RECORD valid) and re-hashed into the
    # manifest and SHA256SUMS, so the pack agrees with itself; the record's content digest refuses it
    original_wheel = next((tmp_path / "cache" / "wheels").rglob(wheel.name))  # the content store kept the real one
    wheel.unlink()
    rebuilt = _rebuilt(original_wheel, tmp_path / "evil", "omegaconf/__init__.py", "import os  # added\n")
    wheel.write_bytes(rebuilt.read_bytes())
    manifest = json.loads((house / pack.MANIFEST).read_text())
    for d in manifest["distributions"]:
        if d["file"] == wheel.name:
            d.update(sha256=pack.sha256(wheel), content=lock.wheel_content(wheel))
    (house / pack.MANIFEST).write_text(json.dumps(manifest))
    (house / pack.SUMS).write_text("".join(f"{d['sha256']}  {d['file']}\n" for d in manifest["distributions"])
                                   + f"{manifest['code_sha256']}  ../{pack.BUNDLE}\n")
    venvs_before = sorted(p.name for p in (tmp_path / "offline-cache" / "venvs").iterdir())
    rehashed, _ = co.replay(original["id"], "--as-recorded", "--wheelhouse", str(house))
    assert rehashed.returncode == 2, rehashed.stdout + rehashed.stderr
    recorded = lock.contents(lock.load(co.ledger, original["environment"]["env_hash"]))["omegaconf"]
    assert "the omegaconf " in rehashed.stderr and "wheel holds other files than the record ran with" in rehashed.stderr
    assert lock.wheel_content(wheel)[:16] in rehashed.stderr and recorded[:16] in rehashed.stderr
    assert "packages restored" not in rehashed.stdout and len(co.records("run")) == runs + 1  # nothing ran
    assert sorted(p.name for p in (tmp_path / "offline-cache" / "venvs").iterdir()) == venvs_before  # none made


@pytest.mark.slow
def test_another_target_leaves_out_what_it_has_and_refuses_what_it_cannot_have(tmp_path):
    ledger = tmp_path / "ledger"
    text = lock.render([lock.Dist("antlr4-python3-runtime", "4.9.3", "index"),  # an sdist only
                        lock.Dist("omegaconf", "2.3.1", "index"),
                        lock.Dist("pyyaml", "6.0.3", "index")], "3.11.7")
    digest = lock.store(ledger, text)
    have = tmp_path / "image.txt"
    have.write_text("PyYAML==6.0.3\nomegaconf==2.3.0\ntorch==2.11.0+cu130\n")
    cmd = [sys.executable, "-m", "repro", "env", "pack", digest[:12], "--ledger", str(ledger), "--python", "3.12",
           "--platform", "manylinux_2_28_x86_64", "--have", str(have)]
    out = subprocess.run([*cmd, "--out", str(tmp_path / "p312")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    manifest = json.loads((tmp_path / "p312" / pack.MANIFEST).read_text())
    assert manifest["target"] == {"python": "3.12", "platform": "manylinux_2_28_x86_64"}
    assert sorted(d["name"] for d in manifest["distributions"]) == ["antlr4-python3-runtime", "omegaconf"]
    assert manifest["left_out"] == ["pyyaml==6.0.3"]
    assert manifest["differs"] == [{"name": "omegaconf", "target_has": "2.3.0", "lock": "2.3.1", "packed": True}]
    built = next(d for d in manifest["distributions"] if d["name"] == "antlr4-python3-runtime")["source"]["built"]
    assert built["sdist"] == "antlr4-python3-runtime-4.9.3.tar.gz" and "pip wheel --no-deps" in built["how"]
    assert "target has omegaconf 2.3.0, the lock 2.3.1: packed" in out.stdout

    kept = subprocess.run([*cmd, "--keep", "omegaconf", "--out", str(tmp_path / "kept")], capture_output=True, text=True)
    assert kept.returncode == 0 and "the target's kept (--keep)" in kept.stdout, kept.stdout + kept.stderr

    # markupsafe 2.0.1 has no cp312 wheel, and its sdist builds a C extension for this machine only
    lock.store(ledger, old := lock.render([lock.Dist("markupsafe", "2.0.1", "index")], "3.11.7"))
    refused = subprocess.run([*cmd[:5], lock.env_hash(old)[:12], *cmd[6:], "--out", str(tmp_path / "no")],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "cannot be had for Python 3.12" in refused.stderr, refused.stdout + refused.stderr
    assert "markupsafe==2.0.1 (its sdist" in refused.stderr and not (tmp_path / "no").exists()
