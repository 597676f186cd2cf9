"""The HTTP notifier against real receivers on loopback: delivery, refusals, failures."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from treasury_aiohttp.notifier import CallbackFailed, DestinationRefused, HttpNotifier
from treasury_core.events import Event, EventType


class Receiver:
    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], Any]] = []
        self.status = 200

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((dict(request.headers), await request.json()))
        return web.Response(status=self.status)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, TestServer]]:
    sink = Receiver()
    app = web.Application()
    app.router.add_post("/cards", sink.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield sink, server
    finally:
        await server.close()


def event(url: str, type_: EventType = EventType.PAYMENT_METHOD_TOKEN_INTENT_SUCCEEDED) -> Event:
    return Event(
        id="evt_01",
        type=type_,
        company_id=1,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        data={
            "object": {
                "id": "pmti_01",
                "callback_url": url,
                "status": "succeeded",
                "payment_method_token": "pmt_01",
                "card": {"brand": "visa", "last4": "4242", "expiry_month": 12, "expiry_year": 2030},
                "error": None,
            }
        },
    )


async def test_delivers_the_result_with_the_event_id(
    receiver: tuple[Receiver, TestServer],
) -> None:
    sink, server = receiver
    async with HttpNotifier(allow_private=True) as notifier:
        await notifier.deliver(event(str(server.make_url("/cards"))))
        # Other events are not PMTI results: nothing is sent for them.
        await notifier.deliver(event(str(server.make_url("/cards")), EventType.REFUND_CREATED))
    assert len(sink.received) == 1
    headers, body = sink.received[0]
    assert headers["webhook-id"] == "evt_01"
    assert body == {
        "payment_method_token_intent_id": "pmti_01",
        "payment_method_token": "pmt_01",
        "status": "succeeded",
        "card": {"brand": "visa", "last4": "4242", "expiry_month": 12, "expiry_year": 2030},
        "error": None,
    }


async def test_a_non_2xx_answer_fails_naming_the_host_only(
    receiver: tuple[Receiver, TestServer],
) -> None:
    sink, server = receiver
    sink.status = 500
    url = str(server.make_url("/cards?token=receiver-secret"))
    async with HttpNotifier(allow_private=True) as notifier:
        with pytest.raises(CallbackFailed) as failed:
            await notifier.deliver(event(url))
    assert "answered 500" in str(failed.value)
    assert "receiver-secret" not in str(failed.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
async def test_private_destinations_are_refused_unless_allowed(
    receiver: tuple[Receiver, TestServer], host: str
) -> None:
    sink, server = receiver
    url = f"http://{host}:{server.port}/cards"
    async with HttpNotifier(allow_private=False) as notifier:
        with pytest.raises(DestinationRefused):
            await notifier.deliver(event(url))
    assert sink.received == []
