"""The ledger invariant checks, re-exported for tests.

They are defined in :mod:`treasury_core.ledger.invariants`, where production code
(``treasury ledger verify``) shares them; this module keeps the testing kit's import path.
"""

from __future__ import annotations

from treasury_core.ledger.invariants import (
    InvariantViolation,
    LedgerSnapshot,
    check_history,
    check_invariants,
    check_snapshot,
    history_violations,
    ledger_violations,
    read_ledger,
    wallet_history_violations,
)

__all__ = [
    "InvariantViolation",
    "LedgerSnapshot",
    "check_history",
    "check_invariants",
    "check_snapshot",
    "history_violations",
    "ledger_violations",
    "read_ledger",
    "wallet_history_violations",
]
