"""Statement imports through the service: what matches, what stays unmatched, what is refused.

Each test runs on the memory storage, an SQLite file and PostgreSQL (the ``storage`` fixture),
with the files rail; the round trip over HTTP and the commands is tests/e2e/test_bank_files.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import date
from decimal import Decimal

import pytest

pytest.importorskip("sepaxml", reason="the bank-files extra is not installed")

from tests.bankfiles import Entry, camt053
from treasury_core import (
    CreateDepositRequest,
    CreateVirtualAccountRequest,
    CreateWalletRequest,
    CreateWithdrawalRequest,
    InvalidRequestError,
    RegisterBankAccountRequest,
    Treasury,
    TreasuryConfig,
    bootstrap,
)
from treasury_core.errors import ValidationFailed
from treasury_core.movements.bank_files import BankExport, BankStatementLine, line_key
from treasury_core.movements.records import Withdrawal
from treasury_core.ports import Storage
from treasury_core.testing.fakes.clock import FakeClock

DEBTOR_IBAN = "NL91ABNA0417164300"


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


async def _company(treasury: Treasury, name: str = "Acme") -> tuple[int, str]:
    company = (await treasury.companies.create_company(name)).company.id
    wallet = await treasury.wallets.create(
        company, CreateWalletRequest(name="E", currency_id="EUR")
    )
    return company, wallet.id


async def _deposit(treasury: Treasury, company: int, wallet: str, amount: int, ref: str) -> str:
    request = CreateDepositRequest(
        wallet_id=wallet, from_amount=amount, from_currency_id="EUR", reference=ref
    )
    return (await treasury.deposits.create(company, request)).id


async def _status(treasury: Treasury, company: int, deposit_id: str) -> str:
    return (await treasury.deposits.get(company, deposit_id)).status.value


async def test_only_our_own_ids_and_exact_amounts_move_money(treasury: Treasury) -> None:
    company, wallet = await _company(treasury)
    exact = await _deposit(treasury, company, wallet, 1_000, "INV-1")
    short = await _deposit(treasury, company, wallet, 2_000, "INV-2")
    chosen = await _deposit(treasury, company, wallet, 3_000, "Invoice 42")
    statement = camt053(
        [
            # Banks upper-case remittance text; the id is still ours.
            Entry("L1", credit=True, amount="10.00", remittance=f"PAYMENT {exact.upper()}"),
            Entry("L2", credit=True, amount="19.99", remittance=short),
            # The merchant's own reference settles nothing, even alone and exact.
            Entry("L3", credit=True, amount="30.00", remittance="Invoice 42"),
            Entry("L4", credit=True, amount="10.00", remittance=exact),
            Entry("L5", credit=False, amount="5.00", end_to_end="wdr_01JNOSUCHWITHDRAWAL00000"),
        ]
    )
    result = await treasury.bank.import_statement(statement)
    outcomes = {line.entry_reference: line for line in result.lines}
    assert outcomes["L1"].outcome.value == "deposit_completed"
    assert outcomes["L1"].matched_id == exact
    assert "the amount is 1999, 2000 was expected" in (outcomes["L2"].reason or "")
    assert outcomes["L3"].outcome.value == "unmatched"
    # The deposit L4 quotes was completed by L1 in the same import.
    assert f"{exact} is completed" in (outcomes["L4"].reason or "")
    assert "no withdrawal or payment file of ours" in (outcomes["L5"].reason or "")
    assert (result.imported, result.unmatched) == (5, 4)
    assert await _status(treasury, company, exact) == "completed"
    for pending in (short, chosen):
        assert await _status(treasury, company, pending) == "pending"
    balance = await treasury.wallets.balance(company, wallet)
    assert balance.balance == 1_000
    unmatched = await treasury.bank.unmatched()
    assert [line.entry_reference for line in unmatched] == ["L2", "L3", "L4", "L5"]


async def test_payment_instructions_quote_the_deposit_id(treasury: Treasury) -> None:
    """The payer is asked for the reference the system issued, not the merchant's."""
    company, wallet = await _company(treasury)
    request = CreateDepositRequest(
        wallet_id=wallet, from_amount=1_000, from_currency_id="EUR", reference="Invoice 42"
    )
    deposit = await treasury.deposits.create(company, request)
    [instruction] = deposit.payment_instructions
    assert instruction.account_number == DEBTOR_IBAN
    assert deposit.id in instruction.account_name
    assert "Invoice 42" not in instruction.account_name


