"""What each instruction of a compiled XLA module is: its opcode, the opcodes inside it (a
fusion's called computation), its result shape, and whether its source is the optimizer.

XLA's profilers name the instruction they ran (`ynn_fusion.2`, `multiply_add_fusion`,
`dot`); the name alone says little (a `ynn_fusion` may be a matmul or a reduction), so the
optimized HLO text (`compiled.as_text()`, the same text run.capture_ir keeps) is read to
say what is inside. The text is XLA's stable printed form; no Python parser for it ships
with jax, hence these few regular expressions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from repro.profile.categories import OPTIMIZER_SOURCES

COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*"
                         r"(\([^=]*?\)|[a-z0-9]+\[[^\]]*\](?:\{[^}]*\})?|[a-z0-9]+\[\])\s+([a-z][a-z0-9\-]*)\(")
CALLS = re.compile(r"calls=%?([\w.\-]+)")
FRAME = re.compile(r"stack_frame_id=(\d+)")
SOURCE_FILE = re.compile(r'source_file="([^"]+)"')
TABLE_ROW = re.compile(r"^(\d+)\s+(.*)$")


def _tables(lines: list[str]) -> tuple[dict, dict, dict]:
    """FileNames, FileLocations and StackFrames: the source of each stack_frame_id."""
    files, locations, frames, section = {}, {}, {}, None
    for line in lines:
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = line
            continue
        m = TABLE_ROW.match(line)
        if not m or section is None:
            if line.strip() == "" or m is None:
                section = section if line.strip() == "" else None
            continue
        key, rest = int(m.group(1)), m.group(2)
        if section == "FileNames":
            files[key] = rest.strip('"')
        elif section == "FileLocations":
            locations[key] = int(re.search(r"file_name_id=(\d+)", rest).group(1))
        elif section == "StackFrames":
            frames[key] = (int(re.search(r"file_location_id=(\d+)", rest).group(1)),
                           int(re.search(r"parent_frame_id=(\d+)", rest).group(1)))
    return files, locations, frames


def _frame_files(frame: int, files: dict, locations: dict, frames: dict) -> list[str]:
    out, seen = [], set()
    while frame in frames and frame not in seen:
        seen.add(frame)
        loc, parent = frames[frame]
        out.append(files.get(locations.get(loc), ""))
        frame = parent
    return out


@dataclass(frozen=True)
class Instruction:
    """One instruction of a compiled module: its opcode, the opcodes inside it (a called computation's;
    else its own), its result shape, and whether its source lies in an optimizer library."""

    opcode: str
    inside: tuple[str, ...] = ()
    shape: str = ""
    optimizer: bool = False


def instructions(text: str) -> dict[str, Instruction]:
    """{instruction name: what it is} for every computation's instructions."""
    lines = text.splitlines()
    files, locations, frames = _tables(lines)
    opcodes_of: dict[str, set[str]] = {}  # computation → the opcodes it holds
    found: dict[str, tuple] = {}  # name → (opcode, the computation it calls, shape, optimizer)
    current = None
    for line in lines:
        if m := COMPUTATION.match(line):
            current = m.group(1)
            opcodes_of[current] = set()
            continue
        m = INSTRUCTION.match(line)
        if not m or current is None:
            continue
        name, shape, opcode = m.groups()
        if opcode != "parameter":
            opcodes_of[current].add(opcode)
        sources = SOURCE_FILE.findall(line)
        if f := FRAME.search(line):
            sources += _frame_files(int(f.group(1)), files, locations, frames)
        calls = CALLS.search(line)
        found[name] = (opcode, calls.group(1) if calls else None, re.sub(r"\{[^}]*\}$", "", shape),
                       any(OPTIMIZER_SOURCES.search(s) for s in sources))
    return {name: Instruction(opcode, tuple(sorted(opcodes_of.get(called, ()))) if called else (opcode,), shape,
                              optimizer)
            for name, (opcode, called, shape, optimizer) in found.items()}
