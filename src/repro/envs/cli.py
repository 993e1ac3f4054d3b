"""`repro env list | show HASH | prune`: the cached venvs and worktrees of replays and version sweeps."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from repro.envs import cache, lock, venvs, worktrees


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def entries() -> list[dict]:
    out = []
    for path in sorted(cache.venvs().glob("*")) if cache.venvs().is_dir() else []:
        if path.is_dir():
            meta = venvs.info(path) or {}
            out.append({"kind": "venv", "path": path, "name": (meta.get("env_hash") or path.name)[:16],
                        "note": (f"{meta.get('packages')} packages, python {meta.get('python')}"
                                 + (f", substitutes {meta['substitutes']}" if meta.get("substitutes") else "")
                                 if meta else "half-built (built again on next use)")})
    for path in sorted(cache.worktrees().glob("*")) if cache.worktrees().is_dir() else []:
        if path.is_dir():
            out.append({"kind": "worktree", "path": path, "name": path.name, "note": "code of commit " + path.name})
    for e in out:
        e["bytes"], e["used"] = cache.size(e["path"]), e["path"].stat().st_mtime
    return out


def cmd_list(args) -> int:
    rows = entries()
    if not rows:
        print(f"no cached environments under {cache.root()}")
        return 0
    for e in rows:
        print(f"{e['kind']:8}  {e['name']:16}  {_mib(e['bytes']):>10}  {e['note']}")
    uv_cache = Path.home() / ".cache" / "uv"
    print(f"{len(rows)} entries, {_mib(sum(e['bytes'] for e in rows))} under {cache.root()} "
          f"(venvs hard-link from uv's cache{', ' + _mib(cache.size(uv_cache)) + ' at ' + str(uv_cache) if args.sizes else ''})")
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
    print(f"environment {lock.env_hash(text)}  ({len(lock.parse(text)['requirements'])} distributions)")
    if venv:
        print(f"venv {venv} ({_mib(cache.size(venv))}): {venvs.info(venv)}")
    sys.stdout.write(text)
    return 0


def cmd_prune(args) -> int:
    cutoff = time.time() - args.older_than * 86400
    freed, gone = 0, 0
    for e in entries():
        if e["used"] <= cutoff:
            freed += e["bytes"]
            gone += 1
            (worktrees.remove if e["kind"] == "worktree" else cache.remove)(e["path"])
            print(f"removed {e['kind']} {e['name']} ({_mib(e['bytes'])})")
    print(f"pruned {gone} entries, {_mib(freed)} freed (uv's own cache: `python -m uv cache prune`)")
    return 0


def add_parser(sub, common) -> None:
    p = sub.add_parser("env", help="the cached venvs and worktrees of replays (--as-recorded) and version sweeps")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="list|show|prune")
    ls = verbs.add_parser("list", parents=[common], help="cached venvs and worktrees with their sizes")
    ls.add_argument("--sizes", action="store_true", help="also measure uv's own cache (slow on a large one)")
    ls.set_defaults(func=cmd_list)
    show = verbs.add_parser("show", parents=[common], help="an environment's lock (from the ledger's envs/ or the cache)")
    show.add_argument("hash", help="an environment hash or a prefix of it")
    show.set_defaults(func=cmd_show)
    prune = verbs.add_parser("prune", parents=[common], help="remove cached venvs and worktrees (rebuilt when next needed)")
    prune.add_argument("--older-than", type=float, default=0.0, metavar="DAYS",
                       help="only those unused for this many days (default 0: all)")
    prune.set_defaults(func=cmd_prune)
