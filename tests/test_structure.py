"""One direction of imports (DESIGN.md "One direction"): data flows config → runner → ledger →
report → tracking / CLI, and a module never imports one on a floor above its own, nor report
and tracking each other (tracking is handed the rows and names it shows). Imports are read with
`ast` from the source, so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import repro

SRC = Path(repro.__file__).parent

# Floors by import (who calls whom), lowest first. The runner writes records into the ledger and
# validation checks layouts and clusters, so the ledger sits below the run path. report and tracking
# share a floor: neither imports the other. Modules that are commands (a CLI verb, the session,
# the Python API) sit on top, whatever package holds them.
FLOORS = [
    ("repro", "repro.hashing", "repro.flat", "repro.paths", "repro.console"),
    ("repro.ledger",),
    ("repro.config", "repro.backends", "repro.models", "repro.data", "repro.hardware", "repro.sweeper",
     "repro.ir", "repro.runner", "repro.envs", "repro.profile"),
    ("repro.report", "repro.tracking", "repro.preflight"),  # profile/ measures (floor 2), report/ renders it
    ("repro.session", "repro.app", "repro.api", "repro.cli", "repro.__main__", "repro.replay", "repro.dvc_stage",
     "repro.ledger.cli", "repro.models.cli", "repro.tracking.sync", "repro.tracking.projector", "repro.envs.cli",
     "repro.hydra_callback"),
]
SIBLINGS_APART = {("repro.report", "repro.tracking"), ("repro.tracking", "repro.report")}


def _module(path: Path) -> str:
    parts = ("repro", *path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _place(module: str) -> tuple[int, str]:
    """(floor, the FLOORS entry that holds it: the longest prefix wins)."""
    best = max(((i, p) for i, ps in enumerate(FLOORS) for p in ps if module == p or module.startswith(p + ".")),
               key=lambda ip: len(ip[1]))
    return best


def _imports(source: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "repro":
            out |= {node.module} if node.module != "repro" else {f"repro.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "repro"}
    return {m for m in out if m != "repro.__version__"}


def upward_imports(sources: dict[str, str]) -> list[str]:
    """Every import in `sources` ({module: its source}) that goes up a floor or across to a sibling kept apart."""
    found = []
    for me, source in sorted(sources.items()):
        floor, entry = _place(me)
        for target in sorted(_imports(source)):
            their_floor, their_entry = _place(target)
            if their_floor > floor or (their_floor == floor and (entry, their_entry) in SIBLINGS_APART):
                found.append(f"{me} (floor {floor}) imports {target} (floor {their_floor})")
    return found


def test_no_lower_floor_imports_a_higher_one():
    assert upward_imports({_module(p): p.read_text() for p in SRC.rglob("*.py")}) == []


def test_the_check_sees_an_upward_import():
    assert upward_imports({"repro.ledger.probe": "from repro.report import comparison\n",
                           "repro.tracking.probe": "def f():\n    from repro.report.varied import run_name\n",
                           "repro.report.probe": "import repro.ledger\nfrom repro.flat import flatten\n"}) == [
        "repro.ledger.probe (floor 1) imports repro.report (floor 3)",
        "repro.tracking.probe (floor 3) imports repro.report.varied (floor 3)"]
