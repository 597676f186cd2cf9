"""What a caller asks the ledger to do: a journal of legs applied entirely or not at all.

A leg is one of:
- :class:`Move`: posted funds from the debit account to the credit account;
- :class:`Reserve`: a pending movement (phase one) with an optional deadline;
- :class:`PostPending` / :class:`VoidPending` / :class:`ExpirePending`: phase two of a pending
  movement made by an earlier journal.

Each leg debits and credits accounts of its own currency, so every journal balances per currency
by construction; an FX journal has legs in two currencies through liquidity accounts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from treasury_core.ledger.postings import PendingCategory


@dataclass(frozen=True, slots=True)
class Move:
    """Move ``amount`` posted funds from ``debit`` to ``credit``."""

    debit: str
    credit: str
    currency: str
    amount: int


@dataclass(frozen=True, slots=True)
class Reserve:
    """Reserve ``amount`` from ``debit`` towards ``credit`` until posted, voided or expired."""

    debit: str
    credit: str
    currency: str
    amount: int
    category: PendingCategory = PendingCategory.OUT
    deadline: datetime | None = None


@dataclass(frozen=True, slots=True)
class PostPending:
    """Post a pending movement: ``amount`` (default all of it) moves, the rest is released."""

    pending_id: str
    amount: int | None = None


@dataclass(frozen=True, slots=True)
class VoidPending:
    """Release a pending movement entirely; nothing moves."""

    pending_id: str


@dataclass(frozen=True, slots=True)
class ExpirePending:
    """Release a pending movement whose deadline has passed; nothing moves."""

    pending_id: str


Leg = Move | Reserve | PostPending | VoidPending | ExpirePending


@dataclass(frozen=True, slots=True)
class Journal:
    """One business operation's movements. Leg ``i`` becomes posting ``leg_id(i)``."""

    id: str
    legs: tuple[Leg, ...]
    operation: str = "movement"
    company_id: int | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    #: The business object the journal is for (a deposit, a withdrawal, a payout…), shown as
    #: the source of the wallet transactions it writes; ``None``: the journal is its own source.
    source_id: str | None = None

    def leg_id(self, index: int) -> str:
        """The posting id of leg ``index``; a :class:`Reserve` leg's id is its pending id."""
        return f"{self.id}.{index}"
