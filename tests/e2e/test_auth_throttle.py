"""Failed authentications limited per client address, over a real loopback server: wrong API
keys and wrong dashboard sign-ins are answered 429 once an address has spent its failures, and
no longer looked up; other addresses and right keys beforehand are unaffected; two server
processes share the count through Redis; dashboard pages count against their key's rate limit.

Client addresses are told apart by binding the client's socket to other loopback addresses
(127.0.0.0/8 is all loopback on Linux); the server sees each as ``request.remote``."""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.e2e.conftest import Tenant
from tests.e2e.dashboard_client import SAME_ORIGIN, csrf_of, sign_in
from tests.listening import serving
from treasury_aiohttp import create_app
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.testing.fakes.clock import FakeClock
from treasury_sqlalchemy.companies import SqlCompanies
from treasury_sqlalchemy.operator_keys import SqlOperatorKeys

Client = TestClient[Any, Any]
BURST = 20
SLOW = 0.001  # a second: nothing refills while a test runs
TOO_MANY = "Too many failed authentications from this address; retry after the time in Retry-After"
TOO_MANY_REQUESTS = "Too many requests for this API key; retry after the time in Retry-After"


@pytest.fixture
def treasury(database_url: str, clock: FakeClock) -> Treasury:
    return bootstrap(
        TreasuryConfig(
            database_url=database_url,
            pool_size=4,
            auth_failure_limit_per_second=SLOW,
            auth_failure_limit_burst=BURST,
        ),
        clock=clock,
        wall_clock=clock,
    )


