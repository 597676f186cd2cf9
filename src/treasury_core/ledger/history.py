"""A wallet's history: one entry per posting that changed the wallet, with its figures after.

Entries are derived from postings at write time, inside the journal's transaction, by
:func:`wallet_entries`: the storage adapter hands it the plan and the touched accounts as they
are *after* the journal (it just updated and locked them), and the figures after each posting
follow by taking the journal's change back off and replaying the postings in leg order. No
balance is ever written from outside the ledger: an entry is a projection of a posting, like a
stored index, and folding a wallet's postings still gives its counters.

Ordering: ``seq`` numbers a wallet's entries 1, 2, 3… in the order they were written (the account
row is locked while they are, so the order is the order the figures chain in). An entry's
``created_at`` is the posting's time, raised when needed to the wallet's previous entry's, so
that time order and write order agree and a period (``created_gte``/``created_lt``) is always an
unbroken run of entries whose opening figure is the one before it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from treasury_core.ledger.accounts import Account, AccountKind, CounterDelta
from treasury_core.ledger.kernel import LedgerPlan
from treasury_core.ledger.postings import PendingCategory, Posting, PostingKind


class EntryType(StrEnum):
    """What a wallet transaction is, derived from the journal's operation and the posting."""

    DEPOSIT = "deposit"
    WITHDRAWAL = "withdrawal"
    WITHDRAWAL_FEE = "withdrawal_fee"
    TRANSFER_IN = "transfer_in"
    TRANSFER_OUT = "transfer_out"
    FX = "fx"
    PAYOUT = "payout"
    REFUND = "refund"
    CHARGEBACK = "chargeback"
    HOLD = "hold"
    RELEASE = "release"
    ADJUSTMENT = "adjustment"


class EntryCounter(StrEnum):
    """Which of the wallet's figures an entry's ``amount`` changed."""

    BALANCE = "balance"
    PENDING = "pending"


@dataclass(frozen=True, slots=True)
class WalletEntry:
    """One posting as seen from one wallet, with the wallet's figures right after it.

    ``amount`` is signed from the wallet's side: money in (or on its way in) is positive, money
    out (or reserved to go out) negative. ``counter`` says whether it moved the posted
    ``balance`` or a pending figure. Settling a reservation is one ``balance`` entry; the
    reservation it releases shows in ``available_balance_after``.
    """

    id: str
    wallet_id: str
    seq: int
    posting_id: str
    journal_id: str
    type: EntryType
    counter: EntryCounter
    amount: int
    currency: str
    balance_after: int
    available_balance_after: int
    pending_in_after: int
    source_id: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class EntryPosition:
    """Where an entry sits in its wallet's history: the keyset a page continues from."""

    created_at: datetime
    seq: int


@dataclass(frozen=True, slots=True)
class EntryQuery:
    """A page of one wallet's entries, newest first.

    ``before`` is the position of the last entry of the previous page (exclusive);
    ``created_gte`` is inclusive and ``created_lt`` exclusive; ``type`` keeps one type.
    """

    wallet_id: str
    limit: int
    before: EntryPosition | None = None
    created_gte: datetime | None = None
    created_lt: datetime | None = None
    type: EntryType | None = None


_NOT_ID = re.compile(r"[^0-9A-Za-z]")


def entry_id(posting_id: str) -> str:
    """The public id of a wallet transaction: ``txn_`` and the posting id's characters.

    Posting ids are ``{journal id}.{leg}``; an API id has one underscore and no dot, so the
    journal's prefix is dropped and the dot spelled ``x``. The leg is digits only, so the last
    ``x`` is always the dot and no two postings share an id. A posting touches a wallet once,
    so the id is unique within the wallet's history.
    """
    body = posting_id.split("_", 1)[1] if "_" in posting_id else posting_id
    return "txn_" + _NOT_ID.sub("x", body)


