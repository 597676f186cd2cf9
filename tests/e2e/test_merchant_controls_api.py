"""Issue 24, items 6–8 over HTTP: the sandbox clock read, refund outcomes, acting on disputes
and managing webhook endpoints (on an SQLite file and on PostgreSQL)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from treasury_core.testing import FakeClock

Client = TestClient[Any, Any]
CLOCK = "/api/v1/sandbox/clock"


async def call(
    client: Client, tenant: Tenant, method: str, path: str, body: Any = None, status: int = 200
) -> Any:
    response = await client.request(method, path, json=body, headers=tenant.auth)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def test_the_sandbox_clock_reads_business_time(
    client: Client, tenant: Tenant, clock: FakeClock
) -> None:
    before = datetime.fromisoformat((await call(client, tenant, "GET", CLOCK))["now"])
    assert before == clock.now()
    advanced = await call(client, tenant, "POST", CLOCK + "/advance", {"seconds": 3_600})
    after = await call(client, tenant, "GET", CLOCK)
    assert after == advanced
    assert datetime.fromisoformat(after["now"]) - before == timedelta(hours=1)
    # A read moves nothing.
    assert await call(client, tenant, "GET", CLOCK) == after
    response = await client.get(CLOCK)
    assert response.status == 401