@pytest.fixture
def key_lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The digests the SQL storage looks up among API keys and operator keys, as it does
    them (the real lookups, each noted on its way in)."""
    seen: list[str] = []
    for repository, method in ((SqlCompanies, "api_key_by_hash"), (SqlOperatorKeys, "by_hash")):
        real = getattr(repository, method)

        def noted(self: Any, key_hash: str, *, _real: Any = real) -> Any:
            seen.append(key_hash)
            return _real(self, key_hash)

        monkeypatch.setattr(repository, method, noted)
    return seen


def from_address(client: Client, address: str) -> aiohttp.ClientSession:
    """A browser on the same server whose connections come from ``address``."""
    return aiohttp.ClientSession(
        base_url=str(client.make_url("")),
        connector=aiohttp.TCPConnector(local_addr=(address, 0)),
        cookie_jar=aiohttp.CookieJar(unsafe=True),
    )


def wrong_key(prefix: str = "sk_") -> str:
    return prefix + secrets.token_urlsafe(24)


async def test_wrong_api_keys_are_refused_before_the_lookup(
    client: Client, tenant: Tenant, key_lookups: list[str]
) -> None:
    # Right keys first spend nothing: the address still has all its failures.
    for _ in range(30):
        assert (await client.get("/api/v1/wallets", headers=tenant.auth)).status == 200
    key_lookups.clear()

    async def attempt(key: str) -> tuple[int, dict[str, Any], str | None]:
        auth = {"Authorization": f"Bearer {key}"}
        response = await client.get("/api/v1/wallets", headers=auth)
        return response.status, await response.json(), response.headers.get("Retry-After")

    answers = [await attempt(wrong_key()) for _ in range(300)]
    assert [status for status, _, _ in answers] == [401] * BURST + [429] * (300 - BURST)
    # One lookup per failure the address had and the one that found them spent; none for the
    # other 279 refused.
    assert len(key_lookups) == BURST + 1
    for _, body, retry_after in answers[BURST:]:
        assert body == {
            "error": {"type": "rate_limit_error", "code": "rate_limited", "message": TOO_MANY}
        }
        assert retry_after is not None and int(retry_after) >= 1
    # Even the right key is refused from there now (it cannot be told apart unlooked-up) ...
    assert (await client.get("/api/v1/wallets", headers=tenant.auth)).status == 429
    # ... while another address is not: its right key works and its wrong key is looked up.
    async with from_address(client, "127.0.0.2") as other:
        async with other.get("/api/v1/wallets", headers=tenant.auth) as ok:
            assert ok.status == 200
        bad = {"Authorization": f"Bearer {wrong_key()}"}
        async with other.get("/api/v1/wallets", headers=bad) as refused:
            assert refused.status == 401


async def test_wrong_sign_ins_are_refused_before_the_lookup(
    client: Client, tenant: Tenant, key_lookups: list[str]
) -> None:
    token = csrf_of(await (await client.get("/dashboard/login")).text())

    async def attempt(key: str) -> tuple[int, str, str | None]:
        response = await client.post(
            "/dashboard/login",
            data={"secret_key": key, "csrf_token": token},
            headers=SAME_ORIGIN,
            allow_redirects=False,
        )
        return response.status, await response.text(), response.headers.get("Retry-After")

    answers = [await attempt(wrong_key("ok_" if n % 2 else "sk_")) for n in range(300)]
    assert [status for status, _, _ in answers] == [401] * BURST + [429] * (300 - BURST)
    assert len(key_lookups) == BURST + 1
    for _, page, retry_after in answers[BURST:]:
        assert TOO_MANY in page and 'role="alert"' in page
        assert retry_after is not None and int(retry_after) >= 1
    refused, _, _ = await attempt(tenant.secret_key)
    assert refused == 429
    async with from_address(client, "127.0.0.3") as other:
        async with other.get("/dashboard/login") as login:
            other_token = csrf_of(await login.text())
        async with other.post(
            "/dashboard/login",
            data={"secret_key": tenant.secret_key, "csrf_token": other_token},
            headers=SAME_ORIGIN,
            allow_redirects=False,
        ) as signed_in:
            assert signed_in.status == 303


async def test_dashboard_pages_count_against_the_keys_rate_limit(tmp_path: Path) -> None:
    treasury = bootstrap(
        TreasuryConfig(
            database_url=f"sqlite:///{tmp_path / 'limited.db'}",
            rate_limit_per_second=SLOW,
            rate_limit_burst=6,
        )
    )
    created = await treasury.companies.create_company("Acme")
    auth = {"Authorization": f"Bearer {created.secret_key}"}
    client = TestClient(TestServer(create_app(treasury, close_treasury=True)))
    await client.start_server()
    try:
        await sign_in(client, created.secret_key)  # its landing page is the first request
        for _ in range(3):
            assert (await client.get("/api/v1/wallets", headers=auth)).status == 200
        assert (await client.get("/dashboard/wallets")).status == 200
        assert (await client.get("/api/v1/wallets", headers=auth)).status == 200
        page = await client.get("/dashboard/wallets")
        assert page.status == 429
        assert page.headers["Retry-After"] is not None
        assert TOO_MANY_REQUESTS in await page.text()
        assert (await client.get("/api/v1/wallets", headers=auth)).status == 429
    finally:
        await client.close()


@pytest.fixture
async def two_servers(tmp_path: Path, redis_url: str) -> AsyncIterator[tuple[list[int], str]]:
    """Two ``treasury serve`` processes on one SQLite file and one Redis, limiting failures
    to 6 an address: (their ports, a loopback address of this test's own)."""
    database = f"sqlite:///{tmp_path / 'shared.db'}"
    bootstrap(TreasuryConfig(database_url=database)).close()
    # An address of our own, so that no other test on this machine's Redis shares its bucket.
    address = f"127.0.{random.randint(1, 254)}.{random.randint(1, 254)}"
    bucket = f"treasury:authfail:{address}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
    env.update(
        {
            "TREASURY_AUTH_FAILURE_LIMIT_PER_SECOND": str(SLOW),
            "TREASURY_AUTH_FAILURE_LIMIT_BURST": "6",
            "TREASURY_RATE_LIMIT_REDIS_URL": redis_url,
            "TREASURY_RATE_LIMIT_REDIS_TIMEOUT_SECONDS": "10",
        }
    )
    redis_asyncio = pytest.importorskip("redis.asyncio", reason="the redis extra is not installed")
    redis = redis_asyncio.Redis.from_url(redis_url)
    await redis.delete(bucket)
    try:
        async with serving(database, env) as ports:
            yield ports, address
    finally:
        await redis.delete(bucket)
        await redis.aclose()


async def test_two_servers_share_the_failures_through_redis(
    two_servers: tuple[list[int], str],
) -> None:
    ports, address = two_servers
    statuses: list[tuple[int, int]] = []
    connector = aiohttp.TCPConnector(local_addr=(address, 0))
    async with aiohttp.ClientSession(connector=connector) as session:
        for n in range(12):  # alternating: each server alone would allow 6
            port = ports[n % 2]
            auth = {"Authorization": f"Bearer {wrong_key()}"}
            async with session.get(f"http://127.0.0.1:{port}/api/v1/wallets", headers=auth) as r:
                statuses.append((port, r.status))
    assert [status for _, status in statuses] == [401] * 6 + [429] * 6
    assert {port for port, status in statuses if status == 429} == set(ports)
