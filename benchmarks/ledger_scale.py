"""The ledger at scale: `repro ledger list`, `verify`, `compare --experiment` and
`report --experiment` over 100,000 records, through the real CLI.

    .venv/bin/python benchmarks/ledger_scale.py [--records 100000] [--repeats 1] [--against REV]

Makes N realistic records in a temp dir: copies of the repo's shipped `ledger/` run records (its
`started` and `ok` pairs), each pair with its own creation time (spread over 30 date folders),
sweep (20 jobs a sweep, as stack_wars writes), experiment (one of EXPERIMENTS) and seed,
chained `started` -> `ok` as real runs are, written the way `Ledger.append` writes them
(canonical content hash as the id and file name, indent 1, sorted keys), over every core.
Then it times each command as a subprocess (`python -m repro ...`, so its imports count; output
to /dev/null), as wall seconds and as CPU seconds (user + system of the command and its forked
workers: less moved by other load than the wall). The first `list` of a ledger builds its index
(`<ledger>/.index/files.json`) and the first `verify` reads every file (no `verified.json` yet):
both are printed apart ("first", "cold"); the others are the median of `--repeats` runs.
`--against REV` extracts REV's `src/` with `git archive` and times the same commands with that
code on the same records in the same run (the shared 2-core machine's figures move by ±30 %
from minute to minute under the others' load: compare the ratio). Target: each ≤ 5 s over
100,000 records. A benchmark, not a test: exit 0 either way.

`--clone` measures what a clone, a new machine or a CI job meets: the records committed to a git
repo (with the travelling index `.checked/` that this tree's `ledger verify` writes, committed
too), and each command's first run ("cold") on a fresh `git clone` of it (no `.index/`), then
its second run there ("warm"); wall and CPU seconds, and the load average when each was taken.
`--profile` profiles the cold `verify` and `list` of a fresh clone in one process (no forked
workers) with cProfile and splits their CPU time: reading the files (open, read, stat, listing
folders), sha256, JSON parse, schema check, content hash (the canonical dump), repro's own (the
rest); with the floor of reading and hashing every file alone.
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import datetime, timedelta, timezone
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from repro.ledger import Ledger, recordfile, record_id  # noqa: E402

TARGET_S = 5.0
EXPERIMENTS = ("stack_wars", "seed_study", "vit_scaling", "quickstart", "gemm_roofline")
JOBS = 20  # runs a sweep


def shipped_pairs() -> list[tuple[dict, dict]]:
    records = list(Ledger(ROOT / "ledger").records())
    by_id = {r["id"]: r for r in records}
    return [(by_id[r["prev"]], r) for r in records if r.get("prev") in by_id and r.get("kind") == "run"]


def write(root: Path, body: dict) -> dict:
    body = {k: v for k, v in body.items() if k != "id"}
    body["id"] = record_id(body)
    folder = root / body["created"][:10]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{body['id']}.json").write_bytes(recordfile.dumps(body))
    return body


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _make_runs(job: tuple[Path, int, range]) -> None:
    root, n, runs = job
    pairs = shipped_pairs()
    t0 = datetime(2026, 10, 1, tzinfo=timezone.utc)
    for i in runs:
        started, ok = copy.deepcopy(pairs[i % len(pairs)])
        when = t0 + timedelta(minutes=i * 30 * 24 * 60 // max(1, n), seconds=i % 60)
        sweep = {**started["sweep"], "id": _iso(t0 + timedelta(minutes=i // JOBS * JOBS * 30 * 24 * 60 // max(1, n))),
                 "job": i % JOBS, "experiment": EXPERIMENTS[i // JOBS % len(EXPERIMENTS)]}
        for r in (started, ok):
            r["sweep"] = sweep
            r["config"]["run"]["seed"] = i
        started["created"] = _iso(when)
        started = write(root, started)
        ok["created"] = _iso(when + timedelta(seconds=4))
        ok["prev"] = started["id"]
        write(root, ok)  # its results as recorded: a step time series and its median that agree


def make_ledger(root: Path, n: int) -> None:
    """n records (n/2 runs of two records each), split over the usable cores."""
    runs = n // 2
    workers = len(os.sched_getaffinity(0))
    chunks = [(root, runs, range(k, runs, workers)) for k in range(workers)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_make_runs, chunks)


def timed(src: Path, ledger: Path, args: list[str]) -> tuple[float, float] | None:
    """(wall seconds, CPU seconds of the command and its children) of one `repro ...`; None
    when that code has no such command or option (an older REV)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "repro", *args, "--ledger", str(ledger)],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:  # no figure for it; the others are still measured
        if "unrecognized arguments" not in proc.stderr:
            print(f"repro {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return elapsed, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _median(runs: list) -> tuple[float, float] | None:
    runs = [r for r in runs if r is not None]
    return (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)) if runs else None


