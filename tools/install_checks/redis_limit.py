"""The ``redis`` extra with ``server``: ``TREASURY_RATE_LIMIT_REDIS_URL`` keeps the buckets in
Redis (docs/guides/operations.md).

Two apps stand for two server processes; they share one Redis and so one limit per key.
``tools/check_installs.py`` runs it in a fresh environment holding
``treasury-core[server,redis]`` with the Redis URL as its argument. Prints ``redis limit: ok``.
"""

from __future__ import annotations

import asyncio
import sys

from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

from treasury_aiohttp import create_app
from treasury_core import bootstrap
from treasury_core.settings import config_from_env


async def main(redis_url: str) -> None:
    """Burst 2 shared by two apps: two requests pass, the third is a 429; any error exits."""
    config = config_from_env(
        {
            "TREASURY_DATABASE_URL": "memory://",
            "TREASURY_RATE_LIMIT_PER_SECOND": "0.001",
            "TREASURY_RATE_LIMIT_BURST": "2",
            "TREASURY_RATE_LIMIT_REDIS_URL": redis_url,
        }
    )
    treasury = bootstrap(config)
    created = await treasury.companies.create_company("Acme")
    key_id = (await treasury.companies.authenticate(created.secret_key)).key_id
    clients = [TestClient(TestServer(create_app(treasury))) for _ in range(2)]
    auth = {"Authorization": f"Bearer {created.secret_key}"}
    try:
        for client in clients:
            await client.start_server()
        statuses = [
            (await clients[n % 2].get("/api/v1/wallets", headers=auth)).status for n in range(3)
        ]
        assert statuses == [200, 200, 429], statuses
    finally:
        for client in clients:
            await client.close()
        redis = Redis.from_url(redis_url)
        await redis.delete(f"treasury:ratelimit:{key_id}")
        await redis.aclose()
        treasury.close()
    print("redis limit: ok")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
