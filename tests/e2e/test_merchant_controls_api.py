"""Issue 24, items 6–8 over HTTP: the sandbox clock read, refund outcomes, acting on disputes
and managing webhook endpoints (on an SQLite file and on PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from standardwebhooks import Webhook, WebhookVerificationError

from tests.e2e.conftest import Tenant
from treasury_core import Treasury
from treasury_core.testing import FakeClock

Client = TestClient[Any, Any]
CLOCK = "/api/v1/sandbox/clock"


async def call(
    client: Client, tenant: Tenant, method: str, path: str, body: Any = None, status: int = 200
) -> Any:
    response = await client.request(method, path, json=body, headers=tenant.auth)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def test_the_sandbox_clock_reads_business_time(
    client: Client, tenant: Tenant, clock: FakeClock
) -> None:
    before = datetime.fromisoformat((await call(client, tenant, "GET", CLOCK))["now"])
    assert before == clock.now()
    advanced = await call(client, tenant, "POST", CLOCK + "/advance", {"seconds": 3_600})
    after = await call(client, tenant, "GET", CLOCK)
    assert after == advanced
    assert datetime.fromisoformat(after["now"]) - before == timedelta(hours=1)
    # A read moves nothing.
    assert await call(client, tenant, "GET", CLOCK) == after
    response = await client.get(CLOCK)
    assert response.status == 401


# --- webhook endpoints managed -----------------------------------------------------------------

ENDPOINTS = "/api/v1/webhook-endpoints"
CREATED = "merchant_of_record.payment_intent.created"


class Receiver:
    """Records every request it gets, by path."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((request.path, dict(request.headers), await request.text()))
        return web.Response()

    def take(self) -> list[tuple[str, dict[str, str], str]]:
        taken, self.received = self.received, []
        return taken


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    sink = Receiver()
    app = web.Application()
    app.router.add_route("POST", "/{tail:.*}", sink.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield sink, str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


async def an_event(client: Client, tenant: Tenant, treasury: Treasury) -> None:
    """Make one ``payment_intent.created`` event and deliver what is due."""
    body = {
        "account_id": tenant.account_id,
        "billing_amount": 1_500,
        "billing_currency": "EUR",
        "payment_type": "Card Payment",
    }
    await call(client, tenant, "POST", "/api/v1/payments/intent", body)
    await treasury.notifications.run_due()


async def test_endpoints_are_updated_disabled_and_rotated(
    client: Client, tenant: Tenant, treasury: Treasury, receiver: tuple[Receiver, str]
) -> None:
    sink, base = receiver
    endpoint = await call(
        client, tenant, "POST", ENDPOINTS, {"url": f"{base}/a", "events": [CREATED]}
    )
    path = f"{ENDPOINTS}/{endpoint['id']}"
    await an_event(client, tenant, treasury)
    assert [p for p, _, _ in sink.take()] == ["/a"]

    # A new URL and event list: the next delivery goes there; the fields left out stay.
    moved = await call(client, tenant, "POST", path, {"url": f"{base}/b"})
    assert (moved["url"], moved["events"], moved["status"]) == (f"{base}/b", [CREATED], "enabled")
    assert moved["secret"] is None
    await an_event(client, tenant, treasury)
    assert [p for p, _, _ in sink.take()] == ["/b"]
    narrowed = await call(client, tenant, "POST", path, {"events": ["treasury.deposit.completed"]})
    assert narrowed["events"] == ["treasury.deposit.completed"]
    await an_event(client, tenant, treasury)
    assert sink.take() == []
    await call(client, tenant, "POST", path, {"events": None})  # every type again

    # Disabled: listed, but sent nothing until enabled again.
    disabled = await call(client, tenant, "POST", path, {"enabled": False})
    assert disabled["status"] == "disabled"
    assert [e["status"] for e in await call(client, tenant, "GET", ENDPOINTS)] == ["disabled"]
    await an_event(client, tenant, treasury)
    assert sink.take() == []
    assert (await call(client, tenant, "POST", path, {"enabled": True}))["status"] == "enabled"
    await an_event(client, tenant, treasury)
    [(_, headers, body)] = sink.take()
    Webhook(endpoint["secret"]).verify(body, headers)

    # Rotation: a new secret, shown once; for the overlap both sign, the new one first.
    rotated = await call(client, tenant, "POST", path + "/rotate-secret", {"overlap_seconds": 60})
    new, old = rotated["secret"], endpoint["secret"]
    assert new.startswith("whsec_") and new != old
    assert rotated["previous_secret_expires_at"] is not None
    await an_event(client, tenant, treasury)
    [(_, headers, body)] = sink.take()
    signatures = headers["webhook-signature"].split(" ")
    assert len(signatures) == 2 and all(s.startswith("v1,") for s in signatures)
    for secret in (new, old):
        Webhook(secret).verify(body, headers)
    # Past the overlap (business time) only the new secret signs.
    await call(client, tenant, "POST", CLOCK + "/advance", {"seconds": 60})
    sink.take()
    await an_event(client, tenant, treasury)
    [(_, headers, body)] = sink.take()
    assert len(headers["webhook-signature"].split(" ")) == 1
    Webhook(new).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(body, headers)
    # Without an overlap the old secret stops at once.
    again = await call(client, tenant, "POST", path + "/rotate-secret", {"overlap_seconds": 0})
    assert again["previous_secret_expires_at"] is None
    await an_event(client, tenant, treasury)
    [(_, headers, body)] = sink.take()
    Webhook(again["secret"]).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new).verify(body, headers)


@pytest.mark.parametrize(
    ("suffix", "body", "param"),
    [
        ("", {"url": None}, "url"),
        ("", {"enabled": None}, "enabled"),
        ("", {"enabled": "no"}, "enabled"),
        ("", {"url": "ftp://merchant.example/hooks"}, "url"),
        ("", {"events": []}, "events"),
        ("", {"colour": "red"}, "colour"),
        ("/rotate-secret", {"overlap_seconds": -1}, "overlap_seconds"),
        ("/rotate-secret", {"overlap_seconds": 604_801}, "overlap_seconds"),
    ],
)
async def test_bad_endpoint_changes_are_refused(
    client: Client, tenant: Tenant, suffix: str, body: dict[str, Any], param: str
) -> None:
    made = await call(client, tenant, "POST", ENDPOINTS, {"url": "https://merchant.example/h"})
    refused = await call(client, tenant, "POST", f"{ENDPOINTS}/{made['id']}{suffix}", body, 400)
    assert refused["error"]["type"] == "invalid_request_error"
    assert param in (refused["error"].get("param") or ""), refused
    [listed] = await call(client, tenant, "GET", ENDPOINTS)
    assert {k: listed[k] for k in ("url", "status", "events", "previous_secret_expires_at")} == {
        "url": "https://merchant.example/h",
        "status": "enabled",
        "events": None,
        "previous_secret_expires_at": None,
    }


async def test_a_deleted_endpoint_cannot_be_changed(client: Client, tenant: Tenant) -> None:
    made = await call(client, tenant, "POST", ENDPOINTS, {"url": "https://merchant.example/h"})
    path = f"{ENDPOINTS}/{made['id']}"
    await call(client, tenant, "POST", path, {"enabled": False})
    await call(client, tenant, "DELETE", path)  # a disabled endpoint can be deleted
    for suffix, body in (("", {"enabled": True}), ("/rotate-secret", {})):
        gone = await call(client, tenant, "POST", path + suffix, body, 404)
        assert gone["error"]["type"] == "not_found"
    await call(client, tenant, "POST", f"{ENDPOINTS}/we_nope{suffix}", {}, 404)
