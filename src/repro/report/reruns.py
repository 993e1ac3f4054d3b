"""Runs a rerun replaced: the sweep loop (loop/sweep.py) runs a round again when telemetry
flagged it, and the new round's records name the runs they replace (`repeat.replaces`). The
ledger keeps both (it is append-only); every view of a sweep reads the new ones only."""

from __future__ import annotations

from repro.ledger.record import view


def replaced(records: list[dict]) -> set[str]:
    """The ids some record of `records` replaces."""
    return {i for r in records for i in view(r).repeat.replaces}


def kept(records: list[dict]) -> list[dict]:
    """`records` without the runs a rerun replaced."""
    gone = replaced(records)
    return [r for r in records if r.get("id") not in gone] if gone else list(records)


def rerun_rounds(records: list[dict]) -> int:
    """How many rounds were run again (one count per rerun attempt of a round)."""
    return len({(view(r).sweep.id, view(r).repeat.index, view(r).repeat.rerun) for r in records if view(r).repeat.rerun})
