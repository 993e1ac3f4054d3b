"""What a pack may be trusted with, and what it is trusted for (issue 59's two high defects).

- Nothing secret in a pack: credentials planted in every place pip and uv read them (the index URL in
  PIP_INDEX_URL and UV_INDEX_URL, extra indexes, pip's config file, a netrc, secret-named variables such as
  UV_INDEX_<NAME>_PASSWORD) reach no file of the pack, the ledger or repro's caches.
- A pack is checked against the record, not against itself: a wheel rebuilt with one line changed, with a
  valid RECORD, and its new sha256 written into the manifest and SHA256SUMS, is refused, naming the
  distribution and both content digests; nothing is installed or reused.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from wheels import QuietServer, make_wheel, simple_index

from repro.envs import lock, pack, venvs

SECRET = "s3cretPW42"


def _rebuilt(wheel: Path, out: Path, path: str, extra: str) -> Path:
    """`wheel` rebuilt with `extra` appended to the file `path`, its RECORD made valid again (as an attacker would)."""
    import base64
    import hashlib

    members = {}
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            members[info.filename] = z.read(info)
    members[path] += extra.encode()
    record_name = next(n for n in members if n.endswith(".dist-info/RECORD"))
    digest = lambda d: "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()  # noqa: E731
    members[record_name] = "".join(f"{n},{digest(d)},{len(d)}\n" for n, d in members.items()
                                   if n != record_name).encode() + f"{record_name},,\n".encode()
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out / wheel.name, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out / wheel.name


def test_a_wheel_and_its_installed_files_name_one_content(tmp_path):
    """The lock's digest, read from an installed distribution's RECORD, is the wheel's, computed from its bytes;
    what an installer writes itself (dist-info, byte-code, scripts outside site-packages) does not count."""
    wheel = make_wheel(tmp_path / "w", "demo-pkg", "1.0", {"demo_pkg/__init__.py": "X = 1\n",
                                                          "demo_pkg-1.0.data/purelib/demo_extra.py": "Y = 2\n",
                                                          "demo_pkg-1.0.data/scripts/demo": "#!python\n"})
    site = tmp_path / "site"
    (site / "demo_pkg").mkdir(parents=True)
    (site / "demo_pkg" / "__init__.py").write_text("X = 1\n")
    (site / "demo_extra.py").write_text("Y = 2\n")
    info = site / "demo_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
    (info / "INSTALLER").write_text("uv\n")
    rows = [f"demo_pkg/__init__.py,{lock._b64_sha256(b'X = 1' + bytes([10]))},6",
            "demo_extra.py,,",  # listed without a hash: hashed from disk
            "demo_pkg/__pycache__/__init__.cpython-311.pyc,sha256=abc,3",
            "../../../bin/demo,sha256=rewritten,9",
            "demo_pkg-1.0.dist-info/INSTALLER,sha256=x,3", "demo_pkg-1.0.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    installed = metadata.PathDistribution(info)
    assert lock.installed_content(installed) == lock.wheel_content(wheel) is not None
    # one changed byte in a file that installs: another digest
    changed = _rebuilt(wheel, tmp_path / "x", "demo_pkg/__init__.py", "# one more line\n")
    assert lock.wheel_content(changed) != lock.wheel_content(wheel)
    # the lock names it, pip and uv skip the line, and a pin drops the content it no longer describes
    text = lock.render([lock.Dist("demo-pkg", "1.0", content="a" * 64),
                        lock.Dist("zipp", "3.0", content="b" * 64)], "3.11.7")
    assert lock.contents(text) == {"demo-pkg": "a" * 64, "zipp": "b" * 64}
    assert list(lock.parse(text).requirements.values()) == ["demo-pkg==1.0", "zipp==3.0"]
    assert lock.contents(lock.with_pins(text, ["zipp==3.1"])) == {"demo-pkg": "a" * 64}


def test_a_rebuilt_and_rehashed_wheel_is_refused_against_the_record(tmp_path):
    """The probe's case: the wheel changed, its RECORD valid, its new sha256 in manifest.json and SHA256SUMS."""
    wheel = make_wheel(tmp_path / "w", "zipp", "3.99", {"zipp/__init__.py": "def path(): return 1\n"})
    recorded = lock.render([lock.Dist("zipp", "3.99", content=lock.wheel_content(wheel))], "3.11.7")
    house = tmp_path / "pack"
    (house / pack.WHEELS).mkdir(parents=True)
    (house / pack.WHEELS / wheel.name).write_bytes(wheel.read_bytes())

    def write_sums():
        f = house / pack.WHEELS / wheel.name
        dists = [{"name": "zipp", "version": "3.99", "file": f.name, "sha256": pack.sha256(f), "bytes": f.stat().st_size,
                  "content": lock.wheel_content(f), "source": {"index": "x"}}]
        (house / pack.MANIFEST).write_text(json.dumps({"what": "t", "target": {}, "distributions": dists}))
        (house / pack.SUMS).write_text(f"{dists[0]['sha256']}  {f.name}\n")

    write_sums()
    pack.check(house, recorded, "record r1")  # the packed wheel is the recorded one
    bad = _rebuilt(wheel, tmp_path / "evil", "zipp/__init__.py", "import os  # one line added\n")
    (house / pack.WHEELS / wheel.name).write_bytes(bad.read_bytes())
    write_sums()  # re-hashed: the pack agrees with itself
    assert pack.verify(house)
    with pytest.raises(pack.PackError) as refused:
        pack.check(house, recorded, "record r1")
    line = str(refused.value)
    assert "the zipp 3.99 wheel holds other files than the record ran with" in line
    assert lock.wheel_content(bad)[:16] in line and lock.wheel_content(wheel)[:16] in line and "\n" not in line
    # a lock from before content digests can only be checked against the pack itself, and is
    pack.check(house, lock.render([lock.Dist("zipp", "3.99")], "3.11.7"), "old")
    # the venv cache: a build from this pack is never the one an index build or another pack of the lock made
    plain = lock.render([lock.Dist("zipp", "3.99")], "3.11.7")
    digest = lock.env_hash(plain)
    from_pack = venvs._key(digest, plain, house)
    assert venvs._key(digest, plain, None) == digest != from_pack
    (house / pack.WHEELS / wheel.name).write_bytes(wheel.read_bytes())
    assert venvs._key(digest, plain, house) != from_pack


