"""The ledger at scale: `repro ledger verify` and `repro ledger list --json` over 10,000 records.

    .venv/bin/python benchmarks/ledger_scale.py [--records 10000] [--repeats 3] [--against 077c32b]

Makes N realistic records in a temp dir: copies of the repo's shipped `ledger/` records (its
`started` and `ok` pairs), each pair with its own creation time (spread over 30 date folders),
sweep id, job, seed and steady time, chained `started` -> `ok` as real runs are, written the way
`Ledger.append` writes them (canonical content hash as the id and file name, indent 1, sorted
keys). Then it times both commands as subprocesses (`python -m repro ledger ...`, output to
/dev/null), the median of `--repeats` runs after one first run, as wall seconds and as CPU
seconds (user + system, the command's processes together: less moved by other load). The first `list` of a ledger
builds its index (`<ledger>/.index/`); it is printed apart ("first").
`--against REV` extracts REV's `src/` with `git archive` into a temp dir and times the same
commands with that code on the same records in the same run, so the two are compared under the
same load (the figures on the shared 2-core machine move by ±30 % from minute to minute; compare
the ratio). Target: each ≤ 2 s over 10,000 records. A benchmark, not a test: exit 0 either way.

Measured on the 2-core machine, 2026-11-23, other engineers' tests running beside it:
see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
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

from repro.ledger import Ledger, record_id  # noqa: E402

TARGET_S = 2.0


def shipped_pairs() -> list[tuple[dict, dict]]:
    records = list(Ledger(ROOT / "ledger").records())
    by_id = {r["id"]: r for r in records}
    return [(by_id[r["prev"]], r) for r in records if r.get("prev") in by_id]


def write(root: Path, body: dict) -> dict:
    body = {k: v for k, v in body.items() if k != "id"}
    body["id"] = record_id(body)
    folder = root / body["created"][:10]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{body['id']}.json", "w") as f:
        json.dump(body, f, indent=1, sort_keys=True, ensure_ascii=False, default=str)
        f.write("\n")
    return body


def make_ledger(root: Path, n: int) -> None:
    pairs = shipped_pairs()
    t0 = datetime(2026, 10, 1, tzinfo=timezone.utc)
    for i in range(n // 2):
        started, ok = copy.deepcopy(pairs[i % len(pairs)])
        when = t0 + timedelta(minutes=i * 30 * 24 * 60 // (n // 2), seconds=i % 60)
        sweep = {**started["sweep"], "id": f"bench-{i // 6:05d}", "job": i % 6}
        for r in (started, ok):
            r["sweep"] = sweep
            r["config"]["run"]["seed"] = i
        started["created"] = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        started = write(root, started)
        ok["created"] = (when + timedelta(seconds=4)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        ok["prev"] = started["id"]
        ok["results"]["steady_median_s"] *= 1 + (i % 97) / 1000
        write(root, ok)


def timed(src: Path, ledger: Path, args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children) of one `repro ledger ...`."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "repro", "ledger", *args, "--ledger", str(ledger)],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"repro ledger {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def measure(src: Path, ledger: Path, repeats: int) -> dict[str, tuple[float, float]]:
    out = {}
    for name, args in (("list --json", ["list", "--json"]), ("verify", ["verify"])):
        out[f"{name} first"] = timed(src, ledger, args)
        runs = [timed(src, ledger, args) for _ in range(repeats)]
        out[name] = (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
    return out


def extract_src(rev: str, into: Path) -> Path:
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    return into / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--against", metavar="REV", help="also time the code of this git revision (e.g. 077c32b)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ledger-scale-") as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        make_ledger(tmp / "ledger", args.records)
        count = sum(1 for _ in (tmp / "ledger").glob("*/*.json"))
        print(f"{count} records in {tmp / 'ledger'} (made in {time.perf_counter() - t:.1f} s); "
              f"median of {args.repeats} after a first run; target ≤ {TARGET_S:.1f} s")
        codes = {"this tree": ROOT / "src"}
        if args.against:
            codes[args.against] = extract_src(args.against, tmp / "before")
        figures = {}
        for label, src in reversed(codes.items()):  # the older code first: it builds no index
            figures[label] = measure(src, tmp / "ledger", args.repeats)
        print(f"{'wall s (CPU s)':<20}" + "".join(f"{label:>20}" for label in codes)
              + ("   wall ratio" if args.against else ""))
        for key in figures["this tree"]:
            row = f"{key:<20}" + "".join(f"{figures[label][key][0]:>11.2f} ({figures[label][key][1]:5.2f})"
                                         for label in codes)
            if args.against:
                row += f"   x{figures[args.against][key][0] / figures['this tree'][key][0]:.1f} faster"
            wall = figures["this tree"][key][0]
            print(row + ("" if key.endswith("first") else "  PASS" if wall <= TARGET_S else "  FAIL"))
        print(f"load average now: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")

if __name__ == "__main__":
    main()
