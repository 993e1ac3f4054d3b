"""Environment replay: whole-environment records, `replay --as-recorded`, `repro env`.

The recorded runs use a small venv made here with uv (just what a JAX MLP run imports) as
`framework.python`, so rebuilding their environment is quick and downloads nothing large.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from repro import paths
from repro.envs import lock, venvs, worktrees
from repro.ledger import schema

WORKER_NEEDS = ("jax", "jaxlib", "flax", "numpy", "omegaconf", "psutil", "rich")
RUN = ("run.steps=6", "run.warmup=2", "run.batch_size=8")


def make_venv(path: Path, *pins: str) -> str:
    """A venv with this interpreter's versions of what the worker needs, plus `pins`."""
    uv = [sys.executable, "-m", "uv"]
    subprocess.run([*uv, "venv", "-q", "--python", sys._base_executable, str(path)], check=True, env=venvs.uv_env())
    wanted = {n: f"{n}=={metadata.version(n)}" for n in WORKER_NEEDS} | {p.split("==")[0]: p for p in pins}
    subprocess.run([*uv, "pip", "install", "-q", "--python", str(path / "bin" / "python"), *wanted.values(),
                    *venvs.sources()], check=True, env=venvs.uv_env())
    return str(path / "bin" / "python")


class Checkout:
    """A clone of this repo's committed code, where runs are recorded and replayed."""

    def __init__(self, root: Path):
        self.root, self.clone, self.ledger = root, root / "clone", root / "ledger"
        subprocess.run(["git", "clone", "-q", str(paths.repo_root()), str(self.clone)], check=True)
        self.env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
        self.env.update(PYTHONPATH=str(self.clone / "src"), MLFLOW_TRACKING_URI=f"sqlite:///{root / 'mlflow.db'}",
                        REPRO_ENV_CACHE=str(root / "cache"), PYTHONUNBUFFERED="1")

    def repro(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "repro", *args], cwd=self.clone, env=self.env,
                              capture_output=True, text=True, timeout=600)

    def record(self, python: str) -> dict:
        out = self.repro(f"framework.python={python}", *RUN, f"ledger.dir={self.ledger}", "progress.mode=plain")
        assert out.returncode == 0, out.stdout + out.stderr
        return self.records("run")[-1]

    def replay(self, rid: str, *flags: str) -> tuple[subprocess.CompletedProcess, float]:
        start = time.perf_counter()
        out = self.repro("replay", rid, "--ledger", str(self.ledger), "--progress", "none", *flags)
        return out, time.perf_counter() - start

    def records(self, kind: str) -> list[dict]:
        rows = [json.loads(p.read_text()) for p in self.ledger.glob("2*/*.json")]
        return sorted((r for r in rows if r["kind"] == kind and r["status"] != "started"), key=lambda r: r["created"])

    def commit(self, message: str) -> str:
        git = ["git", "-C", str(self.clone), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "commit", "-qam", message], check=True)
        return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
def test_code_changed_later_replays_exact_as_recorded(tmp_path):
    co = Checkout(tmp_path)
    python = make_venv(tmp_path / "venv")
    original = co.record(python)
    env_hash = original["environment"]["env_hash"]
    assert original["schema_version"] == schema.SCHEMA_VERSION >= 2 and not original["git"]["dirty"]  # 2: env_hash
    assert lock.load(co.ledger, env_hash).count("\njax==") == 1  # the whole environment, kept once
    model = co.clone / "src/repro/models/mlp/flax_model.py"
    model.write_text(model.read_text().replace("nnx.gelu(layer(x), approximate=False)", "nnx.relu(layer(x))"))
    co.commit("ReLU in place of GELU")

    plain, plain_s = co.replay(original["id"])
    assert plain.returncode == 1 and "verdict: differs" in plain.stdout, plain.stdout + plain.stderr
    assert "code differs" in plain.stdout

    exact, exact_s = co.replay(original["id"], "--as-recorded")
    assert exact.returncode == 0 and "verdict: exact" in exact.stdout, exact.stdout + exact.stderr
    assert original["git"]["commit"][:12] in exact.stdout and env_hash[:12] in exact.stdout
    verdict = co.records("replay")[-1]
    rerun = next(r for r in co.records("run") if r["id"] == verdict["replay"])
    assert verdict["parts"] == {"code": "restored", "packages": "restored", "data": "same", "hardware": "same"}
    assert rerun["git"]["commit"] == verdict["as_recorded"]["commit"] == original["git"]["commit"]
    assert rerun["environment"]["env_hash"] == verdict["as_recorded"]["env_hash"] == env_hash
    # the sources uv was handed are pip's (in a fresh login shell only pip's config names the CA bundle)
    sources = verdict["as_recorded"]["sources"]
    assert sources["index"] and "package sources (pip's configuration, handed to uv)" in exact.stdout
    assert sources.get("cert") == venvs.pipconf.read().cert
    print(f"\nplain replay {plain_s:.1f} s, --as-recorded {exact_s:.1f} s (cold worktree and venv)")