async def test_a_malformed_statement_applies_nothing(treasury: Treasury) -> None:
    company, wallet = await _company(treasury)
    deposit = await _deposit(treasury, company, wallet, 1_000, "INV-1")
    good = Entry("L1", credit=True, amount="10.00", remittance=deposit)
    for bad, why in (
        (Entry("L2", credit=True, amount="1.00", currency="XAU"), "the line is in XAU"),
        (Entry("L2", credit=True, amount="1.00", currency="USD"), "account NL91ABNA0417164300"),
        (Entry("L2", credit=True, amount="1.001"), "more decimals than EUR allows"),
        (Entry("L2", credit=True, amount="999999999999.99"), "above the largest amount"),
        (Entry("L2", credit=True, amount="9223372036854775.08"), "above the largest amount"),
        (Entry("L2", credit=True, amount="92233720368547758.08"), "more than 18 digits"),
        (Entry("L2", credit=True, amount="1E+2"), "'1E+2' is not an amount"),
    ):
        with pytest.raises(ValidationFailed) as refused:
            await treasury.bank.import_statement(camt053([good, bad]))
        assert refused.value.code == "statement_invalid"
        assert "entry 2" in refused.value.message and why in refused.value.message
    assert await _status(treasury, company, deposit) == "pending"
    assert await treasury.bank.unmatched() == []


async def test_only_the_treasurys_own_accounts_are_imported(storage: Storage) -> None:
    """A statement of any other account is not the bank speaking about our money: refused
    whole. Configured accounts are read in their own currency."""
    clock = FakeClock()
    config = TreasuryConfig(
        database_url="memory://",
        bank_rail="files",
        bank_debtor_name="Acme Treasury BV",
        bank_debtor_iban=DEBTOR_IBAN,
        bank_accounts={"EUR": ["DE02 1203 0000 0000 2020 51"]},
    )
    treasury = bootstrap(config, storage=storage, clock=clock, wall_clock=clock)
    try:
        company, wallet = await _company(treasury)
        deposit = await _deposit(treasury, company, wallet, 1_000, "x")
        line = Entry("L1", credit=True, amount="10.00", remittance=deposit)
        for forged in ("XX00FAKE", "NL91ABNA0417164301"):
            with pytest.raises(ValidationFailed) as refused:
                await treasury.bank.import_statement(camt053([line], account=forged))
            assert f"account {forged} is not one of the treasury's bank accounts" in (
                refused.value.message
            )
        assert await _status(treasury, company, deposit) == "pending"
        second = await treasury.bank.import_statement(
            camt053([line], account="de02120300000000202051")
        )
        assert second.statements[0].account == "DE02120300000000202051"
        assert await _status(treasury, company, deposit) == "completed"
    finally:
        treasury.close()


async def test_one_booking_counts_once_however_it_is_spelled(treasury: Treasury) -> None:
    """The line's identity is the account and the bank's reference without white space and
    case: another spelling, or the same line again, is the same booking."""
    company, wallet = await _company(treasury)
    account = await treasury.virtual_accounts.create(
        company, CreateVirtualAccountRequest(wallet_id=wallet, source_currency="EUR")
    )
    assert account.iban is not None
    for spelling in ("REF-1", "ref-1", " R E F-1 ", "Ref-1"):
        await treasury.bank.import_statement(
            camt053(
                [Entry(spelling, credit=True, amount="40.00", creditor_iban=account.iban)],
                statement_id=f"S-{spelling}",
            )
        )
    assert (await treasury.wallets.balance(company, wallet)).balance == 4_000


async def test_lines_without_a_bank_reference_get_a_stable_identity(treasury: Treasury) -> None:
    """Two identical lines of one statement are two bookings; the same statement again is
    none; NONREF is no reference."""
    company, wallet = await _company(treasury)
    account = await treasury.virtual_accounts.create(
        company, CreateVirtualAccountRequest(wallet_id=wallet, source_currency="EUR")
    )
    assert account.iban is not None
    twin = Entry(None, credit=True, amount="5.00", creditor_iban=account.iban)
    nonref = Entry("NONREF", credit=True, amount="5.00", creditor_iban=account.iban)
    statement = camt053([twin, twin, nonref])
    first = await treasury.bank.import_statement(statement)
    assert (first.imported, first.already_imported) == (3, 0)
    assert all(line.identity.startswith("derived:") for line in first.lines)
    again = await treasury.bank.import_statement(statement)
    assert (again.imported, again.already_imported) == (0, 3)
    assert (await treasury.wallets.balance(company, wallet)).balance == 1_500


