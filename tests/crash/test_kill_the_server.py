"""Crash test: ``kill -9`` the server under load, restart it, and check that nothing
acknowledged was lost, nothing is half-applied, the ledger holds, and every event is delivered.

Clients create payment intents and pay them while a server is killed twice, at moments chosen by
a seeded random generator: the one ``treasury serve`` of an SQLite file, or one of two servers
sharing a PostgreSQL database (the other keeps serving).

A live server must answer every request it gets with 200; only a connection the kill broke may
be retried. The servers lease deliveries for a few seconds, so a delivery held by a killed
server is taken over well within the wait for every event.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from treasury_core import TreasuryConfig, bootstrap
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest
from treasury_core.payments import IntentFilter
from treasury_core.testing import check_invariants

#: Seconds a server leases a delivery; the wait for every event below is ten times as long.
DELIVERY_LEASE_SECONDS = 6
CARD = {"card_number": "4242424242424242", "expiry_month": 12, "expiry_year": 2030, "cvc": "123"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Acknowledged:
    """What the server answered 2xx to: intent ids and lookup ids, and which were paid."""

    created: dict[str, int] = field(default_factory=dict)  # lookup id -> intent id
    paid: set[str] = field(default_factory=set)


class Server:
    def __init__(self, database: str, port: int) -> None:
        self.database, self.port = database, port
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
        env.update(
            {
                "TREASURY_JOB_POLL_SECONDS": "0.2",
                "TREASURY_RATE_LIMIT_PER_SECOND": "0",
                "TREASURY_DELIVERY_LEASE_SECONDS": str(DELIVERY_LEASE_SECONDS),
                "TREASURY_WEBHOOK_TIMEOUT_SECONDS": str(DELIVERY_LEASE_SECONDS // 3),
            }
        )
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "treasury_aiohttp.cli", "serve", "--port", str(self.port),
            "--database", self.database, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(300):  # readiness: the port accepts connections once the app serves
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return
            except OSError:
                await asyncio.sleep(0.1)
        raise TimeoutError("server did not start")

    async def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
            await asyncio.wait_for(self.process.wait(), 60)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[set[str], str]]:
    seen: set[str] = set()

    async def handle(request: web.Request) -> web.Response:
        seen.add(request.headers["webhook-id"])
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hooks", handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield seen, str(server.make_url("/hooks"))
    finally:
        await server.close()


@pytest.fixture(params=["sqlite", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, int]:
    """The database URL, and how many servers share it."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'crash.db'}", 1
    return str(request.getfixturevalue("postgres_url")), 2


@pytest.mark.timeout(600)
async def test_kill_9_under_load_loses_nothing_acknowledged(
    deployment: tuple[str, int], receiver: tuple[set[str], str]
) -> None:
    seen, hook_url = receiver
    database, count = deployment
    treasury = bootstrap(TreasuryConfig(database_url=database))
    created = await treasury.companies.create_company("Acme")
    await treasury.notifications.create_endpoint(
        created.company.id, CreateWebhookEndpointRequest(url=hook_url)
    )
    treasury.close()
    servers = [Server(database, _free_port()) for _ in range(count)]
    for server in servers:
        await server.start()
    acked = Acknowledged()
    rng = random.Random(20261122)
    stop = asyncio.Event()
    progress = asyncio.Event()  # set whenever a payment is acknowledged
    auth = {"Authorization": f"Bearer {created.secret_key}"}
    refused: list[str] = []  # any answer but 200 from a server that was up

    async def client(n: int, session: aiohttp.ClientSession) -> None:
        base = f"http://127.0.0.1:{servers[n % count].port}"
        while not stop.is_set():
            try:
                async with session.post(
                    f"{base}/api/v1/payments/intent",
                    json={
                        "account_id": created.merchant_account.id,
                        "billing_amount": rng.randint(100, 10_000),
                        "billing_currency": "USD",
                        "payment_type": "Card Payment",
                    },
                    headers=auth,
                ) as response:
                    if response.status != 200:
                        refused.append(f"create: {response.status} {await response.text()}")
                        continue
                    intent = await response.json()
                lookup = intent["payment_intent_lookup_id"]
                acked.created[lookup] = intent["id"]
                async with session.post(f"{base}/pay/{lookup}", json=CARD) as response:
                    if response.status != 200:
                        refused.append(f"pay: {response.status} {await response.text()}")
                        continue
                    acked.paid.add(lookup)
                    progress.set()
            except (aiohttp.ClientError, OSError):
                await asyncio.sleep(0.05)  # the server is down: try again shortly

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        clients = [asyncio.create_task(client(n, session)) for n in range(8)]
        try:
            for _ in range(2):
                target = len(acked.paid) + rng.randint(20, 60)
                while len(acked.paid) < target:
                    progress.clear()
                    await progress.wait()
                victim = rng.choice(servers)
                await victim.kill()
                await victim.start()
            target = len(acked.paid) + 20
            while len(acked.paid) < target:
                progress.clear()
                await progress.wait()
        finally:
            stop.set()
            await asyncio.gather(*clients)

    # Every event the outbox holds reaches the receiver (the restarted server's worker loop).
    treasury = bootstrap(TreasuryConfig(database_url=database), migrate=False)
    try:
        events = await treasury.storage.run(lambda uow: uow.outbox.list(), write=False)
        wanted = {e.id for e in events}
        for _ in range(DELIVERY_LEASE_SECONDS * 10 * 10):
            if wanted <= seen:
                break
            await asyncio.sleep(0.1)
        assert wanted <= seen, f"{len(wanted - seen)} events never delivered"
        for server in servers:
            await server.stop()
        # Nothing acknowledged was lost; nothing is half-applied.
        for lookup, intent_id in acked.created.items():
            intent = await treasury.payments.get_by_lookup_id(created.company.id, lookup)
            assert intent.id == intent_id
            if lookup in acked.paid:
                assert intent.status.value == "PROCESSED"
        intents = await treasury.payments.count(created.company.id, IntentFilter())
        assert intents >= len(acked.created)
        check_invariants(treasury.storage)
        assert len(acked.paid) >= 60
        assert refused == []
    finally:
        for server in servers:
            await server.stop()
        treasury.close()
