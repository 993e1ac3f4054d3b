"""Packages before commits (issue 56): which packages differ between two records' locks, which of them
move together, the cumulative steps from GOOD to BAD one group at a time, and, within the guilty group,
its released versions between the two, each checked to install here before it is offered.

The rules, stated once:

- **A change** is a distribution whose version (or URL) differs between the two locks, or that only one
  of them has. Distributions installed from a folder (`# editable:`/`# local:` lines: a workload's own
  package, restored from git) and repro itself are not package changes. Both locks must be for one
  Python (major.minor): every step runs in one interpreter.
- **Coupling and order**, from declared requirements (a wheel's METADATA `Requires-Dist`, markers
  evaluated for this interpreter, no extras): a step must never hold a package whose requirement is
  unmet. When A at BAD requires of B what B's GOOD version does not meet, B moves no later than A; when A
  at GOOD requires what B's BAD version does not meet, A moves no later than B. Both at once (an exact or
  tight pin that moved: jax 0.10.2 → jaxlib>=0.10.1,<=0.10.2 and jax 0.9.0 → jaxlib==0.9.0; torch →
  triton==X) is a cycle: they are one group. One way only (flax 0.12.8 → jax>=0.10.0, flax 0.12.6 happy
  with jax 0.10.2) is an order: jax's step comes first, flax's after, each its own step. A loose
  requirement both ends meet (numpy>=1.26) is nothing. A package BAD adds (or removes) that one changed
  package needs at BAD (or needed at GOOD) moves with that package (orbax-export, dropped by flax 0.12.8,
  moves with flax); one that several need goes before them (added) or after them (removed). Groups are
  the cycles of "no later than" joined with these. The METADATA comes from wheel files (a wheelhouse,
  pip's wheel cache), uv's cache (unpacked wheels), the distributions installed in this interpreter, and,
  when no wheelhouse was given, the index (`pip install --dry-run --report`). A package whose METADATA is
  found nowhere is constrained by nothing, and its group says so (`unknown`).
- **Group steps** are positions 0..n: 0 is GOOD's lock as recorded, k is GOOD with groups 1..k moved
  to their BAD versions, n is BAD's lock as recorded. Groups go in an order that keeps every "no later
  than", else by their lead's name (with one culprit any order finds it in as many probes). The culprit is
  the first bad step, so the search names the guilty group first.
- **A group's lead** is a member present at both ends with most requirement links, then the one that
  requires the others, then the first by name (jax in jax/jaxlib; torch in torch/triton). Versions are the lead's.
- **Versions** are the lead's released versions strictly between its GOOD and BAD versions, from a
  wheelhouse (folders of wheels, or `repro env pack` folders, checked against their manifest) with no
  index at all, or else from the index (`pip index versions`, pip's own configuration). A version
  with no wheel for this Python and platform (tags, Requires-Python) was not released for it and is
  not offered (said); every version offered passed `installable`: `uv pip install --dry-run
  --no-deps` of the group's lines into a throwaway venv of the lock's Python. A listed version that
  fails that check is an error naming the version, the Python and the platform.
- **Version steps**: the lock just before the group (group step k-1), then that lock with the lead at
  each version between and the other members at the newest version between their two ends (inclusive)
  whose declared requirements fit the lead's and each other's, then group step k.
"""

from __future__ import annotations

import email.parser
import functools
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from repro.envs import cache, lock, pack, venvs
from repro.envs.venvs import EnvError


class PackagesError(EnvError):
    """Package bisection cannot go on: a version that cannot be had here, a wheelhouse that does not
    hold what it should, an index out of reach, locks of two Pythons (the driver exits 2)."""


# ---- what changed ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    name: str
    good: str | None  # version (or URL) in GOOD's lock; None: BAD added it
    bad: str | None  # None: BAD removed it
    good_line: str | None = None  # the lock's requirement line at each end
    bad_line: str | None = None
    good_content: str | None = None  # the content sha256 the lock names for it (envs.lock), where it does
    bad_content: str | None = None

    @property
    def kind(self) -> str:
        return "added" if self.good is None else "removed" if self.bad is None else "changed"

    def line(self, end: str) -> str | None:
        return self.good_line if end == "good" else self.bad_line

    def content(self, end: str) -> str | None:
        return self.good_content if end == "good" else self.bad_content

    def version(self, end: str) -> str | None:
        return self.good if end == "good" else self.bad

    def __str__(self) -> str:
        if self.good is None:
            return f"{self.name} (added: {self.bad})"
        if self.bad is None:
            return f"{self.name} (removed: {self.good})"
        return f"{self.name} {self.good} → {self.bad}"

    def to_dict(self) -> dict:
        return {"name": self.name, "good": self.good, "bad": self.bad}


