"""`repro env pack`: a recorded environment and its code, packed for a machine with no index.

A pack is a folder:

    manifest.json   every distribution: name, version, file, sha256, its content digest (envs.lock), where
                    it came from (the index or a wheel folder pip is configured with, or built here from
                    an sdist: the sdist, its sha256 and the command), the target, what the target already
                    had. Every string in it is redacted: an index URL's credentials never travel
    SHA256SUMS      the wheels' and the code bundle's sha256 in `sha256sum -c` form, run in wheels/
                    (a target without repro checks with it)
    wheels/         the wheel files, hard links into a content store (`<cache>/wheels/<sha256>/`):
                    two packs of one lock share their files
    locks/          the packed locks (`<env_hash>.txt`), so a replay there finds them
    code.bundle     the recorded commit as a git bundle: `git clone code.bundle DIR` checks it out

pip downloads (`pip download --no-deps --only-binary=:all:`, with `--python-version`/`--platform` for
another target): uv has no download command, and pip's own configuration (wheel folders, extra
indexes) serves what this machine's environment was installed from. A replay installs from the pack
with uv, offline (`venvs.offline`: `--offline --no-index --find-links wheels/`), after `verify` found every file
the manifest names with its sha256 and every distribution of the lock, and `check` found each wheel's content
to be what the record ran with (the lock's content digests): a pack's own sums say only that it is unchanged
since packing, and a wheel rebuilt and re-hashed into them is still refused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from repro.blocks import typed
from repro.envs import cache, lock
from repro.envs.venvs import EnvError
from repro.ledger.record import Git, view
from repro.profile import sha256_file as sha256
from repro.redaction import redact, redact_data

MANIFEST = "manifest.json"
SUMS = "SHA256SUMS"
WHEELS = "wheels"
BUNDLE = "code.bundle"
# platform tags pip and uv take (PEP 425/600/656 and the macOS and Windows forms)
PLATFORM = re.compile(r"(manylinux_\d+_\d+|manylinux(1|2010|2014)|musllinux_\d+_\d+|linux|macosx_\d+_\d+)_"
                      r"(x86_64|i686|aarch64|armv7l|ppc64le|s390x|riscv64|arm64|universal2)|win_amd64|win32|win_arm64")
PYTHON = re.compile(r"3\.\d{1,2}")
UNSERVED = re.compile(r"No matching distribution found for (\S+)")


class PackError(EnvError):
    """A pack that cannot be made, or a wheelhouse that does not hold what it should (exit 2)."""


@dataclass(frozen=True)
class Target:
    python: str | None = None  # "3.12"; None: this interpreter
    platform: str | None = None  # "manylinux_2_28_x86_64"; None: this machine

    @property
    def here(self) -> bool:
        return self.python is None and self.platform is None

    def pip_args(self) -> list[str]:
        if self.here:
            return []
        out = ["--implementation", "cp"]
        if self.python:  # pip takes these abis only as asked: the stable ABI and pure wheels too
            out += ["--python-version", self.python, "--abi", "cp" + self.python.replace(".", ""), "--abi", "abi3",
                    "--abi", "none"]
        return out + [arg for p in self.platforms() for arg in ("--platform", p)]

    def platforms(self) -> list[str]:
        """The platform and every older one it runs (pip does not widen a given manylinux tag itself)."""
        m = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", self.platform or "")
        if not m:
            return [self.platform] if self.platform else []
        arch = m.group(2)
        return [f"manylinux_2_{v}_{arch}" for v in range(int(m.group(1)), 16, -1)] + [f"manylinux2014_{arch}"]

    def describe(self) -> dict:
        import platform

        return {"python": self.python or platform.python_version(), "platform": self.platform or "this machine"}

    def __str__(self) -> str:
        return "Python {python} on {platform}".format(**self.describe())


def target(python: str | None, plat: str | None) -> Target:
    if python and not PYTHON.fullmatch(python):
        raise PackError(f"--python {python!r} is not a Python version: give MAJOR.MINOR, e.g. --python 3.12")
    if plat and not PLATFORM.fullmatch(plat):
        raise PackError(f"--platform {plat!r} is not a platform tag pip or uv knows: e.g. manylinux_2_28_x86_64, "
                        "musllinux_1_2_aarch64, macosx_14_0_arm64, win_amd64")
    return Target(python, plat)


@dataclass
class Source:
    label: str  # what was packed: "record 5581cc5c", "sweep ...", "environment 3f2a9c...", "current"
    locks: dict[str, str]  # env_hash -> lock text
    commit: str | None = None
    records: list[dict] = field(default_factory=list)


def source(ledger_root: Path, what: str, repo: Path) -> Source:
    """The locks (and the commit) `what` names: `current`, an environment hash, a sweep id or a record id."""
    from repro.ledger import Ledger, LedgerError

    if what == "current":
        from repro import gitinfo
        from repro.paths import interpreter

        text = lock.of_interpreter(interpreter(None), cache.locks())
        git = typed(Git, gitinfo.state(repo, Path(ledger_root)))
        return Source("the current worker environment" + (" (the checkout is dirty: its bundle holds HEAD, not "
                      "the uncommitted change)" if git.dirty else ""), {lock.env_hash(text): text}, git.commit)
    envs = Path(ledger_root) / "envs"
    if re.fullmatch(r"[0-9a-f]{6,64}", what) and (found := sorted(envs.glob(f"{what}*.txt"))):
        if len(found) > 1:
            raise PackError(f"{what!r} names {len(found)} environments in {envs}: give more of the hash")
        return Source(f"environment {found[0].stem[:12]}", {found[0].stem: _lock(Path(ledger_root), found[0].stem, what)})
    ledger = Ledger(ledger_root)
    runs = ledger.heads(kind="run", sweep=what) if ledger.root.is_dir() else []
    label = f"sweep {what}"
    if not runs:
        try:
            record = ledger.current(ledger.get(what))
        except LedgerError as e:
            if "ambiguous" in str(e):  # a prefix of several records: say which, not "no such id"
                raise PackError(f"{e}: give more of the id") from None
            raise PackError(f"{what!r} is no environment hash, sweep or record id in {ledger_root}: "
                            "`repro ledger list` shows records, `repro env show HASH` an environment; "
                            "or pack `current`") from None
        runs, label = [record], f"record {view(record).id}"
    locks = {h: _lock(ledger.root, h, view(r).id) for r in runs if (h := view(r).environment.env_hash)}
    if not locks:
        raise PackError(f"{label} names no whole environment (environment.env_hash): nothing to pack")
    commits = {view(r).git.commit for r in runs} - {None}
    dirty = [view(r).id for r in runs if view(r).git.dirty]
    if len(commits) > 1 or dirty:
        raise PackError(f"{label} ran from " + (f"{len(commits)} commits" if len(commits) > 1 else
                        f"a dirty tree ({', '.join(dirty[:3])})") + ": pack its records one by one, or a clean one")
    return Source(label, locks, next(iter(commits), None), runs)


def _lock(root: Path, digest: str, who: str) -> str:
    try:
        text = lock.load(root, digest, check=True)
    except lock.EditedLock as e:
        raise PackError(str(e)) from None
    if text is None:
        raise PackError(f"{who}'s environment {digest[:12]} is not in {root / 'envs'}: copy envs/{digest}.txt "
                        "from the ledger it was recorded in")
    return text


def read_have(path: Path) -> dict[str, str]:
    """A target's `pip list --format=freeze` (or `pip freeze`): {name: version}."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise PackError(f"--have {path}: {e.strerror}: give the target's `pip list --format=freeze` output") from None
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if m := re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)", line):
            out[lock.normalise(m.group(1))] = m.group(2)
        elif m := re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*@\s*(\S+)", line):
            out[lock.normalise(m.group(1))] = m.group(2)
        elif line and not line.startswith("-"):
            raise PackError(f"--have {path}: {line!r} is not a `name==version` line (`pip list --format=freeze`)")
    return out


