"""Markdown's pipe table, the one way report pages draw a grid (report.md's sections)."""

from __future__ import annotations


def md_table(header: list[str], body: list[list[str]]) -> list[str]:
    clean = lambda cell: str(cell).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(clean(c) for c in row) + " |" for row in body])
