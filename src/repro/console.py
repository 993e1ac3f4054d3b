"""The terminal console every command prints through (rich), on the lowest floor: the runner,
the ledger and the report all print, and none of them imports another's package for it."""

from rich.console import Console

# Off a terminal (a pipe, a log file, CI) rich assumes 80 columns and cuts wide tables
# ("1,315,575,8…"): there a table takes its natural width, as a log line does.
UNBOUNDED_WIDTH = 10_000


def console() -> Console:
    """A terminal console, or, for pipes and logs, one wide enough that no table is cut
    (not even $COLUMNS squeezes it: shells and test runners export COLUMNS=80 to pipes)."""
    c = Console()
    return c if c.is_terminal else Console(width=UNBOUNDED_WIDTH)