def _minor(version: str | None) -> str | None:
    return ".".join((version or "").split(".")[:2]) or None


def changed(good_lock: str, bad_lock: str) -> list[Change]:
    """The distributions whose version differs between the locks, and those only one has, by name."""
    good, bad = lock.parse(good_lock), lock.parse(bad_lock)
    if good.python and bad.python and _minor(good.python) != _minor(bad.python):
        raise PackagesError(f"the two locks are for Python {good.python} and {bad.python}: package steps run in "
                            "one interpreter; bisect between records made with one Python (major.minor)")
    g, b = lock.versions(good_lock), lock.versions(bad_lock)
    gc, bc = lock.contents(good_lock), lock.contents(bad_lock)
    out = []
    for name in sorted(set(good.requirements) | set(bad.requirements)):
        if name in lock.OWN or name in good.local or name in bad.local or g.get(name) == b.get(name):
            continue
        out.append(Change(name, g.get(name) if name in good.requirements else None,
                          b.get(name) if name in bad.requirements else None,
                          good.requirements.get(name), bad.requirements.get(name), gc.get(name), bc.get(name)))
    return out


# ---- where wheels and their METADATA are -----------------------------------------------------------

def _version(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        return None


def _tags(python: str | None) -> frozenset:
    """The wheel tags an interpreter of `python` (a lock's version; None: this one) takes on this platform."""
    from packaging import tags

    here = sys.version_info[:2]
    want = tuple(int(p) for p in _minor(python).split(".")) if python else here
    if want == here:
        return frozenset(tags.sys_tags())
    return frozenset([*tags.cpython_tags(want), *tags.compatible_tags(want)])


def target_words(python: str | None = None) -> str:
    """'Python 3.11.9 on linux-x86_64 (cp311-cp311-manylinux_2_39_x86_64)': what a version must install for."""
    from packaging import tags

    py = python or platform.python_version()
    best = next(iter(tags.sys_tags())) if _minor(py) == _minor(platform.python_version()) else None
    return f"Python {py} on {sysconfig.get_platform()}" + (f" ({best})" if best else "")


@dataclass(frozen=True)
class Meta:
    """What a distribution's METADATA declares that bisection reads."""
    requires: tuple[str, ...]  # Requires-Dist lines
    requires_python: str | None
    where: str  # the file or place it was read from

    def needs(self, name: str):
        """This distribution's requirements on `name` that apply here (markers evaluated, no extras)."""
        from packaging.requirements import InvalidRequirement, Requirement

        out = []
        for text in self.requires:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if lock.normalise(req.name) != name:
                continue
            if req.marker and not req.marker.evaluate({"extra": ""}):
                continue
            out.append(req)
        return out


def _meta_of(text: str, where: str) -> Meta:
    msg = email.parser.Parser().parsestr(text, headersonly=True)
    return Meta(tuple(msg.get_all("Requires-Dist") or ()), msg.get("Requires-Python"), where)


def wheel_meta(path: Path) -> Meta | None:
    """The METADATA of a wheel file (its top-level `*.dist-info/METADATA`), or None when unreadable."""
    try:
        with zipfile.ZipFile(path) as z:
            name = next((n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)), None)
            return _meta_of(z.read(name).decode("utf-8", "replace"), str(path)) if name else None
    except (OSError, zipfile.BadZipFile):
        return None


def _wheel_key(filename: str) -> tuple[str, str, frozenset] | None:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        name, version, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    return lock.normalise(name), str(version), tags


def _same(a: str, b: str) -> bool:
    va, vb = _version(a), _version(b)
    return va == vb if va is not None and vb is not None else a == b