def requirements(locks: dict[str, str]) -> dict[str, str]:
    """Every installable line of the locks, `name==version` (or `name @ URL`), without repro itself."""
    out: dict[str, str] = {}
    for text in locks.values():
        for name, line in lock.parse(text).requirements.items():
            if name not in lock.OWN:
                out[line] = name
    return out


def _pip(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """pip in a session of its own, so that an interrupted pack (SIGINT, SIGTERM: cmd_pack turns both into
    KeyboardInterrupt) ends pip and whatever pip started (a build of an sdist), and leaves no child running."""
    import signal

    cmd = [sys.executable, "-m", "pip", *args]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate()
        except BaseException:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def download(wanted: list[str], tgt: Target, dest: Path, log=print) -> tuple[list[str], list[str]]:
    """pip download each wanted line's wheel for the target into `dest`: (got, no wheel). pip stops at
    the first requirement with no wheel: it is set aside and the rest asked for again."""
    left, unserved = list(wanted), []
    while left:
        reqs = dest / ".requirements.txt"
        reqs.write_text("\n".join(left) + "\n")
        done = _pip("download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(dest), *tgt.pip_args(),
                    "-r", str(reqs))
        reqs.unlink()
        if done.returncode == 0:
            return left, unserved
        m = UNSERVED.search(done.stderr)
        if not m or m.group(1) not in left:
            tail = [line for line in done.stderr.splitlines() if line.startswith("ERROR")][-2:] or done.stderr.splitlines()[-2:]
            raise PackError("pip download failed: " + " ".join(tail))
        unserved.append(m.group(1))
        left.remove(m.group(1))
        log(f"  no wheel of {m.group(1)} for {tgt}; trying its sdist")
    return left, unserved


def build(req: str, tgt: Target, dest: Path) -> tuple[dict | None, str]:
    """A wheel built here from the sdist of `req`: (how, "") or (None, why not)."""
    work = Path(tempfile.mkdtemp(prefix="repro-sdist-"))
    try:
        got = _pip("download", "-q", "--no-deps", "--no-binary=:all:", "-d", str(work / "sdist"), req)
        sdists = sorted((work / "sdist").glob("*")) if got.returncode == 0 else []
        if not sdists:
            return None, "no wheel and no sdist for the target"
        sdist = sdists[0]
        cmd = ["pip", "wheel", "--no-deps", "-w", "OUT", sdist.name]
        # a build is not byte-reproducible (timestamps): one wheel per sdist, kept, so packs share it
        built = cache.root() / "built" / sha256(sdist)
        if not (wheels := sorted(built.glob("*.whl"))):
            made = _pip(*cmd[1:3], "-w", str(work / "out"), str(sdist))
            wheels = sorted((work / "out").glob("*.whl")) if made.returncode == 0 else []
            if not wheels:
                return None, f"its sdist {sdist.name} does not build: " + (made.stderr.strip().splitlines() or ["?"])[-1]
            built.mkdir(parents=True, exist_ok=True)
            shutil.copy2(wheels[0], built / wheels[0].name)
        wheel = wheels[0]
        if not tgt.here and not re.search(r"-py3?\d*(\.py\d+)*-none-any\.whl$", wheel.name):
            return None, f"its sdist builds {wheel.name} here, a wheel for this machine only, not the target"
        import platform

        shutil.copy2(wheel, dest / wheel.name)
        return {"sdist": sdist.name, "sdist_sha256": sha256(sdist),
                "how": f"{' '.join(cmd)} (pip {_pip('--version').stdout.split()[1]}, Python {platform.python_version()})"}, ""
    finally:
        shutil.rmtree(work, ignore_errors=True)


def store(path: Path) -> tuple[Path, str]:
    """The file moved into the content store (`<cache>/wheels/<sha256>/<name>`, once) and its sha256."""
    digest = sha256(path)
    kept = cache.root() / "wheels" / digest / path.name
    if not kept.exists():
        kept.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, kept) if path.stat().st_dev == kept.parent.stat().st_dev else shutil.copy2(path, kept)
    return kept, digest


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem: a copy
        shutil.copy2(src, dst)


