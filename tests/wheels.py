"""Real wheel files made in a test: a pure-Python distribution written as a zip with a correct RECORD
(PEP 427), so pip and uv install it, with no build backend and no network.

    make_wheel(folder, "slowpkg", "1.5", {"slowpkg/__init__.py": "def work(): ..."}, requires=["other==2.0"])
    simple_index(root, [wheel, ...])   # a PEP 503 /simple/ tree of them, for http.server or file://
    server = QuietServer(("127.0.0.1", 0), handler)   # serves them (or a proxy) on a thread of the test
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import zipfile
from pathlib import Path


class QuietServer(http.server.ThreadingHTTPServer):
    """A test's local HTTP server whose request threads print nothing. socketserver prints a request's
    exception (a client that went away: pip's timeout, a killed command) to sys.stderr, and a request
    thread can outlive its test (a handler asleep past `shutdown()`): the traceback then lands in
    whatever a later test of the same process is capturing (a redirect_stderr that asserts no
    Traceback). What the test checks is its command's output, never the server's; the errors are kept
    in `errors` for a test that wants them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.errors: list[str] = []

    def handle_error(self, request, client_address) -> None:
        import sys

        self.errors.append(f"{client_address}: {sys.exc_info()[1]!r}")


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(folder: Path, name: str, version: str, files: dict[str, str], requires: tuple[str, ...] | list = ()) -> Path:
    """`folder/<name>-<version>-py3-none-any.whl` holding `files` (path -> text), its metadata and RECORD."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    members = {path: text.encode() for path, text in files.items()}
    members[f"{info}/METADATA"] = ("Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode()
    members[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: repro-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = "".join(f"{path},{_hash(data)},{len(data)}\n" for path, data in members.items()) + f"{info}/RECORD,,\n"
    members[f"{info}/RECORD"] = record.encode()
    Path(folder).mkdir(parents=True, exist_ok=True)
    out = Path(folder) / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in members.items():
            z.writestr(path, data)
    return out


def simple_index(root: Path, wheels: list[Path]) -> Path:
    """A PEP 503 simple index of `wheels` under `root/simple/` (one page per project)."""
    import shutil

    by_project: dict[str, list[Path]] = {}
    for wheel in wheels:
        by_project.setdefault(wheel.name.split("-")[0].replace("_", "-").lower(), []).append(wheel)
    for project, files in by_project.items():
        page = root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        links = []
        for f in files:
            shutil.copy2(f, page / f.name)
            links.append(f'<a href="{f.name}#sha256={hashlib.sha256(f.read_bytes()).hexdigest()}">{f.name}</a>')
        (page / "index.html").write_text("<html><body>" + "\n".join(links) + "</body></html>\n")
    (root / "simple" / "index.html").write_text(
        "<html><body>" + "".join(f'<a href="{p}/">{p}</a>' for p in sorted(by_project)) + "</body></html>\n")
    return root / "simple"
