"""What `ledger verify` found good last time, so a file unchanged since is not read again.

Where: `<ledger>/.index/verified.json`, beside the index (git-ignored, derived, deleted at any
time: then every file is read again). For each file that passed every check it holds the file's
size, mtime, ctime and inode when it was read, the sha256 of its bytes, and what the
whole-ledger checks need of the record (verify.KEPT).

A file is trusted without reading while all four stat values are as they were: a change to its
bytes changes its ctime, which no program can set back (touch, utime and git set mtime only).
A file whose stat changed (rewritten by a git checkout, copied, tampered with) is read and its
bytes hashed: bytes that hash to a digest verified before (the same content) need no parse,
schema check or content hash; any other bytes are checked in full. A file changed within
RACY_NS of being read is not trusted by its stat next time (its clock tick may not be over).
The cache is dropped whole when the checks themselves change (`CHECKER`: the schema and what is
kept). `repro ledger verify --full` reads and checks every file whatever the cache says.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from repro.ledger import recordfile, schema
from repro.ledger.index import FOLDER, RACY_NS, newest, save_derived

FILE = "verified.json"
FORMAT = 1
DIGEST_LEN = 32  # hex digits of sha256 over the file's bytes


def checker_id(kept: tuple[str, ...]) -> str:
    """Changes whenever what a verification checks or keeps changes: a cache of another is dropped."""
    return hashlib.sha256(recordfile.dump_compact([FORMAT, schema.SCHEMA, list(kept)])).hexdigest()[:16]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:DIGEST_LEN]


def stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


class Cache:
    def __init__(self, root: Path, kept: tuple[str, ...]):
        self.path = root / FOLDER / FILE
        self.checker = checker_id(kept)
        self.segments: dict[str, int] | None = None  # the travelling index as the last check left it covering all
        self.files: dict[str, list] = self._load()  # name -> [size, mtime_ns, ctime_ns, ino, digest, kept]

    def trusted(self, stats: dict[str, os.stat_result]) -> dict[str, dict]:
        """name -> kept fields of each file unchanged since it passed (by its stat)."""
        out = {}
        files = self.files
        for name, st in stats.items():
            old = files.get(name)
            if (old is not None and old[0] == st.st_size and old[1] == st.st_mtime_ns and old[2] == st.st_ctime_ns
                    and old[3] == st.st_ino):
                out[name] = old[5]
        return out

    def by_digest(self) -> dict[str, tuple[dict, None]]:
        """digest -> (kept fields, no summary), of every file that passed: bytes seen before need no checks."""
        return {v[4]: (v[5], None) for v in self.files.values()}

    def save(self, stats: dict[str, os.stat_result], trusted: dict[str, dict],
             passed: dict[str, tuple[str, dict]], now_ns: int, segments: dict[str, int] | None = None) -> None:
        """Keep the files that passed: those `trusted` as they were, those read now (`passed`:
        name -> (digest, kept)) with their stat as read, unless changed within RACY_NS of `now_ns`.
        `segments`: the travelling index's files (name -> size) once they cover every file kept."""
        if not passed and len(trusted) == len(self.files) and segments == self.segments:
            return  # nothing read, nothing gone: the cache is as it was
        old = self.files
        files = {name: old[name] for name in trusted}
        if passed and now_ns - newest(list(map(stats.__getitem__, passed))) >= RACY_NS:  # none racy: one pass, no test each
            files.update({name: [(st := stats[name]).st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, d, kept]
                          for name, (d, kept) in passed.items()})
        else:
            for name, (d, kept) in passed.items():
                st = stats[name]
                key = stat_key(st) if now_ns - max(st.st_mtime_ns, st.st_ctime_ns) >= RACY_NS else [-1, 0, 0, 0]
                files[name] = [*key, d, kept]
        save_derived(self.path, {"format": FORMAT, "checker": self.checker, "files": files,
                                 "segments": segments})  # else: all read again

    def _load(self) -> dict[str, list]:
        try:
            saved = recordfile.parse_json(self.path.read_bytes())
            if saved.get("format") == FORMAT and saved.get("checker") == self.checker:
                files = saved["files"]
                if all(isinstance(v, list) and len(v) == 6 and isinstance(v[4], str) and isinstance(v[5], dict)
                       and isinstance(v[5].get("id"), str) for v in files.values()):
                    segments = saved.get("segments")
                    self.segments = segments if isinstance(segments, dict) else None
                    return files
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            pass  # missing, corrupt, another format or another checker: every file is read
        return {}
