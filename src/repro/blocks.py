"""A record's (or a stream's) JSON object read as a typed block: a pure helper on the lowest floor,
beside flat.py. A block is a frozen dataclass whose fields name the keys it reads, each default
written once, in the dataclass; `typed` fills one from an object, so that no reader indexes the
object by string keys (the record's own blocks: ledger/record.py)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Mapping, TypeVar

T = TypeVar("T")


@functools.lru_cache(maxsize=None)
def names(kind: type) -> frozenset[str]:
    """The keys a block reads: its dataclass's field names."""
    return frozenset(f.name for f in dataclasses.fields(kind))


def typed(kind: type[T], node: Mapping | None) -> T | None:
    """`kind` from one JSON object: the fields it holds, the rest at their dataclass's defaults; keys the
    dataclass does not name are not read (they stay in the object). None for no object."""
    if node is None:
        return None
    known = names(kind)
    return kind(**{k: v for k, v in node.items() if k in known})
