"""docs/architecture.md is checked against the tree (it drifted within a day: 5 of 11 rooms had the
wrong file count): every room and module its floors table names exists, each count matches the
`*.py` files there, no room of src/repro is missing from it, and the config groups' counts hold."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "repro"
MAP = ROOT / "docs" / "architecture.md"


def _floor_rows(text: str) -> list[str]:
    table = text.split("## Floors and rooms", 1)[1].split("\n\n## ", 1)[0]
    return [line.split("|")[2] for line in table.splitlines() if re.match(r"\| \d ", line)]


def named_rooms(text: str) -> dict[str, int | None]:
    """{`name` or `name/`: its stated file count (None: a module)} from the floors table's room column."""
    rooms = {}
    for cell in _floor_rows(text):
        for name, count in re.findall(r"`([\w./]+)`(?: \((\d+)[:)])?", cell):
            rooms[name] = int(count) if count else None
    return rooms


def drift(text: str) -> list[str]:
    """What the map says that the tree does not (empty: they agree)."""
    problems, rooms = [], named_rooms(text)
    for name, count in rooms.items():
        if name.endswith("/"):
            folder = SRC / name
            if not folder.is_dir():
                problems.append(f"{name}: no such package")
            elif count is not None and (real := len(list(folder.rglob("*.py")))) != count:
                problems.append(f"{name}: the map says {count} files, the tree has {real}")
        elif name != "repro" and not (SRC / name).is_file() and not (SRC / f"{name}.py").is_file():
            problems.append(f"{name}: no such module")
    for path in sorted(SRC.iterdir()):
        room = f"{path.name}/" if path.is_dir() and (path / "__init__.py").exists() else \
            path.stem if path.suffix == ".py" and path.stem != "__init__" else None
        if room and room not in rooms:
            problems.append(f"{room}: in the tree, not on the map")
    around = text.split("Around `src/repro`:", 1)[1].split("\n\n", 1)[0]
    for group, count in re.findall(r"`(\w+)/` (\d+)", around):
        if (real := len(list((ROOT / "conf" / group).glob("*.yaml")))) != int(count):
            problems.append(f"conf/{group}/: the map says {count}, the tree has {real}")
    return problems


def test_the_map_matches_the_tree():
    assert drift(MAP.read_text()) == []


def test_a_planted_drift_is_named():
    text = MAP.read_text()
    planted = re.sub(r"`worker/` \(\d+\)", "`worker/` (2)", text)
    planted = planted.replace("`hashing`, ", "`hashing`, `nowhere`, ").replace("`flat`, ", "")
    found = drift(planted)
    assert any(p.startswith("worker/: the map says 2 files, the tree has ") for p in found)
    assert "nowhere: no such module" in found and "flat: in the tree, not on the map" in found