@pytest.mark.slow
def test_one_package_older_rebuilt_from_the_record(tmp_path):
    co = Checkout(tmp_path)
    python = make_venv(tmp_path / "venv", "numpy==2.4.5")  # a patch release older than this venv's
    original = co.record(python)
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "-q", "--python", python, "numpy==2.4.6",
                    *venvs.sources()], check=True, env=venvs.uv_env())  # today's environment: one package newer

    plain, plain_s = co.replay(original["id"])
    assert "packages.numpy: '2.4.5' → '2.4.6'" in plain.stdout, plain.stdout + plain.stderr
    assert "packages differs" in plain.stdout

    cold, cold_s = co.replay(original["id"], "--as-recorded")
    assert cold.returncode == 0 and "verdict: exact" in cold.stdout, cold.stdout + cold.stderr
    assert "venv built in" in cold.stdout and "no differences in environment, code or data" in cold.stdout
    warm, warm_s = co.replay(original["id"], "--as-recorded")
    assert "(cached venv)" in warm.stdout and "verdict: exact" in warm.stdout, warm.stdout + warm.stderr
    built = co.records("replay")[-2]["as_recorded"]
    listing = co.repro("env", "list")
    assert built["env_hash"][:16] in listing.stdout and "worktree" in listing.stdout, listing.stdout
    print(f"\nplain replay {plain_s:.1f} s; --as-recorded cold {cold_s:.1f} s (venv {built['build_s']:.1f} s), "
          f"cached {warm_s:.1f} s\n{listing.stdout}")
    pruned = co.repro("env", "prune", "--all")
    assert pruned.returncode == 0 and "pruned 2 entries" in pruned.stdout, pruned.stdout + pruned.stderr
    assert not list((tmp_path / "cache" / "venvs").glob("*/bin"))


@pytest.mark.slow
def test_lock_pins_and_refusals(tmp_path, monkeypatch):
    text = lock.render([lock.Dist("numpy", "2.4.6", "index"),
                        lock.Dist("optax", "0.2.8", "index"),
                        lock.Dist("mine", "1.0", "editable", "file:///src")], "3.11.7")
    parsed = lock.parse(text)
    assert parsed.python == "3.11.7" and parsed.requirements == {"numpy": "numpy==2.4.6", "optax": "optax==0.2.8"}
    assert "mine" in parsed.local
    pinned = lock.with_pins(text, ["optax==0.2.7"])
    assert lock.versions(pinned)["optax"] == "0.2.7" and lock.env_hash(pinned) != lock.env_hash(text)
    assert lock.parse(pinned).local == parsed.local
    # records from before (no schema_version, no env_hash) stay valid; a malformed hash does not
    assert schema.errors({"id": "0" * 16, "kind": "run", "status": "ok", "created": "2025-01-01T00:00"}) == []
    assert schema.errors({"id": "0" * 16, "kind": "run", "status": "ok", "created": "2025-01-01T00:00",
                          "environment": {"env_hash": "abc"}})
    dirty = {"id": "r1", "git": {"commit": "a" * 40, "dirty": True, "diff_sha256": "d" * 64, "changed": ["x.py"]}}
    assert "would need the change itself" in worktrees.refuse_dirty(dirty, {"commit": "b" * 40})
    assert worktrees.refuse_dirty(dirty, {"commit": "a" * 40, "diff_sha256": "d" * 64}) is None
    monkeypatch.setenv("REPRO_ENV_CACHE", str(tmp_path))
    with pytest.raises(venvs.EnvError, match="editable"):
        venvs.ensure(text)
    gone = lock.render([lock.Dist("optax", "0.0.7", "index")], lock.parse(text).python)
    gone = gone.replace("3.11.7", __import__("platform").python_version())
    with pytest.raises(venvs.EnvError, match=r"optax==0.0.7.*--allow-substitutes"):
        venvs.ensure(gone, allow_substitutes=False)  # a replay: the flag exists there
    with pytest.raises(venvs.EnvError, match=r"optax==0.0.7.*pip index versions") as plain:
        venvs.ensure(gone)  # a run's env.packages: no such flag, so no hint to use it
    assert "--allow-substitutes" not in str(plain.value)
    venv, meta = venvs.ensure(gone, allow_substitutes=True, log=lambda _: None)
    assert meta.substitutes == {"optax==0.0.7": "optax==0.0.6"}
    assert lock.versions(lock.of_interpreter(venvs.python_of(venv), tmp_path / "locks"))["optax"] == "0.0.6"


@pytest.mark.slow
def test_an_edited_lock_is_refused_by_verify_show_and_replay(tmp_path):
    """A lock in <ledger>/envs/ edited after it was written (another optax) was verified,
    shown and restored as if it were the recorded one."""
    co = Checkout(tmp_path)
    original = co.record(sys.executable)
    env_hash = original["environment"]["env_hash"]
    path = co.ledger / "envs" / f"{env_hash}.txt"
    text = path.read_text()
    assert "\noptax==" in text
    path.write_text(text.replace(f"\noptax=={metadata.version('optax')}", "\noptax==0.2.7"))

    verify = co.repro("ledger", "verify", "--ledger", str(co.ledger))
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert str(path) in verify.stderr and original["id"] in verify.stderr and "changed after it was written" in verify.stderr
    show = co.repro("env", "show", env_hash[:12], "--ledger", str(co.ledger))
    assert show.returncode == 1 and str(path) in show.stderr and "optax==0.2.7" not in show.stdout, show.stdout + show.stderr
    runs = len(co.records("run"))
    exact, _ = co.replay(original["id"], "--as-recorded")
    assert exact.returncode != 0 and str(path) in exact.stdout + exact.stderr, exact.stdout + exact.stderr
    assert "packages restored" not in exact.stdout and len(co.records("run")) == runs  # nothing ran
    assert not (tmp_path / "cache" / "venvs").exists()  # nothing was built from it


