"""The append-only, content-hashed, git-tracked record of every run attempt."""

from repro.ledger.schema import SCHEMA, SCHEMA_VERSION
from repro.ledger.state import RunState, state_of
from repro.ledger.store import Ledger, LedgerError, Problem, Recovery, Verification, record_id

__all__ = ["Ledger", "LedgerError", "Problem", "Recovery", "RunState", "SCHEMA", "SCHEMA_VERSION",
           "Verification", "record_id", "state_of"]
