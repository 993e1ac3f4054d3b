"""User text is data: what a user typed or named (override values, run names, paths, error reasons)
is rendered through these and nothing else, so that it prints as typed: never read as rich
markup, never an escape sequence that recolours, moves or retitles the terminal. On the lowest
floor, without rich at import (the command line's own errors use `shown`)."""

from __future__ import annotations

import re

# An escape sequence (CSI `ESC [ ... m`, OSC `ESC ] ... BEL`, a two-byte ESC x), then any other C0 or
# C1 control character but a tab and a newline (a carriage return rewrites the line it is on).
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -~]?)|\x9b[0-?]*[ -/]*[@-~]?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: object) -> str:
    """User text (an override's value, a run's name, a path, an error's reason) as a terminal or a
    page may show it: escape sequences and control characters left out (a tab and a newline kept).
    The ledger keeps the value exactly; only what is rendered is cleaned."""
    return _CONTROL.sub("", _ESCAPE.sub("", str(text)))


def shown_rows(rows: list[list[str]]) -> list[list[str]]:
    """`shown` of every cell of a table of strings. One search over all of them first: every
    escape sequence starts with a control character, so where there is none (nearly always) each
    cell is shown as it is, and 50,000 rows of 9 cells cost one scan of their text, not 900,000
    substitutions (0.8 s)."""
    if _CONTROL.search("".join(["".join(r) for r in rows])) is None:
        return rows
    return [[shown(c) for c in r] for r in rows]


def markup(text: object) -> str:
    """User text to put inside a rich markup string (`f"[bold]{markup(name)}[/]"`): `shown`, its
    square brackets escaped, so that a value holding `[/]` or `[red]` prints as typed. The one way
    user text reaches rich: elsewhere as `plain(...)` (a Text, never parsed) or `shown` with markup=False."""
    from rich.markup import escape

    return escape(shown(text))


def plain(text: object, style: str = ""):
    """User text as a rich Text (a table cell, a title): never read as markup nor as an emoji code."""
    from rich.text import Text

    return Text(shown(text), style=style)


def duration(seconds: float) -> str:
    """4.1 s, 52 s, 3 min 20 s, 1 h 05 min."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    h, m, sec = s // 3600, s // 60 % 60, s % 60
    return f"{h} h {m:02d} min" if h else f"{m} min {sec:02d} s"