def measure(src: Path, ledger: Path, repeats: int, out_dir: Path) -> dict[str, tuple[float, float] | None]:
    experiment = EXPERIMENTS[0]
    cache = ledger / ".index" / "verified.json"
    shutil.rmtree(ledger / ".index", ignore_errors=True)
    out = {"ledger list, first (builds the index)": timed(src, ledger, ["ledger", "list"])}
    cache.unlink(missing_ok=True)
    out["ledger verify, cold (reads every file)"] = timed(src, ledger, ["ledger", "verify"])
    commands = {
        "ledger list": ["ledger", "list"],
        "ledger list --json": ["ledger", "list", "--json"],
        "ledger verify (warm)": ["ledger", "verify"],
        "ledger verify --full": ["ledger", "verify", "--full"],
        f"compare --experiment {experiment}": ["compare", "--experiment", experiment],
        f"report --experiment {experiment}": ["report", "--experiment", experiment, "--out", str(out_dir)],
    }
    for name, args in commands.items():
        out[name] = _median([timed(src, ledger, args) for _ in range(repeats)])
    return out
def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), "-c", "user.email=bench@repro", "-c", "user.name=bench",
                           "-c", "gc.auto=0", *args],  # no gc in the background: a clone would race it
                          check=True, capture_output=True, text=True).stdout


def make_origin(ledger: Path) -> Path:
    """The ledger as a git repo whose last commit holds its records and the travelling index that
    this tree's `ledger verify` writes: what a user pushes."""
    if not (ledger / ".git").exists():
        _git(ledger, "init", "-q", "-b", "main")
        _git(ledger, "add", "-A")
        _git(ledger, "commit", "-qm", "records")
    timed(ROOT / "src", ledger, ["ledger", "verify"])  # writes .checked/ (or brings it up to date)
    _git(ledger, "add", "-A")
    if _git(ledger, "status", "--porcelain"):
        _git(ledger, "commit", "-qm", "the travelling index")
    _git(ledger, "repack", "-adq")  # packed, as a repo that was pushed and fetched is
    return ledger


def _load() -> float:
    return os.getloadavg()[0]