def test_the_code_bundle_is_covered_by_the_sums(tmp_path):
    house = tmp_path / "pack"
    (house / pack.WHEELS).mkdir(parents=True)
    (house / pack.BUNDLE).write_bytes(b"a git bundle")
    manifest = {"what": "t", "target": {}, "distributions": [], "code": pack.BUNDLE,
                "code_sha256": pack.sha256(house / pack.BUNDLE)}
    (house / pack.MANIFEST).write_text(json.dumps(manifest))
    assert pack.verify(house).code == pack.BUNDLE
    (house / pack.BUNDLE).write_bytes(b"another history")
    with pytest.raises(pack.PackError, match="code.bundle does not match its manifest"):
        pack.verify(house)
    (house / pack.MANIFEST).write_text(json.dumps({**manifest, "code_sha256": None}))
    with pytest.raises(pack.PackError, match="not covered by the manifest's sums"):
        pack.verify(house)


def test_a_manifest_that_is_not_a_packs_is_named(tmp_path):
    (tmp_path / pack.MANIFEST).write_text("{}")
    with pytest.raises(pack.PackError, match="is not a pack's .it needs a `distributions` list"):
        pack.manifest_of(tmp_path)
    (tmp_path / pack.MANIFEST).write_text(json.dumps({"distributions": [{"name": "x"}]}))
    with pytest.raises(pack.PackError, match="each with name, version, file, sha256"):
        pack.verify(tmp_path)


class _Index(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the server's own log stays out of the test's output
        pass


@pytest.mark.slow
def test_no_credential_reaches_the_pack_the_ledger_or_the_caches(tmp_path):
    """A real pack from a real (local) index reached with a password, as the probe ran it."""
    wheels = [make_wheel(tmp_path / "w", "demo-pkg", "1.0", {"demo_pkg/__init__.py": "X = 1\n"}),
              make_wheel(tmp_path / "w", "demo-dep", "2.0", {"demo_dep/__init__.py": "Y = 2\n"})]
    simple_index(tmp_path / "index", wheels)
    handler = lambda *a: _Index(*a, directory=str(tmp_path / "index"))  # noqa: E731
    server = QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        ledger, cache, home = tmp_path / "ledger", tmp_path / "cache", tmp_path / "home"
        home.mkdir()
        text = lock.render([lock.Dist("demo-pkg", "1.0"),
                            lock.Dist("demo-dep", "2.0")], "3.11.7")
        digest = lock.store(ledger, text)
        url = f"http://user:{SECRET}@127.0.0.1:{port}/simple"
        (home / ".netrc").write_text(f"machine 127.0.0.1 login user password {SECRET}\n")
        (home / ".netrc").chmod(0o600)
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[global]\nindex-url = {url}\nextra-index-url = http://tok{SECRET}@127.0.0.1:{port}/simple\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
        env.update(HOME=str(home), REPRO_ENV_CACHE=str(cache), PIP_CONFIG_FILE=str(conf), PIP_INDEX_URL=url,
                   PIP_EXTRA_INDEX_URL=f"http://127.0.0.1:{port}/simple?token={SECRET}", UV_INDEX_URL=url,
                   UV_INDEX_PRIVATE_USERNAME="user", UV_INDEX_PRIVATE_PASSWORD=SECRET, PIP_NO_CACHE_DIR="1")
        out = subprocess.run([sys.executable, "-m", "repro", "env", "pack", digest[:12], "--ledger", str(ledger),
                              "--out", str(tmp_path / "pack")], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        manifest = json.loads((tmp_path / "pack" / pack.MANIFEST).read_text())
        assert sorted(d["name"] for d in manifest["distributions"]) == ["demo-dep", "demo-pkg"]
        assert {d["source"]["index"] for d in manifest["distributions"]} == {f"http://***@127.0.0.1:{port}/simple"}
        assert all(d["content"] == lock.wheel_content(tmp_path / "pack" / pack.WHEELS / d["file"])
                   for d in manifest["distributions"])
        assert SECRET not in out.stdout + out.stderr
        leaks = [str(f) for root in (tmp_path / "pack", ledger, cache) for f in root.rglob("*")
                 if f.is_file() and SECRET.encode() in f.read_bytes()]
        assert leaks == []
    finally:
        server.shutdown()
