"""The terminal console every command prints through (rich), on the lowest floor: the runner,
the ledger and the report all print, and none of them imports another's package for it.

`guard_streams` is where text leaves a repro process for its terminal, pipe or log: every line
is redacted (repro.redaction); a pipe whose reader went away (`repro ... | head -1`) takes the
rest of the output into /dev/null, as git's commands do, and fails nothing (a sweep goes on and
records everything); a terminal or pipe whose encoding lacks a glyph gets its ASCII fallback
(× → x, ⚠ → !, ─ → -), never a UnicodeEncodeError."""

from __future__ import annotations

import codecs
import os
import sys
from typing import TYPE_CHECKING

from repro.usertext import shown
from repro.redaction import redact

if TYPE_CHECKING:  # rich is imported where a console is made: `guard_streams`, a command's first act, needs none of it
    from rich.console import Console

# Off a terminal (a pipe, a log file, CI) rich assumes 80 columns and cuts wide tables
# ("1,315,575,8…"): there a table takes its natural width, as a log line does.
UNBOUNDED_WIDTH = 10_000
# The console a live progress display (report/progress.py) draws on, while it is live: what is
# printed meanwhile goes through it, above the live lines (rich redraws them below), never into them.
_live: list[Console] = []


def live(c: Console | None) -> None:
    """`c` is live from now on (None: no longer)."""
    _live[:] = [c] if c is not None else []

GLYPH_ERRORS = "repro-ascii-glyphs"
ASCII_GLYPHS = {
    "×": "x", "⚠": "!", "─": "-", "━": "-", "│": "|", "┃": "|", "┼": "+", "┬": "+", "┴": "+", "├": "+", "┤": "+",
    "┌": "+", "┐": "+", "└": "+", "┘": "+", "═": "=", "…": "...", "→": "->", "←": "<-", "↔": "<->", "≥": ">=",
    "≤": "<=", "≈": "~", "±": "+-", "·": ".", "•": "*", "–": "-", "—": "-", "✓": "v", "✔": "v", "✗": "x", "✘": "x",
    "µ": "u", "μ": "u", "°": "deg", "“": '"', "”": '"', "‘": "'", "’": "'", "▏": "|", "█": "#", "░": ".",
    "▕": "|", "╸": "-", "╺": "-", "σ": "sd", "Δ": "d", "\u00a0": " ",
}


def _ascii_fallback(err: UnicodeError):
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return "".join(ASCII_GLYPHS.get(c, "?") for c in err.object[err.start:err.end]), err.end


codecs.register_error(GLYPH_ERRORS, _ascii_fallback)


class GuardedStream:
    """A text stream (sys.stdout or sys.stderr) whose writes are redacted and never raise for a
    reader that went away: on EPIPE its file descriptor is pointed at /dev/null (so that what is
    still buffered, and whoever else holds the descriptor, writes into nothing) and `closed_by_reader`
    says so. Everything else (isatty, fileno, encoding) is the stream's own."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.closed_by_reader = False

    def write(self, text: str) -> int:
        try:
            self._stream.write(redact(text))
        except BrokenPipeError:
            self._reader_gone()
        except ValueError:  # closed under us (interpreter teardown): nothing to write to
            pass
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()
        except ValueError:
            pass

    def _reader_gone(self) -> None:
        self.closed_by_reader = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        try:
            self._stream.flush()  # what was buffered goes to /dev/null now
        except (OSError, ValueError):
            pass

    @property
    def buffer(self) -> "_GuardedBuffer":
        """The binary side (`ledger list --json` writes the record files' bytes, already redacted)."""
        return _GuardedBuffer(self)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _GuardedBuffer:
    def __init__(self, text: GuardedStream) -> None:
        self._text = text

    def write(self, data: bytes) -> int:
        try:
            self._text._stream.buffer.write(data)
        except BrokenPipeError:
            self._text._reader_gone()
        return len(data)

    def flush(self) -> None:
        try:
            self._text._stream.buffer.flush()
        except BrokenPipeError:
            self._text._reader_gone()

    def __getattr__(self, name):
        return getattr(self._text._stream.buffer, name)


def guard_streams() -> None:
    """Install GuardedStream on sys.stdout and sys.stderr (once; a process's entry point calls it).
    A standard descriptor that was closed (`repro ledger list >&-`) is opened on /dev/null first,
    so that no file this process opens later takes its number and receives its children's output."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_RDWR)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        if isinstance(stream, GuardedStream):
            continue
        if stream is None:
            stream = open(fd, "w", closefd=False, encoding="utf-8", errors=GLYPH_ERRORS)
        elif hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors=GLYPH_ERRORS)
            except (ValueError, OSError):
                pass
        setattr(sys, name, GuardedStream(stream))


def console() -> Console:
    """A terminal console, or, for pipes and logs, one wide enough that no table is cut
    (not even $COLUMNS squeezes it: shells and test runners export COLUMNS=80 to pipes)."""
    from rich.console import Console

    if _live:
        return _live[0]
    c = Console()
    return c if c.is_terminal else Console(width=UNBOUNDED_WIDTH)


def say(line: str) -> None:
    """One "repro: ..." notice on stderr. In a terminal it wraps at the terminal's width (at words;
    a path longer than the width is folded), as the closing table and verdicts do; in pipes and
    logs it stays one line. While a live progress display shows, it prints above it (through its console)."""
    from rich.console import Console

    err = _live[0] if _live else Console(stderr=True)
    if err.is_terminal:
        err.print(f"repro: {shown(line)}", markup=False, highlight=False, emoji=False)
    else:
        print(f"repro: {shown(line)}", file=sys.stderr)
