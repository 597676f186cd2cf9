"""The bank's balance against the ledger: mirrors, breaks, the safeguarding report, and the
audit of the mirrors, on the memory storage, an SQLite file and PostgreSQL; also statements
that do not come one a day in date order: several of one booking date imported again, an
earlier day after a later one, a notification before any statement, and breaks that heal and
break again.

The treasury's one bank account is the debtor IBAN. Statements are camt.053 files whose stated
booked balances the test states (tests/safeguarding.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from decimal import Decimal

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
from treasury_core.ledger import Journal, Move
from treasury_core.ledger.audit import audit_ledger
from treasury_core.movements.bank_files import OPERATOR, BankStatementLine
from treasury_core.movements.safeguarding import BankDay, BankMirror, BreakKind, BreakStatus
from treasury_core.notifications.events import EventType
from treasury_core.ports import Balance, Statement, Storage, UnitOfWork
from treasury_core.services.movements import safeguarding
from treasury_core.services.movements.safeguarding import bank_balance_as_of, check_bank_mirrors
from treasury_core.testing.fakes.clock import FakeClock

MIRROR = f"bank:{DEBTOR_IBAN}:EUR"
JAN, FEB, MAR = (date(2026, m, 1) for m in (1, 2, 3))
DAY3, DAY4, DAY5, DAY6 = (date(2026, 1, d) for d in (3, 4, 5, 6))


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


async def _mirror(treasury: Treasury) -> BankMirror:
    def read(uow: UnitOfWork) -> BankMirror:
        mirror = uow.records.get(BankMirror, BankMirror.id_for(DEBTOR_IBAN, "EUR"), OPERATOR)
        assert mirror is not None
        return mirror

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


async def test_lines_before_the_first_opening_are_inside_it(treasury: Treasury) -> None:
    """A line imported before any statement stated a balance was already in the bank's first
    stated opening: the opening recorded is that balance less the line."""
    notice = statement(
        "NOTE",
        [Entry("N1", credit=True, amount="7.00", booked=date(2025, 12, 30))],
        start=date(2025, 12, 30),
        end=date(2025, 12, 30),
        opening=None,
        closing=None,
    )
    assert (await treasury.bank.import_statement(notice)).breaks == ()
    assert (await treasury.bank.import_statement(january())).breaks == ()
    mirror = await _mirror(treasury)
    assert (mirror.opening, mirror.start_date) == (100_000 - 700, date(2026, 1, 5))
    assert await _bank(treasury, date(2025, 12, 31)) == 100_000
    assert await _bank(treasury, date(2025, 12, 29)) == 100_000 - 700
    assert (await treasury.bank.import_statement(february())).breaks == ()
    assert await _bank(treasury, date(2026, 2, 28)) == 102_600
    sound = audit_ledger(treasury.storage, bank_mirrors=check_bank_mirrors)
    assert sound.ok, sound.differences


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


# --- statements out of date order ------------------------------------------------------------


def day(
    statement_id: str, on: date, opening: str, closing: str, *entries: tuple[str, str]
) -> bytes:
    """A camt.053 of one booking date: credits ``(ref, amount)`` from ``opening`` to
    ``closing``."""
    return statement(
        statement_id,
        [Entry(ref, credit=True, amount=amount, booked=on) for ref, amount in entries],
        start=on,
        end=on,
        opening=opening,
        closing=closing,
    )


def notification(ref: str, amount: str, on: date) -> bytes:
    """A camt.054 booked credit notification: one entry, no balances."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.054.001.08">'
        "<BkToCstmrDbtCdtNtfctn><GrpHdr><MsgId>N1</MsgId>"
        "<CreDtTm>2026-01-05T12:00:00</CreDtTm></GrpHdr><Ntfctn><Id>NOTE-1</Id>"
        "<CreDtTm>2026-01-05T12:00:00</CreDtTm>"
        f"<Acct><Id><IBAN>{DEBTOR_IBAN}</IBAN></Id><Ccy>EUR</Ccy></Acct>"
        f'<Ntry><Amt Ccy="EUR">{amount}</Amt><CdtDbtInd>CRDT</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts>'
        f"<BookgDt><Dt>{on.isoformat()}</Dt></BookgDt><AcctSvcrRef>{ref}</AcctSvcrRef></Ntry>"
        "</Ntfctn></BkToCstmrDbtCdtNtfctn></Document>"
    ).encode()


