"""The delivery pipeline with real receivers on loopback: batches (one claim and one record
transaction each), a dead receiver beside a live one, the in-process wake-up, and the sandbox
clock's advance leaving a backlog to the worker loop."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.e2e.conftest import Tenant
from tests.e2e.test_worker import short_lease_env, start_worker_process
from treasury_aiohttp import create_app
from treasury_aiohttp.notifier import HttpSender
from treasury_aiohttp.worker import work_loop
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.notifications.deliveries import DeliveryStatus
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest
from treasury_core.payments.intents import PaymentType
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports import UnitOfWork
from treasury_core.testing.fakes.clock import FakeClock

CREATED = "merchant_of_record.payment_intent.created"


class Receiver:
    """A webhook receiver on loopback: answers 200 and keeps the ``webhook-id`` of each
    request in the order they came."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.arrived = asyncio.Event()
        self.wanted = 0

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.ids.append(request.headers["webhook-id"])
        if len(set(self.ids)) >= self.wanted:
            self.arrived.set()
        return web.Response(status=200)

    async def until(self, count: int, seconds: float) -> None:
        """Wait (at most ``seconds``) until ``count`` distinct events have arrived."""
        self.wanted = count
        if len(set(self.ids)) < count:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), seconds)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    sink = Receiver()
    app = web.Application()
    app.router.add_post("/hooks", sink.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield sink, str(server.make_url("/hooks"))
    finally:
        await server.close()


class DeadReceiver:
    """A port that accepts connections and reads requests but never answers."""

    def __init__(self) -> None:
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def _take(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        while await reader.read(65536):
            pass

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._take, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/hooks"

    async def close(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def company_with_endpoints(treasury: Treasury, *urls: str) -> tuple[int, int]:
    created = await treasury.companies.create_company("Acme")
    for url in urls:
        await treasury.notifications.create_endpoint(
            created.company.id, CreateWebhookEndpointRequest(url=url, events=[CREATED])
        )
    return created.company.id, created.merchant_account.id


async def create_intents(treasury: Treasury, company: int, account: int, count: int) -> None:
    for n in range(count):
        await treasury.payments.create(
            company,
            CreateIntentRequest(
                account_id=account,
                billing_amount=100 + n,
                billing_currency="USD",
                payment_type=PaymentType.CARD_PAYMENT,
            ),
        )


def count_transactions(treasury: Treasury) -> dict[str, int]:
    """Count the storage's transactions from here on, writes and reads apart (a wrapper
    around the storage object every service shares)."""
    counts = {"write": 0, "read": 0}
    storage = treasury.storage
    inner = storage.run

    async def run(fn: Callable[[UnitOfWork], Any], *, write: bool = True, **kw: Any) -> Any:
        counts["write" if write else "read"] += 1
        return await inner(fn, write=write, **kw)

    storage.run = run  # type: ignore[method-assign]
    return counts


async def pending(treasury: Treasury, event_ids: list[str], url: str | None = None) -> int:
    """How many deliveries of these events (to ``url``, or anywhere) are still pending."""

    def read(uow: UnitOfWork) -> int:
        return sum(
            d.status is DeliveryStatus.PENDING and url in (None, d.url)
            for event_id in event_ids
            for d in uow.deliveries.for_event(event_id)
        )

    return await treasury.storage.run(read, write=False)


async def event_ids(treasury: Treasury) -> list[str]:
    events = await treasury.storage.run(lambda uow: uow.outbox.list(), write=False)
    return [e.id for e in events]


async def test_a_batch_is_one_claim_one_read_and_one_record_transaction(
    database_url: str, clock: FakeClock, receiver: tuple[Receiver, str]
) -> None:
    sink, url = receiver
    treasury = bootstrap(
        TreasuryConfig(
            database_url=database_url,
            pool_size=4,
            delivery_batch_size=50,
            delivery_concurrency_per_destination=50,
        ),
        clock=clock,
    )
    try:
        company, account = await company_with_endpoints(treasury, url)
        await create_intents(treasury, company, account, 50)
        await treasury.notifications.dispatch_all()
        async with HttpSender(allow_private=True) as sender:
            treasury.notifications.sender = sender
            counts = count_transactions(treasury)
            assert await treasury.notifications.deliver_due() == 50
        # Every event arrived, and recorded as delivered, in three transactions: the claim,
        # the read of the endpoint's secret, and the record of all fifty attempts.
        assert len(set(sink.ids)) == 50
        assert counts == {"write": 2, "read": 1}
        assert await pending(treasury, await event_ids(treasury)) == 0
    finally:
        treasury.close()


async def run_worker(treasury: Treasury) -> tuple[asyncio.Event, asyncio.Task[None]]:
    stop = asyncio.Event()
    first_pass = asyncio.Event()
    task = asyncio.create_task(work_loop(treasury, stop, after_pass=first_pass.set))
    await asyncio.wait_for(first_pass.wait(), 30)
    return stop, task


async def test_a_dead_receiver_does_not_hold_up_a_live_one(
    database_url: str, receiver: tuple[Receiver, str]
) -> None:
    sink, live = receiver
    dead = DeadReceiver()
    dead_url = await dead.start()
    treasury = bootstrap(
        TreasuryConfig(
            database_url=database_url,
            pool_size=4,
            # The dead receiver's sends time out only after the test is over: every live
            # delivery must get through while the dead one holds its slots.
            webhook_timeout_seconds=60,
            delivery_lease_seconds=150,
            delivery_batch_size=10,
            delivery_concurrency=8,
            delivery_concurrency_per_destination=3,
            job_poll_seconds=0.05,
        )
    )
    try:
        company, account = await company_with_endpoints(treasury, dead_url, live)
        async with HttpSender(allow_private=True, timeout_seconds=60) as sender:
            treasury.notifications.sender = sender
            stop, worker = await run_worker(treasury)
            try:
                await create_intents(treasury, company, account, 60)
                await sink.until(60, 30)
                # The dead receiver was sent no more than its limit in flight, and has not
                # answered one: all sixty live deliveries went past it.
                assert 1 <= dead.connections <= 3
                assert len(sink.ids) == 60  # each once
                ids = await event_ids(treasury)
                # The dead receiver's deliveries are all still waiting, none given up on.
                assert await pending(treasury, ids, dead_url) == 60
            finally:
                stop.set()
                # The worker's batches in flight end with their sends' timeout: close the
                # dead receiver's connections so they fail now, and are recorded.
                await dead.close()
                await asyncio.wait_for(worker, 30)
    finally:
        await dead.close()
        treasury.close()


async def test_an_event_goes_out_without_waiting_for_the_poll(
    database_url: str, receiver: tuple[Receiver, str]
) -> None:
    sink, url = receiver
    treasury = bootstrap(
        TreasuryConfig(database_url=database_url, pool_size=4, job_poll_seconds=60)
    )
    first_pass = asyncio.Event()
    app = create_app(treasury, run_jobs=True, after_jobs_pass=first_pass.set)
    client: TestClient[Any, Any] = TestClient(TestServer(app))
    await client.start_server()
    try:
        await asyncio.wait_for(first_pass.wait(), 30)  # the worker now sleeps for 60 s
        created = await treasury.companies.create_company("Acme")
        auth = {"Authorization": f"Bearer {created.secret_key}"}
        endpoint = await client.post(
            "/api/v1/webhook-endpoints", json={"url": url, "events": [CREATED]}, headers=auth
        )
        assert endpoint.status == 200
        body = {
            "account_id": created.merchant_account.id,
            "billing_amount": 700,
            "billing_currency": "USD",
            "payment_type": "Card Payment",
        }
        answer = await client.post("/api/v1/payments/intent", json=body, headers=auth)
        assert answer.status == 200
        # Woken by the request's commit: the event arrives long before the next poll.
        await sink.until(1, 10)
        assert sink.ids == await event_ids(treasury)
    finally:
        await client.close()
        treasury.close()


async def test_a_clock_advance_leaves_the_backlog_to_the_worker(
    client: TestClient[Any, Any],
    tenant: Tenant,
    treasury: Treasury,
    receiver: tuple[Receiver, str],
) -> None:
    sink, url = receiver
    await treasury.notifications.create_endpoint(
        tenant.company_id, CreateWebhookEndpointRequest(url=url, events=[CREATED])
    )
    await create_intents(treasury, tenant.company_id, tenant.account_id, 120)
    # One batch holds no more for one receiver than its limit in flight.
    assert treasury.config.delivery_concurrency_per_destination < 120
    answer = await client.post(
        "/api/v1/sandbox/clock/advance", json={"seconds": 1}, headers=tenant.auth
    )
    assert answer.status == 200
    # Every event was fanned out, one batch sent; the rest of the backlog is still waiting.
    ids = await event_ids(treasury)
    assert len(ids) == 120
    sent = len(set(sink.ids))
    assert 0 < sent < 120
    assert await pending(treasury, ids) == 120 - sent
    # The worker loop sends the rest.
    stop, worker = await run_worker(treasury)
    try:
        await sink.until(120, 30)
    finally:
        stop.set()
        await asyncio.wait_for(worker, 30)
    assert await pending(treasury, ids) == 0
    assert set(sink.ids) == set(ids)


async def test_a_worker_killed_mid_batch_loses_nothing(tmp_path: Path) -> None:
    """kill -9 a ``treasury worker`` while a batch is in flight (some answered, some held by
    the receiver); the next worker delivers every event. Only what the killed worker had
    in flight may arrive twice (at least once, as documented), and every delivery ends
    succeeded."""
    received: list[str] = []
    answered: set[str] = set()
    held = asyncio.Event()
    release = asyncio.Event()
    holding = True

    async def handle(request: web.Request) -> web.Response:
        event_id = request.headers["webhook-id"]
        received.append(event_id)
        if holding and len(received) > 10:
            if len(received) >= 20:
                held.set()
            await release.wait()  # the first worker is killed while these wait
        answered.add(event_id)
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hooks", handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    db = tmp_path / "killed.db"
    env = short_lease_env(
        TREASURY_DELIVERY_BATCH_SIZE="25", TREASURY_DELIVERY_CONCURRENCY_PER_DESTINATION="25"
    )

    try:
        treasury = bootstrap(TreasuryConfig(database_url=f"sqlite:///{db}"))
        try:
            company, account = await company_with_endpoints(
                treasury, str(server.make_url("/hooks"))
            )
            await create_intents(treasury, company, account, 60)
            ids = set(await event_ids(treasury))
        finally:
            treasury.close()
        first = await start_worker_process(db, env)
        await asyncio.wait_for(held.wait(), 30)
        first.kill()  # SIGKILL mid-batch: nothing recorded, nothing released
        await first.wait()
        in_flight_at_kill = set(received)
        holding = False
        second = await start_worker_process(db, env)
        try:
            deadline = asyncio.get_running_loop().time() + 60
            while answered != ids:  # a bounded wait for an async arrival
                assert asyncio.get_running_loop().time() < deadline, len(answered)
                await asyncio.sleep(0.05)
        finally:
            second.send_signal(signal.SIGINT)
            await asyncio.wait_for(second.communicate(), 30)
        repeated = {i for i in received if received.count(i) > 1}
        assert repeated <= in_flight_at_kill
        treasury = bootstrap(TreasuryConfig(database_url=f"sqlite:///{db}"))
        try:
            assert await pending(treasury, sorted(ids)) == 0
            deliveries = await treasury.storage.run(
                lambda uow: [d for i in sorted(ids) for d in uow.deliveries.for_event(i)],
                write=False,
            )
        finally:
            treasury.close()
        assert len(deliveries) == 60
        assert all(d.status is DeliveryStatus.SUCCEEDED for d in deliveries)
    finally:
        release.set()
        await server.close()


async def test_a_company_s_flood_does_not_starve_another_company(
    database_url: str, receiver: tuple[Receiver, str]
) -> None:
    # 300 events of one company, then one of another, both to the same receiver: the claim
    # takes turns between companies, so the second company's event goes in the first batch
    # rather than after the flood.
    sink, url = receiver
    treasury = bootstrap(
        TreasuryConfig(database_url=database_url, pool_size=4, delivery_batch_size=10)
    )
    try:
        flood_company, flood_account = await company_with_endpoints(treasury, url)
        await create_intents(treasury, flood_company, flood_account, 300)
        quiet_company, quiet_account = await company_with_endpoints(treasury, url)
        await create_intents(treasury, quiet_company, quiet_account, 1)
        quiet = await treasury.notifications.events(quiet_company, limit=1)
        async with HttpSender(allow_private=True) as sender:
            treasury.notifications.sender = sender
            await treasury.notifications.run_due()  # batch after batch, each recorded in turn
        assert len(set(sink.ids)) == 301
        assert sink.ids.index(quiet.items[0].id) < 10  # in the first batch of ten
    finally:
        treasury.close()
