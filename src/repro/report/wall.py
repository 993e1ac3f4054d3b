"""The report's "Where each job's wall goes": every run's wall split into its parts
(job/wall_split.py, recorded in `wall_split`; its parts' words: ledger/render.py), one row per run, in seconds."""

from __future__ import annotations

from repro.report.md import md_table
from repro.ledger.record import view
from repro.ledger.render import WALL_PARTS as LABELS


def markdown(comparison) -> list[str]:
    runs = [(row.name, r, wall) for row in comparison.rows for r in row.records if (wall := view(r).wall_split)]
    if not runs:
        return []
    parts = [k for k in LABELS if any(k in wall.parts for _, _, wall in runs)]
    rows = []
    for name, r, wall in runs:
        first = wall.first_step
        cells = [f"{wall.parts[k]:.2f}" if k in wall.parts else "—" for k in parts]
        if (build := wall.build) and "build" in parts:  # JAX: the XLA compiles inside the build
            cells[parts.index("build")] += f" (XLA {build['trace_s'] + build['lower_s']:.2f} / {build['compile_s']:.2f})"
        if first and "first_step" in parts:  # its trace/compile/execute beside it
            i = parts.index("first_step")
            cells[i] += f" ({first['trace_lower_s']:.2f} / {first['compile_s']:.2f} / {first['execute_s']:.2f})"
        rows.append([name, f"{view(r).wall_s or 0:.2f}", *cells, f"{wall.rest_s:.2f}", wall.rest])
    lines = ["## Where each job's wall goes", "",
             "Each run's wall (the worker's, from its start to its exit) split into its parts, in seconds: "
             + "; ".join(f"{k.replace('_', ' ')}: {LABELS[k]}" for k in parts)
             + ". The first step splits into trace / compile / execute where the framework says; a JAX "
            "build into XLA's trace+lower / compile of what it jitted (the parameter init, optimizer state). "
             "Rest: the wall no part covers; above 10 % of the wall it says where it lies.", ""]
    lines += md_table(["run", "wall", *(k.replace("_", " ") for k in parts), "rest", "where the rest lies"], rows)
    return lines + [""]
