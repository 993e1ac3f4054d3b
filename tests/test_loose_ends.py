"""Issue 22: the loose ends found by probing (quick start, symlink loops, the replay chain, a full
disk under MLflow, lost runs, and the one-liners), each through the real CLI or the real ledger."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import psutil
import pytest

from conftest import Sandbox, tmpfs
from repro.ledger import Ledger
from repro.tracking import handoff

REPO = Path(__file__).resolve().parents[1]
TINY = ("model=mlp", "framework=torch", "run.warmup=2", "run.steps=4")


def _cli(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repro", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={**os.environ, **env})


def _run(ledger: Ledger, store: Path, **extra) -> dict:
    """A finished run's records (started → ok), as the runner writes them."""
    tracking = {"uri": f"sqlite:///{store}", "experiment": "loose"}
    config = {"framework": {"name": "jax"}, "model": {"name": "mlp", "preset": "tiny"}, "tracking": tracking}
    base = {"kind": "run", "config_hash": "c" * 64, "config": config, **extra}
    started = ledger.append({**base, "status": "started"})
    return ledger.append({**base, "status": "ok", "prev": started["id"], "results": {"steady_median_s": 0.01}})


def _dead_parent() -> dict:
    """The identity of a process that has exited (a parent killed mid-run)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    created = psutil.Process(proc.pid).create_time()
    proc.wait()
    return {"host": socket.gethostname(), "pid": proc.pid, "create_time": created}


# -- 2. symlink loops ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> Sandbox:
    """One real tiny run (torch, 4 steps) in its own ledger and sqlite store."""
    sandbox = Sandbox(tmp_path_factory.mktemp("one_run"))
    proc = sandbox.run(*TINY, "tracking.experiment=loose")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return sandbox


@pytest.fixture
def looped(one_run, tmp_path) -> tuple[Ledger, dict, list[Path]]:
    """A copy of a real run's ledger with two links pointing at each other in its root and a
    self-link in a date folder."""
    shutil.copytree(one_run.ledger, tmp_path / "ledger")
    ledger = Ledger(tmp_path / "ledger")
    ok = ledger.heads(kind="run")[0]
    date = next(ledger.root.rglob(f"{ok['id']}.json")).parent
    (ledger.root / "a").symlink_to("b")
    (ledger.root / "b").symlink_to("a")
    (date / "self.json").symlink_to("self.json")
    return ledger, ok, [ledger.root / "a", ledger.root / "b", date / "self.json"]


@pytest.mark.parametrize("command", [("ledger", "list"), ("ledger", "show", "ID"), ("ledger", "export"),
                                     ("compare", "ID"), ("report", "--experiment", "loose"), ("sync",)])
def test_readers_skip_a_symlink_loop_with_one_line_naming_it(looped, tmp_path, command):
    ledger, ok, loops = looped
    args = [ok["id"] if a == "ID" else a for a in command]
    proc = _cli(*args, "--ledger", str(ledger.root), cwd=tmp_path)
    assert "Traceback" not in proc.stderr and "Errno 40" not in proc.stderr, proc.stderr
    assert "MLflow failed" not in proc.stderr
    for loop in loops:
        lines = [line for line in proc.stderr.splitlines() if str(loop) in line]
        assert len(lines) == 1 and "symlink loop" in lines[0], proc.stderr
    if command[:2] in (("ledger", "list"), ("ledger", "show")):
        assert proc.returncode == 0 and ok["id"] in proc.stdout


def test_verify_names_each_symlink_loop_and_fails(looped):
    ledger, ok, loops = looped
    proc = _cli("ledger", "verify", "--ledger", str(ledger.root))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    fails = [line for line in proc.stderr.splitlines() if line.startswith("FAIL")]
    assert sorted(fails) == sorted(f"FAIL {p}: a symlink loop (it never reaches a file or folder): remove the link"
                                   for p in loops)


def test_a_ledger_dir_that_is_a_symlink_loop_is_refused_by_the_preflight_and_by_readers(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "other")
    (tmp_path / "other").symlink_to(loop)
    proc = _cli(*TINY, f"ledger.dir={loop}", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"ledger.dir='{loop}' is a symlink loop ({loop} ->" in proc.stderr and "hydra.callbacks" not in proc.stderr
    proc = _cli("ledger", "list", "--ledger", str(loop / "sub"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and f"is a symlink loop ({loop} ->" in proc.stderr


# -- 3. the replay chain -----------------------------------------------------------------------------

def test_a_dangling_replay_of_fails_verify_naming_both_ids(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    original = _run(ledger, tmp_path / "mlflow.db")
    replay = _run(ledger, tmp_path / "mlflow.db", replay_of=original["id"])
    assert _cli("ledger", "verify", "--ledger", str(ledger.root)).returncode == 0
    for r in ledger.chain(original):
        next(ledger.root.rglob(f"{r['id']}.json")).unlink()
    proc = _cli("ledger", "verify", "--ledger", str(ledger.root))
    assert proc.returncode == 1
    fails = [line for line in proc.stderr.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 2  # the replay's started and ok records both name the original
    assert any(replay["id"] in f for f in fails) and all(original["id"] in f and "is a replay of" in f for f in fails)


# -- 5. lost runs ------------------------------------------------------------------------------------

def test_recover_marks_a_lost_run_superseded_by_its_later_ok_run(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    lost = ledger.append({"kind": "run", "status": "started", "config_hash": "c" * 64, "parent": _dead_parent()})
    warned = _cli("ledger", "verify", "--ledger", str(ledger.root))
    assert warned.returncode == 0 and f"WARN {next(ledger.root.rglob(lost['id'] + '.json'))}" in warned.stderr
    again = _run(ledger, tmp_path / "mlflow.db")
    proc = _cli("ledger", "recover", "--ledger", str(ledger.root))
    assert proc.returncode == 0 and f"marked the lost run {lost['id']} superseded by run {again['id']}" in proc.stdout
    mark = ledger.current(lost)
    assert (mark["kind"], mark["status"], mark["prev"], mark["superseded_by"]) == \
           ("supersession", "superseded", lost["id"], again["id"])
    assert ledger.get(lost["id"]) == lost  # append-only: the lost record is still there, unchanged
    verified = _cli("ledger", "verify", "--ledger", str(ledger.root))
    assert verified.returncode == 0 and "WARN" not in verified.stderr, verified.stderr
    assert "nothing to recover" in _cli("ledger", "recover", "--ledger", str(ledger.root)).stdout  # once only


def test_a_resumed_sweep_marks_the_lost_run_of_its_job_superseded(tmp_path):
    """The lost `started` record is the one a SIGKILLed parent leaves (a dead parent pid, the job's
    config hash); then `run.resume=true` runs that job for real."""
    from repro.config import config_hash
    from repro import preflight
    from repro.config.schema import as_dict

    sandbox = Sandbox(tmp_path)
    args = [*TINY, f"ledger.dir={sandbox.ledger}", "run.resume=true"]
    chash = config_hash(as_dict(preflight.plan(args).jobs[0]))
    ledger = Ledger(sandbox.ledger)
    lost = ledger.append({"kind": "run", "status": "started", "config_hash": chash, "parent": _dead_parent()})
    proc = sandbox.run(*TINY, "run.resume=true")
    assert proc.returncode == 0, proc.stderr[-2000:]
    ok = next(h for h in sandbox.heads() if h["status"] == "ok")
    assert f"the lost run {lost['id']} is superseded by run {ok['id']}" in proc.stdout
    assert ledger.current(lost)["superseded_by"] == ok["id"]
    verified = _cli("ledger", "verify", "--ledger", str(sandbox.ledger))
    assert verified.returncode == 0 and "WARN" not in verified.stderr, verified.stderr


# -- 6. one-liners -------------------------------------------------------------------------------------

def test_ledger_given_as_a_file_is_named_a_file(tmp_path):
    (tmp_path / "f").write_text("")
    proc = _cli("ledger", "list", "--ledger", str(tmp_path / "f"))
    assert proc.returncode == 2 and "is a file, not a folder" in proc.stderr and "no such folder" not in proc.stderr


def test_ledger_schema_needs_no_ledger(tmp_path, monkeypatch, capsys):
    from repro import cli, paths

    monkeypatch.setattr(paths, "default_ledger_dir", lambda: tmp_path / "no-ledger-here")
    assert cli.dispatch(["ledger", "schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "repro ledger record"
    assert cli.dispatch(["ledger", "list"]) == 2  # a command that reads one still says it is missing


def test_a_large_foreign_json_file_with_an_id_is_not_a_record(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    ok = _run(ledger, tmp_path / "mlflow.db")
    folder = next(ledger.root.rglob(f"{ok['id']}.json")).parent
    big = folder / "dump.json"
    with open(big, "w") as f:  # 50 MB of someone's data that happens to carry an id
        f.write('{"id": "0123456789abcdef", "rows": [' + ",".join(["1234567890"] * 5_000_000) + "]}")
    small = folder / "note.json"
    small.write_text('{"id": "fedcba9876543210", "note": "not a run"}')
    proc = _cli("ledger", "list", "--ledger", str(ledger.root))
    assert proc.returncode == 0 and "0123456789abcdef" not in proc.stdout and "fedcba9876543210" not in proc.stdout
    assert f"skipping {big}: 52 MiB, larger than any record" in proc.stderr
    assert f"skipping {small}: not a record: it does not match the record schema" in proc.stderr
    proc = _cli("ledger", "show", "0123", "--ledger", str(ledger.root))
    assert proc.returncode == 2 and len(proc.stdout) == 0 and len(proc.stderr) < 2000


# -- 4. a full disk under an existing MLflow store ----------------------------------------------------

def test_a_full_disk_under_an_existing_mlflow_store_is_one_warning_with_the_real_cause(tmp_path):
    """A real 3 MiB tmpfs holds the sqlite store (created with its experiment by repro's Tracker),
    then is filled; the ledger lies elsewhere. The run is recorded; MLflow's failure is one warning."""
    from repro.tracking.mlflow_tracker import Tracker

    sandbox = Sandbox(tmp_path)
    with tmpfs(tmp_path / "mnt", "size=3m") as mnt:
        store = f"tracking.uri=sqlite:///{mnt}/mlflow.db"
        tracker = Tracker(f"sqlite:///{mnt}/mlflow.db", "full")
        with open(mnt / "filler", "wb", buffering=0) as f:
            with pytest.raises(OSError, match="No space left"):
                while True:
                    f.write(b"\0" * 4096)
        proc = sandbox.run(*TINY, store, "tracking.experiment=full")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert len(sandbox.heads()) == 1 and {h["status"] for h in sandbox.heads()} == {"ok"}
        (first,) = sandbox.heads()
        assert "Traceback" not in proc.stderr and "autoflush" not in proc.stderr and "ERROR" not in proc.stderr
        # MLflow is written by the background projector: its failure is kept, one line with the real
        # cause, and said by the next command on this ledger
        deadline = time.time() + 120
        while handoff.busy(sandbox.ledger) and time.time() < deadline:
            time.sleep(0.2)
        failed = handoff.last_failure(sandbox.ledger)
        assert failed and "OperationalError: database or disk is full" in failed["error"], failed
        log = (handoff.folder(sandbox.ledger) / handoff.LOG).read_text()
        assert "Traceback" not in log and "autoflush" not in log, log
        again = sandbox.run(*TINY, "run.seed=1", f"tracking.uri=sqlite:///{tmp_path}/other.db", "tracking.experiment=full")
        warnings = [line for line in again.stderr.splitlines() if "warning" in line]
        assert len(warnings) == 1 and "OperationalError: database or disk is full" in warnings[0], again.stderr
        assert "`repro sync`" in warnings[0]
        while handoff.busy(sandbox.ledger) and time.time() < deadline + 120:  # that command's projector
            time.sleep(0.2)
        synced = _cli("sync", "--ledger", str(sandbox.ledger))
        assert synced.returncode == 1 and "Traceback" not in synced.stderr and "ERROR" not in synced.stderr
        assert synced.stderr.count("\n") == 1 and "database or disk is full" in synced.stderr
        (mnt / "filler").unlink()
        assert _cli("sync", "--ledger", str(sandbox.ledger)).returncode == 0
        runs = tracker.find_runs("repro.ledger_id")
        assert [r.data.tags["repro.ledger_id"] for r in runs] == [first["id"]]
        tracker.client._tracking_client.store.engine.dispose()  # let the tmpfs be unmounted


def test_show_refuses_an_empty_id_in_one_line(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    a, b = _run(ledger, tmp_path / "mlflow.db"), _run(ledger, tmp_path / "mlflow.db", note="other")
    proc = _cli("ledger", "show", "", "--ledger", str(ledger.root))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "give a record id" in proc.stderr
    assert a["id"] not in proc.stderr and b["id"] not in proc.stderr


def test_show_and_compare_warn_of_a_record_whose_hash_does_not_match(one_run, tmp_path):
    shutil.copytree(one_run.ledger, tmp_path / "ledger")
    ledger = Ledger(tmp_path / "ledger")
    ok = ledger.heads(kind="run")[0]
    path = next(ledger.root.rglob(f"{ok['id']}.json"))
    path.write_text(path.read_text().replace('"steady_median_s": ', '"steady_median_s": 1'))  # a figure edited
    for command in (("ledger", "show", ok["id"][:8]), ("compare", ok["id"])):
        proc = _cli(*command, "--ledger", str(ledger.root))
        assert proc.returncode == 0, proc.stderr
        warned = [line for line in proc.stderr.splitlines() if "changed after it was written" in line]
        assert len(warned) == 1 and ok["id"] in warned[0] and str(path) in warned[0], proc.stderr
    assert _cli("ledger", "show", ok["prev"], "--ledger", str(ledger.root)).stderr == ""  # an intact one: silent


def test_a_misspelt_key_gets_the_key_it_meant(tmp_path):
    for override, meant in (("run.stpes=3", "run.steps"), ("modle.width=8", "model.width")):
        proc = _cli(*TINY, override, f"ledger.dir={tmp_path / 'ledger'}", "--dry-run")
        assert proc.returncode == 2 and f"{override.split('=')[0]} is not a config key: did you mean {meant}?" \
            in proc.stderr, proc.stderr
        assert "To append to your config" not in proc.stderr


def test_completion_offers_plus_exp(tmp_path):
    for line in ("repro ", "repro run ", "repro ex"):
        proc = subprocess.run([sys.executable, "-m", "repro", "-sc", "query=bash"], capture_output=True, text=True,
                              env={**os.environ, "COMP_LINE": line}, timeout=120)
        words = proc.stdout.split()
        assert proc.returncode == 0 and "exp=" not in words, (line, words)
        assert "+exp=" in words and "model=" in words or line == "repro ex", (line, words)


def test_a_run_removes_the_temp_folders_of_parents_that_are_gone(tmp_path):
    """A `repro-run-<pid>-*` folder left by a parent killed with SIGKILL (its pid is gone), one of a
    live process (this test's) and one without a pid in its name: the next run start removes the first."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    stale = tmp / f"repro-run-{_dead_parent()['pid']}-abc123"
    live = tmp / f"repro-run-{os.getpid()}-def456"
    other = tmp / "repro-run-xyz789"
    for folder in (stale, live, other):
        (folder / "compile-cache").mkdir(parents=True)
    sandbox = Sandbox(tmp_path / "box")
    sandbox.root.mkdir()
    proc = sandbox.run(*TINY, TMPDIR=str(tmp))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in tmp.glob("repro-run-*")) == sorted([live.name, other.name])


def test_hydra_run_folders_are_pruned_to_the_newest(tmp_path):
    from repro.runner import hydra_dirs

    runs = tmp_path / "cache" / "repro" / "hydra" / "runs"
    made = [runs / f"2026-01-0{d}" / f"10-00-0{s}.000000" for d in (1, 2) for s in range(5)]
    for folder in made:
        (folder / ".hydra").mkdir(parents=True)
    current = runs / "2026-01-03" / "09-00-00.000000"
    assert hydra_dirs.prune(current, keep=3) == made[:7]
    assert sorted(runs.glob("*/*")) == made[7:] and not (runs / "2026-01-01").exists()
    own = tmp_path / "mine" / "2026-01-01" / "x"
    own.mkdir(parents=True)
    assert hydra_dirs.prune(tmp_path / "mine" / "2026-01-02" / "y", keep=0) == [] and own.exists()


# -- 1. the README's quick start, as a new user runs it --------------------------------------------------

def _quick_start_block() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Quick start", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_the_quick_start_block_runs_as_written_in_a_fresh_clone_and_shell(tmp_path):
    """What it runs: `git clone` of this repository (its committed HEAD) into a temp folder; the
    README's quick-start block parsed from the clone; each command in `env -i` with only
    PATH=/usr/local/bin:/usr/bin:/bin and HOME (a fresh login shell has no .venv on its PATH), by
    `bash -c`, in the clone.

    What it does not run: the install. The clone's `.venv` is a symlink to the shared venv (made
    by `make install` once), and each `make TARGET` line runs as `make -n TARGET`, which must
    succeed and print the recipe the README's comment names (`.venv/bin/python -m repro
    +exp=quickstart`, `.venv/bin/python -m pytest`): running them would reinstall ~2 GB, and
    `make test` inside the suite would recurse. Every other line (`.venv/bin/repro --help`) runs
    for real and must exit 0 with repro's help. The shared venv's editable install points at the
    main checkout, so `repro --help` there prints main's help text, not the clone's."""
    clone = tmp_path / "repro"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    venv = REPO / ".venv"
    (clone / ".venv").symlink_to(venv.resolve())
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    commands = _quick_start_block()
    assert commands and any(c.startswith("make ") for c in commands) and not any(c.startswith("repro ") for c in commands)
    ran = []
    for command in commands:
        if command.startswith("make "):
            target = command.split()[1]
            proc = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], "bash", "-c",
                                   f"make -n {target}"], cwd=clone, capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, (command, proc.stderr)
            wanted = {"quickstart": ".venv/bin/python -m repro +exp=quickstart", "test": ".venv/bin/python -m pytest"}
            assert any(line.startswith(wanted[target]) for line in proc.stdout.splitlines()), (command, proc.stdout)
        else:
            proc = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], "bash", "-c", command],
                                  cwd=clone, capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
            assert "usage: repro" in proc.stdout and "Commands:" in proc.stdout, (command, proc.stdout)
        ran.append(command)
    assert ran == ["make quickstart", "make test", ".venv/bin/repro --help"]
    # the same line as the old README had it fails in a fresh shell: the reason for the fix
    bare = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], "bash", "-c", "repro --help"],
                          cwd=clone, capture_output=True, text=True, timeout=60)
    assert bare.returncode == 127 and "command not found" in bare.stderr
    _replay_as_recorded_in_the_fresh_shell(clone, env, tmp_path)


def _replay_as_recorded_in_the_fresh_shell(clone: Path, env: dict, tmp_path: Path) -> None:
    """Issue 30: one `repro replay ID --as-recorded` for real in that fresh shell (no SSL_CERT_FILE, no
    PIP_* variables, a HOME with no uv cache): uv must reach the package index with what pip's own
    configuration names (its certificate bundle). The run it replays uses a small venv (what a JAX MLP
    worker imports), so the rebuild downloads tens of MB, not the whole stack. PYTHONPATH makes the
    clone's code the code that runs (the shared venv's editable install points at the main checkout)."""
    from repro.envs import venvs

    small = tmp_path / "small"
    uv = [sys.executable, "-m", "uv"]
    subprocess.run([*uv, "venv", "-q", "--python", sys._base_executable, str(small)], check=True, env=venvs.uv_env())
    needs = ("jax", "jaxlib", "flax", "numpy", "omegaconf", "psutil", "rich")
    subprocess.run([*uv, "pip", "install", "-q", "--python", str(small / "bin/python"),
                    *(f"{n}=={metadata.version(n)}" for n in needs), *venvs.sources()], check=True, env=venvs.uv_env())
    shell = [f"{k}={v}" for k, v in env.items()] + ["LANG=C.UTF-8", f"PYTHONPATH={clone / 'src'}"]
    ledger = tmp_path / "ledger"

    def fresh(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["env", "-i", *shell, "bash", "-lc", command], cwd=clone, capture_output=True,
                              text=True, timeout=600)

    ran = fresh(f".venv/bin/repro model=mlp framework=jax run.steps=6 run.warmup=2 run.batch_size=8 "
                f"framework.python={small / 'bin/python'} ledger.dir={ledger} progress.mode=plain")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    (recorded,) = Ledger(ledger).heads(kind="run", status="ok")
    rid = recorded["id"]
    replay = fresh(f".venv/bin/repro replay {rid} --as-recorded --ledger {ledger} --progress none")
    assert replay.returncode == 0 and "verdict: exact" in replay.stdout, replay.stdout[-3000:] + replay.stderr[-3000:]
    assert "package sources (pip's configuration, handed to uv)" in replay.stdout, replay.stdout
    print("\n" + "\n".join(line for line in replay.stdout.splitlines() if "restored" in line or "sources" in line
                             or "verdict" in line))


def test_ctrl_c_between_jobs_counts_what_was_recorded_and_names_repro_sync(tmp_path):
    """A two-job sweep pressed with Ctrl-C (SIGINT) once the first job's record is in the ledger."""
    import signal
    import time

    sandbox = Sandbox(tmp_path)
    parent = subprocess.Popen(sandbox.repro_cmd("-m", "model=mlp", "framework=torch", "run.warmup=2",
                                                "run.steps=4,1000000"),
                              cwd=sandbox.root, env=sandbox.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    deadline = time.time() + 300
    while time.time() < deadline and not any(h["status"] == "ok" for h in sandbox.heads()):
        time.sleep(0.5)
    time.sleep(2)
    parent.send_signal(signal.SIGINT)
    _, err = parent.communicate(timeout=300)
    assert parent.returncode == 130, err[-2000:]
    heads = sandbox.heads()
    recorded = len([h for h in heads if h["status"] != "started"])
    assert heads[0]["status"] == "ok" and recorded == len(heads) >= 1, heads  # the second, if it started: interrupted
    assert f"repro: interrupted; {recorded} job(s) recorded in the ledger; `repro sync` puts any run not yet in " \
           "MLflow there" in err, err[-2000:]
