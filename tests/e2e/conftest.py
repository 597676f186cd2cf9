"""An aiohttp test server over a real SQLite file, with one company and its keys."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from treasury_aiohttp import create_app
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.testing.fakes.clock import FakeClock


@dataclass
class Tenant:
    company_id: int
    account_id: int
    secret_key: str
    publishable_key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret_key}"}

    @property
    def publishable_auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.publishable_key}"}


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Every HTTP test runs on an SQLite file and on a PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'api.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def treasury(database_url: str, clock: FakeClock) -> Treasury:
    return bootstrap(
        # Withdrawals cost 25 minor units plus 1 %, so fee arithmetic is visible in every test.
        TreasuryConfig(database_url=database_url, pool_size=4, withdrawal_fees={"*": (25, 100)}),
        clock=clock,
        wall_clock=clock,
    )


@pytest.fixture
async def client(treasury: Treasury) -> AsyncIterator[TestClient[Any, Any]]:
    client = TestClient(TestServer(create_app(treasury, close_treasury=True)))
    await client.start_server()
    try:
        yield client
    finally:
        await client.close()


async def _tenant(treasury: Treasury, name: str) -> Tenant:
    created = await treasury.companies.create_company(name)
    return Tenant(
        created.company.id, created.merchant_account.id, created.secret_key, created.publishable_key
    )


@pytest.fixture
async def tenant(treasury: Treasury) -> Tenant:
    return await _tenant(treasury, "Acme")


@pytest.fixture
async def other_tenant(treasury: Treasury) -> Tenant:
    return await _tenant(treasury, "Globex")