@dataclass
class Source:
    """Where versions and wheels come from: `folders` (wheel folders or `repro env pack` folders; then no
    index is asked anything), else the index pip is configured with."""
    folders: tuple[Path, ...] = ()
    wheels: dict = field(default_factory=dict)  # (name, version) -> [wheel files]
    tags: dict = field(default_factory=dict)  # wheel file -> its tags

    @property
    def offline(self) -> bool:
        return bool(self.folders)

    def __str__(self) -> str:
        return ("the wheelhouse " + ", ".join(map(str, self.folders)) + " (offline)") if self.folders else \
            "the index (pip's configuration)"

    def files(self, name: str, version: str | None = None) -> list[Path]:
        return [p for (n, v), paths in self.wheels.items() if n == name and (version is None or _same(v, version))
                for p in paths]

    def view(self) -> Path:
        """A pack-shaped folder (`wheels/`) of hard links to every wheel, keyed by the files it holds:
        what `venvs.ensure(wheelhouse=...)` installs from offline."""
        files = sorted({p.resolve() for paths in self.wheels.values() for p in paths})
        key = hashlib.sha256(json.dumps([(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]).encode())
        out = cache.root() / "bisect-wheels" / key.hexdigest()[:16]
        if not (out / pack.WHEELS).is_dir():
            tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
            (tmp / pack.WHEELS).mkdir(parents=True, exist_ok=True)
            for p in files:
                if not (tmp / pack.WHEELS / p.name).exists():
                    pack._link(p, tmp / pack.WHEELS / p.name)
            try:
                os.replace(tmp, out)
            except OSError:  # another process made it first
                import shutil

                shutil.rmtree(tmp, ignore_errors=True)
        return out

    def uv_args(self) -> tuple[list[str], dict]:
        """uv options and environment: the wheelhouse alone, offline (venvs.offline), or pip's sources."""
        if self.folders:
            return venvs.offline(self.view())
        return venvs.sources(), venvs.uv_env()


def source(folders=None) -> Source:
    """A Source of wheel folders and packs (none: the index). A pack is checked against its manifest
    first (pack.verify: a changed or extra wheel is refused, naming it)."""
    found: dict = {}
    tags: dict = {}
    kept = []
    for folder in [Path(f) for f in (folders or [])]:
        if (folder / pack.MANIFEST).is_file():
            pack.verify(folder)
            files = sorted((folder / pack.WHEELS).glob("*.whl"))
        elif folder.is_dir():
            files = sorted(folder.glob("*.whl"))
        else:
            raise PackagesError(f"wheelhouse {folder} is not a folder: give a folder of wheels or a `repro env pack` folder")
        if not files:
            raise PackagesError(f"wheelhouse {folder} holds no wheel files (*.whl): give a folder of wheels or a "
                                "`repro env pack` folder")
        for p in files:
            if key := _wheel_key(p.name):
                found.setdefault(key[:2], []).append(p)
                tags[p] = key[2]
        kept.append(folder)
    return Source(tuple(kept), found, tags)


@functools.lru_cache(maxsize=1)
def _pip_cache_wheels() -> tuple[Path, ...]:
    out = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True)
    root = Path(out.stdout.strip()) / "wheels" if out.returncode == 0 and out.stdout.strip() else None
    return tuple(sorted(root.rglob("*.whl"))) if root and root.is_dir() else ()


@functools.lru_cache(maxsize=1)
def _uv_cache_index() -> dict:
    """(name, version) -> METADATA path of every wheel uv's cache holds unpacked (`archive-v0/<id>/*.dist-info`)."""
    root = cache.uv_cache_dir()
    out = {}
    for meta in (root / "archive-v0").glob("*/*.dist-info/METADATA") if root else ():
        stem = meta.parent.name[:-len(".dist-info")]
        if "-" in stem:
            name, version = stem.rsplit("-", 1)
            out.setdefault((lock.normalise(name), version), meta)
    return out


@functools.lru_cache(maxsize=1)
def _installed() -> dict:
    """name -> the distributions this interpreter has (read once)."""
    from importlib import metadata

    out: dict = {}
    for dist in metadata.distributions():
        out.setdefault(lock.normalise(dist.metadata["Name"] or ""), []).append(dist)
    return out


class Metadata:
    """METADATA of (name, version), found as the module docstring says, each looked up once."""

    def __init__(self, src: Source | None = None):
        self.src = src or Source()
        self.known: dict[tuple[str, str], Meta | None] = {}

    def prefetch(self, wanted: list[tuple[str, str | None]]) -> None:
        """Look up many at once: those found nowhere on disk asked of the index in two or so pip calls."""
        if self.src.offline:
            return
        later = []
        for name, version in wanted:
            if version is None or (name, version) in self.known:
                continue
            meta = self._find(name, version, index=False)
            if meta is None and "://" not in version:
                later.append((name, version))
            else:
                self.known[(name, version)] = meta
        _index_report(later)
        self.known.update({w: _INDEX_META.get(w) for w in later})

    def __call__(self, name: str, version: str | None) -> Meta | None:
        if version is None:
            return None
        key = (name, version)
        if key not in self.known:
            self.known[key] = self._find(name, version)
        return self.known[key]

    def _find(self, name: str, version: str, index: bool = True) -> Meta | None:
        for path in self.src.files(name, version):
            if meta := wheel_meta(path):
                return meta
        for (n, v), path in _uv_cache_index().items():
            if n == name and _same(v, version):
                return _meta_of(path.read_text(errors="replace"), str(path))
        for dist in _installed().get(name, ()):
            if _same(dist.version, version):
                return Meta(tuple(dist.requires or ()), dist.metadata.get("Requires-Python"), f"installed {name} {version}")
        for path in _pip_cache_wheels():
            key = _wheel_key(path.name)
            if key and key[0] == name and _same(key[1], version) and (meta := wheel_meta(path)):
                return meta
        if not index or self.src.offline or "://" in version:
            return None
        return _index_meta(name, version)


