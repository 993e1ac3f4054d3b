"""The terminal console every command prints through (rich), on the lowest floor: the runner,
the ledger and the report all print, and none of them imports another's package for it."""

import sys

from rich.console import Console

from repro.usertext import shown

# Off a terminal (a pipe, a log file, CI) rich assumes 80 columns and cuts wide tables
# ("1,315,575,8…"): there a table takes its natural width, as a log line does.
UNBOUNDED_WIDTH = 10_000
# The console a live progress display (report/progress.py) draws on, while it is live: what is
# printed meanwhile goes through it, above the live lines (rich redraws them below), never into them.
_live: list[Console] = []


def live(c: Console | None) -> None:
    """`c` is live from now on (None: no longer)."""
    _live[:] = [c] if c is not None else []


def console() -> Console:
    """A terminal console, or, for pipes and logs, one wide enough that no table is cut
    (not even $COLUMNS squeezes it: shells and test runners export COLUMNS=80 to pipes)."""
    if _live:
        return _live[0]
    c = Console()
    return c if c.is_terminal else Console(width=UNBOUNDED_WIDTH)


def say(line: str) -> None:
    """One "repro: ..." notice on stderr. In a terminal it wraps at the terminal's width (at words;
    a path longer than the width is folded), as the closing table and verdicts do; in pipes and
    logs it stays one line. While a live progress display shows, it prints above it (through its console)."""
    err = _live[0] if _live else Console(stderr=True)
    if err.is_terminal:
        err.print(f"repro: {shown(line)}", markup=False, highlight=False, emoji=False)
    else:
        print(f"repro: {shown(line)}", file=sys.stderr)