def _wheel_name(filename: str) -> tuple[str, str]:
    name, version = filename.split("-")[:2]
    return lock.normalise(name), version


def make(src: Source, tgt: Target, out: Path, have: dict[str, str] | None = None, keep: tuple[str, ...] = (),
         repo: Path | None = None, log=print, leave: tuple[str, ...] = (), max_size: int | None = None,
         selection: dict | None = None) -> Manifest:
    """Write the pack of `src` for `tgt` into `out` (a new or empty folder) and return its manifest.
    `leave`: names left out on purpose (what the target does not need, or cannot have), kept in the manifest.
    `max_size`: refused over it, before anything is written (envs.runtime.fits); `selection`: how `leave` was
    chosen (envs.runtime.select: --runtime-only), kept in the manifest."""
    have = have or {}
    keep_all = "all" in keep
    wanted, left_out, differs, unwanted = [], [], [], []
    for line, name in requirements(src.locks).items():
        version = re.split(r"==| @ ", line, maxsplit=1)[1]
        if name in leave:
            unwanted.append(line)
        elif name in have and have[name] == version:
            left_out.append(line)
        elif name in have:
            kept = keep_all or name in keep
            differs.append(Differs(name, have[name], version, packed=not kept))
            if not kept:
                wanted.append(line)
        else:
            wanted.append(line)
    with writing(out):
        check_out(out)
        return _make(src, tgt, out, wanted, left_out, differs, unwanted, repo, log, max_size, selection)