_INDEX_META: dict[tuple[str, str], Meta | None] = {}


def _index_meta(name: str, version: str) -> Meta | None:
    if (name, version) not in _INDEX_META:
        _index_report([(name, version)])
    return _INDEX_META.get((name, version))


def _index_report(wanted: list[tuple[str, str]]) -> None:
    """METADATA from the index for each (name, version), one pip dry-run report (PEP 658 metadata where the index
    serves it) per batch of distinct names; a batch pip refuses is asked again one by one."""
    wanted = [w for w in dict.fromkeys(wanted) if w not in _INDEX_META]
    while wanted:
        batch, names = [], set()
        for name, version in wanted:
            if name not in names:
                batch.append((name, version))
                names.add(name)
        wanted = [w for w in wanted if w not in batch]
        out = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
                              "--quiet", "--report", "-", *(f"{n}=={v}" for n, v in batch)], capture_output=True, text=True)
        try:
            got = {lock.normalise(i["metadata"]["name"]): i["metadata"] for i in json.loads(out.stdout)["install"]}
        except (ValueError, KeyError, TypeError):
            if len(batch) > 1:
                for one in batch:
                    _index_report([one])
            else:
                _INDEX_META[batch[0]] = None
            continue
        for name, version in batch:
            meta = got.get(name)
            _INDEX_META[(name, version)] = Meta(tuple(meta.get("requires_dist") or ()), meta.get("requires_python"),
                                                f"the index ({name} {version})") if meta else None


# ---- which packages move together ------------------------------------------------------------------

def _breaks(meta: Meta | None, other: str, other_version: str | None) -> str | None:
    """The requirement of `meta` on package `other` that `other_version` (None: absent) does not meet."""
    if meta is None:
        return None
    for req in meta.needs(other):
        if other_version is None:
            return str(req)
        v = _version(other_version)
        if v is None or (req.specifier and not req.specifier.contains(v, prereleases=True)):
            return str(req)
    return None


def _some(items: list[str], most: int = 3) -> str:
    """'a, b, c' or, past `most`, 'a, b and 6 more': a label stays one line."""
    return ", ".join(items) if len(items) <= most else f"{', '.join(items[:most - 1])} and {len(items) - most + 1} more"


@dataclass(frozen=True)
class Group:
    changes: tuple[Change, ...]  # the lead first, then by name
    why: tuple[str, ...] = ()  # each coupling, in words
    unknown: tuple[str, ...] = ()  # members whose METADATA was found nowhere (coupled with nothing)

    @property
    def lead(self) -> Change:
        return self.changes[0]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.changes)

    def __str__(self) -> str:
        rest = [c.name for c in self.changes[1:]]
        return str(self.lead) + (f" ({_some(rest)} with it)" if rest else "")

    def to_dict(self) -> dict:
        return {"changes": [c.to_dict() for c in self.changes], "why": list(self.why), "unknown": list(self.unknown)}


