"""The pytest plugin's fixtures with bank calls, under the installs the pytest guide names.

``tools/check_installs.py`` runs this file with pytest in a virtual environment per documented
install, selecting the tests by name (``-k``) as docs/guides/pytest-plugin.md says what each
fixture needs: ``treasury_memory`` no extra, ``treasury_sqlite`` the ``sql`` extra,
``treasury_server`` the ``server`` extra. ``tests/unit/test_documented_installs.py``
runs the ``memory`` test with every module outside the bare install's requirements
unimportable.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import TYPE_CHECKING

from treasury_core import (
    CreateDepositRequest,
    CreateWalletRequest,
    MovementStatus,
    RegisterBankAccountRequest,
    Treasury,
)
from treasury_core.testing import FakeClock

if TYPE_CHECKING:  # the module needs the server extra; the annotations alone do not
    from treasury_pytest import TreasuryServer

EUR_ACCOUNT = RegisterBankAccountRequest(
    bank_name="Commerzbank",
    account_name="Acme GmbH",
    account_number="DE89370400440532013000",
    routing_number="COBADEFFXXX",
    currency_id="EUR",
)


async def deposit_and_bank_account(treasury: Treasury, company_id: int) -> str:
    """A EUR wallet, a pending deposit into it and a registered IBAN; the deposit's id."""
    wallet = await treasury.wallets.create(
        company_id, CreateWalletRequest(name="Operating", currency_id="EUR")
    )
    deposit = await treasury.deposits.create(
        company_id,
        CreateDepositRequest(wallet_id=wallet.id, from_amount=5_000, from_currency_id="EUR"),
    )
    assert deposit.status is MovementStatus.PENDING
    await treasury.bank_accounts.register(company_id, EUR_ACCOUNT)
    return deposit.id


def test_deposit_and_bank_account_on_treasury_memory(
    treasury_memory: Treasury, treasury_clock: FakeClock
) -> None:
    async def calls() -> None:
        company_id = (await treasury_memory.companies.create_company("Acme")).company.id
        await deposit_and_bank_account(treasury_memory, company_id)

    asyncio.run(calls())
    treasury_clock.advance(60)


def test_deposit_and_bank_account_on_treasury_sqlite(treasury_sqlite: Treasury) -> None:
    async def calls() -> None:
        company_id = (await treasury_sqlite.companies.create_company("Acme")).company.id
        await deposit_and_bank_account(treasury_sqlite, company_id)

    asyncio.run(calls())


def test_deposit_through_treasury_server(treasury_server: TreasuryServer) -> None:
    server = treasury_server
    deposit_id = server.call(deposit_and_bank_account(server.treasury, server.company_id))
    # An http:// URL of the fixture's server on loopback (S310 guards against file: URLs).
    url = server.url(f"/api/v1/deposit/{deposit_id}")
    request = urllib.request.Request(url, headers=server.auth_headers)  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        assert json.load(response)["id"] == deposit_id