async def test_a_reimport_answers_every_line_as_the_first_import_stored_it(
    treasury: Treasury,
) -> None:
    """The same file again applies nothing, and its reply is still the whole file: each
    statement and each line as stored, in file order, every one counted as already imported."""
    company, wallet = await _company(treasury)
    account = await treasury.virtual_accounts.create(
        company, CreateVirtualAccountRequest(wallet_id=wallet, source_currency="EUR")
    )
    assert account.iban is not None
    deposit = await _deposit(treasury, company, wallet, 1_000, "INV-1")
    statement = camt053(
        [
            Entry("L1", credit=True, amount="10.00", remittance=deposit),
            Entry("L2", credit=True, amount="7.00", creditor_iban=account.iban),
            Entry("L3", credit=True, amount="3.00", remittance="Invoice 42"),
            Entry(None, credit=True, amount="2.00", creditor_iban=account.iban),
        ]
    )
    first = await treasury.bank.import_statement(statement)
    assert [(line.entry_reference, line.outcome.value) for line in first.lines] == [
        ("L1", "deposit_completed"),
        ("L2", "virtual_account_credited"),
        ("L3", "unmatched"),
        (None, "virtual_account_credited"),
    ]
    assert (first.imported, first.already_imported, first.unmatched) == (4, 0, 1)
    balance = (await treasury.wallets.balance(company, wallet)).balance
    assert balance == 1_900

    again = await treasury.bank.import_statement(statement)
    assert again.statements == first.statements
    assert [s.lines for s in again.statements] == [4]
    assert again.lines == first.lines
    # Nothing new is unmatched: the unmatched line was counted by the first import.
    assert (again.imported, again.already_imported, again.unmatched) == (0, 4, 0)
    assert again.breaks == first.breaks
    assert (await treasury.wallets.balance(company, wallet)).balance == balance

    # Reissued with a booking added between two known ones: the reply keeps the file's order.
    reissued = await treasury.bank.import_statement(
        camt053(
            [
                Entry("L1", credit=True, amount="10.00", remittance=deposit),
                Entry("L9", credit=True, amount="1.00", creditor_iban=account.iban),
                Entry("L3", credit=True, amount="3.00", remittance="Invoice 42"),
            ],
            statement_id="STMT-1-REISSUED",
        )
    )
    known = {line.entry_reference: line for line in first.lines}
    assert [line.entry_reference for line in reissued.lines] == ["L1", "L9", "L3"]
    assert reissued.lines[0] == known["L1"] and reissued.lines[2] == known["L3"]
    assert reissued.lines[1].outcome.value == "virtual_account_credited"
    assert (reissued.imported, reissued.already_imported, reissued.unmatched) == (1, 2, 0)


async def test_a_batch_booking_completes_every_withdrawal_of_the_file(treasury: Treasury) -> None:
    company, wallet, bank = await _paying_wallet(treasury)
    withdrawals = [
        await treasury.withdrawals.create(
            company,
            CreateWithdrawalRequest(
                wallet_id=wallet, from_amount=amount, from_currency_id="EUR", bank_account_id=bank
            ),
        )
        for amount in (1_000, 2_500)
    ]
    exported = (await treasury.bank.export()).export
    assert exported is not None and exported.amount == 3_500
    assert b"<BtchBookg>true</BtchBookg>" in exported.content.encode()
    assert f"<PmtInfId>{exported.id}</PmtInfId>" in exported.content
    wrong = camt053([Entry("B0", credit=False, amount="35.01", batch=exported.id)])
    assert "the amount is 3501, 3500 was expected" in (
        (await treasury.bank.import_statement(wrong)).lines[0].reason or ""
    )
    booked = await treasury.bank.import_statement(
        camt053([Entry("B1", credit=False, amount="35.00", batch=exported.id)])
    )
    [line] = booked.lines
    assert (line.outcome.value, line.matched_id) == ("batch_completed", exported.id)
    for withdrawal in withdrawals:
        done = await treasury.withdrawals.get(company, withdrawal.id)
        assert done.status.value == "completed"
    again = await treasury.bank.import_statement(
        camt053([Entry("B2", credit=False, amount="35.00", batch=exported.id)])
    )
    assert "is already completed" in (again.lines[0].reason or "")


