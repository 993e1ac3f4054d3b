"""A series and the changes found in it: what the table, the plot, `--json` and the CI gate read.

Each change names the records on either side of it (the last run before, the first after): the
two a `repro bisect GOOD BAD` starts from (bisect is its own command; this only prints it).
`newest_slowdown` is what `--fail-on-regression PCT` gates on: per series, its newest change,
when that one is a slowdown larger than PCT % (its step's point estimate; the change itself
already passed the permutation test at p <= alpha).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from repro.history import changepoints
from repro.history.changepoints import Change
from repro.history.series import Point, Series

ID_CHARS = 12  # a record id prefix in a printed command (ids are 16 hex digits)


@dataclass(frozen=True)
class Found:
    series: Series
    changes: tuple[Change, ...]

    def around(self, change: Change) -> tuple[Point, Point]:
        """(the last point before the change, the first after it)."""
        return self.series.points[change.index - 1], self.series.points[change.index]

    def bisect(self, change: Change, ledger: str | None = None) -> str:
        """The command that looks for the cause: `repro bisect <before> <after>` (+ `--ledger` where
        the history was read from another ledger than the default)."""
        good, bad = self.around(change)
        extra = f" --ledger {shlex.quote(ledger)}" if ledger else ""
        return f"repro bisect {good.id[:ID_CHARS]} {bad.id[:ID_CHARS]}{extra}"

    def to_dict(self, ledger: str | None = None) -> dict:
        s = self.series
        return {"model": s.model, "label": s.label, "config_hash": s.config_hash, "hardware": s.hardware,
                "mode": s.mode, "points": [p.to_dict() for p in s.points],
                "changes": [{**c.to_dict(), "before_id": self.around(c)[0].id, "after_id": self.around(c)[1].id,
                             "finished": self.around(c)[1].finished, "bisect": self.bisect(c, ledger)}
                            for c in self.changes]}


def analyse(series: list[Series], alpha: float = changepoints.ALPHA,
            min_segment: int = changepoints.MIN_SEGMENT) -> list[Found]:
    return [Found(s, tuple(changepoints.changes(s.values(), alpha=alpha, min_segment=min_segment)))
            for s in series]


def percent(ratio: float) -> str:
    """A step in words: "9.8 % slower", "4.1 % faster"."""
    return f"{(ratio - 1) * 100:.1f} % slower" if ratio >= 1 else f"{(1 - ratio) * 100:.1f} % faster"


def newest_slowdown(found: list[Found], pct: float) -> list[tuple[Found, Change]]:
    """The series whose newest change is a slowdown larger than `pct` %, with that change."""
    return [(f, f.changes[-1]) for f in found if f.changes and f.changes[-1].ratio > 1 + pct / 100]
