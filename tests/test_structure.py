"""Layers that only look down (docs/architecture.md, "Layers that only look down"): types on the ground
floor, what measures above them, the run path above that, the preflight, reports and tracking
above the run path, commands on top. A module never imports one on a floor above its own,
except the named climbs in CLIMBS (at most four, each with its reason), and no import closes a
circle, between modules or between rooms. Imports are read from the source with `ast`, so a
lazy import inside a function counts too.

A room is a package under repro (repro.job) or a top-level module (repro.cli); a module that
is a command (a CLI verb's module) is a room of its own on the top floor, whatever package
holds it. `python tests/test_structure.py` prints the counts: rooms, floors, arrows, climbs,
circles.
"""

from __future__ import annotations

import ast
from pathlib import Path

import repro

SRC = Path(repro.__file__).parent

FLOORS = [
    # 0 types and plumbing: what every floor may use
    ("repro", "repro.hashing", "repro.flat", "repro.paths", "repro.console", "repro.gitinfo",
     "repro.config", "repro.models", "repro.redaction"),
    # 1 the record and what a run reads: the ledger, the machine, the data, the sweep's order
    ("repro.ledger", "repro.hardware", "repro.data", "repro.ir"),
    # 2 what measures: the frameworks' backends and the profiler, the environments a run is built in
    ("repro.backends", "repro.profile", "repro.envs"),
    # 3 the run path: the sweep loop and its launchers, a job's parent side, its worker process
    ("repro.loop", "repro.job", "repro.worker"),
    # 4 what reads the run path: the preflight (checks a config against layouts, clusters, schedulers), reports
    ("repro.preflight", "repro.report"),
    # 5 MLflow, a view of the ledger (it renders report's comparison into the store)
    ("repro.tracking",),
    # 6 commands
    ("repro.session", "repro.sweep_close", "repro.app", "repro.api", "repro.repeats",
     "repro.cli", "repro.__main__", "repro.replay", "repro.dvc_stage", "repro.calibrate",
     "repro.ledger.cli", "repro.models.cli", "repro.envs.cli", "repro.tracking.sync", "repro.tracking.projector",
     "repro.tracking.writer", "repro.history", "repro.bisect"),
]

# Imports that climb a floor, each with its reason; the list can only shrink.
CLIMBS: dict[tuple[str, str], str] = {}