async def test_single_booking_exports_one_block_per_transfer(storage: Storage) -> None:
    clock = FakeClock()
    config = TreasuryConfig(
        database_url="memory://",
        bank_rail="files",
        bank_debtor_name="Acme Treasury BV",
        bank_debtor_iban=DEBTOR_IBAN,
        bank_batch_booking=False,
    )
    treasury = bootstrap(config, storage=storage, clock=clock, wall_clock=clock)
    try:
        company, wallet, bank = await _paying_wallet(treasury)
        ids = []
        for amount in (1_000, 2_500):
            request = CreateWithdrawalRequest(
                wallet_id=wallet, from_amount=amount, from_currency_id="EUR", bank_account_id=bank
            )
            ids.append((await treasury.withdrawals.create(company, request)).id)
        exported = (await treasury.bank.export()).export
        assert exported is not None
        assert exported.content.count("<BtchBookg>false</BtchBookg>") == 2
        booked = await treasury.bank.import_statement(
            camt053(
                [
                    Entry("D1", credit=False, amount="10.00", end_to_end=ids[0]),
                    Entry("D2", credit=False, amount="25.00", end_to_end=ids[1]),
                ]
            )
        )
        assert [line.outcome.value for line in booked.lines] == ["withdrawal_completed"] * 2
    finally:
        treasury.close()


async def _paying_wallet(treasury: Treasury) -> tuple[int, str, str]:
    """A company, its EUR wallet holding 100.00 (credited by hand at a virtual account) and a
    registered bank account to pay out to."""
    company, wallet = await _company(treasury)
    account = await treasury.virtual_accounts.create(
        company, CreateVirtualAccountRequest(wallet_id=wallet, source_currency="EUR")
    )
    await treasury.virtual_accounts.incoming(None, account.id, 10_000)
    return company, wallet, await _bank_account(treasury, company)


async def _bank_account(treasury: Treasury, company: int) -> str:
    registered = await treasury.bank_accounts.register(
        company,
        RegisterBankAccountRequest(
            bank_name="Commerzbank",
            account_name="Jane Doe",
            account_number="DE89370400440532013000",
            routing_number="COBADEFFXXX",
            currency_id="EUR",
        ),
    )
    return registered.id


async def test_an_mt940_statement_books_an_exported_withdrawal(treasury: Treasury) -> None:
    company, wallet, bank = await _paying_wallet(treasury)
    request = CreateWithdrawalRequest(
        wallet_id=wallet, from_amount=2_500, from_currency_id="EUR", bank_account_id=bank
    )
    withdrawal = await treasury.withdrawals.create(company, request)
    # Not exported yet: the bank's booking matches nothing.
    mt940 = (
        ":20:MT1\n:25:NL91ABNA0417164300\n:28C:1/1\n:60F:C260101EUR100,00\n"
        f":61:2601020102D25,00NTRFNONREF//B-{{n}}\n:86:EREF+{withdrawal.id}\n"
        ":62F:C260102EUR75,00\n"
    )
    early = await treasury.bank.import_statement(mt940.format(n=1).encode())
    assert "was never exported" in (early.lines[0].reason or "")
    exported = await treasury.bank.export()
    assert exported.export is not None and exported.export.withdrawal_ids == (withdrawal.id,)
    assert (await treasury.bank.export()).export is None  # never twice
    booked = await treasury.bank.import_statement(mt940.format(n=2).encode())
    assert booked.lines[0].outcome.value == "withdrawal_completed"
    assert booked.lines[0].booking_date == date(2026, 1, 2)
    done = await treasury.withdrawals.get(company, withdrawal.id)
    assert done.status.value == "completed"


async def test_a_line_key_is_stored_once(treasury: Treasury) -> None:
    """The unique index behind idempotent imports: a second line with the same key is refused
    by the storage itself (what a concurrent second import of a statement runs into)."""
    await _company(treasury)
    statement = camt053([Entry("L1", credit=True, amount="1.00", remittance="nobody")])
    await treasury.bank.import_statement(statement)
    [stored] = await treasury.bank.unmatched()
    key = line_key(DEBTOR_IBAN, "ref:L1")

    def duplicate(uow: object) -> None:
        found = uow.records.find(BankStatementLine, key)  # type: ignore[attr-defined]
        assert found is not None and found.id == stored.id
        uow.records.add(found.model_copy(update={"id": "bsl_01JDUPLICATE000000000000000"}))  # type: ignore[attr-defined]

    with pytest.raises(Exception) as refused:  # noqa: PT011 - each storage has its own error
        await treasury.storage.run(duplicate)  # type: ignore[arg-type]
    assert not isinstance(refused.value, AssertionError)