@contextmanager
def writing(out: Path):
    """One pack at a time into one --out: the second is refused at once, in one line (a lock under the cache,
    keyed by the folder's path: nothing is left beside the pack)."""
    import fcntl
    import hashlib

    path = cache.root() / "locks" / f"pack-{hashlib.sha256(str(Path(out).resolve()).encode()).hexdigest()[:24]}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise PackError(f"--out {out}: another `repro env pack` is writing it now (pid {f.read().strip() or '?'}): "
                            "wait for it, or give another folder") from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        yield


def _make(src, tgt, out, wanted, left_out, differs, unwanted, repo, log, max_size, selection) -> Manifest:
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / WHEELS).mkdir(parents=True)
    dl = Path(tempfile.mkdtemp(prefix="repro-pack-", dir=cache.root() if cache.root().is_dir() else None))
    try:
        log(f"packing {src.label}: {len(wanted)} distributions for {tgt}" + (f" ({len(left_out)} left out: the target has them)" if left_out else ""))
        got, unserved = download(wanted, tgt, dl, log=log)
        built, refused = {}, []
        for req in unserved:
            how, why = build(req, tgt, dl)
            if how:
                built[lock.normalise(re.split(r"==| @ ", req)[0])] = how
            else:
                refused.append(f"{req} ({why})")
        if refused:
            raise PackError(f"cannot be had for {tgt}: " + "; ".join(refused))
        from repro.envs import runtime

        total = runtime.fits(sorted(dl.glob("*")), max_size, log)  # its size and largest wheels; over --max-size: refused
        check_room(out, dl, total)
        origin = _origins()
        dists = []
        for path in sorted(dl.glob("*")):
            kept, digest = store(path)
            _link(kept, tmp / WHEELS / path.name)
            name, version = _wheel_name(path.name)
            dists.append(Packed(name, version, path.name, digest, lock.wheel_content(kept), kept.stat().st_size,
                                {"built": built[name]} if name in built else origin(path.name)))
        (tmp / "locks").mkdir()
        for digest, text in src.locks.items():
            (tmp / "locks" / f"{digest}.txt").write_text(redact(text))
        sums = {d.file: d.sha256 for d in dists}
        if src.commit and repo:
            bundle(repo, src.commit, tmp / BUNDLE)
            sums[BUNDLE] = sha256(tmp / BUNDLE)
        made = Manifest(src.label, sorted(src.locks), src.commit, [view(r).id for r in src.records], tgt.describe(),
                        tuple(dists), sorted(left_out), tuple(differs), sorted(unwanted), selection or None,
                        BUNDLE if src.commit and repo else None, sums.get(BUNDLE), sum(d.bytes for d in dists))
        # the one redaction, over every field: an index URL's user and password (PIP_INDEX_URL=https://u:p@...),
        # a token in a query, a secret-named variable's value; the pack is made to be carried and pushed (--dvc)
        written = redact_data(made.as_dict())
        (tmp / MANIFEST).write_text(json.dumps(written, indent=1) + "\n")
        manifest = Manifest.of(written)
        # names as seen from wheels/ (`cd wheels && sha256sum -c ../SHA256SUMS`, as experiments/gpu's script checks)
        (tmp / SUMS).write_text("".join(f"{digest}  {name if name != BUNDLE else '../' + name}\n"
                                        for name, digest in sums.items()))
        if out.exists():
            out.rmdir()
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, out)
        return manifest
    finally:
        shutil.rmtree(dl, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


# ---- refused before anything is downloaded or written (one line each, exit 2) ------------------------

def check_out(out: Path, ledger_root: Path | None = None) -> None:
    """--out must be a folder that can be written: new or empty, not a file, not inside a ledger (its files would
    be read as records), on a writable file system."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise PackError(f"--out {out} is a file: give a new folder (a pack is a folder of wheels and its manifest)")
    if out.is_dir() and any(out.iterdir()):
        raise PackError(f"--out {out} is not empty: give a new folder (a pack is written once)")
    for above in [out, *out.parents]:
        if (above / "envs").is_dir() and any(above.glob("20[0-9][0-9]-*/*.json")) or \
                (ledger_root and above.resolve() == Path(ledger_root).resolve()):
            raise PackError(f"--out {out} is inside the ledger {above}: `repro ledger verify` would read the pack's "
                            "files as records; give a folder outside it")
    parent = next((p for p in [out, *out.parents] if p.exists()), Path("/"))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PackError(f"--out {out}: {parent} cannot be written (read-only or not yours): give a writable folder")


def check_room(out: Path, downloaded: Path, total: int) -> None:
    """The file system of --out holds `total` bytes more (they are hard links when it is the content store's)."""
    parent = next((p for p in [out, *out.parents] if p.exists()), Path("/"))
    same = parent.stat().st_dev == downloaded.stat().st_dev
    free = shutil.disk_usage(parent).free
    if not same and free < total + (1 << 20):
        raise PackError(f"--out {out}: the pack is {total / 2**20:,.1f} MiB and {parent} has {free / 2**20:,.1f} MiB "
                        "free: give a folder on a larger disk (nothing was written there)")


def check_python(python: str | None) -> None:
    """A --python that no CPython release has (3.99): refused now, not after minutes of pip resolving. The releases
    are uv's own list (`uv python list --all-versions --only-downloads`: known to uv, no network)."""
    if not python:
        return
    from repro.envs.venvs import uv

    listed = subprocess.run([*uv(), "python", "list", "--all-versions", "--only-downloads", "--output-format", "json"],
                            capture_output=True, text=True)
    try:
        known = sorted({(v["version_parts"]["major"], v["version_parts"]["minor"]) for v in json.loads(listed.stdout)
                        if v.get("implementation") == "cpython"})
    except (ValueError, KeyError, TypeError):
        return  # uv could not say: pip's own answer will do
    if known and tuple(int(x) for x in python.split(".")) not in known:
        raise PackError(f"--python {python} is no CPython release (uv knows {known[0][0]}.{known[0][1]} to "
                        f"{known[-1][0]}.{known[-1][1]}): give the target's MAJOR.MINOR, e.g. --python 3.12")


def check_indexes(timeout: float = 5.0) -> None:
    """Every http(s) index pip is configured with answers (any HTTP status counts: it is there); else refused,
    naming the index with its credentials masked and where it was set, before any download."""
    import ssl
    import urllib.error
    import urllib.request

    from repro.envs import pipconf

    conf = pipconf.read()
    if os.environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on"):
        return
    context = ssl.create_default_context(cafile=conf.cert if conf.cert and Path(conf.cert).is_file() else None)
    for url in [conf.index_url or pipconf.DEFAULT_INDEX, *conf.extra_index_urls]:
        if not url.startswith(("http://", "https://")):
            continue
        plain = re.sub(r"//[^/@]*@", "//", url)  # urllib takes no userinfo; a 401 still says the index is there
        try:
            urllib.request.urlopen(urllib.request.Request(plain, method="HEAD"), timeout=timeout, context=context)
        except urllib.error.HTTPError:
            continue
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            where = "PIP_INDEX_URL" if url == conf.index_url else "PIP_EXTRA_INDEX_URL"
            where = conf.origin.get("index-url" if url == conf.index_url else "extra-index-url", where)
            raise PackError(f"the index {redact(url)} does not answer ({reason}; set in {where}): fix or remove it "
                            "(`pip config list` shows pip's settings), or pack on a machine that reaches it") from None


def _origins():
    """file name -> where pip took it from: a wheel folder or a local (file://) index pip is configured with,
    else its index."""
    from repro.envs import pipconf

    conf = pipconf.read()
    local = lambda urls: [Path(u.removeprefix("file://")) for u in urls if "://" not in u or u.startswith("file://")]  # noqa: E731
    folders, indexes = local(conf.find_links), local([conf.index_url or "", *conf.extra_index_urls])

    def origin(filename: str) -> dict:
        for folder in folders:
            if (folder / filename).is_file():
                return {"find_links": str(folder)}
        for index in indexes:
            page = index / _wheel_name(filename)[0] / "index.html"
            if page.is_file() and f">{filename}<" in page.read_text(errors="replace"):
                return {"index": f"file://{index}"}
        return {"index": conf.index_url or pipconf.DEFAULT_INDEX}
    return origin


def bundle(repo: Path, commit: str, dest: Path) -> None:
    """`commit` and its history as a git bundle whose HEAD is that commit (a bare clone in a temp folder:
    the checkout's own refs are left alone)."""
    with tempfile.TemporaryDirectory(prefix="repro-bundle-") as tmp:
        def git(*args: str, where: str = tmp) -> subprocess.CompletedProcess:
            return subprocess.run(["git", "-C", where, *args], capture_output=True, text=True)

        if git("clone", "-q", "--bare", "--no-tags", str(repo), tmp, where=str(repo)).returncode \
                or git("update-ref", "--no-deref", "HEAD", commit).returncode \
                or (made := git("bundle", "create", str(dest), "HEAD")).returncode:
            raise PackError(f"commit {commit[:12]} could not be bundled from {repo}: `git fetch` the branch that has it")
        del made


# ---- the other side: checking and installing a pack -------------------------------------------------

@dataclass(frozen=True)
class _Built:
    sdist: str | None = None
    how: str | None = None


@dataclass(frozen=True)
class _Origin:
    """Where a packed wheel came from: built from an sdist, or a find-links folder's or an index's."""

    built: Mapping | None = None
    find_links: str | None = None
    index: str | None = None


@dataclass(frozen=True)
class Packed:
    """One wheel of a pack, as its manifest lists it."""

    name: str | None = None
    version: str | None = None
    file: str | None = None
    sha256: str | None = None
    content: str | None = None  # its files' digest (lock.wheel_content)
    bytes: int = 0
    source: Mapping = field(default_factory=dict)  # {"built": {"sdist", "how"}} | {"find_links": ...} | {"index": ...}

    @property
    def where(self) -> str:
        origin = typed(_Origin, self.source)
        if origin.built is not None:
            built = typed(_Built, origin.built)
            return f"built from {built.sdist} ({built.how})"
        return f"from {origin.find_links or origin.index}"


@dataclass(frozen=True)
class Differs:
    """A distribution the target has at another version than the lock's, and whether the pack holds the lock's."""

    name: str | None = None
    target_has: str | None = None
    lock: str | None = None
    packed: bool = False


@dataclass(frozen=True)
class _Selection:
    left_out: list | tuple = ()  # what --runtime-only left out (envs.runtime.select)


@dataclass(frozen=True)
class _Target:
    python: str | None = None
    platform: str | None = None


@dataclass(frozen=True)
class Manifest:
    """A pack's manifest.json, typed; `as_dict` writes it in its order (older manifests read with the defaults)."""

    what: str | None = None
    locks: list = field(default_factory=list)
    commit: str | None = None
    records: list = field(default_factory=list)
    target: Mapping = field(default_factory=dict)  # {"python", "platform"} (Target.describe)
    distributions: tuple[Packed, ...] = ()
    left_out: list = field(default_factory=list)
    differs: tuple[Differs, ...] = ()
    left_out_by_request: list = field(default_factory=list)
    selection: Mapping | None = None  # how --runtime-only chose what to leave out (envs.runtime.select)
    code: str | None = None  # the code bundle's file name, where the pack holds one
    code_sha256: str | None = None
    bytes: int = 0

    @classmethod
    def of(cls, node: Mapping) -> "Manifest":
        made = typed(cls, node)
        return dataclasses.replace(made, distributions=tuple(typed(Packed, d) for d in made.distributions),
                                   differs=tuple(typed(Differs, d) for d in made.differs))

    def as_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if not self.selection:
            del out["selection"]
        return {**out, "distributions": [dataclasses.asdict(d) for d in self.distributions],
                "differs": [dataclasses.asdict(d) for d in self.differs]}


def _names_a_wheel(d: Packed) -> bool:
    return all(isinstance(v, str) for v in (d.name, d.version, d.file, d.sha256))


def manifest_of(wheelhouse: Path) -> Manifest:
    try:
        manifest = json.loads((Path(wheelhouse) / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise PackError(f"--wheelhouse {wheelhouse} has no readable {MANIFEST} ({e.__class__.__name__}): "
                        "give a folder `repro env pack` wrote") from None
    fields = ("name", "version", "file", "sha256")
    listed = typed(Manifest, manifest).distributions if isinstance(manifest, dict) else None  # as written: a list
    if not isinstance(listed, list) or not all(isinstance(d, dict) and _names_a_wheel(typed(Packed, d)) for d in listed):
        raise PackError(f"--wheelhouse {wheelhouse}: its {MANIFEST} is not a pack's (it needs a `distributions` list, "
                        f"each with {', '.join(fields)}): pack again with `repro env pack`")
    return Manifest.of(manifest)


def verify(wheelhouse: Path) -> Manifest:
    """The manifest, once every wheel it names is there with its sha256 and no other file is."""
    wheelhouse = Path(wheelhouse)
    manifest = manifest_of(wheelhouse)
    listed = {d.file: d for d in manifest.distributions}
    for f in sorted((wheelhouse / WHEELS).iterdir()) if (wheelhouse / WHEELS).is_dir() else []:
        if f.name not in listed:
            raise PackError(f"wheelhouse {wheelhouse}: {f} is not in its manifest; remove it or pack again")
    for name, d in listed.items():
        path = wheelhouse / WHEELS / name
        if not path.is_file():
            raise PackError(f"wheelhouse {wheelhouse}: {path} is missing (the manifest names it): pack again")
        if (got := sha256(path)) != d.sha256:
            raise PackError(f"wheelhouse {wheelhouse}: {path} does not match its manifest (sha256 {got[:12]}, "
                            f"the manifest says {d.sha256[:12]}): it was changed after packing; pack again")
    if manifest.code:
        path = wheelhouse / manifest.code
        if not path.is_file() or (want := manifest.code_sha256) is None or sha256(path) != want:
            raise PackError(f"wheelhouse {wheelhouse}: {path} " + ("is missing" if not path.is_file() else
                            "is not covered by the manifest's sums" if want is None else
                            "does not match its manifest") + " (the code bundle): pack again")
    return manifest


def missing(manifest: Manifest, text: str) -> list[str]:
    """The lock's requirements no wheel of the pack serves."""
    served = {(d.name, _version(d.version)) for d in manifest.distributions}
    out = []
    for name, line in lock.parse(text).requirements.items():
        if name in lock.OWN:
            continue
        if "==" in line and (name, _version(line.split("==", 1)[1].strip())) not in served:
            out.append(line)
        elif " @ " in line and not any(d.name == name for d in manifest.distributions):
            out.append(line)
    return out


def _version(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        return text


def check(wheelhouse: Path, text: str, who: str) -> None:
    """PackError, one line, unless the pack is intact, serves every distribution of the lock, and each wheel's
    content is the one the lock names (its digest, computed here from the wheel's bytes: not the manifest's word)."""
    manifest = verify(wheelhouse)
    if gone := missing(manifest, text):
        raise PackError(f"{who}: wheelhouse {wheelhouse} has no wheel for {', '.join(gone[:8])}"
                        + (f" and {len(gone) - 8} more" if len(gone) > 8 else "")
                        + f" (it packs {manifest.what} for {manifest.target}): pack this record's environment")
    if changed := content_differs(Path(wheelhouse), manifest, text):
        name, version, packed, recorded = changed[0]
        raise PackError(f"{who}: wheelhouse {wheelhouse}: the {name} {version} wheel holds other files than the record "
                        f"ran with (content sha256 {packed[:16]} in the pack, {recorded[:16]} recorded)"
                        + (f", and {len(changed) - 1} more" if len(changed) > 1 else "")
                        + ": it was rebuilt or changed, whatever the pack's own sums say; pack the record again "
                        "from the index its environment was installed from")


def content_differs(wheelhouse: Path, manifest: Manifest, text: str) -> list[tuple[str, str, str, str]]:
    """(name, version, the pack's wheel's content digest, the lock's) for each distribution whose wheel differs."""
    recorded = lock.parse(text).content
    out = []
    for d in manifest.distributions:
        want = recorded.get(d.name)
        if want and _version(want[0]) == _version(d.version):
            got = lock.wheel_content(Path(wheelhouse) / WHEELS / d.file)
            if got != want[1]:
                out.append((d.name, d.version, got or "none", want[1]))
    return out


def describe(manifest: Manifest, out: Path) -> list[str]:
    """What a pack holds, as lines: size, counts, the built, the differing, each distribution."""
    dists, target = manifest.distributions, typed(_Target, manifest.target)
    lines = [f"pack {out}: {len(dists)} wheels, {manifest.bytes / 2**20:,.1f} MiB, for Python "
             f"{target.python} on {target.platform} ({manifest.what})"]
    if manifest.left_out:
        lines.append(f"  left out (the target has them at these versions): {len(manifest.left_out)}")
    selected = set((typed(_Selection, manifest.selection) or _Selection()).left_out)
    if asked := [x for x in manifest.left_out_by_request
                 if lock.normalise(re.split(r"==| @ ", x, maxsplit=1)[0]) not in selected]:
        lines.append(f"  left out (--leave-out): {', '.join(asked)}")
    if manifest.selection:
        from repro.envs import runtime

        lines += runtime.describe(manifest.selection)
    for d in manifest.differs:
        lines.append(f"  target has {d.name} {d.target_has}, the lock {d.lock}: "
                     + ("packed (installs over it)" if d.packed else "the target's kept (--keep)"))
    for d in dists:
        lines.append(f"  {d.name}=={d.version}  {d.bytes / 2**20:.1f} MiB  {d.sha256[:12]}  {d.where}")
    if manifest.code:
        lines.append(f"  code: commit {manifest.commit[:12]} in {out / manifest.code} "
                     f"(`git clone {out / manifest.code} DIR`)")
    return lines
