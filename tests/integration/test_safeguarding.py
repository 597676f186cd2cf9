"""The bank's balance against the ledger: mirrors, breaks, the safeguarding report, and the
audit of the mirrors, on the memory storage, an SQLite file and PostgreSQL.

The treasury's one bank account is the debtor IBAN. Statements are camt.053 files whose stated
booked balances the test states (tests/safeguarding.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest

pytest.importorskip("sepaxml", reason="the bank-files extra is not installed")

from tests.bankfiles import Entry
from tests.safeguarding import DEBTOR_IBAN, statement
from treasury_core import (
    CreateDepositRequest,
    CreateWalletRequest,
    CreateWithdrawalRequest,
    RegisterBankAccountRequest,
    Treasury,
    TreasuryConfig,
    bootstrap,
)
from treasury_core.events import EventType
from treasury_core.ledger import Journal, Move
from treasury_core.ledger.audit import audit_ledger
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.services.safeguarding import bank_balance_as_of, check_bank_mirrors
from treasury_core.testing.clock import FakeClock
from treasury_core.treasury.bank_files import OPERATOR, BankStatementLine
from treasury_core.treasury.safeguarding import BankDay, BankMirror, BreakKind, BreakStatus

MIRROR = f"bank:{DEBTOR_IBAN}:EUR"
JAN, FEB, MAR = (date(2026, m, 1) for m in (1, 2, 3))


@pytest.fixture
def treasury(storage: Storage) -> Iterator[Treasury]:
    clock = FakeClock()
    config = TreasuryConfig(
        database_url="memory://",
        bank_rail="files",
        bank_debtor_name="Acme Treasury BV",
        bank_debtor_iban=DEBTOR_IBAN,
    )
    treasury = bootstrap(config, storage=storage, clock=clock, wall_clock=clock)
    try:
        yield treasury
    finally:
        treasury.close()


def january(closing: str = "1006.00") -> bytes:
    """1,000.00 before the treasury began, +10.00 on the 5th, -4.00 on the 20th."""
    return statement(
        "JAN",
        [
            Entry("J1", credit=True, amount="10.00", booked=date(2026, 1, 5)),
            Entry("J2", credit=False, amount="4.00", booked=date(2026, 1, 20)),
        ],
        start=JAN,
        end=date(2026, 1, 31),
        opening="1000.00",
        closing=closing,
    )


def february(closing: str = "1026.00") -> bytes:
    """+20.00 on the 3rd."""
    return statement(
        "FEB",
        [Entry("F1", credit=True, amount="20.00", booked=date(2026, 2, 3))],
        start=FEB,
        end=date(2026, 2, 28),
        opening="1006.00",
        closing=closing,
    )


def march() -> bytes:
    """+5.00 on the 2nd."""
    return statement(
        "MAR",
        [Entry("M1", credit=True, amount="5.00", booked=date(2026, 3, 2))],
        start=MAR,
        end=date(2026, 3, 31),
        opening="1026.00",
        closing="1031.00",
    )


async def _bank(treasury: Treasury, on: date) -> int:
    def read(uow: UnitOfWork) -> int:
        mirror = uow.records.get(BankMirror, BankMirror.id_for(DEBTOR_IBAN, "EUR"), OPERATOR)
        assert mirror is not None
        return bank_balance_as_of(uow, mirror, on)

    return await treasury.storage.run(read, write=False)


async def _break_events(treasury: Treasury) -> list[str]:
    events = await treasury.storage.run(lambda uow: uow.outbox.list(OPERATOR), write=False)
    return [e.data["object"]["id"] for e in events if e.type is EventType.RECONCILIATION_BREAK]


async def _postings(treasury: Treasury) -> int:
    return await treasury.storage.run(lambda uow: uow.ledger.count_postings(), write=False)


async def test_balances_that_agree_raise_no_break(treasury: Treasury) -> None:
    result = await treasury.bank.import_statement(january())
    assert result.breaks == ()
    mirror = await treasury.storage.run(lambda uow: uow.ledger.get_account(MIRROR), write=False)
    # The opening (money there before the treasury began) and both lines, as a debit balance.
    assert mirror is not None and mirror.balance == -100_600
    assert await _bank(treasury, date(2025, 12, 31)) == 100_000
    assert await _bank(treasury, date(2026, 1, 5)) == 101_000
    assert await _bank(treasury, date(2026, 1, 19)) == 101_000
    assert await _bank(treasury, date(2026, 1, 31)) == 100_600
    day = await treasury.storage.run(
        lambda uow: uow.records.get(
            BankDay, BankDay.id_for(DEBTOR_IBAN, "EUR", date(2026, 1, 20)), OPERATOR
        ),
        write=False,
    )
    assert day is not None and (day.net, day.lines) == (-400, 1)
    assert await treasury.safeguarding.breaks() == []
    assert await _break_events(treasury) == []
    # The next month agrees too: its opening is not recorded again.
    assert (await treasury.bank.import_statement(february())).breaks == ()
    assert await _bank(treasury, date(2026, 2, 28)) == 102_600


async def test_a_closing_that_disagrees_is_a_break_raised_once(treasury: Treasury) -> None:
    company = (await treasury.companies.create_company("Acme")).company.id
    await treasury.bank.import_statement(january())
    result = await treasury.bank.import_statement(february(closing="1030.00"))
    found = {b.kind: b for b in result.breaks}
    assert set(found) == {BreakKind.CLOSING, BreakKind.STATEMENT}
    closing = found[BreakKind.CLOSING]
    assert (closing.stated, closing.expected, closing.difference) == (103_000, 102_600, 400)
    assert (closing.account, closing.currency, closing.statement_id) == (DEBTOR_IBAN, "EUR", "FEB")
    assert closing.date == date(2026, 2, 28) and closing.status is BreakStatus.OPEN
    # The statement against itself: 1,006.00 + 20.00 is not 1,030.00.
    assert (found[BreakKind.STATEMENT].stated, found[BreakKind.STATEMENT].expected) == (
        103_000,
        102_600,
    )
    listed = await treasury.safeguarding.breaks()
    assert sorted(b.id for b in listed) == sorted(b.id for b in result.breaks)
    assert sorted(await _break_events(treasury)) == sorted(b.id for b in result.breaks)
    # The operator's: no company's events show them.
    theirs = await treasury.notifications.events(company, type_=None, limit=100)
    assert EventType.RECONCILIATION_BREAK not in {e.type for e in theirs.items}

    postings = await _postings(treasury)
    again = await treasury.bank.import_statement(february(closing="1030.00"))
    assert (again.imported, again.already_imported) == (0, 1)
    assert await _postings(treasury) == postings
    assert sorted(b.id for b in again.breaks) == sorted(b.id for b in result.breaks)
    assert len(await treasury.safeguarding.breaks()) == 2
    assert len(await _break_events(treasury)) == 2


async def test_a_missing_statement_is_a_break_on_the_next_opening(treasury: Treasury) -> None:
    await treasury.bank.import_statement(january())
    gap = await treasury.bank.import_statement(march())
    found = {b.kind: b for b in gap.breaks}
    # February's +20.00 never arrived: the bank opens March with it, the ledger without.
    assert set(found) == {BreakKind.OPENING, BreakKind.CLOSING}
    opening = found[BreakKind.OPENING]
    assert (opening.date, opening.stated, opening.expected) == (MAR, 102_600, 100_600)
    assert opening.difference == 2_000
    assert found[BreakKind.CLOSING].difference == 2_000

    # February imported late fills the gap; March imported again agrees and resolves both.
    assert (await treasury.bank.import_statement(february())).breaks == ()
    assert (await treasury.bank.import_statement(march())).breaks == ()
    assert await treasury.safeguarding.breaks() == []
    resolved = await treasury.safeguarding.breaks(None)
    assert {b.id for b in resolved} == {b.id for b in gap.breaks}
    assert all(b.status is BreakStatus.RESOLVED and b.resolved_at for b in resolved)
    assert await _bank(treasury, date(2026, 3, 31)) == 103_100


async def test_lines_before_any_balance_leave_no_opening(treasury: Treasury) -> None:
    """Once the mirror has moved, a stated opening is compared, never recorded."""
    notice = statement(
        "NOTE",
        [Entry("N1", credit=True, amount="7.00", booked=date(2025, 12, 30))],
        start=date(2025, 12, 30),
        end=date(2025, 12, 30),
        opening=None,
        closing=None,
    )
    assert (await treasury.bank.import_statement(notice)).breaks == ()
    result = await treasury.bank.import_statement(january())
    kinds = {b.kind: b.difference for b in result.breaks}
    assert kinds == {BreakKind.OPENING: 100_000 - 700, BreakKind.CLOSING: 100_600 - 1_300}


async def _company_wallet(treasury: Treasury) -> tuple[int, str]:
    company = (await treasury.companies.create_company("Acme")).company.id
    wallet = await treasury.wallets.create(
        company, CreateWalletRequest(name="E", currency_id="EUR")
    )
    return company, wallet.id


async def test_the_safeguarding_report_flags_a_shortfall(treasury: Treasury) -> None:
    company, wallet = await _company_wallet(treasury)
    deposit = await treasury.deposits.create(
        company, CreateDepositRequest(wallet_id=wallet, from_amount=5_000, from_currency_id="EUR")
    )
    # Announced, never received: not money yet.
    await treasury.deposits.create(
        company, CreateDepositRequest(wallet_id=wallet, from_amount=3_000, from_currency_id="EUR")
    )
    jan = statement(
        "S1",
        [Entry("D1", credit=True, amount="50.00", remittance=deposit.id, booked=date(2026, 1, 2))],
        start=JAN,
        end=date(2026, 1, 31),
        opening="100.00",
        closing="150.00",
    )
    imported = await treasury.bank.import_statement(jan)
    assert imported.lines[0].matched_id == deposit.id and imported.breaks == ()
    bank_account = await treasury.bank_accounts.register(
        company,
        RegisterBankAccountRequest(
            bank_name="Commerzbank",
            account_name="Jane Doe",
            account_number="DE89370400440532013000",
            routing_number="COBADEFFXXX",
            currency_id="EUR",
        ),
    )
    await treasury.withdrawals.create(
        company,
        CreateWithdrawalRequest(
            wallet_id=wallet,
            from_amount=2_000,
            from_currency_id="EUR",
            bank_account_id=bank_account.id,
        ),
    )
    # February: the bank takes 120.00 nobody in the ledger knows of.
    feb = statement(
        "S2",
        [Entry("X1", credit=False, amount="120.00", booked=date(2026, 2, 10))],
        start=FEB,
        end=date(2026, 2, 28),
        opening="150.00",
        closing="30.00",
    )
    assert (await treasury.bank.import_statement(feb)).breaks == ()

    before = await treasury.safeguarding.report(date(2026, 1, 31))
    [row] = before.rows
    assert (row.currency, row.bank_ledger, row.bank_stated) == ("EUR", 15_000, 15_000)
    assert row.stated_on == date(2026, 1, 31)
    # Still owed in full; 20.00 of it reserved to leave; 30.00 announced.
    assert (row.wallets, row.reserved, row.pending_in) == (5_000, 2_000, 3_000)
    assert (row.surplus, row.shortfall, before.shortfall) == (10_000, False, False)

    after = await treasury.safeguarding.report(date(2026, 2, 28))
    [row] = after.rows
    assert (row.bank_ledger, row.bank_stated, row.wallets) == (3_000, 3_000, 5_000)
    assert (row.surplus, row.shortfall, after.shortfall) == (-2_000, True, True)
    assert after.csv().splitlines() == [
        "date,currency,bank_ledger,bank_stated,stated_on,wallets,reserved,pending_in,"
        "requirement,surplus,shortfall",
        "2026-02-28,EUR,3000,3000,2026-02-28,5000,2000,3000,5000,-2000,yes",
    ]
    # Before anything happened: the opening was at the bank, nothing was owed.
    [empty] = (await treasury.safeguarding.report(date(2025, 12, 31))).rows
    assert (empty.bank_ledger, empty.bank_stated, empty.wallets) == (10_000, None, 0)


async def test_ledger_verify_checks_the_mirrors(treasury: Treasury) -> None:
    await treasury.bank.import_statement(january())
    storage = treasury.storage
    sound = audit_ledger(storage, bank_mirrors=check_bank_mirrors)
    assert sound.ok, sound.differences

    def tamper(uow: UnitOfWork) -> None:
        journal = Journal("jr_tamper", (Move("world:EUR", MIRROR, "EUR", 100),))
        uow.ledger.apply(journal, treasury.clock.now())

    await storage.run(tamper)
    broken = audit_ledger(storage, bank_mirrors=check_bank_mirrors)
    assert f"[8] {MIRROR}: posting jr_tamper.0 has no statement line" in broken.differences
    assert (
        f"[8] {MIRROR}: holds 100500 at the bank, its opening and statement lines make 100600"
        in (broken.differences)
    )
    # The ledger itself still balances: only the mirror check sees it.
    assert audit_ledger(storage).ok


async def test_ledger_verify_finds_a_line_without_its_posting(treasury: Treasury) -> None:
    result = await treasury.bank.import_statement(january())
    line_id = result.lines[0].id

    def forge(uow: UnitOfWork) -> None:
        line = uow.records.get(BankStatementLine, line_id, OPERATOR)
        assert line is not None
        uow.records.add(
            line.model_copy(
                update={
                    "id": "bsl_01JFORGED00000000000000000",
                    "entry_reference": "Z",
                    "identity": "ref:Z",
                }
            )
        )

    await treasury.storage.run(forge)
    broken = audit_ledger(treasury.storage, bank_mirrors=check_bank_mirrors)
    assert (
        f"[8] {MIRROR}: statement line bsl_01JFORGED00000000000000000 has 0 postings, not 1"
        in broken.differences
    )