async def test_other_rails_exchange_no_files(storage: Storage) -> None:
    treasury = bootstrap(TreasuryConfig(database_url="memory://"), storage=storage)
    try:
        with pytest.raises(InvalidRequestError) as refused:
            await treasury.bank.import_statement(camt053([]))
        assert refused.value.code == "bank_files_unavailable"
    finally:
        treasury.close()


async def test_two_imports_of_one_statement_at_once_apply_it_once(treasury: Treasury) -> None:
    """However the two interleave (one after the other, or both planning before either
    commits and the second refused by the unique key, then planned again), both answer and the
    money moves once."""
    company, wallet = await _company(treasury)
    account = await treasury.virtual_accounts.create(
        company, CreateVirtualAccountRequest(wallet_id=wallet, source_currency="EUR")
    )
    assert account.iban is not None
    statement = camt053([Entry("L1", credit=True, amount="25.00", creditor_iban=account.iban)])
    first, second = await asyncio.gather(
        treasury.bank.import_statement(statement),
        treasury.bank.import_statement(statement),
    )
    assert sorted([first.imported, second.imported]) == [0, 1]
    assert (await treasury.wallets.balance(company, wallet)).balance == 2_500


def _batch_entry(
    credit: bool, ref: str, txs: list[tuple[str, str, str | None]], *, own_refs: bool = False
) -> str:
    """A camt entry booking several transactions: (amount, end-to-end id, return code); with
    ``own_refs`` each transaction has its own bank reference, ``TX-`` and its end-to-end id."""
    total = sum(Decimal(amount) for amount, _, _ in txs)
    details = "".join(
        "<TxDtls><Refs>"
        + (f"<AcctSvcrRef>TX-{e2e}</AcctSvcrRef>" if own_refs else "")
        + f'<EndToEndId>{e2e}</EndToEndId></Refs><Amt Ccy="EUR">{amount}</Amt>'
        + (f"<RtrInf><Rsn><Cd>{code}</Cd></Rsn></RtrInf>" if code else "")
        + "</TxDtls>"
        for amount, e2e, code in txs
    )
    return (
        f'<Ntry><Amt Ccy="EUR">{total:.2f}</Amt><CdtDbtInd>{"CRDT" if credit else "DBIT"}'
        "</CdtDbtInd><Sts>BOOK</Sts><BookgDt><Dt>2026-01-05</Dt></BookgDt>"
        f"<AcctSvcrRef>{ref}</AcctSvcrRef><NtryDtls>{details}</NtryDtls></Ntry>"
    )


async def test_a_batch_entrys_transactions_settle_one_by_one(treasury: Treasury) -> None:
    """One booked debit for two transfers completes each; a booked batch of returns settles
    only the withdrawal each return names: the unpaid one fails, the one just paid has its
    amount credited back."""
    company, wallet, bank = await _paying_wallet(treasury)
    paid = []
    for amount in (1_000, 2_500, 500):
        request = CreateWithdrawalRequest(
            wallet_id=wallet, from_amount=amount, from_currency_id="EUR", bank_account_id=bank
        )
        paid.append((await treasury.withdrawals.create(company, request)).id)
    assert (await treasury.bank.export()).export is not None
    entries = _batch_entry(False, "D-1", [("10.00", paid[0], None), ("25.00", paid[1], None)])
    entries += _batch_entry(True, "R-1", [("5.00", paid[2], "AC04"), ("10.00", paid[0], "AC04")])
    statement = _camt(entries)
    result = await treasury.bank.import_statement(statement)
    # The transactions have no bank reference of their own: each is its entry's and what it
    # says, never its place in the entry.
    assert [(line.identity[:6], line.outcome.value) for line in result.lines] == [
        ("ref:D-", "withdrawal_completed"),
        ("ref:D-", "withdrawal_completed"),
        ("ref:R-", "withdrawal_returned"),
        ("ref:R-", "return_credited"),
    ]
    assert all("#" in line.identity for line in result.lines)
    statuses = [(await treasury.withdrawals.get(company, w)).status.value for w in paid]
    assert statuses == ["completed", "completed", "failed"]
    # 100.00 in; 10.00 and 25.00 paid with their fees; the 10.00 came back; the failed 5.00's
    # amount and fee were released.
    fees = 0
    for withdrawal_id in paid[:2]:
        fees += (await treasury.withdrawals.get(company, withdrawal_id)).withdraw_fee
    assert (await treasury.wallets.balance(company, wallet)).balance == 10_000 - 2_500 - fees
    again = await treasury.bank.import_statement(statement)
    assert (again.imported, again.already_imported) == (0, 4)