def _verified(treasury: Treasury) -> None:
    report = audit_ledger(treasury.storage, bank_mirrors=check_bank_mirrors)
    assert report.ok, report.differences


async def _stated(treasury: Treasury, on: date) -> int | None:
    [row] = (await treasury.safeguarding.report(on)).rows
    return row.bank_stated


# --- several statements of one booking date ------------------------------------------------


async def test_intraday_statements_imported_again_raise_no_break(treasury: Treasury) -> None:
    first = day("P1", DAY5, "100.00", "110.00", ("A1", "10.00"))
    second = day("P2", DAY5, "110.00", "130.00", ("A2", "20.00"))
    assert (await treasury.bank.import_statement(first)).breaks == ()
    assert (await treasury.bank.import_statement(second)).breaks == ()
    # Again, in either order: each is compared with the mirror as it first saw it.
    for data in (first, second, first, second):
        result = await treasury.bank.import_statement(data)
        assert (result.imported, result.breaks) == (0, ())
    assert await treasury.safeguarding.breaks(None) == []
    assert await _break_events(treasury) == []
    assert await _bank(treasury, DAY5) == 13_000
    # The day's stated balance stays the later statement's.
    assert await _stated(treasury, DAY5) == 13_000
    _verified(treasury)


MT940_PAGES = (
    f":20:PAGES\r\n:25:{DEBTOR_IBAN}\r\n:28C:7/1\r\n"
    ":60F:C260104EUR100,00\r\n:61:2601050105C10,00NTRFNONREF//B1\r\n:86:one\r\n"
    ":62M:C260105EUR110,00\r\n-\r\n"
    f":20:PAGES\r\n:25:{DEBTOR_IBAN}\r\n:28C:7/2\r\n"
    ":60M:C260105EUR110,00\r\n:61:2601050105C20,00NTRFNONREF//B2\r\n:86:two\r\n"
    ":62F:C260105EUR130,00\r\n-\r\n"
)


async def test_mt940_pages_of_one_day_imported_again_raise_no_break(treasury: Treasury) -> None:
    data = MT940_PAGES.encode()
    first = await treasury.bank.import_statement(data)
    assert (first.imported, first.breaks) == (2, ())
    again = await treasury.bank.import_statement(data)
    assert (again.imported, again.breaks) == (0, ())
    assert await treasury.safeguarding.breaks(None) == []
    assert await _bank(treasury, DAY4) == 10_000
    assert await _bank(treasury, DAY5) == 13_000
    _verified(treasury)


async def test_a_new_line_of_a_statement_imported_again_counts(treasury: Treasury) -> None:
    """The statement's own lines are before its closing, whenever they arrive."""
    await treasury.bank.import_statement(day("P1", DAY5, "100.00", "110.00", ("A1", "10.00")))
    # The bank sends the statement again with a line it had left out: its closing is a new
    # balance, its opening the one already compared.
    fuller = day("P1", DAY5, "100.00", "115.00", ("A1", "10.00"), ("A3", "5.00"))
    result = await treasury.bank.import_statement(fuller)
    assert (result.imported, result.breaks) == (1, ())
    assert await _bank(treasury, DAY5) == 11_500
    _verified(treasury)


# --- an earlier day after a later one ------------------------------------------------------