def test_pip_settings_are_handed_to_uv_in_its_own_terms():
    from repro.envs import pipconf

    s = pipconf.parse("global.index-url='https://mirror.example/simple'\n"
                      "global.trusted-host='mirror.example other.example'\n"
                      "global.cert='/etc/ssl/company.pem'\n"
                      ":env:.cert='/etc/ssl/certs/ca-certificates.crt'\n"  # PIP_CERT wins over the file
                      "install.proxy='http://proxy.example:3128'\n"
                      ":env:.default-timeout='60'\n"
                      "global.client-cert='/etc/ssl/me.pem'\n")
    args = pipconf.uv_args(s)
    assert args[args.index("--index-url") + 1] == "https://mirror.example/simple"
    assert [args[i + 1] for i, a in enumerate(args) if a == "--allow-insecure-host"] == ["mirror.example", "other.example"]
    env = pipconf.uv_env(s, {})
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "SSL_CLIENT_CERT": "/etc/ssl/me.pem",
                   "HTTPS_PROXY": "http://proxy.example:3128", "HTTP_PROXY": "http://proxy.example:3128",
                   "UV_HTTP_TIMEOUT": "60"}
    assert pipconf.describe(s)["from"]["cert"] == "PIP_CERT"


def test_the_makefiles_uv_install_takes_pips_settings_and_names_a_missing_argument(monkeypatch, capsys):
    """`python -m repro.envs.pipconf ARGS` (the Makefile's installs): `uv pip install`, pip's sources first, then
    the caller's arguments, in an environment with pip's certificate; no argument is refused with the usage."""
    from repro.envs import pipconf

    settings = pipconf.parse("global.find-links='/nowhere/wheels'\nglobal.index-url='https://mirror.example/simple'\n"
                             "global.extra-index-url='https://bob:S3cr3tPW@private.example/simple'\n"
                             "global.cert='/etc/ssl/company.pem'\n")
    monkeypatch.setattr(pipconf, "read", lambda: settings)
    calls = []
    monkeypatch.setattr(pipconf.subprocess, "call", lambda cmd, env: calls.append((cmd, env)) or 0)
    assert pipconf.main(["-q", "--python", "/v/bin/python", "torch==2.13.0", "-e", ".[all]"]) == 0
    (cmd, env), = calls
    assert cmd[:5] == [sys.executable, "-m", "uv", "pip", "install"]
    assert cmd[5:] == ["--index-url", "https://mirror.example/simple",
                       "--extra-index-url", "https://bob:S3cr3tPW@private.example/simple",  # uv gets the real one
                       "--index-strategy", "unsafe-best-match",
                       "-q", "--python", "/v/bin/python", "torch==2.13.0", "-e", ".[all]"]  # a missing folder: skipped
    assert env["SSL_CERT_FILE"] == "/etc/ssl/company.pem"
    assert pipconf.main([]) == 2 and len(calls) == 1
    err = capsys.readouterr().err
    assert err.startswith("repro.envs.pipconf: nothing to install") and "index https://mirror.example/simple" in err
    assert "S3cr3tPW" not in err and "extra index https://***@private.example/simple" in err  # shown redacted


@pytest.mark.slow
def test_an_index_uv_cannot_reach_is_named_in_one_line_with_what_pip_would_use(tmp_path):
    """pip's certificate set to a bundle that trusts nothing: uv's TLS handshake with the index fails,
    and the refusal names the index and pip's settings in one line (not uv's multi-line error)."""
    bogus = tmp_path / "nothing.pem"
    bogus.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_DIR", "SSL_CERT_FILE")}  # only pip's bundle
    env |= {"PIP_CERT": str(bogus), "REPRO_ENV_CACHE": str(tmp_path / "cache"),
           "UV_CACHE_DIR": str(tmp_path / "uv"), "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": ""}
    text = lock.render([lock.Dist("leftpad", "0.0.7", "index")],
                       __import__("platform").python_version())
    out = subprocess.run([sys.executable, "-c", "import sys; from repro.envs import venvs\n"
                          "try:\n    venvs.ensure(sys.stdin.read())\n"
                          "except venvs.EnvError as e:\n    print(e)"], input=text, env=env, capture_output=True,
                         text=True, timeout=300)
    line = out.stdout.strip()
    assert "\n" not in line and line.startswith("uv could not reach https://pypi.org/simple/"), out.stdout + out.stderr
    assert f"certificate bundle {bogus}" in line and "index https://pypi.org/simple" in line
