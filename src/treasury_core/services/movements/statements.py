"""Wallet statements: a wallet's transactions (its ledger history) and period statements.

Every posting that changed a wallet is one transaction, with the wallet's figures after it (see
:mod:`treasury_core.ledger.history`, which writes them with the posting). Reading a page or a
month costs the same whatever the length of the history: nothing here sums postings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from pydantic import BaseModel, ConfigDict

from treasury_core.errors import NotFound, ValidationFailed
from treasury_core.ledger import (
    AccountKind,
    EntryCounter,
    EntryPosition,
    EntryQuery,
    EntryType,
    WalletEntry,
)
from treasury_core.pagination import Page, PageRequest, checked_page, page_of
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.serialization import Timestamp
from treasury_core.validation import is_resource_id

#: The longest period one statement covers, in days (a year, leap or not).
MAX_STATEMENT_DAYS = 366
#: The most transactions one statement holds; a busier period is refused (ask for a shorter
#: one, or page through the transactions).
MAX_STATEMENT_TRANSACTIONS = 100_000
#: How many entries a statement reads per query.
_BATCH = 1_000


class WalletTransaction(BaseModel):
    """One posting that changed a wallet, as the interface shows it (a balance transaction).

    ``amount`` is signed from the wallet's side (money in or on its way in is positive) and
    changed ``counter``: ``balance`` (posted funds) or ``pending`` (a reservation made or
    released). ``balance_after``, ``available_balance_after`` and ``pending_in_after`` are the
    wallet's figures right after it. ``source_id`` is the deposit, withdrawal, transfer or
    payout it belongs to.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    wallet_id: str
    type: EntryType
    counter: EntryCounter
    amount: int
    currency_code: str
    balance_after: int
    available_balance_after: int
    pending_in_after: int
    source_id: str
    created_at: Timestamp

    @classmethod
    def of(cls, entry: WalletEntry) -> WalletTransaction:
        """The record of a history entry."""
        return cls(
            id=entry.id,
            wallet_id=entry.wallet_id,
            type=entry.type,
            counter=entry.counter,
            amount=entry.amount,
            currency_code=entry.currency,
            balance_after=entry.balance_after,
            available_balance_after=entry.available_balance_after,
            pending_in_after=entry.pending_in_after,
            source_id=entry.source_id,
            created_at=entry.created_at,
        )


class TypeTotal(BaseModel):
    """A statement's transactions of one type: how many, and their sums per counter."""

    model_config = ConfigDict(frozen=True)

    type: EntryType
    count: int
    balance_amount: int
    pending_amount: int


class WalletStatement(BaseModel):
    """A wallet's statement for the days ``from_date`` to ``to_date`` (both included, UTC).

    ``closing_balance = opening_balance + Σ amount`` of the ``balance`` transactions, and the
    same for the available balance with every transaction's effect on it.
    """

    model_config = ConfigDict(frozen=True)

    wallet_id: str
    currency_code: str
    from_date: date
    to_date: date
    period_start: Timestamp
    period_end: Timestamp
    opening_balance: int
    closing_balance: int
    opening_available_balance: int
    closing_available_balance: int
    totals: list[TypeTotal]
    #: Oldest first, as a statement reads.
    transactions: list[WalletTransaction]


@dataclass(frozen=True, slots=True)
class TransactionFilter:
    """Which transactions to list: ``created_gte`` inclusive, ``created_lt`` exclusive, one
    ``type``."""

    created_gte: datetime | None = None
    created_lt: datetime | None = None
    type: EntryType | None = None


