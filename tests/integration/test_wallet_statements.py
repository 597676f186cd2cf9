"""Wallet transactions and statements through the services, on every storage backend.

A wallet goes through a deposit, a withdrawal with a fee, a failed withdrawal, transfers in the
same and in another currency; its history must list each posting once, newest first, with
figures after each that chain and end at the wallet's balance record, and a statement must
open and close on the figures around its period.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar

import pytest

from tests.conftest import sandbox_bank_account
from treasury_core import CreateWalletRequest, PageRequest, Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import NotFound, ValidationFailed
from treasury_core.ledger import EntryCounter, EntryType
from treasury_core.movements.requests import (
    CreateDepositRequest,
    CreateTransferRequest,
    CreateWithdrawalRequest,
)
from treasury_core.services.movements.statements import TransactionFilter, WalletTransaction
from treasury_core.testing import FakeClock

T = TypeVar("T")
DAY = 24 * 3600
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
FEE = 25


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def treasury(request: pytest.FixtureRequest) -> Iterator[Treasury]:
    url = (
        "memory://"
        if request.param == "memory"
        else request.getfixturevalue(f"{request.param}_url")
    )
    config = TreasuryConfig(database_url=str(url), pool_size=2, withdrawal_fees={"*": (FEE, 0)})
    t = bootstrap(config, clock=FakeClock(START))
    try:
        yield t
    finally:
        t.close()


@pytest.fixture(autouse=True)
def _loop() -> Iterator[None]:
    # One loop per test: the storage's threads answer on the loop that asked.
    global _LOOP
    _LOOP = asyncio.new_event_loop()
    try:
        yield
    finally:
        _LOOP.close()


_LOOP: asyncio.AbstractEventLoop


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    return _LOOP.run_until_complete(coroutine)


@dataclass(frozen=True)
class History:
    company: int
    other_company: int
    usd: str
    usd2: str
    eur: str
    deposit: str
    withdrawal: str
    failed: str
    transfer: str
    fx: str


def _clock(t: Treasury) -> FakeClock:
    assert isinstance(t.clock, FakeClock)
    return t.clock


async def _history(t: Treasury) -> History:
    clock = _clock(t)
    a = (await t.companies.create_company("A")).company.id
    b = (await t.companies.create_company("B")).company.id

    async def wallet(name: str, currency: str) -> str:
        return (await t.wallets.create(a, CreateWalletRequest(name=name, currency_id=currency))).id

    usd, usd2, eur = (
        await wallet("usd", "USD"),
        await wallet("usd2", "USD"),
        await wallet("eur", "EUR"),
    )
    # Day 1 (March 1): a deposit arrives.
    deposit = await t.deposits.create(
        a, CreateDepositRequest(wallet_id=usd, from_amount=10_000, from_currency_id="USD")
    )
    clock.advance(3600)
    await t.deposits.complete(None, deposit.id)
    # Day 2: a withdrawal with its fee, paid out; another refused by the bank.
    clock.advance(DAY)
    bank = await t.bank_accounts.register(a, sandbox_bank_account("A Inc"))

    def withdrawal(amount: int) -> CreateWithdrawalRequest:
        return CreateWithdrawalRequest(
            wallet_id=usd, from_amount=amount, from_currency_id="USD", bank_account_id=bank.id
        )

    paid = await t.withdrawals.create(a, withdrawal(1_000))
    failed = await t.withdrawals.create(a, withdrawal(2_000))
    clock.advance(3600)
    await t.withdrawals.complete(None, paid.id)
    await t.withdrawals.fail(None, failed.id)
    # Day 3: a transfer to the other USD wallet, and one into EUR (settled later that day).
    clock.advance(DAY)
    transfer = await t.transfers.create(
        a, CreateTransferRequest(from_wallet_id=usd, to_wallet_id=usd2, from_amount=500)
    )
    fx = await t.transfers.create(
        a, CreateTransferRequest(from_wallet_id=usd, to_wallet_id=eur, from_amount=300)
    )
    clock.advance(3600)
    await t.transfers.complete(None, fx.id)
    return History(a, b, usd, usd2, eur, deposit.id, paid.id, failed.id, transfer.id, fx.id)


async def _all(t: Treasury, company: int, wallet: str, limit: int) -> list[WalletTransaction]:
    rows: list[WalletTransaction] = []
    cursor: str | None = None
    while True:
        page = await t.statements.transactions(company, wallet, PageRequest(limit, cursor))
        rows.extend(page.items)
        if not page.has_more:
            return rows
        cursor = page.items[-1].id


def test_history_lists_every_posting_with_chained_figures(treasury: Treasury) -> None:
    t = treasury
    h = _run(_history(t))
    rows = _run(_all(t, h.company, h.usd, 100))
    oldest_first = list(reversed(rows))
    expected = [
        (EntryType.DEPOSIT, EntryCounter.PENDING, 10_000, h.deposit),
        (EntryType.DEPOSIT, EntryCounter.BALANCE, 10_000, h.deposit),
        (EntryType.WITHDRAWAL, EntryCounter.PENDING, -1_000, h.withdrawal),
        (EntryType.WITHDRAWAL_FEE, EntryCounter.PENDING, -FEE, h.withdrawal),
        (EntryType.WITHDRAWAL, EntryCounter.PENDING, -2_000, h.failed),
        (EntryType.WITHDRAWAL_FEE, EntryCounter.PENDING, -FEE, h.failed),
        (EntryType.WITHDRAWAL, EntryCounter.BALANCE, -1_000, h.withdrawal),
        (EntryType.WITHDRAWAL_FEE, EntryCounter.BALANCE, -FEE, h.withdrawal),
        (EntryType.RELEASE, EntryCounter.PENDING, 2_000, h.failed),
        (EntryType.RELEASE, EntryCounter.PENDING, FEE, h.failed),
        (EntryType.TRANSFER_OUT, EntryCounter.BALANCE, -500, h.transfer),
        (EntryType.FX, EntryCounter.PENDING, -300, h.fx),
        (EntryType.FX, EntryCounter.BALANCE, -300, h.fx),
    ]
    assert [(r.type, r.counter, r.amount, r.source_id) for r in oldest_first] == expected
    # The running figures chain, and the newest are the balance record's.
    balance = available = pending_in = 0
    for row in oldest_first:
        if row.counter is EntryCounter.BALANCE:
            balance += row.amount
        assert row.balance_after == balance
        assert row.available_balance_after <= row.balance_after
        pending_in = row.pending_in_after
        available = row.available_balance_after
    record = _run(t.wallets.balance(h.company, h.usd))
    assert (balance, available, pending_in) == (
        record.balance,
        record.available_balance,
        record.pending_in,
    )
    assert record.balance == 10_000 - 1_000 - FEE - 500 - 300
    # Pending figures: the deposit shows as pending_in until it completes.
    assert oldest_first[0].pending_in_after == 10_000
    assert oldest_first[1].pending_in_after == 0
    assert oldest_first[2].available_balance_after == 10_000 - 1_000
    # Paging by 3 gives the same rows; ids are unique.
    assert _run(_all(t, h.company, h.usd, 3)) == rows
    assert len({r.id for r in rows}) == len(rows)
    # The other wallets: the same-currency transfer in, and the converted amount in EUR.
    usd2 = _run(_all(t, h.company, h.usd2, 100))
    assert [(r.type, r.amount, r.balance_after) for r in usd2] == [
        (EntryType.TRANSFER_IN, 500, 500)
    ]
    eur = _run(_all(t, h.company, h.eur, 100))
    assert [(r.type, r.counter) for r in eur] == [
        (EntryType.FX, EntryCounter.BALANCE),
        (EntryType.FX, EntryCounter.PENDING),
    ]
    assert eur[0].balance_after == _run(t.wallets.balance(h.company, h.eur)).balance > 0


def test_filters_and_refusals(treasury: Treasury) -> None:
    t = treasury
    h = _run(_history(t))

    def listed(filters: TransactionFilter, limit: int = 100) -> list[WalletTransaction]:
        page = _run(t.statements.transactions(h.company, h.usd, PageRequest(limit), filters))
        return page.items

    fees = listed(TransactionFilter(type=EntryType.WITHDRAWAL_FEE))
    assert [(r.type, r.counter, r.amount) for r in fees] == [
        (EntryType.WITHDRAWAL_FEE, EntryCounter.BALANCE, -FEE),
        (EntryType.WITHDRAWAL_FEE, EntryCounter.PENDING, -FEE),
        (EntryType.WITHDRAWAL_FEE, EntryCounter.PENDING, -FEE),
    ]
    day2 = START + timedelta(days=1)
    day3 = START + timedelta(days=2)
    window = listed(TransactionFilter(created_gte=day2, created_lt=day3))
    assert len(window) == 8
    assert all(day2 <= r.created_at < day3 for r in window)
    releases = listed(TransactionFilter(created_gte=day2, type=EntryType.RELEASE), limit=1)
    assert len(releases) == 1 and releases[0].type is EntryType.RELEASE
    # Another company's wallet is not found; a cursor from another wallet is refused.
    with pytest.raises(NotFound):
        _run(t.statements.transactions(h.other_company, h.usd))
    with pytest.raises(NotFound):
        _run(t.statements.statement(h.other_company, h.usd, date(2026, 3, 1), date(2026, 3, 2)))
    # (A same-currency transfer is one posting, so it has one id in both wallets' histories;
    # the EUR leg of a conversion is a posting of its own.)
    other = _run(t.statements.transactions(h.company, h.eur)).items[0].id
    with pytest.raises(NotFound) as missing:
        _run(t.statements.transactions(h.company, h.usd, PageRequest(10, other)))
    assert missing.value.param == "starting_after"
    with pytest.raises(ValidationFailed):
        _run(t.statements.statement(h.company, h.usd, date(2026, 3, 2), date(2026, 3, 1)))
    with pytest.raises(ValidationFailed):
        _run(t.statements.statement(h.company, h.usd, date(2025, 1, 1), date(2026, 3, 1)))


def test_statement_opens_and_closes_on_the_figures_around_its_period(treasury: Treasury) -> None:
    t = treasury
    h = _run(_history(t))
    day1 = _run(t.statements.statement(h.company, h.usd, date(2026, 3, 1), date(2026, 3, 1)))
    assert (day1.opening_balance, day1.closing_balance) == (0, 10_000)
    days23 = _run(t.statements.statement(h.company, h.usd, date(2026, 3, 2), date(2026, 3, 3)))
    assert days23.opening_balance == 10_000
    assert days23.opening_available_balance == 10_000
    moved = sum(r.amount for r in days23.transactions if r.counter is EntryCounter.BALANCE)
    assert days23.closing_balance == days23.opening_balance + moved
    assert days23.closing_balance == _run(t.wallets.balance(h.company, h.usd)).balance
    assert [r.created_at for r in days23.transactions] == sorted(
        r.created_at for r in days23.transactions
    )
    totals = {x.type: x for x in days23.totals}
    assert totals[EntryType.WITHDRAWAL_FEE].count == 3
    assert totals[EntryType.WITHDRAWAL_FEE].balance_amount == -FEE
    assert totals[EntryType.WITHDRAWAL_FEE].pending_amount == -2 * FEE
    assert totals[EntryType.RELEASE].pending_amount == 2_000 + FEE
    assert totals[EntryType.TRANSFER_OUT].balance_amount == -500
    assert sum(x.balance_amount for x in days23.totals) == moved
    # An empty period later on opens and closes on the last figures.
    later = _run(t.statements.statement(h.company, h.usd, date(2026, 4, 1), date(2026, 4, 30)))
    assert later.transactions == [] and later.totals == []
    assert later.opening_balance == later.closing_balance == days23.closing_balance
    # What reconciliation reads: the same rows as the statement, oldest first.
    movements = _run(
        t.statements.movements(h.company, h.usd, days23.period_start, days23.period_end)
    )
    assert movements == days23.transactions


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_migration_replays_the_history_written_before_it(
    backend: str, request: pytest.FixtureRequest
) -> None:
    # A database whose postings were written before 0011: the upgrade must rebuild the same
    # histories the ledger writes live (only the source is the journal, not the object).
    from alembic import command
    from sqlalchemy import create_engine, text

    from treasury_sqlalchemy.migrate import alembic_config, upgrade
    from treasury_sqlalchemy.storage import normalize_url

    url = str(request.getfixturevalue(f"{backend}_url"))
    config = TreasuryConfig(database_url=url, pool_size=2, withdrawal_fees={"*": (FEE, 0)})
    t = bootstrap(config, clock=FakeClock(START))
    try:
        h = _run(_history(t))
        wallets = (h.usd, h.usd2, h.eur)
        live = {w: _run(_all(t, h.company, w, 100)) for w in wallets}
    finally:
        t.close()
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as conn:
            alembic = alembic_config()
            alembic.attributes["connection"] = conn
            command.downgrade(alembic, "0009")
            assert "wallet_entries" not in {
                r[0]
                for r in conn.execute(
                    text("SELECT name FROM sqlite_master WHERE type = 'table'")
                    if backend == "sqlite"
                    else text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
                )
            }
        upgrade(engine)
    finally:
        engine.dispose()
    t = bootstrap(config, clock=FakeClock(START))
    try:
        for wallet in wallets:
            replayed = _run(_all(t, h.company, wallet, 100))
            assert [r.model_copy(update={"source_id": ""}) for r in replayed] == [
                r.model_copy(update={"source_id": ""}) for r in live[wallet]
            ]
            assert all(r.source_id.startswith("jr_") for r in replayed)
    finally:
        t.close()


def test_concurrent_movements_keep_each_history_chained(treasury: Treasury) -> None:
    # Transfers both ways between two wallets at once: each wallet's entries must still chain
    # from one to the next in the order listed, whatever order the requests took their times.
    t = treasury

    async def scenario() -> tuple[int, str, str]:
        company = (await t.companies.create_company("C")).company.id
        a = (await t.wallets.create(company, CreateWalletRequest(name="a", currency_id="USD"))).id
        b = (await t.wallets.create(company, CreateWalletRequest(name="b", currency_id="USD"))).id
        for wallet_id in (a, b):
            request = CreateDepositRequest(
                wallet_id=wallet_id, from_amount=5_000, from_currency_id="USD"
            )
            deposit = await t.deposits.create(company, request)
            await t.deposits.complete(None, deposit.id)
        moves = [
            CreateTransferRequest(from_wallet_id=x, to_wallet_id=y, from_amount=amount)
            for amount in range(1, 21)
            for x, y in ((a, b), (b, a))
        ]
        await asyncio.gather(*(t.transfers.create(company, m) for m in moves))
        return company, a, b

    company, a, b = _run(scenario())
    for wallet_id in (a, b):
        rows = list(reversed(_run(_all(t, company, wallet_id, 100))))
        assert len(rows) == 2 + 40
        balance = 0
        for row in rows:
            if row.counter is EntryCounter.BALANCE:
                balance += row.amount
            assert row.balance_after == balance
        assert [r.created_at for r in rows] == sorted(r.created_at for r in rows)
        assert balance == _run(t.wallets.balance(company, wallet_id)).balance == 5_000
