"""The code a run used: commit, dirty flag and a hash of the uncommitted change.

The ledger folder is left out: new records (and MLflow stores and run outputs, which are
git-ignored) must not make the next run "dirty".
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def source_sha256(package_dir: Path) -> str:
    """sha256 over repro's own source files: names the code even outside git (a copy, a wheel)."""
    h = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        h.update(str(path.relative_to(package_dir)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def state(root: Path, ledger_dir: Path | None = None) -> dict:
    try:
        commit = _git(root, "rev-parse", "HEAD").strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return {"commit": None, "dirty": None, "diff_sha256": None, "changed": []}
    spec = ["--", "."]
    if ledger_dir is not None:
        try:
            spec.append(f":(exclude){Path(ledger_dir).resolve().relative_to(root.resolve())}")
        except ValueError:
            pass  # the ledger lives outside the checkout
    status = _git(root, "status", "--porcelain", "--untracked-files=all", *spec)
    changed = [line[3:] for line in status.splitlines() if line]
    h = hashlib.sha256(_git(root, "diff", "HEAD", "--binary", *spec).encode())
    for line in status.splitlines():
        if line.startswith("??"):
            path = root / line[3:]
            h.update(line[3:].encode())
            if path.is_file():
                h.update(path.read_bytes())
    return {
        "commit": commit,
        "dirty": bool(changed),
        "diff_sha256": h.hexdigest() if changed else None,
        "changed": changed[:50],
    }
