"""`repro env list | show HASH | prune | pack`: the cached venvs and worktrees of replays and version sweeps,
and packs of recorded environments for a machine with no index (envs.pack)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.envs import cache, lock, venvs, worktrees


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n < 10 * 2**20 else f"{n / 2**20:,.0f} MiB"


@dataclass(frozen=True)
class Entry:
    """One cached environment: a venv or a worktree, its size and when it was last used."""

    kind: str  # venv | worktree
    path: Path
    name: str
    note: str
    usage: Any = None  # cache.usage: own, shared, inodes
    used: float = 0.0  # cache.last_used


def entries() -> list[Entry]:
    out = []
    for path in sorted(cache.venvs().glob("*")) if cache.venvs().is_dir() else []:
        if path.is_dir():
            meta = venvs.meta_of(path)
            out.append(Entry("venv", path, ((meta and meta.env_hash) or path.name)[:16],
                             (f"{meta.packages} packages, python {meta.python}"
                              + (f", substitutes {meta.substitutes}" if meta.substitutes else "")
                              if meta else "half-built (built again on next use)")))
    for path in sorted(cache.worktrees().glob("*")) if cache.worktrees().is_dir() else []:
        if path.is_dir():
            out.append(Entry("worktree", path, path.name, "code of commit " + path.name))
    return [dataclasses.replace(e, usage=cache.usage(e.path), used=cache.last_used(e.path)) for e in out]


def _sizes(e: Entry) -> str:
    return f"{_mib(e.usage.own):>10} own  {_mib(e.usage.shared):>10} shared"


def _ago(t: float) -> str:
    days = (time.time() - t) / 86400
    return f"used {days:.1f} d ago" if days >= 1 else f"used {days * 24:.1f} h ago"


def cmd_list(args) -> int:
    rows = entries()
    if not rows:
        print(f"no cached environments under {cache.root()}")
        return 0
    for e in rows:
        print(f"{e.kind:8}  {e.name:16}  {_sizes(e)}  {_ago(e.used)}  {e.note}")
    own = sum(e.usage.own for e in rows)
    inodes = frozenset().union(*(e.usage.inodes for e in rows))
    uv_cache = cache.uv_cache_dir()
    uv_part = ""
    if args.sizes and uv_cache:
        uv_part = f"; uv's cache {uv_cache}: {_mib(cache.size(uv_cache))}"
    elif uv_cache:
        uv_part = f"; uv's cache: {uv_cache} (--sizes measures it)"
    print(f"{len(rows)} entries under {cache.root()}: {_mib(own)} their own (what `repro env prune --all` frees), "
          f"{len(inodes):,} files in all; \"shared\" is hard-linked from uv's cache or another venv, freed only "
          f"with it{uv_part}")
    return 0


def cmd_show(args) -> int:
    envs_dir = Path(args.ledger) / "envs"
    found = sorted(envs_dir.glob(f"{args.hash}*.txt")) if envs_dir.is_dir() else []
    if len(found) > 1:
        print(f"repro env show: {args.hash!r} names {len(found)} environments: give more of the hash", file=sys.stderr)
        return 2
    venv = next((p for p in (cache.venvs().glob(f"{args.hash[:16]}*") if cache.venvs().is_dir() else []) if p.is_dir()), None)
    if not found and not venv:
        print(f"repro env show: no environment {args.hash!r} in {envs_dir} nor in {cache.venvs()}: "
              "`repro env list` names the cached ones, a run record's environment.env_hash the recorded ones",
              file=sys.stderr)
        return 2
    try:
        text = lock.checked(found[0]) if found else (venv / "lock.txt").read_text()
    except lock.EditedLock as e:
        print(f"repro env show: {e}", file=sys.stderr)
        return 1
    print(f"environment {lock.env_hash(text)}  ({len(lock.parse(text).requirements)} distributions)")
    if venv:
        use = cache.usage(venv)
        print(f"venv {venv} ({_mib(use.own)} own, {_mib(use.shared)} shared with uv's cache): {venvs.info(venv)}")
    sys.stdout.write(text)
    return 0


def cmd_prune(args) -> int:
    """Remove entries unused for --older-than days (or --all); with neither, list what --all would remove."""
    rows = entries()
    if args.older_than is None and not args.all:
        for e in rows:
            print(f"would remove {e.kind} {e.name} ({_mib(e.usage.own)} own, {_ago(e.used)})")
        print(f"{len(rows)} entries, {_mib(sum(e.usage.own for e in rows))} would be freed; nothing removed: "
              "`repro env prune --all` removes them, `--older-than DAYS` those unused for that long")
        return 0
    cutoff = time.time() - (args.older_than or 0) * 86400
    freed, gone, kept = 0, 0, 0
    for e in rows:
        if e.used > cutoff:
            continue
        with cache.removable(e.path) as free:
            if not free:
                kept += 1
                print(f"kept {e.kind} {e.name}: in use by a running replay or sweep")
                continue
            now = cache.usage(e.path).own  # measured under the lock: what removing it frees now
            (worktrees.remove if e.kind == "worktree" else cache.remove)(e.path)
        freed += now
        gone += 1
        print(f"removed {e.kind} {e.name} ({_mib(now)} freed)")
    print(f"pruned {gone} entries, {_mib(freed)} freed" + (f", {kept} in use kept" if kept else "")
          + " (uv's own cache: `python -m uv cache prune`)")
    return 0


def cmd_pack(args) -> int:
    """Pack an environment (and its commit) for a target: a wheelhouse folder with its manifest."""
    from repro import paths
    from repro.envs import pack, runtime

    try:
        tgt = pack.target(args.python, args.platform)
        have = pack.read_have(args.have) if args.have else None
        if args.keep and not args.have:
            raise pack.PackError("--keep goes with --have (it names distributions the target has at another version)")
        keep = tuple(lock.normalise(k) for k in args.keep.split(",") if k) if args.keep else ()
        leave = tuple(lock.normalise(k) for k in (args.leave_out or "").split(",") if k)
        out = Path(args.out).resolve()
        pack.check_out(out, Path(args.ledger))  # refused before the first download: seconds, not minutes
        pack.check_python(args.python)
        repo = paths.repo_root()
        if args.dvc and not out.is_relative_to(repo):
            raise pack.PackError(f"--dvc: --out {out} is outside the repository {repo}: DVC tracks folders inside it "
                                 "(e.g. --out wheelhouses/NAME)")
        src = pack.source(Path(args.ledger), args.what, repo)
        max_size = runtime.parse_size(args.max_size) if args.max_size else None
        selection = None
        if args.runtime_only:  # what the parent and the worker import, for the target's Python (envs.runtime)
            import platform

            not_run, selection = runtime.select(src.locks, repo / "pyproject.toml",
                                                tgt.python or ".".join(platform.python_version_tuple()[:2]))
            leave += not_run
        if unknown := [n for n in leave if n not in set(pack.requirements(src.locks).values())
                       and n not in (selection or {}).get("left_out", ())]:
            raise pack.PackError(f"--leave-out {', '.join(unknown)}: no such distribution in {src.label} (a typo would "
                                 "pack what you meant to leave out): `repro env show HASH` lists its distributions")
        pack.check_indexes()
    except (pack.PackError, runtime.SelectionError) as e:
        print(f"repro env pack: {e}", file=sys.stderr)
        return 2
    import signal

    def terminated(signum, frame):  # SIGTERM ends the pack as Ctrl-C does: pip's session killed, nothing half-made
        raise KeyboardInterrupt("SIGTERM")

    before = signal.signal(signal.SIGTERM, terminated)
    try:
        manifest = pack.make(src, tgt, out, have, keep, repo, leave=leave, max_size=max_size, selection=selection)
    except (pack.PackError, runtime.SelectionError) as e:
        print(f"repro env pack: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        how = "SIGTERM" if e.args == ("SIGTERM",) else "Ctrl-C"
        print(f"repro env pack: interrupted ({how}): nothing was written to {out} and no download is left running",
              file=sys.stderr)
        return 143 if how == "SIGTERM" else 130
    finally:
        signal.signal(signal.SIGTERM, before)
    print("\n".join(pack.describe(manifest, out)))
    if args.dvc:
        import subprocess

        added = subprocess.run([sys.executable, "-m", "dvc", "add", str(out)], cwd=repo, capture_output=True, text=True)
        if added.returncode:
            print(f"repro env pack: dvc add {out} failed: {added.stderr.strip()[-400:]}", file=sys.stderr)
            return 1
        print(f"dvc: {out.name}.dvc beside it tracks the pack (`dvc push` publishes it with the data)")
    return 0


def days(text: str) -> float:
    """`--older-than`: a positive, finite number of days (-1, 0, nan and inf would remove everything
    or nothing, which `--all` or no prune says plainly)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of days (e.g. --older-than 30); "
                                         "every entry not in use: --all")
    return value


