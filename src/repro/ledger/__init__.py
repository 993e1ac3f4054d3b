"""The append-only, content-hashed, git-tracked record of every run attempt."""

from repro.ledger.store import Ledger, LedgerError, Problem, record_id

__all__ = ["Ledger", "LedgerError", "Problem", "record_id"]
