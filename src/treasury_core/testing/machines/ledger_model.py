"""The plain reference model that :class:`~treasury_core.testing.machines.ledger.LedgerMachine`
holds a
storage's ledger to: dicts of ints that know nothing of the kernel."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from treasury_core.errors import InsufficientFunds, LedgerRejected
from treasury_core.ledger import (
    AccountKind,
    Journal,
    Leg,
    Move,
    PostPending,
    Reserve,
    VoidPending,
)

#: A predicted refusal: the exception class and its ``code``.
Prediction = tuple[type[InsufficientFunds | LedgerRejected], str]

COUNTER_FIELDS = (
    "debits_posted",
    "credits_posted",
    "debits_pending_holds",
    "debits_pending_out",
    "credits_pending",
)


@dataclass
class ModelPending:
    """The model's record of one reservation."""

    debit: str
    credit: str
    currency: str
    amount: int
    category: str  # "hold" or "out": which pending-debit counter it uses
    deadline: datetime | None
    status: str = "pending"
    resolved_by: str | None = None


@dataclass
class Change:
    """What an accepted journal does to the model (computed before the storage is asked)."""

    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    new_pendings: dict[str, ModelPending] = field(default_factory=dict)
    resolutions: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> status, by
    postings: int = 0

    def add(self, account_id: str, counter: str, amount: int) -> None:
        row = self.counters.setdefault(account_id, dict.fromkeys(COUNTER_FIELDS, 0))
        row[counter] += amount


class ReferenceLedger:
    """The simplest ledger that could work: five ints per account and a dict of reservations.

    Written from the rules in ledger-invariants.md and the journal semantics, independently of
    :mod:`treasury_core.ledger.kernel`, so the two can catch each other's mistakes.
    """

    def __init__(self) -> None:
        self.counters: dict[str, dict[str, int]] = {}
        self.currency: dict[str, str] = {}
        self.kind: dict[str, str] = {}
        self.limit: dict[str, int | None] = {}  # None: unguarded, may go negative
        self.pendings: dict[str, ModelPending] = {}
        self.posting_count = 0

    def open(self, account_id: str, currency: str, kind: str, limit: int | None) -> None:
        """Open an account with zero counters; ``limit`` ``None`` means unguarded."""
        self.counters[account_id] = dict.fromkeys(COUNTER_FIELDS, 0)
        self.currency[account_id] = currency
        self.kind[account_id] = kind
        self.limit[account_id] = limit

    def balance(self, account_id: str) -> int:
        """Posted credits minus posted debits."""
        c = self.counters[account_id]
        return c["credits_posted"] - c["debits_posted"]

    def available(self, account_id: str) -> int:
        """Balance less what holds and outgoing reservations have set aside."""
        c = self.counters[account_id]
        return self.balance(account_id) - c["debits_pending_holds"] - c["debits_pending_out"]

    def room(self, account_id: str) -> int | None:
        """How much more a guarded account can be debited (``None``: unguarded)."""
        limit = self.limit[account_id]
        return None if limit is None else self.available(account_id) + limit

    def accounts_in(self, currency: str) -> list[str]:
        """Every account in ``currency``, sorted."""
        return sorted(a for a, c in self.currency.items() if c == currency)

    def wallets(self, currency: str | None = None) -> list[str]:
        """Wallet accounts (of ``currency`` if given), sorted."""
        return sorted(
            a
            for a, k in self.kind.items()
            if k == AccountKind.WALLET.value and currency in (None, self.currency[a])
        )

    def open_pendings(self) -> list[str]:
        """Ids of reservations still pending, sorted."""
        return sorted(i for i, p in self.pendings.items() if p.status == "pending")

    def due(self, now: datetime) -> list[str]:
        """Pending reservations whose deadline is at or before ``now``, by (deadline, id)."""
        due = [
            (p.deadline, i)
            for i, p in self.pendings.items()
            if p.status == "pending" and p.deadline is not None and p.deadline <= now
        ]
        return [i for _, i in sorted(due)]

    def evaluate(self, journal: Journal, now: datetime) -> Change | Prediction:
        """What ``journal`` at ``now`` would do, or the refusal it must meet; changes nothing."""
        change = Change(postings=len(journal.legs))
        for index, leg in enumerate(journal.legs):
            refusal = self._leg(change, journal.leg_id(index), leg, now)
            if refusal is not None:
                return refusal
        for account_id, delta in sorted(change.counters.items()):
            limit = self.limit[account_id]
            after = {f: self.counters[account_id][f] + delta[f] for f in COUNTER_FIELDS}
            grows = (
                delta["debits_posted"] + delta["debits_pending_holds"] + delta["debits_pending_out"]
            )
            available = (
                after["credits_posted"]
                - after["debits_posted"]
                - after["debits_pending_holds"]
                - after["debits_pending_out"]
            )
            if limit is not None and grows > 0 and available < -limit:
                return (InsufficientFunds, "insufficient_funds")
        return change

    def commit(self, change: Change) -> None:
        """Apply an accepted journal's change."""
        for account_id, delta in change.counters.items():
            for name, amount in delta.items():
                self.counters[account_id][name] += amount
        self.pendings.update(change.new_pendings)
        for pending_id, (status, resolved_by) in change.resolutions.items():
            self.pendings[pending_id].status = status
            self.pendings[pending_id].resolved_by = resolved_by
        self.posting_count += change.postings

    def _leg(self, change: Change, leg_id: str, leg: Leg, now: datetime) -> Prediction | None:
        if isinstance(leg, Move):
            change.add(leg.debit, "debits_posted", leg.amount)
            change.add(leg.credit, "credits_posted", leg.amount)
            return None
        if isinstance(leg, Reserve):
            category = leg.category.value
            change.add(
                leg.debit, f"debits_pending_{'holds' if category == 'hold' else 'out'}", leg.amount
            )
            change.add(leg.credit, "credits_pending", leg.amount)
            change.new_pendings[leg_id] = ModelPending(
                leg.debit, leg.credit, leg.currency, leg.amount, category, leg.deadline
            )
            return None
        if leg.pending_id in change.resolutions:
            return (LedgerRejected, "pending_already_resolved")
        pending = self.pendings.get(leg.pending_id)
        if pending is None:
            return (LedgerRejected, "pending_not_found")
        if pending.status != "pending":
            return (LedgerRejected, "pending_already_resolved")
        due = pending.deadline is not None and now >= pending.deadline
        posted = 0
        if isinstance(leg, PostPending):
            if due:
                return (LedgerRejected, "pending_expired")
            posted = pending.amount if leg.amount is None else leg.amount
            if posted > pending.amount:
                return (LedgerRejected, "amount_exceeds_pending")
            status = "posted"
        elif isinstance(leg, VoidPending):
            status = "voided"
        else:
            if not due:
                return (LedgerRejected, "pending_not_due")
            status = "expired"
        # A resolution releases the whole reservation and moves what was posted, if anything.
        reserved = f"debits_pending_{'holds' if pending.category == 'hold' else 'out'}"
        change.add(pending.debit, reserved, -pending.amount)
        change.add(pending.credit, "credits_pending", -pending.amount)
        change.add(pending.debit, "debits_posted", posted)
        change.add(pending.credit, "credits_posted", posted)
        change.resolutions[leg.pending_id] = (status, leg_id)
        return None