def wallet_entries(
    plan: LedgerPlan,
    after: Mapping[str, Account],
    last: Mapping[str, EntryPosition | None],
) -> list[WalletEntry]:
    """The entries ``plan`` adds to the histories of the wallets it touches.

    ``after`` holds every touched account with the journal applied; ``last`` the position of
    each touched wallet's latest entry (``None`` for a wallet without history yet).
    """
    journal = plan.journal
    running: dict[str, Account] = {}
    positions: dict[str, EntryPosition | None] = {}
    for account_id, account in after.items():
        if account.kind is AccountKind.WALLET:
            running[account_id] = account.with_delta(_negated(plan.deltas[account_id]))
            positions[account_id] = last.get(account_id)
    entries: list[WalletEntry] = []
    for posting in plan.postings:
        for wallet_id in (posting.debit_account_id, posting.credit_account_id):
            if wallet_id not in running:
                continue
            account = running[wallet_id] = running[wallet_id].with_delta(
                posting.delta_for(wallet_id)
            )
            previous = positions[wallet_id]
            created_at = posting.created_at
            seq = 1
            if previous is not None:
                created_at = max(created_at, previous.created_at)
                seq = previous.seq + 1
            positions[wallet_id] = EntryPosition(created_at, seq)
            debit = wallet_id == posting.debit_account_id
            counter, amount = _movement(posting, debit)
            entries.append(
                WalletEntry(
                    id=entry_id(posting.id),
                    wallet_id=wallet_id,
                    seq=seq,
                    posting_id=posting.id,
                    journal_id=journal.id,
                    type=entry_type(journal.operation, posting, debit, after),
                    counter=counter,
                    amount=amount,
                    currency=posting.currency,
                    balance_after=account.balance,
                    available_balance_after=account.available_balance,
                    pending_in_after=account.pending_in,
                    source_id=journal.source_id or journal.id,
                    created_at=created_at,
                )
            )
    return entries


def entry_type(
    operation: str, posting: Posting, debit: bool, accounts: Mapping[str, Account]
) -> EntryType:
    """The type of ``posting`` on the wallet on its ``debit`` (else credit) side."""
    if posting.kind in (PostingKind.VOID_PENDING, PostingKind.EXPIRE_PENDING):
        return EntryType.RELEASE
    if posting.kind is PostingKind.PENDING and posting.category is PendingCategory.HOLD and debit:
        return EntryType.HOLD
    other = accounts.get(posting.credit_account_id if debit else posting.debit_account_id)
    family = operation.split("_", 1)[0]
    if family in ("deposit", "virtual"):
        return EntryType.DEPOSIT
    if family == "withdrawal":
        if other is not None and other.kind is AccountKind.FEES:
            return EntryType.WITHDRAWAL_FEE
        return EntryType.WITHDRAWAL
    if family == "transfer":
        if other is not None and other.kind is AccountKind.FX_LIQUIDITY:
            return EntryType.FX
        return EntryType.TRANSFER_OUT if debit else EntryType.TRANSFER_IN
    if family in ("payout", "refund", "chargeback"):
        return EntryType(family)
    return EntryType.ADJUSTMENT


def _movement(posting: Posting, debit: bool) -> tuple[EntryCounter, int]:
    sign = -1 if debit else 1
    if posting.kind in (PostingKind.POSTED, PostingKind.POST_PENDING):
        return EntryCounter.BALANCE, sign * posting.amount
    if posting.kind is PostingKind.PENDING:
        return EntryCounter.PENDING, sign * posting.amount
    # A release gives back what was reserved: to the debit side's available funds, and out of
    # the credit side's pending_in.
    return EntryCounter.PENDING, -sign * posting.released


def _negated(delta: CounterDelta) -> CounterDelta:
    return CounterDelta(
        -delta.debits_posted,
        -delta.credits_posted,
        -delta.debits_pending_holds,
        -delta.debits_pending_out,
        -delta.credits_pending,
    )
