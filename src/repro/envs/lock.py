"""An interpreter's whole environment as a lock file, content-addressed.

The lock is a pip/uv requirements file: one `name==version` line per installed distribution
(sorted, names normalised), `name @ URL` for one installed from a direct URL (PEP 610
`direct_url.json`: a VCS commit or a wheel file), and comment lines for what cannot be
installed from a lock (editable or local-folder installs), plus the Python version in the
header. Its sha256 is the environment's hash; `<ledger>/envs/<hash>.txt` holds it once.

A version names a release, not its bytes: a wheel rebuilt with one line changed has the same
name and version. So the lock also names each distribution's content, in comment lines
(`# content: NAME==VERSION sha256:HEX`, which pip and uv skip): the sha256 over the sorted
`path,hash` pairs of the files it installed into site-packages, read from its installer's
`RECORD`. Left out are the files an installer writes or rewrites itself (the `.dist-info`
folder, byte-code, scripts outside site-packages), so pip and uv give the same digest, and
`wheel_content` computes the same digest from a wheel file's own bytes: a pack is checked
against what the record ran with (envs.pack.check), not against its own sums.

This file imports only the standard library: `python -I lock.py` prints the lock of any
interpreter (another venv's) without repro installed there.

Reading every distribution's metadata costs 0.2-0.7 s for the project's 190, so a lock is
cached under the cache folder keyed by the interpreter and the mtimes of its site-packages
folders (installing or removing a distribution changes them).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

HEADER = "# repro environment lock: `uv pip install --no-deps -r THIS_FILE` rebuilds it"
PYTHON_LINE = re.compile(r"^# python (\S+)")
CONTENT_LINE = re.compile(r"^# content: (\S+?)==(\S+) sha256:([0-9a-f]{64})$")
# Distributions whose code a replay restores from git, not from the lock.
OWN = ("repro",)


@dataclass(frozen=True)
class Dist:
    """One installed distribution as the lock names it."""

    name: str  # normalised
    version: str
    source: str = "index"  # index | url | editable | local
    url: str | None = None  # a url install's `VCS+URL@COMMIT` or archive, an editable's or a local folder's
    content: str | None = None  # its installed files' digest (`installed_content`); None: no RECORD, or editable


@dataclass(frozen=True)
class Parsed:
    """A lock read back: its python version, installable requirements {name: line}, uninstallable entries
    {name: what it was} and the content digests it names {name: (version, sha256)}."""

    python: str | None
    requirements: dict[str, str]
    local: dict[str, str]
    content: dict[str, tuple[str, str]]


def normalise(name: str) -> str:
    """PEP 503's name, written here again as in `repro.paths.distribution_name`: this file runs as
    `python -I lock.py` in an interpreter without repro, so it imports nothing of repro's."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions() -> list[Dist]:
    """Every distribution this interpreter sees: name, version, source (index | url | editable | local)."""
    from importlib import metadata

    seen: dict[str, Dist] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]  # the core metadata's own field names (importlib.metadata's format)
        if not name or normalise(name) in seen:
            continue  # the first on sys.path is the one imported
        entry = Dist(normalise(name), dist.version)
        direct = dist.read_text("direct_url.json")
        if direct:  # PEP 610's direct_url.json, pip's own format: read as it writes it
            info = json.loads(direct)
            url = info.get("url", "")
            if "vcs_info" in info:
                vcs = info["vcs_info"]
                entry = replace(entry, source="url", url=f"{vcs['vcs']}+{url}@{vcs.get('commit_id', '')}")
            elif "archive_info" in info:
                entry = replace(entry, source="url", url=url)
            elif (info.get("dir_info") or {}).get("editable"):
                entry = replace(entry, source="editable", url=url)
            else:
                entry = replace(entry, source="local", url=url)
        if entry.source != "editable" and (digest := installed_content(dist)):
            entry = replace(entry, content=digest)
        seen[entry.name] = entry
    return sorted(seen.values(), key=lambda d: d.name)