def add_parser(sub, common) -> None:
    p = sub.add_parser("env", help="the cached venvs and worktrees of replays (--as-recorded) and version sweeps")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="list|show|prune|pack")
    ls = verbs.add_parser("list", parents=[common], help="cached venvs and worktrees with their sizes")
    ls.add_argument("--sizes", action="store_true", help="also measure uv's own cache (slow on a large one)")
    ls.set_defaults(func=cmd_list)
    show = verbs.add_parser("show", parents=[common], help="an environment's lock (from the ledger's envs/ or the cache)")
    show.add_argument("hash", help="an environment hash or a prefix of it")
    show.set_defaults(func=cmd_show)
    prune = verbs.add_parser("prune", parents=[common], help="remove cached venvs and worktrees not in use (rebuilt when next needed); "
                                                 "without --all or --older-than: list what it would remove")
    prune.add_argument("--older-than", type=days, default=None, metavar="DAYS",
                       help="remove those unused for this many days (by last use)")
    prune.add_argument("--all", action="store_true", help="remove every entry not in use")
    prune.set_defaults(func=cmd_prune)
    pk = verbs.add_parser("pack", parents=[common], help="an environment and its commit as a wheelhouse folder, to "
                                                        "install with no index: replay --as-recorded --wheelhouse DIR")
    pk.add_argument("what", help="a record id, a sweep id, an environment hash (or prefixes), or `current` "
                                 "(the worker's environment now)")
    pk.add_argument("--out", required=True, help="the pack's folder (new or empty)")
    pk.add_argument("--python", help="the target's Python, MAJOR.MINOR (default: this interpreter's)")
    pk.add_argument("--platform", help="the target's platform tag, e.g. manylinux_2_28_x86_64 (default: this machine)")
    pk.add_argument("--have", help="the target's `pip list --format=freeze`: what it has at the lock's version is "
                                   "left out, what it has at another is named (and packed unless --keep)")
    pk.add_argument("--keep", help="with --have: comma-separated names (or `all`) whose target version stays "
                                   "(e.g. a GPU build of torch)")
    pk.add_argument("--leave-out", metavar="NAMES", help="comma-separated distributions not to pack (the target does not "
                                                          "need them, or cannot have them), named in the manifest")
    pk.add_argument("--runtime-only", action="store_true", help="only what the parent and a worker import at run time "
                    "(repro's dependencies and its run extras, closed over Requires-Dist; envs.runtime): no test, docs, "
                    "lint or replay tools; named in the manifest")
    pk.add_argument("--max-size", metavar="SIZE", help="refuse a pack over SIZE (e.g. 60MiB), naming its biggest wheels; "
                    "its size and largest wheels are printed before anything is written either way")
    pk.add_argument("--dvc", action="store_true", help="`dvc add` the pack (its --out inside the repository)")
    pk.set_defaults(func=cmd_pack)
