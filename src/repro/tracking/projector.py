"""`python -m repro.tracking.projector LEDGER`: the ledger's pending entries into MLflow.

Started detached by a session at its close (tracking/handoff.py), after the last worker's
measured steps, so MLflow's import (~2.7 s), its store opening (~1.7 s) and its writes cost
the person at the terminal nothing and run beside no measured step; run inline, bounded, at
the end of a round whose process a launcher started (submitit, SLURM: `handoff.drain_inline`).
One projector per ledger at a time (a lock). What it writes, and how, is tracking/drain.py's:
the same code `repro sync` runs.
"""

from __future__ import annotations

import sys
import time

from repro.tracking import drain, handoff


def main(argv: list[str]) -> int:
    """`LEDGER [LOCK_FD]`: LOCK_FD is the ledger's lock file as the session opened it (and locked it
    where it was free; taking it again through the same open file is immediate)."""
    from repro.console import guard_streams

    guard_streams()  # its log: redacted lines (a store's error names its URI, credentials and all)
    ledger_root = argv[0]
    start = time.time()
    if len(argv) > 1:
        import fcntl

        fcntl.flock(int(argv[1]), fcntl.LOCK_EX)
        with handoff.at_work(ledger_root):
            counts = drain.drain(ledger_root)
    else:
        with handoff.lock(ledger_root), handoff.at_work(ledger_root):
            counts = drain.drain(ledger_root)
    print(f"repro projector {time.strftime('%Y-%m-%dT%H:%M:%S')}: {counts['pushed']} run(s) and "
          f"{counts['sweeps']} sweep(s) into MLflow, {counts['left']} left, {time.time() - start:.1f} s")
    return 1 if counts["left"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