def _module(path: Path) -> str:
    parts = ("repro", *path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room_of(module: str) -> tuple[int, str]:
    """(floor, room): the longest FLOORS entry that holds the module."""
    return max(((i, p) for i, ps in enumerate(FLOORS) for p in ps if module == p or module.startswith(p + ".")),
               key=lambda ip: len(ip[1]))


def imports(source: str, modules: set[str]) -> set[str]:
    """The repro modules `source` imports: `from pkg import sub` (a submodule) imports the
    submodule, `from pkg import name` the package."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "repro" and not node.level:
            subs = {f"{node.module}.{a.name}" for a in node.names} & modules
            out |= subs or {node.module}
            if len(subs) < len(node.names) and subs:
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "repro"}
    return {m for m in out if m != "repro.__version__"}


def graph(sources: dict[str, str]) -> dict[str, set[str]]:
    modules = set(sources)
    return {me: {t for t in imports(src, modules) if t != me} for me, src in sources.items()}


def climbs(edges: dict[str, set[str]]) -> dict[tuple[str, str], int]:
    """Every import that goes up a floor: (importer, imported) -> how many floors up."""
    return {(me, t): room_of(t)[0] - room_of(me)[0] for me, ts in edges.items() for t in ts
            if room_of(t)[0] > room_of(me)[0]}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                on.discard(w)
                comp.append(w)
            on.discard(v)
            if comp:
                found.append(sorted([v, *comp]))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def rooms(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The room graph: room -> the rooms it imports."""
    out: dict[str, set[str]] = {room_of(m)[1]: set() for m in edges}
    for me, ts in edges.items():
        out[room_of(me)[1]] |= {room_of(t)[1] for t in ts if room_of(t)[1] != room_of(me)[1]}
    return out


def source_graph() -> dict[str, set[str]]:
    return graph({_module(p): p.read_text() for p in SRC.rglob("*.py")})


def test_no_import_climbs_but_the_named_ones():
    found = climbs(source_graph())
    assert sorted(found) == sorted(CLIMBS), "\n".join(f"{a} (floor {room_of(a)[0]}) imports {b} (floor {room_of(b)[0]})"
                                                    for a, b in sorted(set(found) - set(CLIMBS)))
    assert len(CLIMBS) <= 4 and all(CLIMBS.values())


def test_no_import_circle_between_modules_or_rooms():
    edges = source_graph()
    assert circles(edges) == []
    assert circles(rooms(edges)) == []


# The run path's rooms, from the top: the sweep loop hands a job to a job's parent side, which starts
# the worker process; each imports only those after it (issue 57: one way, as the floors are).
RUN_ROOMS = ("repro.loop", "repro.job", "repro.worker")


def run_room_backs(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every import of a run room from a run room after it in RUN_ROOMS: (importer's room, imported room)."""
    order = {room: i for i, room in enumerate(RUN_ROOMS)}
    return sorted({(room_of(me)[1], room_of(t)[1]) for me, ts in edges.items() for t in ts
                   if room_of(me)[1] in order and room_of(t)[1] in order
                   and order[room_of(t)[1]] < order[room_of(me)[1]]})


def test_the_run_rooms_import_one_way_loop_then_job_then_worker():
    edges = source_graph()
    assert run_room_backs(edges) == []
    between = {(room_of(me)[1], room_of(t)[1]) for me, ts in edges.items() for t in ts
               if {room_of(me)[1], room_of(t)[1]} <= set(RUN_ROOMS) and room_of(me)[1] != room_of(t)[1]}
    assert ("repro.loop", "repro.job") in between and ("repro.job", "repro.worker") in between  # the rooms do meet
    planted = {**edges, "repro.worker.planted": {"repro.job.job"}, "repro.job.planted": {"repro.loop.sweep"}}
    assert run_room_backs(planted) == [("repro.job", "repro.loop"), ("repro.worker", "repro.job")]


def test_every_module_has_a_floor():
    assert all(room_of(m) for m in source_graph())


def test_the_checks_see_a_climb_and_a_circle():
    sources = {"repro.ledger.probe": "from repro.report import comparison\n",
               "repro.report.comparison": "def f():\n    from repro.ledger import probe\n",
               "repro.flat": "import repro.hashing\n", "repro.hashing": "from repro import flat\n"}
    edges = graph(sources)
    assert climbs(edges) == {("repro.ledger.probe", "repro.report.comparison"): 3}
    assert sorted(circles(edges)) == [["repro.flat", "repro.hashing"], ["repro.ledger.probe", "repro.report.comparison"]]


def _host_reads(source: str) -> set[str]:
    """The attributes `source` reads of a sweep's host: `host.X`, `self.host.X`."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id == "host":
                out.add(node.attr)
            elif isinstance(owner, ast.Attribute) and owner.attr == "host":
                out.add(node.attr)
    return out


def test_the_sweep_host_declares_everything_its_jobs_and_policies_read():
    """job/host.py's JobHost is the whole of what a job and a policy may ask of their sweep, typed
    (no Any), and the Session (session.py) provides every name of it."""
    from repro.job.host import JobHost

    declared = set(JobHost.__annotations__) | {n for n in vars(JobHost) if not n.startswith("_")}
    readers = ("repeats.py", "calibrate.py", "replay.py", "loop/sweep.py", "job/job.py")
    read = set().union(*(_host_reads((SRC / name).read_text()) for name in readers))
    assert read and read <= declared, sorted(read - declared)
    host = (SRC / "job" / "host.py").read_text()
    assert "Any" not in {n.id for n in ast.walk(ast.parse(host)) if isinstance(n, ast.Name)}
    session = ast.parse((SRC / "session.py").read_text())
    provided = {t.attr for n in ast.walk(session) if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                for t in (t.elts if isinstance(t, ast.Tuple) else [t]) if isinstance(t, ast.Attribute)}
    provided |= {n.name for n in ast.walk(session) if isinstance(n, ast.FunctionDef)}
    assert declared - provided == set(), sorted(declared - provided)


if __name__ == "__main__":
    edges = source_graph()
    room_edges = rooms(edges)
    print(f"modules {len(edges)}, rooms {len(room_edges)}, floors {len(FLOORS)}, "
          f"room arrows {sum(map(len, room_edges.values()))}, module arrows {sum(map(len, edges.values()))}")
    print(f"climbs {len(climbs(edges))}:", *(f"  {a} -> {b}" for a, b in sorted(climbs(edges))), sep="\n")
    print(f"circles {len(circles(edges))} between modules, {len(circles(room_edges))} between rooms:",
          *(f"  {' <-> '.join(c)}" for c in circles(edges) + circles(room_edges)), sep="\n")