def coupled(changes: list[Change], wheels: Source | list | None = None) -> list[Group]:
    """The changes in groups that move together, in the order group_steps applies them (the docstring's rule)."""
    import heapq

    meta = wheels if isinstance(wheels, Metadata) else Metadata(wheels if isinstance(wheels, Source) else source(wheels))
    by_name = {c.name: c for c in changes}
    parent = {c.name: c.name for c in changes}
    degree = {c.name: 0 for c in changes}
    requires: dict[str, set] = {c.name: set() for c in changes}
    before: set[tuple[str, str]] = set()  # (x, y): x moves no later than y
    dependency: dict[str, list[tuple[str, str]]] = {}  # an added/removed package -> (who needs it, the sentence)
    why: list[tuple[set, str]] = []
    meta.prefetch([(c.name, c.version(end)) for c in changes for end in ("good", "bad")])

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for a in changes:
        for b in changes:
            for end, other in (("good", "bad"), ("bad", "good")):
                if a is b or not (broken := _breaks(meta(a.name, a.version(end)), b.name, b.version(other))):
                    continue
                degree[a.name] += 1
                degree[b.name] += 1
                requires[a.name].add(b.name)
                if b.version(other) is None:  # a needs b only at its `end`: b came or went with it
                    dependency.setdefault(b.name, []).append(
                        (a.name, f"{a.name} {a.version(end)} requires {broken}, which BAD "
                                 + ("adds" if end == "bad" else "removes")))
                    continue
                x, y = (b.name, a.name) if end == "bad" else (a.name, b.name)
                before.add((x, y))
                why.append(({x, y}, f"{a.name} {a.version(end)} requires {broken}, which {b.name} {b.version(other)} "
                                    f"({other.upper()}) does not meet: {x} moves no later than {y}"))
    for b, needers in dependency.items():
        if len({a for a, _ in needers}) == 1:  # one package brought it in or dropped it: it moves with that one
            parent[root(b)] = root(needers[0][0])
            why.append(({b, needers[0][0]}, f"{needers[0][1]}: {b} moves with {needers[0][0]}"))
        else:  # several: an added one before all of them, a removed one after all of them
            for a, sentence in needers:
                before.add((b, a) if by_name[b].kind == "added" else (a, b))
                why.append(({a, b}, sentence))
    # a cycle of "no later than" (jax needs jaxlib 0.10 at BAD, jaxlib 0.9 at GOOD): one group
    after = {c.name: set() for c in changes}
    for x, y in before:
        after[root(x)].add(root(y))

    def reach(n: str) -> set:
        seen, todo = set(), [n]
        while todo:
            for m in after[todo.pop()]:
                m = root(m)
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return seen

    roots = sorted({root(c.name) for c in changes})
    reached = {r: reach(r) for r in roots}
    for r in roots:
        for q in roots:
            if r < q and q in reached[r] and r in reached[q]:
                parent[root(q)] = root(r)
    members: dict[str, list[str]] = {}
    for c in changes:
        members.setdefault(root(c.name), []).append(c.name)
    unknown = {c.name for c in changes if all(meta(c.name, c.version(e)) is None for e in ("good", "bad") if c.version(e))}
    groups: dict[str, Group] = {}
    for r, names in members.items():
        lead = sorted(names, key=lambda n: (by_name[n].kind != "changed", -degree[n], -len(requires[n]), n))[0]
        ordered = [lead, *sorted(n for n in names if n != lead)]
        groups[r] = Group(tuple(by_name[n] for n in ordered),
                          tuple(dict.fromkeys(w for pair, w in why if pair & set(names))),
                          tuple(n for n in ordered if n in unknown))
    # the order: every "no later than" kept, else by the lead's name
    edges = {(root(x), root(y)) for x, y in before if root(x) != root(y)}
    waiting = {r: sum(1 for _, y in edges if y == r) for r in groups}
    ready = [(groups[r].lead.name, r) for r, k in waiting.items() if k == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, r = heapq.heappop(ready)
        out.append(groups[r])
        for x, y in edges:
            if x == r:
                waiting[y] -= 1
                if waiting[y] == 0:
                    heapq.heappush(ready, (groups[y].lead.name, y))
    return out


# ---- locks along the way ---------------------------------------------------------------------------

def _name_of(line: str) -> str:
    return lock.normalise(re.split(r"\s*(==|@)", line, maxsplit=1)[0])


def moved(text: str, changes, end: str = "bad") -> str:
    """The lock `text` with each change at its `end`: its line there (and the content digest that end's
    lock names for it, so the wheel installed is checked to be the recorded one), or removed where that
    end lacks it."""
    pins = [c.line(end) for c in changes if c.line(end)]
    out = lock.with_pins(text, pins)
    gone = {c.name for c in changes if c.line(end) is None}
    kept = [line for line in out.splitlines()
            if not ((m := lock.CONTENT_LINE.match(line)) and lock.normalise(m.group(1)) in gone)
            and (line.startswith("#") or not line.strip() or _name_of(line) not in gone)]
    kept += [f"# content: {c.name}=={c.version(end)} sha256:{c.content(end)}" for c in changes
             if c.line(end) and c.content(end) and "==" in c.line(end)]
    return "\n".join(kept) + "\n"


def _pinned(text: str) -> dict[str, str]:
    parsed = lock.parse(text)
    return {n: v for n, v in lock.versions(text).items() if n in parsed.requirements and n not in lock.OWN}


def group_steps(good_lock: str, bad_lock: str, groups: list[Group]) -> list[str]:
    """Locks at positions 0..n: GOOD as recorded, GOOD with groups 1..k at BAD's versions, BAD as recorded."""
    steps, text = [good_lock], good_lock
    for g in groups[:-1]:
        text = moved(text, g.changes)
        steps.append(text)
    if groups:
        last = moved(text, groups[-1].changes)
        if _pinned(last) != _pinned(bad_lock):
            left = changed(last, bad_lock)
            raise PackagesError("the groups do not cover every change between the locks: "
                                + ", ".join(map(str, left)) + " left (give coupled() the changes of these two locks)")
        steps.append(bad_lock)
    return steps


# ---- versions between, each checked to install -------------------------------------------------------

def _between(candidates: list[str], start: str, end: str) -> list[str]:
    """The versions strictly between `start` and `end` (either may be the higher), in order from `start`
    toward `end`; pre-releases only where an end is one."""
    lo, hi = _version(start), _version(end)
    if lo is None or hi is None:
        return []  # a URL or an unparsable version: nothing lies between
    pre = lo.is_prerelease or hi.is_prerelease
    keep = {}
    for c in candidates:
        v = _version(c)
        if v is not None and min(lo, hi) < v < max(lo, hi) and (pre or not v.is_prerelease):
            keep.setdefault(v, c)
    return [keep[v] for v in sorted(keep, reverse=hi < lo)]


def _index_versions(name: str, pre: bool) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name, *(["--pre"] if pre else [])],
                         capture_output=True, text=True)
    if m := re.search(r"Available versions: (.*)", out.stdout):
        return [v.strip() for v in m.group(1).split(",") if v.strip()]
    errors = [line for line in out.stderr.splitlines() if line.startswith("ERROR")]
    raise PackagesError(f"the index lists no versions of {name} for {target_words()} "
                        f"({(errors or out.stderr.strip().splitlines() or ['no answer'])[-1].strip()}): give a wheelhouse "
                        "(a folder of its wheels, or a `repro env pack` folder) that holds them")


