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