def _b64_sha256(data: bytes) -> str:
    """A file's hash as RECORD writes it (PEP 376/427: urlsafe base64 of the sha256, no padding)."""
    import base64

    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _content_path(path: str) -> str | None:
    """The site-packages path a RECORD entry (installed or in a wheel) counts under, or None for a file the
    installer writes or rewrites itself: `*.dist-info/`, byte-code, scripts and data outside site-packages."""
    path = path.replace("\\", "/")
    if m := re.match(r"[^/]+\.data/(purelib|platlib|[^/]+)/(.*)", path):
        if m.group(1) not in ("purelib", "platlib"):
            return None  # scripts, headers, data: installed outside site-packages (scripts rewritten)
        path = m.group(2)
    first = path.split("/", 1)[0]
    if path.startswith("..") or first.endswith(".dist-info") or "__pycache__/" in path or path.endswith(".pyc"):
        return None
    return path


def _digest(pairs: list[tuple[str, str]]) -> str | None:
    return hashlib.sha256("\n".join(f"{p},{h}" for p, h in sorted(pairs)).encode()).hexdigest() if pairs else None


def installed_content(dist) -> str | None:
    """The content digest of an installed distribution (an importlib.metadata Distribution), from its RECORD;
    a file listed without a hash is hashed from disk. None: no RECORD (nothing to name its content by)."""
    import csv

    record = dist.read_text("RECORD")
    if not record:
        return None
    pairs = []
    for row in csv.reader(record.splitlines()):
        if not row or (path := _content_path(row[0])) is None:
            continue
        digest = row[1] if len(row) > 1 else ""
        if not digest:
            try:
                digest = _b64_sha256(Path(dist.locate_file(row[0])).read_bytes())
            except OSError:
                continue
        pairs.append((path, digest))
    return _digest(pairs)