class WalletStatementService:
    """A company's wallet transactions and statements."""

    def __init__(self, *, storage: Storage) -> None:
        self._storage = storage

    async def transactions(
        self,
        company_id: int,
        wallet_id: str,
        page: PageRequest | None = None,
        filters: TransactionFilter | None = None,
    ) -> Page[WalletTransaction]:
        """A page of the wallet's transactions, newest first; ``NotFound`` for a wallet the
        company does not have, and for a ``starting_after`` that is not a transaction of this
        wallet."""
        page = checked_page(page)
        filters = filters or TransactionFilter()
        _check_window(filters.created_gte, filters.created_lt)

        def read(uow: UnitOfWork) -> list[WalletEntry]:
            _require_wallet(uow, company_id, wallet_id)
            before = None
            if page.starting_after is not None:
                cursor = uow.ledger.wallet_entry(wallet_id, page.starting_after)
                if cursor is None:
                    # As for any id this company does not have: not found.
                    raise NotFound(
                        f"No such transaction of wallet {wallet_id}: {page.starting_after}",
                        param="starting_after",
                    )
                before = EntryPosition(cursor.created_at, cursor.seq)
            return uow.ledger.wallet_entries(
                EntryQuery(
                    wallet_id=wallet_id,
                    limit=page.limit + 1,
                    before=before,
                    created_gte=filters.created_gte,
                    created_lt=filters.created_lt,
                    type=filters.type,
                )
            )

        rows = await self._storage.run(read, write=False)
        result = page_of(rows, page.limit)
        return Page([WalletTransaction.of(e) for e in result.items], result.has_more)

    async def movements(
        self, company_id: int, wallet_id: str, created_gte: datetime, created_lt: datetime
    ) -> list[WalletTransaction]:
        """Every transaction of the wallet created in ``[created_gte, created_lt)``, oldest
        first (what reconciliation matches against a bank statement's lines)."""
        _check_window(created_gte, created_lt)

        def read(uow: UnitOfWork) -> list[WalletEntry]:
            _require_wallet(uow, company_id, wallet_id)
            return _period(uow, wallet_id, created_gte, created_lt)

        rows = await self._storage.run(read, write=False, snapshot=True)
        return [WalletTransaction.of(e) for e in rows]

    async def statement(
        self, company_id: int, wallet_id: str, from_date: date, to_date: date
    ) -> WalletStatement:
        """The wallet's statement for the UTC days ``from_date`` to ``to_date``, read in one
        snapshot so its opening figures, transactions and closing figures agree."""
        if to_date < from_date:
            raise ValidationFailed(
                "to must not be before from", param="to", code="statement_period_invalid"
            )
        if (to_date - from_date).days >= MAX_STATEMENT_DAYS:
            raise ValidationFailed(
                f"A statement covers at most {MAX_STATEMENT_DAYS} days",
                param="to",
                code="statement_period_invalid",
            )
        start = datetime.combine(from_date, time(), UTC)
        try:
            end = datetime.combine(to_date + timedelta(days=1), time(), UTC)
        except OverflowError:
            end = datetime.max.replace(tzinfo=UTC)

        def read(uow: UnitOfWork) -> tuple[str, WalletEntry | None, list[WalletEntry]]:
            currency = _require_wallet(uow, company_id, wallet_id)
            opening = uow.ledger.last_wallet_entry(wallet_id, start)
            return currency, opening, _period(uow, wallet_id, start, end)

        currency, opening, rows = await self._storage.run(read, write=False, snapshot=True)
        balance = opening.balance_after if opening else 0
        available = opening.available_balance_after if opening else 0
        totals: dict[EntryType, list[int]] = {}
        for entry in rows:
            total = totals.setdefault(entry.type, [0, 0, 0])
            total[0] += 1
            total[1 if entry.counter is EntryCounter.BALANCE else 2] += entry.amount
        last = rows[-1] if rows else None
        return WalletStatement(
            wallet_id=wallet_id,
            currency_code=currency,
            from_date=from_date,
            to_date=to_date,
            period_start=start,
            period_end=end,
            opening_balance=balance,
            closing_balance=last.balance_after if last else balance,
            opening_available_balance=available,
            closing_available_balance=last.available_balance_after if last else available,
            totals=[
                TypeTotal(type=t, count=c, balance_amount=b, pending_amount=p)
                for t, (c, b, p) in sorted(totals.items())
            ],
            transactions=[WalletTransaction.of(e) for e in rows],
        )


def _require_wallet(uow: UnitOfWork, company_id: int, wallet_id: str) -> str:
    """The wallet's currency; ``NotFound`` (as everywhere) for another company's wallet."""
    account = uow.ledger.get_account(wallet_id) if is_resource_id(wallet_id, "wal") else None
    if (
        account is None
        or account.company_id != company_id
        or account.kind is not AccountKind.WALLET
    ):
        raise NotFound(f"No such wallet: {wallet_id}", param="wallet_id")
    return account.currency


def _check_window(created_gte: datetime | None, created_lt: datetime | None) -> None:
    for name, value in (("created_gte", created_gte), ("created_lt", created_lt)):
        if value is not None and value.tzinfo is None:
            raise ValidationFailed(f"{name} must carry a time zone", param=name)


def _period(
    uow: UnitOfWork, wallet_id: str, created_gte: datetime, created_lt: datetime
) -> list[WalletEntry]:
    """The wallet's entries in ``[created_gte, created_lt)``, oldest first, read newest first
    in batches (each one index range); refused past :data:`MAX_STATEMENT_TRANSACTIONS`."""
    rows: list[WalletEntry] = []
    before: EntryPosition | None = None
    while True:
        batch = uow.ledger.wallet_entries(
            EntryQuery(wallet_id, _BATCH, before, created_gte, created_lt)
        )
        rows.extend(batch)
        if len(rows) > MAX_STATEMENT_TRANSACTIONS:
            raise ValidationFailed(
                f"The period holds more than {MAX_STATEMENT_TRANSACTIONS} transactions; ask "
                "for a shorter one",
                param="from",
                code="statement_too_large",
            )
        if len(batch) < _BATCH:
            break
        before = EntryPosition(batch[-1].created_at, batch[-1].seq)
    rows.reverse()
    return rows
