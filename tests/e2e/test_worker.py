"""``treasury worker`` as a real process: events written while nothing was running are
delivered once it starts, signed, and the worker stops cleanly on SIGINT."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer
from standardwebhooks import Webhook

from treasury_core import TreasuryConfig, bootstrap
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest
from treasury_core.payments.intents import PaymentType
from treasury_core.payments.requests import CreateIntentRequest


async def write_one_event(db: Path, url: str) -> str:
    """A company with a webhook endpoint at ``url`` and one event for it, written with no
    server or worker running; the endpoint's secret."""
    treasury = bootstrap(TreasuryConfig(database_url=f"sqlite:///{db}"))
    try:
        created = await treasury.companies.create_company("Acme")
        endpoint = await treasury.notifications.create_endpoint(
            created.company.id, CreateWebhookEndpointRequest(url=url)
        )
        await treasury.payments.create(
            created.company.id,
            CreateIntentRequest(
                account_id=created.merchant_account.id,
                billing_amount=700,
                billing_currency="USD",
                payment_type=PaymentType.CARD_PAYMENT,
            ),
        )
        return endpoint.secret
    finally:
        treasury.close()


async def start_worker_process(db: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    """``treasury worker`` on ``db`` with ``env``, its output piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "treasury_aiohttp.cli", "worker", "--database", str(db),
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip


def short_lease_env(**extra: str) -> dict[str, str]:
    """The environment without TREASURY_ settings but leases short enough for a test (the
    lease outlasts a send as configuration requires), plus ``extra``."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")},
        "TREASURY_WEBHOOK_TIMEOUT_SECONDS": "2",
        "TREASURY_DELIVERY_LEASE_SECONDS": "5",
        "TREASURY_JOB_POLL_SECONDS": "0.2",
        **extra,
    }


async def test_a_worker_started_later_delivers_what_was_written_before(tmp_path: Path) -> None:
    received: asyncio.Queue[tuple[dict[str, str], str]] = asyncio.Queue()

    async def handle(request: web.Request) -> web.Response:
        await received.put((dict(request.headers), await request.text()))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hooks", handle)
    receiver = TestServer(app, host="127.0.0.1")
    await receiver.start_server()
    db = tmp_path / "worker.db"
    try:
        secret = await write_one_event(db, str(receiver.make_url("/hooks")))
        env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "treasury_aiohttp.cli",
            "worker",
            "--database",
            str(db),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            headers, body = await asyncio.wait_for(received.get(), 30)
            payload = Webhook(secret).verify(body, headers)
            assert payload["type"] == "merchant_of_record.payment_intent.created"
        finally:
            worker.send_signal(signal.SIGINT)
            output, _ = await asyncio.wait_for(worker.communicate(), 30)
        assert worker.returncode == 0, output
        assert b"Traceback" not in output
    finally:
        await receiver.close()


async def test_a_delivery_lost_with_a_killed_worker_goes_out_from_the_next(
    tmp_path: Path,
) -> None:
    """kill -9 a worker while it waits for the receiver; the next worker sends the event once
    the dead one's claim (lease) runs out, with the same webhook-id."""
    first_arrived = asyncio.Event()
    received: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    never = asyncio.Event()

    async def handle(request: web.Request) -> web.Response:
        await received.put(dict(request.headers))
        if not first_arrived.is_set():
            first_arrived.set()
            await never.wait()  # the first worker is killed while waiting here
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hooks", handle)
    receiver = TestServer(app, host="127.0.0.1")
    await receiver.start_server()
    db = tmp_path / "killed.db"
    env = short_lease_env()

    def start_worker() -> Awaitable[asyncio.subprocess.Process]:
        return start_worker_process(db, env)

    try:
        await write_one_event(db, str(receiver.make_url("/hooks")))
        first = await start_worker()
        await asyncio.wait_for(first_arrived.wait(), 30)
        first.kill()  # SIGKILL: no chance to release its claim
        await first.wait()
        second = await start_worker()
        try:
            # Nothing until the dead worker's lease runs out; then the event, once more.
            headers = [await asyncio.wait_for(received.get(), 5)]
            headers.append(await asyncio.wait_for(received.get(), 30))
        finally:
            second.send_signal(signal.SIGINT)
            await asyncio.wait_for(second.communicate(), 30)
        assert headers[0]["webhook-id"] == headers[1]["webhook-id"]
        treasury = bootstrap(TreasuryConfig(database_url=f"sqlite:///{db}"))
        try:
            [event] = await treasury.storage.run(lambda uow: uow.outbox.list(), write=False)
            [delivery] = await treasury.storage.run(
                lambda uow: uow.deliveries.for_event(event.id), write=False
            )
        finally:
            treasury.close()
        assert delivery.status.value == "succeeded"
        assert len(delivery.attempts) == 1  # the killed worker's attempt left no record
    finally:
        never.set()
        await receiver.close()
