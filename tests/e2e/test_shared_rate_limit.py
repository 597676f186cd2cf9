"""The per-key rate limit across processes (issue 26): two real ``treasury serve`` processes
sharing one database and one Redis accept, between them, no more than the one limit; with Redis
out, a server limits per process and says so once, and never refuses everyone."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.listening import free_port, serving
from treasury_core import TreasuryConfig, bootstrap

pytest.importorskip("redis.asyncio", reason="the redis extra is not installed")

BURST = 6
SLOW = "0.001"  # requests a second: nothing refills while the test runs


@pytest.fixture
async def servers(tmp_path: Path, redis_url: str) -> AsyncIterator[tuple[list[int], str, str]]:
    """Two servers on one SQLite file and one Redis: (their ports, a secret key, its id)."""
    database = f"sqlite:///{tmp_path / 'shared.db'}"
    treasury = bootstrap(TreasuryConfig(database_url=database))
    created = await treasury.companies.create_company("Acme")
    key_id = (await treasury.companies.authenticate(created.secret_key)).key_id
    treasury.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
    env.update(
        {
            "TREASURY_RATE_LIMIT_PER_SECOND": SLOW,
            "TREASURY_RATE_LIMIT_BURST": str(BURST),
            "TREASURY_RATE_LIMIT_REDIS_URL": redis_url,
            # A loaded machine must not look like a Redis outage here.
            "TREASURY_RATE_LIMIT_REDIS_TIMEOUT_SECONDS": "10",
        }
    )
    try:
        async with serving(database, env) as ports:
            yield ports, created.secret_key, key_id
    finally:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            await client.delete(f"treasury:ratelimit:{key_id}")
        finally:
            await client.aclose()


async def test_two_servers_share_one_limit(servers: tuple[list[int], str, str]) -> None:
    ports, secret, _ = servers
    auth = {"Authorization": f"Bearer {secret}"}
    answers: list[tuple[int, int, dict[str, Any], str | None]] = []
    async with aiohttp.ClientSession() as session:
        for n in range(2 * BURST):  # alternating: each server alone would allow BURST
            port = ports[n % 2]
            async with session.get(f"http://127.0.0.1:{port}/api/v1/wallets", headers=auth) as r:
                answers.append((port, r.status, await r.json(), r.headers.get("Retry-After")))
    statuses = [status for _, status, _, _ in answers]
    assert statuses == [200] * BURST + [429] * BURST
    # Both servers refuse once the shared bucket is empty, each with today's 429.
    assert {port for port, status, _, _ in answers if status == 429} == set(ports)
    for _, status, body, retry_after in answers:
        if status == 429:
            assert body["error"]["type"] == "rate_limit_error"
            assert body["error"]["code"] == "rate_limited"
            assert retry_after is not None and 990 <= int(retry_after) <= 1000


async def test_redis_out_limits_per_process_and_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from treasury_aiohttp import create_app

    caplog.set_level(logging.WARNING, logger="treasury.ratelimit")
    treasury = bootstrap(
        TreasuryConfig(
            database_url=f"sqlite:///{tmp_path / 'alone.db'}",
            rate_limit_per_second=0.001,
            rate_limit_burst=3,
            rate_limit_redis_url=f"redis://127.0.0.1:{free_port()}/0",  # nothing listens
        )
    )
    created = await treasury.companies.create_company("Acme")
    client = TestClient(TestServer(create_app(treasury, close_treasury=True)))
    await client.start_server()
    try:
        auth = {"Authorization": f"Bearer {created.secret_key}"}
        statuses = [(await client.get("/api/v1/wallets", headers=auth)).status for _ in range(5)]
        refused = await client.get("/api/v1/wallets", headers=auth)
        assert refused.headers["Retry-After"] is not None
        assert (await refused.json())["error"]["type"] == "rate_limit_error"
    finally:
        await client.close()
    assert statuses == [200, 200, 200, 429, 429]
    warnings = [r.getMessage() for r in caplog.records if r.name == "treasury.ratelimit"]
    assert len(warnings) == 1
    assert "per process" in warnings[0]