async def test_a_paid_payout_the_bank_returns_is_credited_back_once(treasury: Treasury) -> None:
    """SEPA returns come after the debit: the withdrawal stays completed (it was paid) and its
    amount comes back to the wallet as a completed deposit (the fee is not refunded); a second
    return of the same payout credits nothing."""
    company, withdrawal, exported = await _exported_withdrawal(treasury)
    wallet = withdrawal.wallet_id
    await treasury.bank.import_statement(
        camt053([Entry("P1", credit=False, amount="10.00", batch=exported.id)], statement_id="S2")
    )
    paid = (await treasury.wallets.balance(company, wallet)).balance
    returned = await treasury.bank.import_statement(
        camt053(
            [
                Entry(
                    "RT1",
                    credit=True,
                    amount="10.00",
                    end_to_end=withdrawal.id,
                    return_code="AC04",
                    return_info="Account closed",
                ),
                Entry(
                    "RT2", credit=True, amount="10.00", end_to_end=withdrawal.id, return_code="AC04"
                ),
            ],
            statement_id="S3",
        )
    )
    first, second = returned.lines
    assert first.outcome.value == "return_credited" and first.matched_id is not None
    deposit = await treasury.deposits.get(company, first.matched_id)
    assert (deposit.status.value, deposit.to_amount, deposit.wallet_id) == (
        "completed",
        1_000,
        wallet,
    )
    assert "AC04" in (deposit.description or "") and withdrawal.id in (deposit.description or "")
    assert second.outcome.value == "unmatched"
    assert "was returned already" in (second.reason or "")
    assert (await treasury.wallets.balance(company, wallet)).balance == paid + 1_000
    done = await treasury.withdrawals.get(company, withdrawal.id)
    assert done.status.value == "completed"


async def test_a_balance_beyond_the_ledger_is_refused(storage: Storage) -> None:
    """A stated balance the ledger's 64-bit counters could not hold refuses the file (never a
    500 from the database): 18 digits of a three-decimal currency are 10^21 minor units."""
    clock = FakeClock()
    kuwait = "KW81CBKU0000000000001234560101"
    config = TreasuryConfig(
        database_url="memory://",
        currencies=("EUR", "KWD"),
        bank_rail="files",
        bank_debtor_name="Acme Treasury BV",
        bank_debtor_iban=DEBTOR_IBAN,
        bank_accounts={"KWD": [kuwait]},
    )
    treasury = bootstrap(config, storage=storage, clock=clock, wall_clock=clock)
    try:
        line = Entry("L1", credit=True, amount="10.000", currency="KWD")
        for opening, why in (
            ("999999999999999999", "beyond what the ledger holds"),
            ("-999999999999999999", "beyond what the ledger holds"),
            ("1.0001", "more decimals than KWD allows"),
        ):
            data = camt053([line], account=kuwait, currency="KWD", opening=opening)
            with pytest.raises(ValidationFailed) as refused:
                await treasury.bank.import_statement(data)
            assert why in refused.value.message
        assert await treasury.bank.unmatched() == []
        fine = camt053([line], account=kuwait, currency="KWD", opening="999999999999.999")
        assert (await treasury.bank.import_statement(fine)).imported == 1
    finally:
        treasury.close()


def _camt(entries: str, *, message: str = "053", ident: str = "S-B") -> bytes:
    """A camt.053 statement (or, ``message="054"``, a camt.054 notification) of the debtor
    account holding ``entries``."""
    root, block = (
        ("BkToCstmrStmt", "Stmt")
        if message == "053"
        else (
            "BkToCstmrDbtCdtNtfctn",
            "Ntfctn",
        )
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.{message}.001.08"><{root}>'
        "<GrpHdr><MsgId>M1</MsgId><CreDtTm>2026-01-06T06:00:00+01:00</CreDtTm></GrpHdr>"
        f"<{block}><Id>{ident}</Id><CreDtTm>2026-01-06T06:00:00+01:00</CreDtTm>"
        f"<Acct><Id><IBAN>{DEBTOR_IBAN}</IBAN></Id><Ccy>EUR</Ccy></Acct>{entries}"
        f"</{block}></{root}></Document>"
    ).encode()


