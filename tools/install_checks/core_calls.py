"""The core's documented calls on in-memory storage, as an install without extras runs them.

Every call that reaches an adapter built on first use is here: the bank rail (deposits,
bank-account registration, withdrawals, virtual accounts), the FX rates (a cross-currency
transfer) and the sandbox clock. ``tools/check_installs.py`` runs it in a fresh virtual
environment per documented install, and ``tests/unit/test_documented_installs.py`` runs it with
every module outside an install's requirements unimportable. Prints ``core calls: ok``.

``python core_calls.py [DATABASE_URL]``: ``memory://`` unless a URL is given (the check of the
``postgres`` extra passes a PostgreSQL one).
"""

from __future__ import annotations

import asyncio
import sys

from treasury_core import (
    CreateDepositRequest,
    CreateTransferRequest,
    CreateVirtualAccountRequest,
    CreateWalletRequest,
    CreateWithdrawalRequest,
    MovementStatus,
    RegisterBankAccountRequest,
    TreasuryConfig,
    bootstrap,
)


async def main(database_url: str) -> None:
    """Run the calls; any error (a missing module included) propagates and exits non-zero."""
    treasury = bootstrap(TreasuryConfig(database_url=database_url))
    try:
        company_id = (await treasury.companies.create_company("Acme")).company.id
        usd = await treasury.wallets.create(
            company_id, CreateWalletRequest(name="Operating", currency_id="USD")
        )
        eur = await treasury.wallets.create(
            company_id, CreateWalletRequest(name="Europe", currency_id="EUR")
        )
        deposit = await treasury.deposits.create(
            company_id,
            CreateDepositRequest(wallet_id=usd.id, from_amount=100_000, from_currency_id="USD"),
        )
        deposit = await treasury.deposits.complete(company_id, deposit.id)
        assert deposit.status is MovementStatus.COMPLETED, deposit.status
        # An IBAN and a BIC: the checks the sandbox rail runs through schwifty.
        bank_account = await treasury.bank_accounts.register(
            company_id,
            RegisterBankAccountRequest(
                bank_name="Commerzbank",
                account_name="Acme GmbH",
                account_number="DE89370400440532013000",
                routing_number="COBADEFFXXX",
                currency_id="EUR",
            ),
        )
        transfer = await treasury.transfers.create(
            company_id,
            CreateTransferRequest(from_wallet_id=usd.id, to_wallet_id=eur.id, from_amount=50_000),
        )
        await treasury.sandbox.advance(7 * 24 * 3600)  # settles the FX leg
        transfer = await treasury.transfers.get(company_id, transfer.id)
        assert transfer.status is MovementStatus.COMPLETED, transfer.status
        await treasury.withdrawals.create(
            company_id,
            CreateWithdrawalRequest(
                wallet_id=eur.id,
                from_amount=1_000,
                from_currency_id="EUR",
                bank_account_id=bank_account.id,
            ),
        )
        await treasury.virtual_accounts.create(
            company_id, CreateVirtualAccountRequest(wallet_id=eur.id, source_currency="EUR")
        )
    finally:
        treasury.close()
    print("core calls: ok")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "memory://"))