def _released_here(src: Source, name: str, version: str, python: str | None) -> str | None:
    """None when the wheelhouse has a wheel of it for this Python and platform, else why not."""
    files = src.files(name, version)
    tags = _tags(python)
    fits = [p for p in files if src.tags.get(p, frozenset()) & tags]
    if not fits:
        return (f"no wheel of it in {src}" if not files else
                f"its wheels ({', '.join(p.name for p in files)}) are not for {target_words(python)}")
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    meta = wheel_meta(fits[0])
    try:
        if meta and meta.requires_python and python and not SpecifierSet(meta.requires_python).contains(python):
            return f"it requires Python {meta.requires_python}"
    except InvalidSpecifier:
        pass
    return None


def versions(group: Group, src: Source | list | None = None, python: str | None = None, log=print) -> list[str]:
    """The lead's released versions strictly between its GOOD and BAD versions (ascending from GOOD),
    from the wheelhouse (no index asked) or else the index; those not released for this Python and
    platform left out (said); each one offered passed `installable`, or PackagesError names it."""
    src = src if isinstance(src, Source) else source(src)
    lead = group.lead
    if lead.good is None or lead.bad is None:
        return []  # added or removed: no versions between
    pre = any(v is not None and v.is_prerelease for v in (_version(lead.good), _version(lead.bad)))
    if src.offline:
        listed = sorted({v for (n, v) in src.wheels if n == lead.name}, key=lambda v: _version(v) or v)
    else:
        listed = _index_versions(lead.name, pre)
    between = _between(listed, lead.good, lead.bad)
    out, left = [], []
    for v in between:
        if src.offline and (why := _released_here(src, lead.name, v, python)):
            left.append(f"{v} ({why})")
            continue
        out.append(v)
    if left:
        log(f"  {lead.name}: not offered, not released for {target_words(python)}: {', '.join(left)}")
    meta, offered, unfit = Metadata(src), [], []
    for v in out:
        try:
            chosen = members_at(group, v, src, meta)
        except PackagesError as e:
            unfit.append(f"{v} ({str(e).split(' (', 1)[1].rsplit(')', 1)[0]})")
            continue
        pins = "".join(f"{n}=={x}\n" for n, x in chosen.items() if x)
        if why := installable(f"# python {python or platform.python_version()}\n{pins}", src):
            raise PackagesError(why)
        offered.append(v)
    if unfit:
        log(f"  {lead.name}: not offered, no version of the group's other members fits: {', '.join(unfit)}")
    return offered