async def _funded_virtual_account(treasury: Treasury) -> tuple[int, str, str]:
    company, wallet = await _company(treasury)
    account = await treasury.virtual_accounts.create(
        company, CreateVirtualAccountRequest(wallet_id=wallet, source_currency="EUR")
    )
    assert account.iban is not None
    return company, wallet, account.iban


async def test_a_reissued_or_reordered_statement_counts_each_booking_once(
    treasury: Treasury,
) -> None:
    """Identities never depend on a line's place: a statement reissued with a line more, with
    its lines in another order, or with a batch's transactions reordered, adds only what is
    new."""
    company, wallet, iban = await _funded_virtual_account(treasury)

    def credit(amount: str, remittance: str) -> Entry:
        return Entry(None, credit=True, amount=amount, creditor_iban=iban, remittance=remittance)

    first = camt053([credit("10.00", "A"), credit("20.00", "B")])
    await treasury.bank.import_statement(first)
    reissued = camt053([credit("5.00", "NEW"), credit("20.00", "B"), credit("10.00", "A")])
    again = await treasury.bank.import_statement(reissued)
    assert (again.imported, again.already_imported) == (1, 2)
    assert (await treasury.wallets.balance(company, wallet)).balance == 3_500


async def test_a_batch_detailed_later_is_the_booking_already_counted(treasury: Treasury) -> None:
    """A transaction notified alone (camt.054) and then detailed inside the day's batch entry
    (camt.053) by its own reference is one booking; so is a batch's transactions in another
    order, and a batch booked whole and detailed later."""
    company, wallet, _ = await _funded_virtual_account(treasury)
    deposits = [await _deposit(treasury, company, wallet, amount, "x") for amount in (1_000, 2_000)]
    alone = _batch_entry(True, "TX-" + deposits[0], [("10.00", deposits[0], None)])
    await treasury.bank.import_statement(_camt(alone, message="054", ident="N-1"))
    txs = [("10.00", deposits[0], None), ("20.00", deposits[1], None)]
    day = _camt(_batch_entry(True, "B-1", txs, own_refs=True), ident="S-1")
    result = await treasury.bank.import_statement(day)
    assert (result.imported, result.already_imported) == (1, 1)
    reordered = _camt(_batch_entry(True, "B-1", txs[::-1], own_refs=True), ident="S-1")
    assert (await treasury.bank.import_statement(reordered)).imported == 0
    assert (await treasury.wallets.balance(company, wallet)).balance == 3_000
    # Booked whole (the transactions' amounts not given), then detailed: the same booking.
    third = await _deposit(treasury, company, wallet, 500, "x")
    whole = camt053([Entry("W-1", credit=True, amount="5.00", remittance=third)])
    assert (await treasury.bank.import_statement(whole)).lines[0].matched_id == third
    detailed = _camt(_batch_entry(True, "W-1", [("2.00", third, None), ("3.00", third, None)]))
    known = await treasury.bank.import_statement(detailed)
    assert (known.imported, known.already_imported) == (0, 2)
    assert (await treasury.wallets.balance(company, wallet)).balance == 3_500
    wrong = _camt(_batch_entry(True, "W-1", [("2.00", third, None), ("4.00", third, None)]))
    with pytest.raises(ValidationFailed) as refused:
        await treasury.bank.import_statement(wrong)
    assert "was imported before" in refused.value.message


async def test_a_known_reference_with_another_amount_refuses_the_file(treasury: Treasury) -> None:
    company, wallet, iban = await _funded_virtual_account(treasury)
    await treasury.bank.import_statement(
        camt053([Entry("R1", credit=True, amount="10.00", creditor_iban=iban)])
    )
    for changed in (
        Entry("r 1", credit=True, amount="5000.00", creditor_iban=iban),
        Entry("R1", credit=False, amount="10.00"),
    ):
        with pytest.raises(ValidationFailed) as refused:
            await treasury.bank.import_statement(camt053([changed], statement_id="S2"))
        assert "the bank reference" in refused.value.message
        assert "was imported before" in refused.value.message
    assert (await treasury.wallets.balance(company, wallet)).balance == 1_000


async def test_one_reference_on_several_bookings_is_each_of_them(treasury: Treasury) -> None:
    """Some banks give one reference to several bookings of a statement: each counts, once."""
    company, wallet, iban = await _funded_virtual_account(treasury)
    statement = camt053(
        [
            Entry("SAME", credit=True, amount="10.00", creditor_iban=iban),
            Entry("same", credit=True, amount="20.00", creditor_iban=iban),
        ]
    )
    assert (await treasury.bank.import_statement(statement)).imported == 2
    assert (await treasury.bank.import_statement(statement)).imported == 0
    assert (await treasury.wallets.balance(company, wallet)).balance == 3_000


