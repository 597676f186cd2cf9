"""The shop's storage adapter: the code under test in the property-testing guide.

``ShopStorage`` is an adapter of the storage port as an application team might write one. To
keep the example small it reuses :class:`~treasury_core.testing.MemoryStorage` for everything
but one query, the one the hold-expiry job runs; a real adapter would send SQL like::

    SELECT * FROM pending_movements
    WHERE status = 'pending' AND deadline < :now
    ORDER BY deadline, id LIMIT :limit

and that query has the bug the guide's property tests find (``docs/guides/property-testing.md``).
:class:`FixedShopStorage` is the same adapter after the fix; both stay here so that the guide's
output can be reproduced and checked (``tests/examples_property``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from treasury_core.ledger import PendingMovement, PendingStatus
from treasury_core.ports import LedgerRepository, UnitOfWork
from treasury_core.testing import MemoryStorage

#: The adapter's rule for "this pending movement is due at this time".
DueRule = Callable[[PendingMovement, datetime], bool]


class ShopStorage(MemoryStorage):
    """The shop's storage, as first written: pending movements expire after their deadline."""

    @staticmethod
    def is_due(pending: PendingMovement, now: datetime) -> bool:
        """Whether the expiry job should pick ``pending`` up at ``now``."""
        # "A hold expires once its deadline has passed."
        return pending.deadline is not None and pending.deadline < now

    @contextmanager
    def transaction(self, *, write: bool = True, snapshot: bool = False) -> Iterator[UnitOfWork]:
        """MemoryStorage's unit of work, with the shop's own expiry query."""
        with super().transaction(write=write, snapshot=snapshot) as uow:
            yield _ShopUnitOfWork(uow, _ShopLedger(uow.ledger, self.is_due))


class FixedShopStorage(ShopStorage):
    """The shop's storage after the fix: due *at* the deadline, as the ledger rules say."""

    @staticmethod
    def is_due(pending: PendingMovement, now: datetime) -> bool:
        """Whether the expiry job should pick ``pending`` up at ``now``."""
        # From its deadline on, the ledger refuses to post a pending movement ("pending_expired"),
        # so from that same instant the expiry job must release it: ``<=``, not ``<``.
        return pending.deadline is not None and pending.deadline <= now


class _ShopLedger:
    """The ledger repository with the shop's ``due_pendings``; the rest is delegated."""

    def __init__(self, inner: LedgerRepository, is_due: DueRule) -> None:
        self._inner = inner
        self._is_due = is_due

    def due_pendings(self, now: datetime, limit: int) -> list[PendingMovement]:
        """Pending movements the expiry job must expire at ``now``, by (deadline, id)."""
        due = [
            p
            for p in self._inner.pendings()
            if p.status is PendingStatus.PENDING and self._is_due(p, now)
        ]
        due.sort(key=lambda p: (p.deadline, p.id))
        return due[:limit]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _ShopUnitOfWork:
    """A unit of work whose ``ledger`` is the shop's; the other repositories are delegated."""

    def __init__(self, inner: UnitOfWork, ledger: _ShopLedger) -> None:
        self._inner = inner
        self.ledger = ledger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