async def test_an_earlier_day_imported_later_moves_the_opening(treasury: Treasury) -> None:
    later = day("D5", DAY5, "110.00", "130.00", ("A5", "20.00"))
    assert (await treasury.bank.import_statement(later)).breaks == ()
    assert (await _bank(treasury, DAY4), await _bank(treasury, DAY5)) == (11_000, 13_000)
    # Day 4's line is inside day 5's opening: the opening before it becomes 100.00.
    earlier = day("D4", DAY4, "100.00", "110.00", ("A4", "10.00"))
    assert (await treasury.bank.import_statement(earlier)).breaks == ()
    assert (await treasury.bank.import_statement(later)).breaks == ()
    assert await treasury.safeguarding.breaks(None) == []
    assert await _bank(treasury, DAY3) == 10_000
    assert await _bank(treasury, DAY4) == 11_000
    assert await _bank(treasury, DAY5) == 13_000
    mirror = await treasury.storage.run(
        lambda uow: uow.records.get(BankMirror, BankMirror.id_for(DEBTOR_IBAN, "EUR"), OPERATOR),
        write=False,
    )
    assert mirror is not None and (mirror.opening, mirror.start_date) == (10_000, DAY5)
    _verified(treasury)
    # The next day follows on.
    assert (await treasury.bank.import_statement(day("D6", DAY6, "130.00", "130.00"))).breaks == ()


async def test_an_earlier_day_that_disagrees_still_breaks(treasury: Treasury) -> None:
    await treasury.bank.import_statement(day("D5", DAY5, "110.00", "130.00", ("A5", "20.00")))
    # Day 4 says it closed at 109.00, yet day 5 opened at 110.00.
    result = await treasury.bank.import_statement(
        day("D4", DAY4, "100.00", "109.00", ("A4", "10.00"))
    )
    found = {b.kind: (b.stated, b.expected) for b in result.breaks}
    assert found == {BreakKind.CLOSING: (10_900, 11_000), BreakKind.STATEMENT: (10_900, 11_000)}
    _verified(treasury)


async def test_ledger_verify_finds_an_opening_moved_by_no_line(treasury: Treasury) -> None:
    await treasury.bank.import_statement(day("D5", DAY5, "110.00", "130.00", ("A5", "20.00")))
    await treasury.bank.import_statement(day("D4", DAY4, "100.00", "110.00", ("A4", "10.00")))
    _verified(treasury)

    def forget(uow: UnitOfWork) -> None:
        mirror = uow.records.get(BankMirror, BankMirror.id_for(DEBTOR_IBAN, "EUR"), OPERATOR)
        assert mirror is not None
        uow.records.update(mirror.model_copy(update={"opening": 11_000}))

    await treasury.storage.run(forget)
    report = audit_ledger(treasury.storage, bank_mirrors=check_bank_mirrors)
    mirror_id = f"bank:{DEBTOR_IBAN}:EUR"
    assert f"[8] {mirror_id}: opening postings make 10000, the recorded opening 11000" in (
        report.differences
    )


# --- a notification before any statement ---------------------------------------------------


async def test_a_notification_before_the_first_statement(treasury: Treasury) -> None:
    assert (await treasury.bank.import_statement(notification("A1", "10.00", DAY5))).breaks == ()
    # The account held 1,000.00 before; the day's statement holds the notified line too.
    first = day("S5", DAY5, "1000.00", "1010.00", ("A1", "10.00"))
    result = await treasury.bank.import_statement(first)
    assert (result.imported, result.breaks) == (0, ())
    assert (
        await treasury.bank.import_statement(day("S6", DAY6, "1010.00", "1010.00"))
    ).breaks == ()
    assert await _bank(treasury, DAY4) == 100_000
    assert await _bank(treasury, DAY6) == 101_000
    _verified(treasury)