def installable(lock_text: str, src: Source | list | None = None, only: list[str] | None = None) -> str | None:
    """None when every requirement of the lock (or those of `only`'s names) installs here for the lock's
    Python and this platform from `src`, else one line naming what cannot be had, the Python and the platform.
    `uv pip install --dry-run --no-deps` into a throwaway venv: the wheel's tags and Requires-Python decide."""
    src = src if isinstance(src, Source) else source(src)
    parsed = lock.parse(lock_text)
    lines = [line for name, line in parsed.requirements.items()
             if name not in lock.OWN and (only is None or name in only)]
    if not lines:
        return None
    args, env = src.uv_args()
    env = {**env, "UV_PYTHON_DOWNLOADS": "never"}
    with tempfile.TemporaryDirectory(prefix="repro-installable-") as tmp:
        made = subprocess.run([*venvs.uv(), "venv", "-q", "--python", venvs._interpreter(parsed.python), f"{tmp}/v"],
                              capture_output=True, text=True, env=env)
        if made.returncode:
            return (f"no Python {parsed.python} here to install {', '.join(lines[:3])} for "
                    f"({made.stderr.strip().splitlines()[-1] if made.stderr.strip() else 'uv venv failed'}): "
                    f"install one (`uv python install {parsed.python}`)")
        (Path(tmp) / "req.txt").write_text("\n".join(lines) + "\n")
        done = subprocess.run([*venvs.uv(), "pip", "install", "--dry-run", "-q", "--no-deps", "--python",
                               f"{tmp}/v/bin/python", "-r", f"{tmp}/req.txt", *args],
                              capture_output=True, text=True, env=env)
    if done.returncode == 0:
        return None
    named = [line for line in lines if line.split(" @ ")[0] in done.stderr or
             re.search(re.escape(_name_of(line)).replace(r"\-", "[-_.]") + r"\b", done.stderr, re.I)]
    reason = " ".join(s.strip(" ×╰─▶") for s in done.stderr.strip().splitlines() if s.strip())[-400:]
    return (f"{', '.join(named or lines[:3])} cannot be had for {target_words(parsed.python)} from {src}: "
            f"{reason or 'uv refused it'}; give a wheelhouse that holds a wheel of it for this Python and platform, "
            "or bisect between records made here")


# ---- the group at each version ---------------------------------------------------------------------

def _fits(meta: Metadata, chosen: dict[str, str | None]) -> str | None:
    """The first declared requirement among `chosen` (name -> version; None: absent) another's version breaks."""
    for a, va in chosen.items():
        for b, vb in chosen.items():
            if a != b and (broken := _breaks(meta(a, va), b, vb)):
                return f"{a} {va} requires {broken}, not {b} {vb or '(absent)'}"
    return None


def members_at(group: Group, version: str, src: Source, meta: Metadata | None = None) -> dict[str, str]:
    """{member: version} for the lead at `version`: each other member at the version nearest its BAD end (of
    those between its two ends, inclusive, from `src`'s listing) whose requirements fit the lead's and the
    members' chosen so far; PackagesError when none fits."""
    meta = meta or Metadata(src)
    chosen: dict[str, str | None] = {group.lead.name: version}
    for c in group.changes[1:]:
        options = [c.bad, c.good]  # added or removed: there or not
        if c.good is not None and c.bad is not None:
            listed = [v for (n, v) in src.wheels if n == c.name] if src.offline else _index_versions(c.name, False)
            options = [c.bad, *_between(listed, c.bad, c.good), c.good]  # from BAD's end toward GOOD's
        for v in options:
            if _fits(meta, {**chosen, c.name: v}) is None:
                chosen[c.name] = v
                break
        else:
            raise PackagesError(f"no version of {c.name} between {c.good} and {c.bad} fits {group.lead.name} {version} "
                                f"({_fits(meta, {**chosen, c.name: c.bad})}): it is not a step")
    return chosen


