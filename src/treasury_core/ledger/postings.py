"""Postings (the append-only entries) and pending movements.

A posting debits one account and credits another by the same amount in one currency. Its kind
says which counters it moves (see :meth:`Posting.delta_for`); folding an account's postings in
any order gives exactly its stored counters, which is how the ledger is audited.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from treasury_core.ledger.accounts import CounterDelta


class PostingKind(StrEnum):
    """What a posting does to the counters of its two accounts."""

    POSTED = "posted"
    PENDING = "pending"
    POST_PENDING = "post_pending"
    VOID_PENDING = "void_pending"
    EXPIRE_PENDING = "expire_pending"


class PendingCategory(StrEnum):
    """Which pending-debit counter a reservation uses: ``hold`` or ``out``."""

    HOLD = "hold"
    OUT = "out"


class PendingStatus(StrEnum):
    """A pending movement's state; every one ends in exactly one of the three terminal states."""

    PENDING = "pending"
    POSTED = "posted"
    VOIDED = "voided"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Posting:
    """One entry. ``amount`` moved or reserved; ``released`` is what a resolution un-reserves."""

    id: str
    journal_id: str
    kind: PostingKind
    debit_account_id: str
    credit_account_id: str
    currency: str
    amount: int
    created_at: datetime
    released: int = 0
    category: PendingCategory | None = None
    pending_id: str | None = None
    deadline: datetime | None = None

    def delta_for(self, account_id: str) -> CounterDelta:
        """What this posting does to ``account_id``'s counters (zero if it is not a party)."""
        on_debit = account_id == self.debit_account_id
        on_credit = account_id == self.credit_account_id
        total = CounterDelta()
        if on_debit:
            total = total + self._debit_side()
        if on_credit:
            total = total + self._credit_side()
        return total

    def _debit_side(self) -> CounterDelta:
        posted = self.amount if self.kind in (PostingKind.POSTED, PostingKind.POST_PENDING) else 0
        reserved = self.amount if self.kind is PostingKind.PENDING else -self.released
        holds = reserved if self.category is PendingCategory.HOLD else 0
        out = reserved if self.category is PendingCategory.OUT else 0
        return CounterDelta(
            debits_posted=posted, debits_pending_holds=holds, debits_pending_out=out
        )

    def _credit_side(self) -> CounterDelta:
        posted = self.amount if self.kind in (PostingKind.POSTED, PostingKind.POST_PENDING) else 0
        reserved = self.amount if self.kind is PostingKind.PENDING else -self.released
        return CounterDelta(credits_posted=posted, credits_pending=reserved)


@dataclass(frozen=True, slots=True)
class PendingMovement:
    """Phase one of a two-phase movement and where it stands."""

    id: str
    debit_account_id: str
    credit_account_id: str
    currency: str
    amount: int
    category: PendingCategory
    deadline: datetime | None
    status: PendingStatus = PendingStatus.PENDING
    resolved_by: str | None = None


def fold_postings(account_id: str, postings: Iterable[Posting]) -> CounterDelta:
    """The counters ``account_id`` must have, recomputed from its postings (the audit fold)."""
    total = CounterDelta()
    for posting in postings:
        total = total + posting.delta_for(account_id)
    return total