def wheel_content(path: Path) -> str | None:
    """The content digest of a wheel file, from the bytes of the files it would install (not its RECORD's
    word for them): equal to `installed_content` of the distribution installed from it."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        pairs = [(p, _b64_sha256(z.read(info))) for info in z.infolist()
                 if not info.is_dir() and (p := _content_path(info.filename)) is not None]
    return _digest(pairs)


def render(dists: list[Dist], python_version: str) -> str:
    lines = [HEADER, f"# python {python_version}"]
    for d in dists:
        if d.source == "index":
            lines.append(f"{d.name}=={d.version}")
        elif d.source == "url":
            lines.append(f"{d.name} @ {d.url}")
        else:  # editable / local folder: the folder may have moved on; named, not installable
            lines.append(f"# {d.source}: {d.name}=={d.version} {d.url or ''}")
    lines += [f"# content: {d.name}=={d.version} sha256:{d.content}" for d in dists if d.content]
    return "\n".join(lines) + "\n"


def parse(text: str) -> Parsed:
    """A lock's python version, installable requirements {name: line}, uninstallable entries and the
    content digests it names {name: (version, sha256)} (none in a lock from before they were kept)."""
    python, requirements, local, content = None, {}, {}, {}
    for line in text.splitlines():
        if m := PYTHON_LINE.match(line):
            python = m.group(1)
        elif m := CONTENT_LINE.match(line):
            content[normalise(m.group(1))] = (m.group(2), m.group(3))
        elif line.startswith(("# editable: ", "# local: ")):
            kind, rest = line[2:].split(": ", 1)
            spec = rest.split(" ", 1)[0]
            local[normalise(spec.split("==")[0])] = f"{spec} ({kind} {rest.split(' ', 1)[1] if ' ' in rest else ''})".strip()
        elif line and not line.startswith("#"):
            name = re.split(r"\s*(==|@)", line, maxsplit=1)[0]
            requirements[normalise(name)] = line
    return Parsed(python, requirements, local, content)


def contents(text: str) -> dict[str, str]:
    """{name: content sha256} of a lock (envs.lock's docstring); empty for a lock from before content was kept."""
    return {name: digest for name, (_, digest) in parse(text).content.items()}


def versions(text: str) -> dict[str, str]:
    """{name: version or URL} of a lock, for naming differences."""
    parsed = parse(text)
    out = {n: re.split(r"==| @ ", line, maxsplit=1)[1] for n, line in parsed.requirements.items()}
    return {**out, **parsed.local, "python": parsed.python}


def env_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def with_pins(text: str, pins: list[str]) -> str:
    """The lock with each `name==version` of `pins` in place of that distribution's line (or added)."""
    parsed = parse(text)
    requirements = dict(parsed.requirements)
    for pin in pins:
        name = re.split(r"\s*(==|@)", pin, maxsplit=1)[0]
        requirements[normalise(name)] = pin.strip()
    lines = [HEADER, f"# python {parsed.python}", *(requirements[n] for n in sorted(requirements))]
    lines += [f"# {line}" for line in text.splitlines() if line.startswith(("# editable: ", "# local: "))
              for line in [line[2:]]]
    pinned = {normalise(re.split(r"\s*(==|@)", pin, maxsplit=1)[0]) for pin in pins}
    lines += [f"# content: {n}=={v} sha256:{d}" for n, (v, d) in sorted(parsed.content.items())
              if n not in pinned]  # a pin's content is not known until it is installed
    return "\n".join(lines) + "\n"


def current() -> str:
    """The lock of this interpreter, without this project's own distribution."""
    return render([d for d in distributions() if d.name not in OWN], platform.python_version())


def _site_dirs(python: str | None) -> list[Path]:
    if python is None:
        return [Path(p) for p in sys.path if p and os.path.isdir(p) and "site-packages" in p]
    return sorted(Path(python).parent.parent.glob("lib/python*/site-packages"))


def _cache_key(python: str | None) -> str | None:
    dirs = _site_dirs(python)
    if not dirs:
        return None  # a system interpreter with no site folder we can see: no cache
    stamps = [(str(d), d.stat().st_mtime_ns) for d in dirs]
    return hashlib.sha256(json.dumps([python or sys.executable, stamps]).encode()).hexdigest()[:32]


def of_interpreter(python: str | None, cache_dir: Path) -> str:
    """The lock of `python` (None: this interpreter), from the cache when its site-packages is unchanged."""
    key = _cache_key(python)
    cached = cache_dir / f"{key}.txt" if key else None
    if cached and cached.is_file():
        return cached.read_text()
    if python is None:
        text = current()
    else:
        text = subprocess.run([python, "-I", __file__], capture_output=True, text=True, check=True).stdout
    from repro.redaction import redact

    text = redact(text)  # `name @ https://user:token@host/...`: a lock goes into the ledger and into packs
    if cached:
        write_once(cached, text)
    return text


def write_once(path: Path, text: str) -> bool:
    """Write `text` to `path` unless it is there already (atomic: a reader never sees half)."""
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return True


def store(ledger_root: Path, text: str) -> str:
    """Keep the lock in `<ledger>/envs/<hash>.txt` (once) and return its hash."""
    digest = env_hash(text)
    write_once(Path(ledger_root) / "envs" / f"{digest}.txt", text)
    return digest


class EditedLock(ValueError):
    """A lock whose content does not hash to the name it is kept under: it was changed after it was written."""


def checked(path: Path) -> str:
    """The text of the lock at `path`, or EditedLock naming the file when its content is not its name's hash."""
    text = path.read_text()
    if (actual := env_hash(text)) != path.stem:
        raise EditedLock(f"environment lock {path} was changed after it was written: its content hashes to "
                         f"{actual[:12]}, its name says {path.stem[:12]} (`repro ledger verify` names the records "
                         "using it); restore it from git or from the ledger it was recorded in")
    return text


def load(ledger_root: Path, digest: str, check: bool = False) -> str | None:
    """The lock `digest` of a ledger (None: not there). `check`: EditedLock when its content does not
    match its name (what rebuilds an environment from it must be sure it is the recorded one)."""
    path = Path(ledger_root) / "envs" / f"{digest}.txt"
    if not path.is_file():
        return None
    return checked(path) if check else path.read_text()


if __name__ == "__main__":  # `python -I lock.py`: the lock of the interpreter running it
    sys.stdout.write(current())
