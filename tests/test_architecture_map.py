"""docs/architecture.md is checked against the tree: every room and module its floors table names
exists and no room of src/repro is missing from it. The map states no file counts (they drifted
within a day, 5 of 11 rooms wrong, and every new file was an edit of the map): the tree lists them
itself, `python tests/test_architecture_map.py` prints each room's `*.py` count and each config
group's yaml count."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "repro"
MAP = ROOT / "docs" / "architecture.md"


def _floor_rows(text: str) -> list[str]:
    table = text.split("## Floors and rooms", 1)[1].split("\n\n## ", 1)[0]
    return [line.split("|")[2] for line in table.splitlines() if re.match(r"\| \d ", line)]


def named_rooms(text: str) -> list[str]:
    """`name` or `name/` of each room the floors table's room column names."""
    return [name for cell in _floor_rows(text) for name in re.findall(r"`([\w./]+)`", cell)]


def counts() -> dict[str, int]:
    """Each room's `*.py` files and each config group's yaml files, from the tree."""
    rooms = {f"{p.name}/": len(list(p.rglob("*.py"))) for p in sorted(SRC.iterdir())
             if p.is_dir() and (p / "__init__.py").exists()}
    groups = {f"conf/{p.name}/": len(list(p.glob("*.yaml"))) for p in sorted((ROOT / "conf").iterdir()) if p.is_dir()}
    return {**rooms, **groups}


def drift(text: str) -> list[str]:
    """What the map says that the tree does not (empty: they agree)."""
    problems, rooms = [], named_rooms(text)
    for name in rooms:
        if name.endswith("/"):
            if not (SRC / name).is_dir():
                problems.append(f"{name}: no such package")
        elif name != "repro" and not (SRC / name).is_file() and not (SRC / f"{name}.py").is_file():
            problems.append(f"{name}: no such module")
    for path in sorted(SRC.iterdir()):
        room = f"{path.name}/" if path.is_dir() and (path / "__init__.py").exists() else \
            path.stem if path.suffix == ".py" and path.stem != "__init__" else None
        if room and room not in rooms:
            problems.append(f"{room}: in the tree, not on the map")
    around = text.split("Around `src/repro`:", 1)[1].split("\n\n", 1)[0]
    for group in re.findall(r"`(\w+)/`", around.split("config groups:", 1)[1].split(")", 1)[0]):
        if not (ROOT / "conf" / group).is_dir():
            problems.append(f"conf/{group}/: no such config group")
    return problems


def test_the_map_matches_the_tree():
    assert drift(MAP.read_text()) == []


def test_a_planted_drift_is_named():
    text = MAP.read_text()
    planted = text.replace("`hashing`, ", "`hashing`, `nowhere`, `elsewhere/`, ").replace("`flat`, ", "")
    planted = planted.replace("`framework/`, ", "`framework/`, `gone/`, ")
    found = drift(planted)
    assert "nowhere: no such module" in found and "flat: in the tree, not on the map" in found
    assert "elsewhere/: no such package" in found and "conf/gone/: no such config group" in found


def test_the_sizes_are_listed_by_the_tree_not_written_on_the_map():
    sizes = counts()
    assert sizes["worker/"] == len(list((SRC / "worker").rglob("*.py"))) and sizes["conf/model/"] >= 1
    assert not re.search(r"`\w+/` \(\d+[:)]", MAP.read_text())  # no count to edit by hand


if __name__ == "__main__":
    for name, n in counts().items():
        print(f"{name:24} {n}")
