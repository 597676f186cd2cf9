"""Graceful shutdown of ``treasury serve``: a request in flight when SIGTERM arrives gets its
answer, and a delivery being sent is recorded (its claim released), not left to its lease."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.listening import free_port, wait_listening
from treasury_core import TreasuryConfig, bootstrap
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest


async def _line_containing(process: asyncio.subprocess.Process, marker: bytes) -> None:
    assert process.stdout is not None
    while marker not in (line := await process.stdout.readline()):
        assert line, "the server exited before it logged its shutdown"


async def test_sigterm_lets_the_request_in_flight_finish(tmp_path: Path) -> None:
    arrived, release = asyncio.Event(), asyncio.Event()

    async def slow_receiver(request: web.Request) -> web.Response:
        arrived.set()
        await release.wait()  # answered only once the server has been told to stop
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hooks", slow_receiver)
    receiver = TestServer(app, host="127.0.0.1")
    await receiver.start_server()
    db = tmp_path / "shutdown.db"
    treasury = bootstrap(TreasuryConfig(database_url=f"sqlite:///{db}"))
    created = await treasury.companies.create_company("Acme")
    await treasury.notifications.create_endpoint(
        created.company.id, CreateWebhookEndpointRequest(url=str(receiver.make_url("/hooks")))
    )
    treasury.close()

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
    env["TREASURY_JOB_POLL_SECONDS"] = "3600"  # only the request below delivers anything
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "treasury_aiohttp.cli", "serve", "--port", str(port),
        "--database", str(db), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        await wait_listening(port, server)
        auth = {"Authorization": f"Bearer {created.secret_key}"}
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", headers=auth) as http:
            intent = await http.post(
                "/api/v1/payments/intent",
                json={
                    "account_id": created.merchant_account.id,
                    "billing_amount": 500,
                    "billing_currency": "USD",
                    "payment_type": "Card Payment",
                },
            )
            assert intent.status == 200  # and payment_intent.created is in the outbox
            # The worker loop ran once at start-up, before this event existed; clock/advance
            # delivers it inline, so the request stays in flight while the receiver waits.
            advance = asyncio.create_task(
                http.post("/api/v1/sandbox/clock/advance", json={"seconds": 1})
            )
            await asyncio.wait_for(arrived.wait(), 30)
            server.send_signal(signal.SIGTERM)
            # The server has begun stopping while the request is still running.
            await asyncio.wait_for(_line_containing(server, b"stopping:"), 30)
            release.set()
            answered = await asyncio.wait_for(advance, 30)
            assert answered.status == 200
            assert "now" in json.loads(await answered.text())
        output, _ = await asyncio.wait_for(server.communicate(), 60)
        assert server.returncode == 0, output
    finally:
        if server.returncode is None:
            server.kill()
        await receiver.close()

    treasury = bootstrap(TreasuryConfig(database_url=f"sqlite:///{db}"))
    try:
        [event] = await treasury.storage.run(lambda uow: uow.outbox.list(), write=False)
        [delivery] = await treasury.storage.run(
            lambda uow: uow.deliveries.for_event(event.id), write=False
        )
    finally:
        treasury.close()
    assert delivery.status.value == "succeeded"
    assert delivery.lease_until is None  # the claim was released, not left to expire
