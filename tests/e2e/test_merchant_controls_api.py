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
from treasury_core.testing import FakeClock, check_invariants

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
    # events null: every type again; url and enabled null: as if left out.
    again = await call(client, tenant, "POST", path, {"events": None, "url": None, "enabled": None})
    assert (again["events"], again["url"], again["status"]) == (None, f"{base}/b", "enabled")

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


# --- disputes a merchant can act on --------------------------------------------------------------

DAY = 86_400
CHARGEBACK_WON = "4000000000000077"
CHARGEBACKS = "/api/v1/payments/chargeback"


async def disputed(client: Client, tenant: Tenant, treasury: Treasury) -> dict[str, Any]:
    """A paid intent whose test card disputes and wins, a day on: its open chargeback."""
    body = {
        "account_id": tenant.account_id,
        "billing_amount": 10_000,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
    }
    intent = await call(client, tenant, "POST", "/api/v1/payments/intent", body)
    card = {
        "cardholder_name": "Jane Doe",
        "card_number": CHARGEBACK_WON,
        "expiry_month": 12,
        "expiry_year": 2040,
        "cvc": "123",
    }
    paid = await client.post(f"/pay/{intent['payment_intent_lookup_id']}", json=card)
    assert paid.status == 200, await paid.text()
    await call(client, tenant, "POST", CLOCK + "/advance", {"seconds": DAY})
    [opened] = chargeback_events(treasury, tenant)
    assert opened[0] == "merchant_of_record.chargeback.created"
    return await call(client, tenant, "GET", f"{CHARGEBACKS}/{opened[1]['id']}")


def chargeback_events(treasury: Treasury, tenant: Tenant) -> list[tuple[str, dict[str, Any]]]:
    events = treasury.storage.run_sync(lambda uow: uow.outbox.list(tenant.company_id), write=False)
    return [(e.type.value, e.data["object"]) for e in events if ".chargeback." in e.type.value]


async def test_evidence_is_taken_until_the_window_closes(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    chargeback = await disputed(client, tenant, treasury)
    path = f"{CHARGEBACKS}/{chargeback['id']}"
    assert (chargeback["status"], chargeback["evidence"], chargeback["accepted"]) == (
        "open",
        None,
        False,
    )
    due = datetime.fromisoformat(chargeback["evidence_due_by"])
    assert due - datetime.fromisoformat(chargeback["created_at"]) == timedelta(days=1)

    first = await call(
        client,
        tenant,
        "POST",
        path + "/evidence",
        {"product_description": "A blue kettle", "shipping_tracking_number": "1Z999"},
    )
    assert first["evidence"]["product_description"] == "A blue kettle"
    assert first["evidence_submitted_at"] is not None
    # Amended: the fields named change, "" clears one, the others stay.
    second = await call(
        client,
        tenant,
        "POST",
        path + "/evidence",
        {"shipping_tracking_number": "", "customer_name": "Jane Doe"},
    )
    assert {k: v for k, v in second["evidence"].items() if v is not None} == {
        "product_description": "A blue kettle",
        "customer_name": "Jane Doe",
    }
    assert second["status"] == "open"
    # Evidence moves nothing and fires nothing; the card network decides when the window ends.
    await call(client, tenant, "POST", CLOCK + "/advance", {"seconds": DAY // 2})
    assert (await call(client, tenant, "GET", path))["status"] == "open"
    await call(client, tenant, "POST", CLOCK + "/advance", {"seconds": DAY // 2})
    decided = await call(client, tenant, "GET", path)
    assert decided["status"] == "won"
    assert decided["evidence"] == second["evidence"]
    assert [t for t, _ in chargeback_events(treasury, tenant)] == [
        "merchant_of_record.chargeback.created",
        "merchant_of_record.chargeback.completed",
        "merchant_of_record.chargeback.reversed",
    ]
    for suffix, body in (("/evidence", {"uncategorized_text": "late"}), ("/accept", {})):
        refused = await call(client, tenant, "POST", path + suffix, body, 400)
        assert refused["error"]["code"] == "chargeback_closed"
    check_invariants(treasury.storage)


async def test_accepting_loses_the_chargeback_now(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    chargeback = await disputed(client, tenant, treasury)
    path = f"{CHARGEBACKS}/{chargeback['id']}"
    accepted = await call(client, tenant, "POST", path + "/accept")
    # The test card would have won; accepted, it is lost at once.
    assert (accepted["status"], accepted["accepted"]) == ("lost", True)
    assert await call(client, tenant, "GET", path) == accepted
    # Past the window the dispute job finds nothing left to decide.
    await call(client, tenant, "POST", CLOCK + "/advance", {"seconds": 3 * DAY})
    events = chargeback_events(treasury, tenant)
    assert [t for t, _ in events] == [
        "merchant_of_record.chargeback.created",
        "merchant_of_record.chargeback.failed",
    ]
    assert events[-1][1]["accepted"] is True
    assert (await call(client, tenant, "POST", path + "/accept", None, 400))["error"][
        "code"
    ] == "chargeback_closed"
    check_invariants(treasury.storage)


async def test_bad_answers_to_a_chargeback_change_nothing(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury, clock: FakeClock
) -> None:
    chargeback = await disputed(client, tenant, treasury)
    path = f"{CHARGEBACKS}/{chargeback['id']}"
    for body, param in (
        ({}, None),
        ({"colour": "red"}, "colour"),
        ({"product_description": 5}, "product_description"),
        ({"product_description": "x" * 5_001}, "product_description"),
    ):
        refused = await call(client, tenant, "POST", path + "/evidence", body, 400)
        assert refused["error"]["type"] == "invalid_request_error"
        if param is not None:
            assert param in refused["error"]["param"], refused
    assert await call(client, tenant, "POST", path + "/accept", {"x": 1}, 400)
    for bad in ("cb_nope", "nope"):
        await call(client, tenant, "GET", f"{CHARGEBACKS}/{bad}", None, 404)
        await call(client, tenant, "POST", f"{CHARGEBACKS}/{bad}/accept", {}, 404)
    for method, suffix, body in (
        ("GET", "", None),
        ("POST", "/evidence", {"customer_name": "x"}),
        ("POST", "/accept", {}),
    ):
        gone = await call(client, other_tenant, method, path + suffix, body, 404)
        assert gone["error"]["type"] == "not_found"
    # Past the window (business time; the dispute job has not run yet): no more evidence.
    clock.advance(DAY)
    closed = await call(client, tenant, "POST", path + "/evidence", {"customer_name": "x"}, 400)
    assert closed["error"]["code"] == "chargeback_evidence_window_closed"
    assert await call(client, tenant, "GET", path) == chargeback
    check_invariants(treasury.storage)
