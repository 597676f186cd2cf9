"""The ``ecb`` extra: ``TREASURY_FX_RATES=ecb`` quotes from the ECB history the extra ships.

Offline, on ``memory://``, at a business time inside that history (Easter Tuesday 2025), so the
check neither needs the network nor ages with the package. ``tools/check_installs.py`` runs it
in a fresh environment holding ``treasury-core[ecb]``. Prints ``ecb rates: ok``.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, date, datetime
from decimal import Decimal

from treasury_core import (
    CreateDepositRequest,
    CreateTransferRequest,
    CreateWalletRequest,
    TreasuryConfig,
    bootstrap,
)
from treasury_core.testing.fakes.clock import FakeClock


async def main() -> None:
    """A USD → GBP transfer at the ECB's rate of 22 April 2025; any error exits non-zero."""
    # The adapter's own variables, as an operator sets them (unset ones keep their defaults).
    for name in ("TREASURY_ECB_URL", "TREASURY_ECB_FILE"):
        os.environ.pop(name, None)
    os.environ["TREASURY_ECB_MARKUP_BPS"] = "0"
    clock = FakeClock(datetime(2025, 4, 22, 17, tzinfo=UTC))
    treasury = bootstrap(
        TreasuryConfig(database_url="memory://", fx_rates="ecb"), clock=clock, wall_clock=clock
    )
    try:
        company = (await treasury.companies.create_company("Acme")).company.id
        usd = await treasury.wallets.create(
            company, CreateWalletRequest(name="U", currency_id="USD")
        )
        gbp = await treasury.wallets.create(
            company, CreateWalletRequest(name="G", currency_id="GBP")
        )
        deposit = await treasury.deposits.create(
            company,
            CreateDepositRequest(wallet_id=usd.id, from_amount=1_000, from_currency_id="USD"),
        )
        await treasury.deposits.complete(None, deposit.id)
        transfer = await treasury.transfers.create(
            company,
            CreateTransferRequest(from_wallet_id=usd.id, to_wallet_id=gbp.id, from_amount=1_000),
        )
        # The ECB's 22 April 2025 figures: GBP 0.85858 and USD 1.1476 per euro.
        assert transfer.exchange_rate_date == date(2025, 4, 22), transfer.exchange_rate_date
        assert transfer.exchange_rate_from_to == Decimal("0.7481526664")
        assert transfer.to_amount == 748
    finally:
        treasury.close()
    print("ecb rates: ok")


if __name__ == "__main__":
    asyncio.run(main())
