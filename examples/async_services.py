"""Call treasury-core's services directly from async code: no HTTP server involved.

Bootstraps a sandbox treasury on an SQLite file in a temporary directory, creates a company with
a USD and a EUR wallet, deposits into the USD wallet, moves part of it to the EUR wallet (an FX
transfer) and prints the balances. Run it with ``python examples/async_services.py``.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from treasury_core import (
    CreateDepositRequest,
    CreateTransferRequest,
    CreateWalletRequest,
    InsufficientFunds,
    MovementStatus,
    Treasury,
    TreasuryConfig,
    bootstrap,
)


async def main(treasury: Treasury) -> None:
    """The walk-through: every service call is one database transaction."""
    created = await treasury.companies.create_company("Acme Ltd")
    company_id = created.company.id
    # created.secret_key and .publishable_key are the raw API keys, returned only here; an app
    # that serves no HTTP can ignore them (and should never print them).
    print(f"company {company_id} created")

    usd = await treasury.wallets.create(
        company_id, CreateWalletRequest(name="Operating", currency_id="USD")
    )
    eur = await treasury.wallets.create(
        company_id, CreateWalletRequest(name="Europe", currency_id="EUR")
    )

    # A deposit is announced first (pending_in) and credited when the bank delivers. In the
    # sandbox, "the bank delivered" is a call; a real rail settles through its adapter.
    deposit = await treasury.deposits.create(
        company_id,
        CreateDepositRequest(wallet_id=usd.id, from_amount=100_000, from_currency_id="USD"),
    )
    pending = await treasury.wallets.balance(company_id, usd.id)
    print(f"deposit {deposit.status}: USD pending_in={pending.pending_in}")
    deposit = await treasury.deposits.complete(company_id, deposit.id)
    assert deposit.status is MovementStatus.COMPLETED

    # Wallets of different currencies: the amount is converted at the current rate. The source
    # is debited at once; the EUR side is credited when the FX leg settles.
    transfer = await treasury.transfers.create(
        company_id,
        CreateTransferRequest(from_wallet_id=usd.id, to_wallet_id=eur.id, from_amount=25_000),
    )
    print(
        f"transfer {transfer.status}: {transfer.from_amount} {transfer.from_currency_id} -> "
        f"{transfer.to_amount} {transfer.to_currency_id} at {transfer.exchange_rate_from_to}"
    )
    # Sandbox time moves on command; advancing it runs everything that falls due, the FX
    # settlement included (production runs due jobs from `treasury worker` or its own loop).
    await treasury.sandbox.advance(3600)
    transfer = await treasury.transfers.get(company_id, transfer.id)
    print(f"transfer {transfer.status}")

    # Errors are typed: catch what you can act on.
    try:
        await treasury.transfers.create(
            company_id,
            CreateTransferRequest(from_wallet_id=usd.id, to_wallet_id=eur.id, from_amount=10**9),
        )
    except InsufficientFunds as exc:
        print(f"refused: {exc.code} ({exc.kind})")

    for wallet in (usd, eur):
        balance = await treasury.wallets.balance(company_id, wallet.id)
        print(
            f"{balance.currency_code} wallet: balance={balance.balance} "
            f"available={balance.available_balance}"
        )


def run() -> None:
    """Bootstrap on a throwaway SQLite file, run :func:`main`, close."""
    with tempfile.TemporaryDirectory() as tmp:
        config = TreasuryConfig(database_url=f"sqlite:///{Path(tmp) / 'treasury.db'}")
        treasury = bootstrap(config)  # applies migrations to the new file
        try:
            asyncio.run(main(treasury))
        finally:
            treasury.close()


if __name__ == "__main__":
    run()
