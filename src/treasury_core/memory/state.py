"""The in-memory storage's state and its transactions: every write records its undo, replayed
backwards on rollback (see :mod:`treasury_core.memory.storage`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from treasury_core.companies import ApiKey, Company, MerchantAccount
from treasury_core.dashboard_sessions import DashboardSession
from treasury_core.idempotency import IdempotencyRecord
from treasury_core.jobs import Job
from treasury_core.ledger import (
    Account,
    PendingMovement,
    Posting,
)
from treasury_core.memory import history as memory_history
from treasury_core.movements.records import TreasuryRecord
from treasury_core.notifications.deliveries import Delivery
from treasury_core.notifications.events import Event
from treasury_core.operators import OperatorKey
from treasury_core.payments.intents import PaymentIntent
from treasury_core.wallets import Wallet

_MISSING: Any = object()


@dataclass
class MemoryState:
    wallets: dict[str, Wallet] = field(default_factory=dict)
    accounts: dict[str, Account] = field(default_factory=dict)
    postings: list[Posting] = field(default_factory=list)
    posting_ids: dict[str, bool] = field(default_factory=dict)
    pendings: dict[str, PendingMovement] = field(default_factory=dict)
    histories: memory_history.Histories = field(default_factory=dict)
    companies: dict[int, Company] = field(default_factory=dict)
    merchant_accounts: dict[int, MerchantAccount] = field(default_factory=dict)
    api_keys: dict[str, ApiKey] = field(default_factory=dict)
    operator_keys: dict[str, OperatorKey] = field(default_factory=dict)
    dashboard_sessions: dict[str, DashboardSession] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    dispatched: dict[str, datetime] = field(default_factory=dict)
    deliveries: dict[str, Delivery] = field(default_factory=dict)
    idempotency: dict[tuple[int, str], IdempotencyRecord] = field(default_factory=dict)
    records: dict[str, TreasuryRecord] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    intents: dict[int, PaymentIntent] = field(default_factory=dict)
    # payment_intent_lookup_id -> intent id, the unique index of the SQL table.
    intent_lookup_ids: dict[str, int] = field(default_factory=dict)
    sequences: dict[str, itertools.count[int]] = field(default_factory=dict)


class MemoryTransaction:
    """Write access to the state that can be undone."""

    def __init__(self, state: MemoryState, write: bool) -> None:
        self.state = state
        self.write = write
        self._undo: list[Callable[[], None]] = []

    def put(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        self._require_write()
        old = table.get(key, _MISSING)
        table[key] = value
        self._undo.append(
            lambda: table.pop(key) if old is _MISSING else table.__setitem__(key, old)
        )

    def remove(self, table: dict[Any, Any], key: Any) -> None:
        self._require_write()
        old = table.pop(key)
        self._undo.append(lambda: table.__setitem__(key, old))

    def append(self, items: list[Any], value: Any) -> None:
        self._require_write()
        items.append(value)
        self._undo.append(items.pop)

    def next_id(self, sequence: str) -> int:
        self._require_write()
        counter = self.state.sequences.setdefault(sequence, itertools.count(1))
        return next(counter)  # like a database sequence, not given back on rollback

    def on_rollback(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` if the transaction rolls back (for changes put() cannot express)."""
        self._require_write()
        self._undo.append(undo)

    def rollback(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def _require_write(self) -> None:
        if not self.write:
            raise RuntimeError("write in a read-only transaction")


def newest_first(
    rows: list[Any], key: Callable[[Any], str], limit: int, starting_after: str | None
) -> list[Any]:
    if starting_after is not None:
        rows = [r for r in rows if key(r) < starting_after]
    rows.sort(key=key, reverse=True)
    return rows[:limit]
