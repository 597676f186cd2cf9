"""``treasury bank breaks``, ``treasury safeguarding report`` and ``treasury ledger verify`` on
the bank mirrors, on SQLite and PostgreSQL.

The statements are imported through the service as camt.053 files stating their balances
(tests/safeguarding.py); the commands then run in-process against the same database.
"""

from __future__ import annotations

import asyncio
from datetime import date

import pytest

pytest.importorskip("sepaxml", reason="the bank-files extra is not installed")

from click.testing import CliRunner, Result

from tests.bankfiles import Entry
from tests.safeguarding import DEBTOR_IBAN, statement
from treasury_aiohttp.cli.bank import _import_summary
from treasury_aiohttp.cli.commands import main
from treasury_core import (
    CreateVirtualAccountRequest,
    CreateWalletRequest,
    Treasury,
    TreasuryConfig,
    bootstrap,
)
from treasury_core.ledger import Journal, Move
from treasury_core.ports import UnitOfWork
from treasury_core.testing.fakes.clock import FakeClock

ENV = {
    "TREASURY_BANK_RAIL": "files",
    "TREASURY_BANK_DEBTOR_NAME": "Acme Treasury BV",
    "TREASURY_BANK_DEBTOR_IBAN": DEBTOR_IBAN,
}
MIRROR = f"bank:{DEBTOR_IBAN}:EUR"


async def cli(database_url: str, *args: str) -> Result:
    """``treasury …`` in-process, on a thread (it runs its own event loop)."""
    env = {"TREASURY_DATABASE_URL": database_url, **ENV}
    return await asyncio.to_thread(
        CliRunner().invoke, main, [*args, "--database", database_url], env=env,
        catch_exceptions=False,
    )  # fmt: skip


def _open(database_url: str) -> Treasury:
    clock = FakeClock()
    config = TreasuryConfig(
        database_url=database_url,
        pool_size=2,
        bank_rail="files",
        bank_debtor_name=ENV["TREASURY_BANK_DEBTOR_NAME"],
        bank_debtor_iban=DEBTOR_IBAN,
    )
    return bootstrap(config, clock=clock, wall_clock=clock)


async def test_breaks_report_and_verify_from_the_command_line(database_url: str) -> None:
    treasury = _open(database_url)
    try:
        company = (await treasury.companies.create_company("Acme")).company.id
        wallet = await treasury.wallets.create(
            company, CreateWalletRequest(name="E", currency_id="EUR")
        )
        # The sandbox's control credits the wallet with money the bank never had.
        account = await treasury.virtual_accounts.create(
            company, CreateVirtualAccountRequest(wallet_id=wallet.id, source_currency="EUR")
        )
        await treasury.virtual_accounts.incoming(None, account.id, 50_000)
        first = statement(
            "S1",
            [Entry("L1", credit=True, amount="10.00", booked=date(2026, 1, 5))],
            start=date(2026, 1, 1),
            end=date(2026, 1, 31),
            opening="100.00",
            closing="115.00",
        )
        result = await treasury.bank.import_statement(first)
        [closing, own] = sorted(result.breaks, key=lambda b: b.kind.value)
        assert (closing.kind.value, closing.difference) == ("closing", 500)
        assert own.kind.value == "statement"
        summary = _import_summary(result)
        assert "BREAKS: 2 balance(s) disagree with the ledger" in summary
        assert any(
            closing.id in line and "stated 11500, expected 11000, difference +500" in line
            for line in summary
        )
    finally:
        treasury.close()

    listed = await cli(database_url, "bank", "breaks")
    assert listed.exit_code == 1, listed.output
    assert closing.id in listed.output and own.id in listed.output
    assert "closing balance against the ledger at that date" in listed.output

    report = await cli(database_url, "safeguarding", "report", "--date", "2026-01-31", "--csv")
    assert report.exit_code == 1, report.output  # a shortfall
    assert report.output.splitlines()[1] == (
        "2026-01-31,EUR,11000,11500,2026-01-31,50000,0,0,50000,-39000,yes"
    )
    table = await cli(database_url, "safeguarding", "report", "--date", "2026-01-31")
    assert "SHORTFALL" in table.output and "11500 (2026-01-31)" in table.output

    sound = await cli(database_url, "ledger", "verify")
    assert sound.exit_code == 0, sound.output

    treasury = _open(database_url)
    try:

        def tamper(uow: UnitOfWork) -> None:
            uow.ledger.apply(
                Journal("jr_tamper", (Move(MIRROR, "world:EUR", "EUR", 700),)),
                treasury.clock.now(),
            )

        await treasury.storage.run(tamper)
    finally:
        treasury.close()
    broken = await cli(database_url, "ledger", "verify")
    assert broken.exit_code == 1, broken.output
    assert f"[8] {MIRROR}: posting jr_tamper.0 has no statement line" in broken.output