async def _exported_withdrawal(treasury: Treasury) -> tuple[int, Withdrawal, BankExport]:
    """A company's 10.00 EUR withdrawal, funded by a statement and exported in a file."""
    company, wallet, iban = await _funded_virtual_account(treasury)
    await treasury.bank.import_statement(
        camt053([Entry("F1", credit=True, amount="100.00", creditor_iban=iban)])
    )
    bank = await _bank_account(treasury, company)
    request = CreateWithdrawalRequest(
        wallet_id=wallet, from_amount=1_000, from_currency_id="EUR", bank_account_id=bank
    )
    withdrawal = await treasury.withdrawals.create(company, request)
    exported = (await treasury.bank.export()).export
    assert exported is not None
    return company, withdrawal, exported


async def test_a_merchants_text_in_a_debit_settles_no_withdrawal(treasury: Treasury) -> None:
    """The remittance of a debit or return is what our file sent: the merchant's reference.
    An id of ours written there is the merchant's word, so it matches nothing."""
    company, victim, exported = await _exported_withdrawal(treasury)
    lines = [
        Entry("X1", credit=False, amount="10.00", remittance=f"payout {victim.id}"),
        Entry("X2", credit=False, amount="10.00", remittance=exported.id),
        Entry("X3", credit=True, amount="10.00", remittance=victim.id, return_code="AC04"),
    ]
    result = await treasury.bank.import_statement(camt053(lines, statement_id="S2"))
    assert [line.outcome.value for line in result.lines] == ["unmatched"] * 3
    assert (await treasury.withdrawals.get(company, victim.id)).status.value == "pending"


async def test_an_embedding_app_can_limit_the_formats(treasury: Treasury) -> None:
    mt940 = b":20:MT1\n:25:NL91ABNA0417164300\n:28C:1/1\n:60F:C260101EUR0,00\n:62F:C260101EUR0,00\n"
    with pytest.raises(ValidationFailed) as refused:
        await treasury.bank.import_statement(mt940, formats=("camt.053", "camt.054"))
    assert "a mt940 statement is not accepted here" in refused.value.message
    assert (await treasury.bank.import_statement(mt940)).statements[0].format == "mt940"


async def test_an_exported_withdrawal_is_settled_only_by_the_bank(treasury: Treasury) -> None:
    """Once its payment file is at the bank, a withdrawal is not failed or completed by hand
    (the sandbox controls included): a refund the bank then pays out would be money twice."""
    company, withdrawal, exported = await _exported_withdrawal(treasury)
    for settle in (treasury.withdrawals.fail, treasury.withdrawals.complete):
        with pytest.raises(InvalidRequestError) as refused:
            await settle(company, withdrawal.id)
        assert refused.value.code == "movement_exported"
        assert exported.id in refused.value.message
    assert (await treasury.withdrawals.get(company, withdrawal.id)).status.value == "pending"


async def test_a_multi_currency_account_holds_each_of_its_currencies(storage: Storage) -> None:
    """One account listed under two currencies takes lines in either, each against the mirror
    of its own currency; a third currency is still refused."""
    clock = FakeClock()
    swiss = "CH9300762011623852957"
    config = TreasuryConfig(
        database_url="memory://",
        currencies=("EUR", "CHF", "USD"),
        bank_rail="files",
        bank_debtor_name="Acme Treasury BV",
        bank_debtor_iban=DEBTOR_IBAN,
        bank_accounts={"CHF": [swiss], "EUR": [swiss]},
    )
    assert config.treasury_bank_accounts()[swiss] == frozenset({"CHF", "EUR"})
    treasury = bootstrap(config, storage=storage, clock=clock, wall_clock=clock)
    try:
        lines = [
            Entry("C1", credit=True, amount="10.00", currency="CHF"),
            Entry("E1", credit=True, amount="20.00", currency="EUR"),
        ]
        result = await treasury.bank.import_statement(camt053(lines, account=swiss, currency="CHF"))
        assert [line.currency for line in result.lines] == ["CHF", "EUR"]
        with pytest.raises(ValidationFailed) as refused:
            await treasury.bank.import_statement(
                camt053([Entry("U1", credit=True, amount="1.00", currency="USD")], account=swiss)
            )
        assert f"the line is in USD; account {swiss} holds CHF, EUR" in refused.value.message
    finally:
        treasury.close()
