"""`repro ledger list`'s table: one row per run from the index (no record file is read but those
of `started` runs, whose state needs their parent), drawn line by line.

rich's Table measures and wraps every cell (~1 ms a row: 50 s for 50,000 runs); this draws the
same box (rich's HEAVY_HEAD) with columns at their natural width, in well under a second.
Where a terminal is narrower than the table, the widest columns are cut with "…" (off a
terminal, in pipes and logs, nothing is cut).
"""

from __future__ import annotations

from rich.cells import cell_len

from repro.ledger.index import Entry
from repro.ledger.state import state_of

COLUMNS = ("id", "created", "status", "kind", "experiment", "framework", "model", "steady ms", "config hash")
MIN_WIDTH = 4  # a column is never cut below this


def row(e: Entry, status: str) -> list[str]:
    return [e.id, e.created[:19], status, e.kind or "", e.experiment or "", e.framework or "",
            e.model if e.model is not None else "/", f"{e.steady_s * 1e3:.2f}" if e.steady_s else "-",
            (e.config_hash or "")[:12]]


CHANGED_MARK = "⚠ changed"  # a record edited after it was written (Ledger.changed): its figures are not its run's


def rows(ledger, entries: list[Entry], states: bool) -> list[list[str]]:
    """A row per entry; `states`: the run's state (lost, running...) for `started` heads, read
    from their record, else the status as recorded; a record edited after it was written is marked."""
    out, changed = [], ledger.changed()
    for e in entries:
        status = str(e.status)
        if states and e.status == "started" and (record := ledger.load(e)) is not None:
            status = str(state_of(record))
        out.append(row(e, f"{status} {CHANGED_MARK}" if e.id in changed else status))
    return out


def _width(text: str) -> int:
    return len(text) if text.isascii() else cell_len(text)


def _fit(text: str, width: int) -> str:
    """`text` padded to `width` cells, or cut to it with "…"."""
    w = _width(text)
    if w <= width:
        return text + " " * (width - w)
    while _width(text) > width - 1:
        text = text[:-1]
    return text + "…" + " " * (width - 1 - _width(text))


def widths(columns, body: list[list[str]], limit: int | None) -> list[int]:
    """Each column's natural width; within `limit` cells in all (box included), the widest cut first."""
    out = [_width(c) for c in columns]
    for i in range(len(out)):  # column by column: max() over a column is C, not a Python loop per cell
        cells = [r[i] for r in body]
        if cells:
            out[i] = max(out[i], max(map(len if all(map(str.isascii, cells)) else _width, cells)))
    if limit is not None:
        while sum(out) + 3 * len(out) + 1 > limit and max(out) > MIN_WIDTH:
            out[out.index(max(out))] -= 1
    return out


def lines(columns, body: list[list[str]], limit: int | None = None) -> tuple[list[str], list[str]]:
    """(the head: top, header and rule lines; the body lines and the bottom line)."""
    w = widths(columns, body, limit)
    natural = widths(columns, body, None) if limit is not None else w
    fit = [(lambda t, n=n: t + " " * (n - len(t)) if len(t) <= n and t.isascii() else _fit(t, n)) for n in w]
    head = ["┏" + "┳".join("━" * (n + 2) for n in w) + "┓",
            "┃" + "┃".join(f" {_fit(c, n)} " for c, n in zip(columns, w)) + "┃",
            "┡" + "╇".join("━" * (n + 2) for n in w) + "┩"]
    # An ASCII row of a table no column of which was cut: every cell fits, str.ljust pads it (one C
    # call per cell; the general `fit` measures each cell in Python: 0.4 s for 50,000 rows)
    uncut = w == natural
    ljust = str.ljust
    out = ["│ " + " │ ".join(map(ljust, r, w) if uncut and "".join(r).isascii() else map(lambda f, c: f(c), fit, r))
           + " │" for r in body]
    out.append("└" + "┴".join("─" * (n + 2) for n in w) + "┘")
    return head, out


def print_table(console, title: str, body: list[list[str]]) -> None:
    """The title, then the table: styled as rich styles a table's title and header on a terminal."""
    head, rest = lines(COLUMNS, body, console.width if console.is_terminal else None)
    console.print(title, style="italic" if console.is_terminal else None, markup=False, highlight=False,
                  crop=False, soft_wrap=True)
    console.print(head[0], markup=False, highlight=False, crop=False, soft_wrap=True)
    console.print(head[1], style="bold" if console.is_terminal else None, markup=False, highlight=False,
                  crop=False, soft_wrap=True)
    console.print(head[2], markup=False, highlight=False, crop=False, soft_wrap=True)
    console.file.write("\n".join(rest) + "\n")
    console.file.flush()
