"""What the ledger's own checks read of a stored ledger, as protocols of this layer.

Audits (:mod:`treasury_core.ledger.audit`) and invariant checks
(:mod:`treasury_core.ledger.invariants`) read accounts, postings, pending movements and the
latest history entries in one read-only snapshot transaction. They name only what they read:
the storage port's ``Storage``, whose unit of work's ``ledger`` has these methods and more,
satisfies :class:`LedgerSource` as it is, and so does any other source of the same reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Protocol, TypeVar

from treasury_core.ledger.accounts import Account
from treasury_core.ledger.history import WalletEntry
from treasury_core.ledger.postings import PendingMovement, Posting

T = TypeVar("T")


class LedgerReads(Protocol):
    """The reads of a stored ledger that its checks make, inside one transaction."""

    def all_accounts(self) -> Iterator[Account]:
        """Every account in id order."""
        ...

    def postings(self) -> Iterator[Posting]:
        """Every posting in id order."""
        ...

    def pendings(self) -> Iterator[PendingMovement]:
        """Every pending movement in id order, whatever its status."""
        ...

    def postings_page(self, after_id: str | None, limit: int) -> list[Posting]:
        """Up to ``limit`` postings with ids above ``after_id``, in id order."""
        ...

    def count_postings(self) -> int:
        """How many postings there are."""
        ...

    def last_wallet_entry(self, wallet_id: str, before: datetime | None) -> WalletEntry | None:
        """The wallet's latest history entry created before ``before`` (of all when ``None``)."""
        ...


class LedgerView(Protocol):
    """One read transaction, as far as the ledger's checks see it."""

    @property
    def ledger(self) -> LedgerReads:
        """The ledger's reads."""
        ...


View_co = TypeVar("View_co", bound=LedgerView, covariant=True)


class LedgerSource(Protocol[View_co]):
    """Runs a function in a read transaction whose view is a :class:`LedgerView` (``Storage``
    is one, with its ``UnitOfWork`` as the view)."""

    def run_sync(self, fn: Callable[[View_co], T], *, write: bool = ..., snapshot: bool = ...) -> T:
        """Run ``fn`` in a transaction (``write=False, snapshot=True``: one consistent read)."""
        ...
