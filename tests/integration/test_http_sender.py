"""The HTTP sender against real receivers on loopback: answers, failures, refusals."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from treasury_aiohttp.notifier import DestinationRefused, HttpSender
from treasury_core.ports import DeliveryFailed, WebhookSender


class Receiver:
    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.status = 200
        self.hang = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((dict(request.headers), await request.read()))
        return web.Response(status=self.status)

    async def hanging(self, request: web.Request) -> web.Response:
        await self.hang.wait()  # released at teardown
        return web.Response(status=200)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, TestServer]]:
    sink = Receiver()
    app = web.Application()
    app.router.add_post("/hook", sink.handle)
    app.router.add_post("/hang", sink.hanging)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield sink, server
    finally:
        sink.hang.set()
        await server.close()


async def test_posts_the_body_and_headers_and_answers_the_status(
    receiver: tuple[Receiver, TestServer],
) -> None:
    sink, server = receiver
    async with HttpSender(allow_private=True) as sender:
        assert isinstance(sender, WebhookSender)
        status = await sender.send(
            str(server.make_url("/hook")), b'{"a":1}', {"webhook-id": "evt_1"}
        )
        sink.status = 503
        failed = await sender.send(str(server.make_url("/hook")), b"{}", {})
    assert (status, failed) == (200, 503)
    headers, body = sink.received[0]
    assert (headers["webhook-id"], body) == ("evt_1", b'{"a":1}')


async def test_no_answer_is_a_delivery_failure_naming_the_host_only(
    receiver: tuple[Receiver, TestServer],
) -> None:
    _, server = receiver
    async with HttpSender(allow_private=True, timeout_seconds=0.3) as sender:
        with pytest.raises(DeliveryFailed, match="did not answer in time") as slow:
            await sender.send(str(server.make_url("/hang?token=receiver-secret")), b"{}", {})
        with pytest.raises(DeliveryFailed, match="could not be reached"):
            await sender.send("http://127.0.0.1:9/hook?token=receiver-secret", b"{}", {})
    assert "receiver-secret" not in str(slow.value)


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "[::1]", "127.1", "2130706433", "[::ffff:127.0.0.1]"]
)
async def test_private_destinations_are_refused_unless_allowed(
    receiver: tuple[Receiver, TestServer], host: str
) -> None:
    sink, server = receiver
    async with HttpSender(allow_private=False) as sender:
        with pytest.raises(DestinationRefused):
            await sender.send(f"http://{host}:{server.port}/hook", b"{}", {})
    assert sink.received == []


async def test_the_pool_opens_as_many_connections_as_sends_in_flight() -> None:
    # 150 sends to one receiver that answers none until all 150 have arrived: a pool capped
    # below them (aiohttp's default is 100 in all) would leave the rest waiting for a
    # connection until the timeout.
    from treasury_core import TreasuryConfig

    arrived = 0
    everyone = asyncio.Event()

    async def handle(request: web.Request) -> web.Response:
        nonlocal arrived
        arrived += 1
        if arrived == 150:
            everyone.set()
        await everyone.wait()
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hook", handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    config = TreasuryConfig(
        webhook_timeout_seconds=10,
        delivery_concurrency=150,
        delivery_concurrency_per_destination=150,
    )
    try:
        async with HttpSender.for_config(config) as sender:
            url = str(server.make_url("/hook"))
            statuses = await asyncio.gather(*(sender.send(url, b"{}", {}) for _ in range(150)))
        assert statuses == [200] * 150
    finally:
        everyone.set()
        await server.close()


@pytest.mark.parametrize("host", ["a" * 64 + ".example", "xn--zz.example"])
async def test_a_host_that_cannot_be_encoded_is_a_delivery_failure(host: str) -> None:
    async with HttpSender(allow_private=True) as sender:
        with pytest.raises(DeliveryFailed, match="cannot be encoded for DNS") as failed:
            await sender.send(f"https://{host}/hook?token=receiver-secret", b"{}", {})
    assert "receiver-secret" not in str(failed.value)
