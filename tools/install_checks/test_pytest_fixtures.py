"""The pytest plugin's fixtures that docs/guides/pytest-plugin.md says need no extra, in use.

``tools/check_installs.py`` runs this file with pytest in a virtual environment holding the
wheel without extras, and ``tests/unit/test_documented_installs.py`` with every module outside
that install's requirements unimportable.
"""

from __future__ import annotations

import asyncio

from treasury_core import (
    CreateDepositRequest,
    CreateWalletRequest,
    MovementStatus,
    RegisterBankAccountRequest,
    Treasury,
)
from treasury_core.testing import FakeClock


def test_deposit_and_bank_account_on_treasury_memory(
    treasury_memory: Treasury, treasury_clock: FakeClock
) -> None:
    async def calls() -> None:
        company_id = (await treasury_memory.companies.create_company("Acme")).company.id
        wallet = await treasury_memory.wallets.create(
            company_id, CreateWalletRequest(name="Operating", currency_id="EUR")
        )
        deposit = await treasury_memory.deposits.create(
            company_id,
            CreateDepositRequest(wallet_id=wallet.id, from_amount=5_000, from_currency_id="EUR"),
        )
        assert deposit.status is MovementStatus.PENDING
        await treasury_memory.bank_accounts.register(
            company_id,
            RegisterBankAccountRequest(
                bank_name="Commerzbank",
                account_name="Acme GmbH",
                account_number="DE89370400440532013000",
                routing_number="COBADEFFXXX",
                currency_id="EUR",
            ),
        )

    asyncio.run(calls())
    treasury_clock.advance(60)