def version_steps(base_lock: str, group: Group, between: list[str], src: Source | list | None = None) -> list[str]:
    """Locks at positions 0..n: `base_lock` (the group step just before this group), the group at each
    version of `between` (members_at), then `base_lock` with the group at BAD (the group step itself)."""
    src = src if isinstance(src, Source) else source(src)
    meta = Metadata(src)
    base_versions = lock.versions(base_lock)
    steps = [base_lock]
    for v in between:
        chosen = members_at(group, v, src, meta)
        changes = [Change(n, base_versions.get(n), chosen[n], None, f"{n}=={chosen[n]}" if chosen[n] else None)
                   for n in group.names]
        steps.append(moved(base_lock, changes))
    steps.append(moved(base_lock, group.changes))
    return steps


def describe(group: Group, lock_text: str) -> str:
    """A step's label: 'jax 0.10.0 (jaxlib 0.10.0 with it)', 'pkg-a 1.5 (pkg-b 1.5 with it; without olddep)'."""
    have = lock.versions(lock_text)
    rest = [f"{c.name} {have[c.name]}" for c in group.changes[1:] if c.name in have]
    gone = [c.name for c in group.changes[1:] if c.name not in have]
    words = ([f"{_some(rest)} with it"] if rest else []) + ([f"without {_some(gone)}"] if gone else [])
    return f"{group.lead.name} {have.get(group.lead.name, '(absent)')}" + (f" ({'; '.join(words)})" if words else "")


# ---- the environment of a candidate --------------------------------------------------------------------

def environment(lock_text: str, src: Source | list | None = None, log=print) -> str:
    """The interpreter of a venv with exactly the lock's versions (venvs.ensure: built once, cached by the
    lock's hash); from the wheelhouse alone, offline, when `src` has folders, else from pip's sources."""
    src = src if isinstance(src, Source) else source(src)
    venv, meta = venvs.ensure(lock_text, log=log, wheelhouse=src.view() if src.offline else None)
    return venvs.python_of(venv)


# ---- for the driver: the two walks ----------------------------------------------------------------------

@dataclass
class Walk:
    """Positions 0..n over packages, each a lock and a label (position 0: GOOD's, n: BAD's)."""
    locks: list[str]
    labels: list[str]
    groups: list[Group] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.locks) - 1


def group_walk(good_lock: str, bad_lock: str, src: Source | list | None = None) -> Walk:
    """The cumulative group steps from GOOD to BAD, labelled by the group each one moves; before any probe,
    every changed package's version at each end is checked to install here (PackagesError naming it)."""
    src = src if isinstance(src, Source) else source(src)
    changes = changed(good_lock, bad_lock)
    if not changes:
        raise PackagesError("the two locks name the same package versions: no package to bisect")
    for text, end in ((good_lock, "good"), (bad_lock, "bad")):
        if why := installable(text, src, only=[c.name for c in changes if c.line(end)]):
            raise PackagesError(f"{end.upper()}'s {why}")
    groups = coupled(changes, src)
    steps = group_steps(good_lock, bad_lock, groups)
    return Walk(steps, ["GOOD", *(str(g) for g in groups)], groups)


def version_walk(walk: Walk, k: int, src: Source | list | None = None, log=print) -> Walk:
    """Within the guilty group (the first bad position k of `walk`, 1..n): its released versions between, as
    positions 0 (walk's position k-1) .. m (walk's position k), labelled `describe`."""
    src = src if isinstance(src, Source) else source(src)
    group = walk.groups[k - 1]
    between = versions(group, src, lock.parse(walk.locks[k - 1]).python, log=log)
    steps = version_steps(walk.locks[k - 1], group, between, src)
    steps[-1] = walk.locks[k]  # the group step itself, verbatim (the last one is BAD's lock as recorded)
    return Walk(steps, [describe(group, s) for s in steps], [group])


def flat_walk(good_lock: str, bad_lock: str, src: Source | list | None = None, log=print) -> Walk:
    """Both walks in one: every group's version steps, group after group (cumulative), so that one positional
    search names the group and its version at once; position k's label says both ("slowpkg 1.5 (of slowpkg
    1.0 → 1.7)"), or the group alone where no version lies between ("quietpkg 1.0 → 1.1"). It lists every group's versions first (an index query and install checks per version): for
    a few changed packages; group_walk then version_walk for many."""
    src = src if isinstance(src, Source) else source(src)
    walk = group_walk(good_lock, bad_lock, src)
    locks, labels = [walk.locks[0]], ["GOOD"]
    for k, group in enumerate(walk.groups, start=1):
        within = version_walk(walk, k, src, log=log)
        locks += within.locks[1:]
        labels += [str(group)] if within.n == 1 else [f"{label} (of {group})" for label in within.labels[1:]]
    return Walk(locks, labels, walk.groups)
