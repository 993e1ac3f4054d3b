"""Shared test helpers: run the real CLI in a subprocess against an isolated ledger and store."""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from repro import hardware


def _cmdline(p) -> str:
    """A process's command line, "" for one that ended (or is a zombie) while being listed."""
    import psutil

    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


@functools.cache
def template_store() -> Path:
    """An empty MLflow sqlite store, created (and migrated) once per test process by MLflow itself.
    Creating one takes MLflow's alembic migrations ~1.5 s of CPU, on the first command's path (it
    waits for the projector to create the store): each Sandbox starts from a copy instead, an
    ordinary store that already exists. The creating path stays tested where a command meets no
    store: test_faults.py (runs started at once on a fresh store), test_snapshot.py,
    test_env_replay.py, test_own_model.py, test_cli.py, test_scaleout.py's follower and the
    Sandbox(store_template=False) tests (test_config_errors.py, test_steady_window.py)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    folder = Path(tempfile.mkdtemp(prefix="repro-store-template-"))
    atexit.register(shutil.rmtree, folder, True)
    SqlAlchemyStore(f"sqlite:///{folder / 'mlflow.db'}", (folder / "mlruns").as_uri()).engine.dispose()
    return folder / "mlflow.db"


@dataclass
class Sandbox:
    """A working folder with its own ledger and sqlite MLflow store. `store_template`: the store
    starts as a copy of `template_store()` (False: the first command creates it, or not)."""

    root: Path
    store_template: bool = True

    @property
    def ledger(self) -> Path:
        return self.root / "ledger"

    @property
    def db(self) -> Path:
        return self.root / "mlflow.db"

    @property
    def uri(self) -> str:
        return f"sqlite:///{self.db}"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a command in this sandbox (its store seeded from the template first)."""
        if self.store_template and not self.db.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(template_store(), self.db)
        env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
        env.update(MLFLOW_TRACKING_URI=self.uri, PYTHONUNBUFFERED="1", **extra)
        return env

    def repro_cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "repro", *args, f"ledger.dir={self.ledger}", "progress.mode=plain"]

    def run(self, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
        """`python -m repro ARGS` with cwd in the sandbox."""
        return subprocess.run(self.repro_cmd(*args), cwd=self.root, env=self.env(**env), capture_output=True,
                              text=True, timeout=timeout)

    def kill_one_process_mid_run(self, *args: str, settle_s: float) -> tuple[list[dict], str, float]:
        """Start `python -m repro -m ARGS` (its first job's run must outlast the test), wait for
        the run's processes (multiprocessing children: torch's ranks or JAX's processes), let it
        settle `settle_s` into its timed loop, SIGKILL the newest one. Returns the heads in job
        order, the output and the seconds from the kill to the sweep's end."""
        import signal
        import time

        import psutil

        parent = subprocess.Popen(self.repro_cmd("-m", *args), cwd=self.root, env=self.env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline, procs = time.time() + 120, []
        while time.time() < deadline and len(procs) < 2:
            procs = [p for p in psutil.Process(parent.pid).children(recursive=True)
                     if "multiprocessing" in _cmdline(p) and "resource_tracker" not in _cmdline(p)]
            time.sleep(0.5)
        assert len(procs) >= 2, "the run's processes did not appear"
        time.sleep(settle_s)
        killed = time.time()
        max(procs, key=lambda p: p.pid).send_signal(signal.SIGKILL)
        out, _ = parent.communicate(timeout=400)
        return sorted(self.heads(), key=lambda r: r["sweep"]["job"]), out, time.time() - killed

    def records(self) -> list[dict]:
        from repro.ledger import Ledger

        return list(Ledger(self.ledger).records())  # every record file (not the index under .index/)

    def heads(self) -> list[dict]:
        """The runs' newest records (a sweep's own "sweep" record is not a run)."""
        from repro.ledger import Ledger

        return [r for r in Ledger(self.ledger).heads() if r.get("kind") == "run"]

    def projected(self, timeout: float = 180) -> None:
        """Wait (bounded) for the background projector to put this ledger's runs into MLflow:
        the command returns before MLflow has them (tracking/handoff.py)."""
        import time

        from repro.tracking import handoff

        deadline = time.time() + timeout
        while handoff.entries(self.ledger) or handoff.busy(self.ledger):
            if failed := handoff.last_failure(self.ledger):
                raise AssertionError(f"the MLflow projector failed: {failed}")
            assert time.time() < deadline, f"the MLflow projector left {handoff.entries(self.ledger)} after {timeout} s"
            time.sleep(0.2)

    def mlflow_runs(self, experiment: str) -> list:
        from mlflow.tracking import MlflowClient

        self.projected()

        client = MlflowClient(tracking_uri=self.uri)
        exp = client.get_experiment_by_name(experiment)
        assert exp is not None, f"no MLflow experiment {experiment!r} in {self.uri}"
        return client.search_runs([exp.experiment_id], max_results=1000)


REPO = Path(__file__).resolve().parents[1]


def repro_cli(*args: str, cwd: Path | None = None, timeout: float = 300, env: dict | None = None,
              **extra: str) -> subprocess.CompletedProcess:
    """`python -m repro ARGS` (this interpreter) in `cwd`, its output captured as text; its environment
    is `env` (default: this process's) plus `extra`. For a sandboxed ledger and store use `Sandbox.run`."""
    return subprocess.run([sys.executable, "-m", "repro", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env={**(os.environ if env is None else env), **extra})


def finished_run(ledger, store: Path, **extra) -> dict:
    """A finished run's records (started → ok) appended to `ledger`, as the runner writes them; its
    tracking block names the sqlite `store`. Returns the ok record."""
    tracking = {"uri": f"sqlite:///{store}", "experiment": "loose"}
    config = {"framework": {"name": "jax"}, "model": {"name": "mlp", "preset": "tiny"}, "tracking": tracking}
    base = {"kind": "run", "config_hash": "c" * 64, "config": config, **extra}
    started = ledger.append({**base, "status": "started"})
    return ledger.append({**base, "status": "ok", "prev": started["id"], "results": {"steady_median_s": 0.01}})


def dead_parent() -> dict:
    """The identity of a process that has exited (a parent killed mid-run)."""
    import psutil

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    created = psutil.Process(proc.pid).create_time()
    proc.wait()
    return {"host": socket.gethostname(), "pid": proc.pid, "create_time": created}


@functools.cache
def shipped_ledger() -> Path:
    """The ledger as the repo publishes it: its git-tracked records, copied once per test process.
    The checkout's ledger/ also takes what a user runs there (the README's `make quickstart` runs
    before `make test`), which the tests that read the shipped records must not see. Outside git
    (an unpacked archive) the ledger's record files as they are."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "ledger"], capture_output=True, text=True)
    names = [n for n in listed.stdout.split("\0") if n] if listed.returncode == 0 else \
        [str(p.relative_to(REPO)) for p in (REPO / "ledger").rglob("*")
         if p.is_file() and not any(part.startswith(".") for part in p.relative_to(REPO / "ledger").parts)]
    copy = Path(tempfile.mkdtemp(prefix="repro-shipped-")) / "ledger"
    atexit.register(shutil.rmtree, copy.parent, True)
    for name in names:
        (copy / Path(name).relative_to("ledger")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, copy / Path(name).relative_to("ledger"))
    return copy


def at_work_on(ledger: Path, machine: Path | None = None, timeout: float = 30):
    """The process at work on `ledger`'s MLflow hand-over as it registered itself in the machine
    folder (worker/machine_locks.py): a projector of its own or the machine's writer
    (tracking/writer.py); `machine`: the folder the command ran with (default: this process's)."""
    import psutil

    from repro import paths

    registry = (machine or paths.machine_dir()) / "projectors"
    want = str(Path(ledger).resolve())
    deadline = time.time() + timeout
    while time.time() < deadline:
        for path in registry.glob("*.json") if registry.is_dir() else []:
            try:
                info = json.loads(path.read_text())
                if info["ledger"] == want:
                    return psutil.Process(info["pid"])
            except (OSError, ValueError, KeyError, psutil.Error):
                continue
        time.sleep(0.02)
    raise AssertionError(f"no projector or writer registered at work on {ledger} within {timeout} s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_of(parent: subprocess.Popen, timeout: float = 60):
    """The `repro.worker.worker` process under `parent`, once it appears."""
    import psutil

    deadline = time.time() + timeout
    while time.time() < deadline:
        for child in psutil.Process(parent.pid).children(recursive=True):
            try:
                if "repro.worker.worker" in " ".join(child.cmdline()):
                    return child
            except psutil.Error:  # a short-lived helper (git) that ended meanwhile
                continue
        time.sleep(0.05)
    raise AssertionError("no worker process appeared")


@contextmanager
def mlflow_server(backend_uri: str, artifacts: Path | None = None, port: int | None = None, cwd: Path | None = None):
    """A real `mlflow server` (one worker) on 127.0.0.1; yields its URL once healthy.
    `artifacts`: its --default-artifact-root (None: the store's own artifact locations)."""
    port = port or free_port()
    mlflow = str(Path(sys.executable).parent / "mlflow")
    root = ["--default-artifact-root", artifacts.as_uri()] if artifacts else []
    # MLflow's job runner off (MLFLOW_SERVER_ENABLE_JOB_EXECUTION): its huey consumers, seven Python
    # processes that each import MLflow (2.4 s of CPU apiece, ~75 s of the suite's), serve MLflow's
    # GenAI jobs, which nothing of repro's asks for
    proc = subprocess.Popen([mlflow, "server", "--backend-store-uri", backend_uri, *root,
                             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"], cwd=cwd,
                            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                break
        except OSError:
            time.sleep(0.5)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("mlflow server did not become healthy within 120 s")
    try:
        yield url
    finally:  # SIGTERM takes the server ~10-20 s to honour; its store is a test's throwaway
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@contextmanager
def tmpfs(path: Path, options: str):
    """A real tmpfs mounted at `path` (`options`: "size=256k", "size=1m,ro"), unmounted after.
    Mounting needs root (or CAP_SYS_ADMIN), as `make test` already does for its system packages:
    without it the test fails saying so, rather than skipping the disk-full and read-only cases."""
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"cannot mount a {options} tmpfs at {path}: {proc.stderr.strip()}. The disk-full and "
                    "read-only tests need root or CAP_SYS_ADMIN: run `make test` as root (CI does)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def one_device_losses(box: Sandbox, fast: tuple[str, ...]) -> dict[str, list[float]]:
    """{framework: the loss trajectory on one device}, JAX and torch in one sweep in `box`: what a
    sharded or multi-node run of the same global batch must reproduce."""
    proc = box.run("-m", "framework=jax,torch", *fast, "tracking.experiment=base")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {h["config"]["framework"]["name"]: h["results"]["loss"] for h in box.heads()}


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


# pytest-xdist (`make test`: 4 workers on 2 cores) sends each scope below to one worker. A module-
# or session-scoped fixture runs once per worker that needs it, so each test file is a scope of its
# own (its module fixtures run once), and the files that read one of SHARED_FIXTURES form one scope
# (the sweep runs once). xdist's own `--dist loadgroup` cannot do this under pytest 9.2: it renames
# items through `item._nodeid`, which pytest 9.2 no longer reads (the marks are set and silently
# ignored), so the scheduler below groups by name. A new session fixture shared across files goes in
# SHARED_FIXTURES; collection fails, naming the file, if a test uses one from a file that
# SHARED_FILES does not put in its scope.
# The SLURM cluster is not shared: it starts in 0.8 s and its idle daemons used 0.01 s of CPU in
# 30 s (measured 2026-12-01), so each worker that takes a SLURM test starts its own (the `slurm`
# fixture, once per worker). Shared, its four files were one scope of ~890 s on one worker: on 2
# cores the suite is CPU-bound and its waits overlapped other tests' work, but on more cores the
# suite would wait for that one chain.
SHARED_FIXTURES = {"report_sweep": "report_sweep", "recorded": "report_sweep"}
SHARED_FILES = {"test_report.py": "report_sweep", "test_report_browser.py": "report_sweep",
                "test_data_replay.py": "report_sweep"}
# Scopes smaller than a file (no module fixture may serve them: it would run once per worker they
# reach; collection fails naming one): a single test of minutes handed out alone, and files whose
# test functions are each a scope (launcher parity: every function runs under every launcher).
ALONE_TESTS = {"test_slurm.py::test_a_bisection_runs_its_rounds_as_slurm_jobs_and_resumes_in_this_process"}
BY_FUNCTION = {"test_launcher_parity.py"}


# The scopes that take longest, longest first, as `--durations=0` measured them (seconds summed per
# scope): handed out first, the short scopes fill in at the end (longest processing time first), so
# that no worker is left with a long scope while the others have nothing more to take. Scopes not
# named here follow, most tests first (xdist's order). History: 2026-11-25/28, the files each alone and
# then under 4 workers, and CI's run of 2026-11-28 (its single long tests, listed nowhere, were handed
# out last); 2026-12-01, this order, from the suite of 0e5eb89 on this 2-core host (CI's run of stop
# 74 in parentheses where it ran longer): the SLURM bisection 221 (310), the rest of test_slurm.py
# 283, test_bisect_packages 257, test_device_pass 229, launcher parity's resume 194 (ray alone 188 on
# CI), sharding 179, docs 170, own_model 162, bisect 152, env_pack 132, sweep_loop 118, report_sweep
# 114, faults 102, tracking_handoff 96, handoff_faults 90, jax_init_build 87, launchers 85, scaleout
# 83, torch_xla 82, parity's Ctrl-C 81, verdicts 74, secrets_sweep 71; the rest under 70.
SLOWEST_SCOPES = ("test_slurm.py::test_a_bisection_runs_its_rounds_as_slurm_jobs_and_resumes_in_this_process",
                  "test_slurm.py", "test_bisect_packages.py", "test_device_pass.py",
                  "test_launcher_parity.py::test_resume_counts_each_record_once_under_every_launcher",
                  "test_sharding.py", "test_docs.py", "test_own_model.py", "test_bisect.py", "test_env_pack.py",
                  "test_sweep_loop.py", "report_sweep", "test_faults.py", "test_tracking_handoff.py",
                  "test_handoff_faults.py", "test_jax_init_build.py", "test_launchers.py", "test_scaleout.py",
                  "test_torch_xla.py",
                  "test_launcher_parity.py::test_ctrl_c_records_interrupted_and_ends_in_one_line_under_every_launcher",
                  "test_verdicts.py", "test_secrets_sweep.py")


def _scope(nodeid: str) -> str:
    """The scope of a test, by its node id (the workers' collection and xdist's scheduler both read it):
    the test function where it is handed out alone, else its shared fixture's group, else its file."""
    path, _, name = nodeid.partition("::")
    here = f"{Path(path).name}::{name.split('[', 1)[0]}"
    if here in ALONE_TESTS or Path(path).name in BY_FUNCTION:
        return here
    return SHARED_FILES.get(Path(path).name, path)


def _named(scope: str) -> str:
    """A scope as SLOWEST_SCOPES names it: a group, a file's name, or file::function."""
    return scope if scope in SHARED_FILES.values() or "::" in scope else Path(scope).name


def _longest_scopes_first(items) -> None:
    """Items ordered by scope (SLOWEST_SCOPES first, then most tests first), each scope's items in
    their collected order: the xdist scheduler below hands scopes out in this order."""
    here = Path(__file__).parent
    if stale := [n for n in SLOWEST_SCOPES if n not in SHARED_FILES.values()
                 and not (here / n.split("::")[0]).is_file()]:
        raise pytest.UsageError(f"SLOWEST_SCOPES in tests/conftest.py names {stale}: neither a test file "
                                "nor a SHARED_FILES group; rename or remove it")
    counts: dict[str, int] = {}
    for item in items:
        counts[_scope(item.nodeid)] = counts.get(_scope(item.nodeid), 0) + 1
    first = {scope: i for i, scope in enumerate(counts)}
    slowest = {name: i for i, name in enumerate(SLOWEST_SCOPES)}

    def rank(item) -> tuple:
        scope = _scope(item.nodeid)
        return (slowest.get(_named(scope), len(SLOWEST_SCOPES)), -counts[scope], first[scope])

    items.sort(key=rank)  # stable: a scope's own items keep their order


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    config.option.loadscopereorder = False  # the workers' collection is already in order
    return SharedFixtureScopes(config, log)


def _check_scopes(items) -> None:
    for item in items:
        for fixture, group in SHARED_FIXTURES.items():
            if fixture in item.fixturenames and SHARED_FILES.get(item.path.name) != group:
                raise pytest.UsageError(f"{item.nodeid} uses the session fixture {fixture!r}: add "
                                        f"{item.path.name!r}: {group!r} to SHARED_FILES in tests/conftest.py")
        if "::" not in _scope(item.nodeid):
            continue
        module = [name for name, defs in item._fixtureinfo.name2fixturedefs.items() if defs[-1].scope == "module"]
        if module:  # private to pytest, read for this guard only: a module fixture per worker a split file reaches
            raise pytest.UsageError(f"{item.nodeid} is handed out apart from its file (ALONE_TESTS, BY_FUNCTION in "
                                    f"tests/conftest.py) but uses the module fixture {module[0]!r}, which would "
                                    "run again on each worker the file's tests reach: make it a function fixture, "
                                    "or hand the file out whole")


# The fast tier (`make test-fast`: -m "not slow") starts no process: a test that starts one
# (`python -m repro`, a worker, a server, a spawned multiprocessing child), in its setup (its
# fixtures) or its body, is marked `slow`. The guard below enforces it in every run: a process
# started while an unmarked test sets up or runs fails that test, naming the program. Quick
# read-only lookups are allowed (QUICK_PROGRAMS). Fixtures' teardown is not watched (a session
# fixture ends in whichever test runs last).
QUICK_PROGRAMS = {"git"}
_watched: list = []  # the unmarked test now setting up or running, if any


def _command(args) -> list[str]:
    if isinstance(args, (str, bytes)):
        return os.fsdecode(args).split()
    if isinstance(args, os.PathLike):
        return [os.fsdecode(args)]
    return [os.fsdecode(a) for a in args]


def _refuse_unmarked(command: list[str]) -> None:
    item = _watched[-1]
    message = (f"{item.nodeid} starts a process ({' '.join(command)[:200]}) but is not marked slow: mark it "
               "`@pytest.mark.slow` (tests/conftest.py: the fast tier starts no process)")
    item.stash.setdefault(_STARTED, []).append(message)
    raise AssertionError(message)


_STARTED = pytest.StashKey[list]()
_popen_init = subprocess.Popen.__init__


def _guarded_popen_init(self, args, *rest, **kwargs):
    if _watched and Path((_command(args) or [""])[0]).name not in QUICK_PROGRAMS:
        _refuse_unmarked(_command(args))
    return _popen_init(self, args, *rest, **kwargs)


# The suite's PyTorch workers wait in OpenMP as a loaded machine's processes should: asleep, not
# spinning. The suite runs more processes than cores (4 test workers on 2), and GNU OpenMP's default
# spin-wait makes a torch worker whose thread is descheduled at a barrier spin on the other core for
# every op: a tiny-ViT run of 150 steps beside 3 busy processes took 90-188 s of wall and 77-185 s of
# CPU with its 2 threads spinning, 7.4 s and 5.8 s with OMP_WAIT_POLICY=PASSIVE, 9 s and 6.5 s with
# run.threads=1 (2026-11-30, this 2-core VM). What the spin cost was CPU the other tests waited for.
# A user's runs keep the library's default; this variable is recorded in every run's environment
# (worker/envcapture.py RESULT_VARS), as any OMP_ variable is. setdefault: a value set outside wins.
SUITE_OMP_WAIT = ("OMP_WAIT_POLICY", "PASSIVE")


def _end_writers_under(folder: str) -> None:
    """SIGTERM the MLflow writers whose socket is under `folder` (this process's machine folder, or its
    tests' temp folders): idle, a writer stays up for tracking.writer_idle_s after its last command,
    which would be after the suite."""
    import psutil

    for p in psutil.process_iter(["cmdline"]):
        cmdline = p.info["cmdline"] or []
        if "repro.tracking.writer" in cmdline and any(a.startswith(folder + os.sep) for a in cmdline):
            try:
                p.terminate()
            except psutil.Error:
                pass


@pytest.fixture(scope="session", autouse=True)
def _writers_end_with_the_session(tmp_path_factory):
    """The writers of the tests that give their commands a machine folder of their own end with the session."""
    yield
    _end_writers_under(str(tmp_path_factory.getbasetemp()))


@pytest.fixture(autouse=True)
def _sigint_heard(request):
    """A test that leaves SIGINT ignored in this process errs naming itself, and SIGINT is heard again:
    every process the worker's later tests start would inherit SIG_IGN (exec keeps it) and ignore a
    Ctrl-C, so a later Ctrl-C test would hang instead, blaming itself (pytest_configure puts back
    what a suite started in the background inherits)."""
    yield
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        pytest.fail(f"{request.node.nodeid} left SIGINT ignored in the test process (a signal handler set and "
                    "not put back): the processes later tests start would ignore Ctrl-C")


def pytest_configure(config):
    import multiprocessing.util

    # This process's runs meet only its own projectors (paths.machine_dir): the suite's workers
    # are not measurements of each other, so one worker's measured windows never hold up the
    # other's projectors (nor its windows wait for them), and a user's own sweep on this machine
    # never waits for the tests'. A test of the machine-wide waits gives its commands one folder.
    # A suite started in the background (`make test &`, nohup, a non-interactive shell's `&`) inherits
    # SIGINT ignored, and exec passes that on: the commands the tests interrupt as a terminal's Ctrl-C
    # would then ignore it (2026-12-01: `repro env pack` went on for 60 s after its SIGINT; every xdist
    # worker began with SIG_IGN). The tests' processes get SIGINT as a terminal's foreground job has it.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    machine = tempfile.mkdtemp(prefix="repro-machine-")
    os.environ["REPRO_MACHINE_DIR"] = machine
    atexit.register(shutil.rmtree, machine, True)
    atexit.register(_end_writers_under, machine)  # atexit runs last-in first: before the folder goes
    os.environ.setdefault(*SUITE_OMP_WAIT)

    subprocess.Popen.__init__ = _guarded_popen_init
    spawn = multiprocessing.util.spawnv_passfds

    def guarded_spawn(path, args, passfds):
        if _watched:
            _refuse_unmarked(["multiprocessing child:", *_command(args)])
        return spawn(path, args, passfds)

    multiprocessing.util.spawnv_passfds = guarded_spawn


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _watching(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _watching(item):
        return (yield)


@contextmanager
def _watching(item):
    watched = item.get_closest_marker("slow") is None
    if watched:
        _watched.append(item)
    try:
        yield
    finally:
        if watched:
            _watched.remove(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test whose code caught the guard's error still fails."""
    report = yield
    if report.when in ("setup", "call") and report.passed and (started := item.stash.get(_STARTED, None)):
        report.outcome, report.longrepr = "failed", started[0]
    return report


# Session fixtures that start processes (a sweep, a cluster): a test that uses one is slow, marked or not.
PROCESS_FIXTURES = {"report_sweep", "recorded", "slurm"}


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        if PROCESS_FIXTURES & set(item.fixturenames) and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
    _check_scopes(items)
    if hasattr(config, "workerinput"):  # an xdist worker: `-n 0` runs keep the files' order
        _longest_scopes_first(items)
    has_gpu = bool(hardware.VENDORS["nvidia"].devices())  # the GPU tests run CUDA
    has_tpu = bool(hardware.tpu_type())
    for item in items:  # the marks, not `item.keywords`: those hold every folder's name too (a checkout in .../gpu/)
        if item.get_closest_marker("gpu") and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU (nvidia-smi found none)"))
        if item.get_closest_marker("tpu") and not has_tpu:
            item.add_marker(pytest.mark.skip(reason="needs a TPU"))


@pytest.fixture(scope="session")
def report_sweep(tmp_path_factory) -> tuple[Sandbox, subprocess.CompletedProcess]:
    """A small sweep (JAX and PyTorch, tiny MLP, 8 steps) whose report, MLflow runs and ledger
    the report tests read (test_report.py, test_report_browser.py)."""
    box = Sandbox(tmp_path_factory.mktemp("report_sweep"))
    proc = box.run("-m", "framework=jax,torch", "model=mlp", "run.steps=8", "tracking.experiment=reporttest",
                   timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    box.projected()  # the report and MLflow are written after the command returns; `recorded` copies them
    return box, proc


@pytest.fixture(scope="module")
def recorded(report_sweep, tmp_path_factory) -> Sandbox:
    """A copy of `report_sweep`'s folder (ledger, MLflow store) for tests that add to it (replays):
    the sweep runs once per session, and its readers never see what a writer added."""
    import shutil

    box, _ = report_sweep
    copy = Sandbox(tmp_path_factory.mktemp("recorded") / "box")
    shutil.copytree(box.root, copy.root)
    return copy


@pytest.fixture(scope="module")
def ray_head():
    """A real Ray head on loopback for the test module that asks for it (tests/ray_cluster.py);
    exactly its processes stopped at the module's end. Not the session's: an idle head (its GCS,
    raylet, agents and two prestarted workers) is other processes' CPU in every measured window the
    worker runs after it, and a busy window is a rerun (the tutorial's quickstart passed 900 s so)."""
    from ray_cluster import RayHead

    try:
        head = RayHead().start()
    except RuntimeError as e:
        pytest.fail(str(e))
    try:
        yield head
    finally:
        head.stop()


@pytest.fixture(scope="session")
def slurm():
    """A real SLURM (munged, slurmctld, slurmd n1 and n2) for the session of each xdist worker that
    takes a SLURM test (its own folder and free ports: clusters of two workers do not meet),
    SLURM_CONF exported; every job cancelled and exactly its daemons stopped at the end
    (tests/slurm_cluster.py)."""
    from slurm_cluster import SlurmCluster

    try:
        cluster = SlurmCluster().start()
    except RuntimeError as e:
        pytest.fail(str(e))
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        cluster.stop()
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