def measure_clones(src: Path, origin: Path, tmp: Path) -> dict[str, tuple[float, float, float] | None]:
    """Each command cold on a fresh clone, then warm: (wall s, CPU s, load average)."""
    out = {}
    for name, args in (("verify", ["ledger", "verify"]), ("list", ["ledger", "list"])):
        clone = tmp / f"clone-{name}"
        shutil.rmtree(clone, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
        for when in ("cold", "warm"):
            load = _load()
            got = timed(src, clone, args)
            out[f"ledger {name}, {when}"] = (*got, load) if got else None
        shutil.rmtree(clone, ignore_errors=True)
    return out


BUCKETS = (("reading the files (open, read, stat, listing)", ("io.open", "readall", "'read' of", "stat", "scandir",
                                                              "listdir", "__exit__", "posix.")),
           ("sha256", ("sha256", "hexdigest")),
           ("JSON parse", ("orjson.loads", "json/decoder", "json.loads")),
           ("schema check", ("ledger/schema.py",)),
           ("content hash (canonical dump)", ("orjson.dumps", "content_id", "json/encoder")))


def steps(clone: Path) -> list[tuple[str, float]]:
    """The work a cold check does per file, step upon step, each timed alone over every record
    file in this process (CPU s; no profiler): what reading and hashing cost, and what parsing,
    the schema and the content hash add to it."""
    import hashlib

    from repro.ledger import recordfile, schema
    from repro.ledger.index import record_files

    names = [n for n, st in record_files(clone) if not isinstance(st, str)]
    paths = [f"{clone}/{n}" for n in names]

    def read(p):
        with open(p, "rb", buffering=0) as f:
            return f.readall()

    work = {"list and stat every file": lambda: list(record_files(clone)),
            "+ read every file": lambda: [read(p) for p in paths],
            "+ sha256 of its bytes": lambda: [hashlib.sha256(read(p)).digest() for p in paths],
            "+ JSON parse": lambda: [(hashlib.sha256(d := read(p)).digest(), recordfile.parse(d)) for p in paths],
            "+ schema check": lambda: [(hashlib.sha256(d := read(p)).digest(), schema.errors(recordfile.parse(d)))
                                       for p in paths],
            "+ content hash (canonical dump, sha256)": lambda: [
                (hashlib.sha256(d := read(p)).digest(), schema.errors(r := recordfile.parse(d)),
                 recordfile.content_id(r, d)) for p in paths]}
    out = []
    for label, fn in work.items():  # the least of 3 (of 1 past 20,000 files): the machine is shared
        times = []
        for _ in range(3 if len(paths) <= 20_000 else 1):
            t = time.process_time()
            fn()
            times.append(time.process_time() - t)
        out.append((label, min(times)))
    return out


def profile_clone(origin: Path, tmp: Path) -> None:
    """The cold `verify` and `list` of a fresh clone, in this process (no forked workers), with and
    without its travelling index: their CPU time against `steps`, and where cProfile (CPU timer: it
    adds its own cost to each call) finds the rest."""
    import cProfile
    import importlib
    import pstats

    from repro.ledger import listing

    verify_module = importlib.import_module("repro.ledger.verify")  # `repro.ledger.verify` is also a function's name
    verify_module.PARALLEL_FROM = 1 << 60  # one process: the profile sees every call
    first = True
    for name, travelling in (("verify", True), ("list", True), ("verify", False), ("list", False)):
        clone = tmp / f"profile-{name}"
        shutil.rmtree(clone, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
        if first:
            print(f"cold work per file, step upon step (each line: all the work above it and its own), over every "
                  f"record file, one process (CPU s; load {_load():.1f}):")
            for label, secs in steps(clone):
                print(f"  {label:<48} {secs:6.2f} s")
            first = False

        def command():
            ledger = Ledger(clone)
            if name == "verify":
                ledger.check()
            else:
                listing.rows(ledger, ledger.head_entries(), states=True)

        cpu = []
        for profiled in (False, True):
            shutil.rmtree(clone / ".index", ignore_errors=True)
            if not travelling:  # as before the travelling index: every file parsed and checked
                shutil.rmtree(clone / ".checked", ignore_errors=True)
            prof = cProfile.Profile(time.process_time) if profiled else None
            load, t = _load(), time.process_time()
            if prof:
                prof.runcall(command)
            else:
                command()
            cpu.append(time.process_time() - t)
        stats = pstats.Stats(prof).stats
        split = dict.fromkeys([b for b, _ in BUCKETS] + ["repro's own (the rest)"], 0.0)
        rest = []
        for (file, line, func), (_, calls, tottime, _, _) in stats.items():
            where = f"{file}:{func}"
            bucket = next((b for b, keys in BUCKETS if any(k in where for k in keys)), "repro's own (the rest)")
            split[bucket] += tottime
            if bucket.startswith("repro's own"):
                rest.append((tottime, calls, f"{Path(file).name}:{line}({func})"))
        total = sum(split.values())
        print(f"cold ledger {name} of a fresh clone {'with' if travelling else 'WITHOUT'} its .checked/, one process: "
              f"{cpu[0]:.2f} s CPU ({cpu[1]:.2f} s under cProfile; load {load:.1f}); cProfile's shares:")
        for bucket, secs in split.items():
            print(f"  {bucket:<48} {100 * secs / total:5.1f} %")
        print("    the rest's largest: " + "; ".join(f"{w} {t:.2f} s ({n} calls)" for t, n, w in sorted(rest)[::-1][:6]))
        shutil.rmtree(clone, ignore_errors=True)


def clones(codes: dict[str, Path], origin: Path, tmp: Path, profile: bool) -> None:
    figures = {label: measure_clones(src, origin, tmp) for label, src in reversed(codes.items())}
    print(f"{'wall s (CPU s) [load]':<24}" + "".join(f"{label:>28}" for label in codes))
    for key in figures["this tree"]:
        cells = [figures[label][key] for label in codes]
        print(f"{key:<24}" + "".join(f"{c[0]:>10.2f} ({c[1]:5.2f}) [{c[2]:4.1f}]" if c else f"{'n/a':>28}"
                                       for c in cells))
    if profile:
        profile_clone(origin, tmp)


def extract_src(rev: str, into: Path) -> Path:
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    return into / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--against", metavar="REV", help="also time the code of this git revision (e.g. 077c32b)")
    ap.add_argument("--clone", action="store_true", help="cold = the first command on a fresh git clone (see above)")
    ap.add_argument("--profile", action="store_true", help="with --clone: where a cold command's CPU time goes")
    ap.add_argument("--origin", type=Path, help="a ledger made before (with --clone: a git repo of one, used in place)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ledger-scale-") as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        ledger = args.origin if args.origin and args.clone else tmp / "ledger"  # an origin is used in place
        if args.origin and not args.clone:
            shutil.copytree(args.origin, ledger, symlinks=True)
        elif not args.origin:
            make_ledger(ledger, args.records)
        count = sum(1 for p in ledger.glob("*/*.json") if not p.parent.name.startswith("."))
        print(f"{count} records in {ledger} (made in {time.perf_counter() - t:.1f} s); "
              f"median of {args.repeats}; target ≤ {TARGET_S:.1f} s; load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores", flush=True)
        codes = {"this tree": ROOT / "src"}
        if args.against:
            codes[args.against] = extract_src(args.against, tmp / "before")
        if args.clone:
            clones(codes, make_origin(ledger), tmp, args.profile)
            return
        figures = {}
        for label, src in reversed(codes.items()):  # the older code first: it builds no index
            figures[label] = measure(src, tmp / "ledger", args.repeats, tmp / "report")
        width = max(map(len, figures["this tree"])) + 2
        print(f"{'wall s (CPU s)':<{width}}" + "".join(f"{label:>20}" for label in codes)
              + ("   wall ratio" if args.against else ""))
        for key in figures["this tree"]:
            cells = [figures[label][key] for label in codes]
            row = f"{key:<{width}}" + "".join(f"{c[0]:>11.2f} ({c[1]:5.2f})" if c else f"{'n/a':>20}" for c in cells)
            if args.against and cells[0] and cells[-1]:
                row += f"   x{cells[-1][0] / cells[0][0]:.1f} faster"
            wall = cells[0][0] if cells[0] else None
            print(row + ("" if wall is None or "first" in key or "cold" in key or "--full" in key
                         else "  PASS" if wall <= TARGET_S else "  FAIL"))
        print(f"load average now: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")

if __name__ == "__main__":
    main()