async def test_a_notification_of_an_earlier_day_is_in_the_opening(treasury: Treasury) -> None:
    await treasury.bank.import_statement(notification("A4", "10.00", DAY4))
    result = await treasury.bank.import_statement(
        day("S5", DAY5, "110.00", "130.00", ("A5", "20.00"))
    )
    assert result.breaks == ()
    assert (await _bank(treasury, DAY3), await _bank(treasury, DAY4)) == (10_000, 11_000)
    _verified(treasury)


# --- breaks kept up to date ------------------------------------------------------------------


async def test_a_break_follows_the_latest_comparison(treasury: Treasury) -> None:
    assert (await treasury.bank.import_statement(day("D3", DAY3, "100.00", "100.00"))).breaks == ()
    d5 = day("D5", DAY5, "130.00", "130.00")
    gap = await treasury.bank.import_statement(d5)
    opening = next(b for b in gap.breaks if b.kind is BreakKind.OPENING)
    assert (opening.expected, opening.difference) == (10_000, 3_000)
    events = await _break_events(treasury)
    assert opening.id in events

    # Part of the gap arrives: the same break, its figures brought up to date, no event.
    await treasury.bank.import_statement(notification("G1", "10.00", DAY4))
    again = await treasury.bank.import_statement(d5)
    same = next(b for b in again.breaks if b.kind is BreakKind.OPENING)
    assert (same.id, same.expected, same.difference) == (opening.id, 11_000, 2_000)
    [listed] = [b for b in await treasury.safeguarding.breaks() if b.id == opening.id]
    assert (listed.expected, listed.difference, listed.status) == (11_000, 2_000, BreakStatus.OPEN)
    assert await _break_events(treasury) == events

    # The rest arrives: resolved.
    await treasury.bank.import_statement(
        statement(
            "D4",
            [Entry("G2", credit=True, amount="20.00", booked=DAY4)],
            start=DAY4,
            end=DAY4,
            opening=None,
            closing=None,
        )
    )
    assert (await treasury.bank.import_statement(d5)).breaks == ()
    assert await treasury.safeguarding.breaks() == []
    [resolved] = [b for b in await treasury.safeguarding.breaks(None) if b.id == opening.id]
    assert resolved.status is BreakStatus.RESOLVED and resolved.resolved_at is not None

    # A line nobody stated lands on day 4 after all: the balance disagrees again and the
    # break opens again, announced once more.
    await treasury.bank.import_statement(notification("G3", "1.00", DAY4))
    broken = await treasury.bank.import_statement(d5)
    reopened = next(b for b in broken.breaks if b.kind is BreakKind.OPENING)
    assert (reopened.id, reopened.status, reopened.resolved_at) == (
        opening.id,
        BreakStatus.OPEN,
        None,
    )
    assert (reopened.expected, reopened.difference) == (13_100, -100)
    after = await _break_events(treasury)
    assert after.count(opening.id) == 2
    assert opening.id in {b.id for b in await treasury.safeguarding.breaks()}
    # Imported again with nothing new: found, not announced again.
    await treasury.bank.import_statement(d5)
    assert await _break_events(treasury) == after


# --- an amount the import did not check ------------------------------------------------------


async def test_an_unchecked_amount_is_an_error_not_a_figure(treasury: Treasury) -> None:
    bad = Statement(
        statement_id="X",
        account=DEBTOR_IBAN,
        currency="EUR",
        period_start=DAY5,
        period_end=DAY5,
        lines=(),
        format="camt.053",
        opening_balance=Balance(Decimal("1.001"), "EUR", DAY5),
    )

    def run(uow: UnitOfWork) -> None:
        safeguarding.reconcile_statement(uow, treasury.adapters, bad, ())

    with pytest.raises(RuntimeError, match=r"1\.001 EUR reached the mirror without being checked"):
        await treasury.storage.run(run)
    # Nothing was recorded.
    mirror = await treasury.storage.run(
        lambda uow: uow.records.get(BankMirror, BankMirror.id_for(DEBTOR_IBAN, "EUR"), OPERATOR),
        write=False,
    )
    assert mirror is not None and mirror.opening is None
