"""Part 6 over HTTP with real receivers on loopback: webhook endpoints, signed deliveries,
retries on the clock, the legacy callback, the events API and redelivery."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from standardwebhooks import Webhook

from tests.e2e.conftest import Tenant
from treasury_core import Treasury
from treasury_core.notifications.endpoints import WebhookEndpoint
from treasury_core.notifications.events import OPERATOR_EVENTS, EventType
from treasury_core.ports import UnitOfWork

Client = TestClient[Any, Any]
ENDPOINTS = "/api/v1/webhook-endpoints"
ADVANCE = "/api/v1/sandbox/clock/advance"


class Receiver:
    """Records every request; answers the next status of ``script`` (then 200)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], str]] = []
        self.queries: list[str] = []
        self.script: list[int] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((request.path, dict(request.headers), await request.text()))
        self.queries.append(request.query_string)
        return web.Response(status=self.script.pop(0) if self.script else 200)

    def at(self, path: str) -> list[tuple[dict[str, str], str]]:
        return [(h, b) for p, h, b in self.received if p == path]


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


async def call(
    client: Client, tenant: Tenant, method: str, path: str, body: Any = None, status: int = 200
) -> Any:
    response = await client.request(method, path, json=body, headers=tenant.auth)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def create_intent(client: Client, tenant: Tenant, **extra: Any) -> dict[str, Any]:
    body = {
        "account_id": tenant.account_id,
        "billing_amount": 1500,
        "billing_currency": "EUR",
        "payment_type": "Card Payment",
        "merchant_reference": "order-9",
        **extra,
    }
    intent: dict[str, Any] = await call(client, tenant, "POST", "/api/v1/payments/intent", body)
    return intent


async def test_endpoints_are_created_listed_and_deleted(client: Client, tenant: Tenant) -> None:
    created = await call(
        client,
        tenant,
        "POST",
        ENDPOINTS,
        {"url": "https://merchant.example/hooks", "events": ["treasury.deposit.completed"]},
    )
    assert created["id"].startswith("we_")
    assert created["secret"].startswith("whsec_")
    assert created["events"] == ["treasury.deposit.completed"]
    listed = await call(client, tenant, "GET", ENDPOINTS)
    assert [e["id"] for e in listed] == [created["id"]]
    assert listed[0]["secret"] is None  # shown once
    deleted = await call(client, tenant, "DELETE", f"{ENDPOINTS}/{created['id']}")
    assert deleted["status"] == "deleted"
    assert await call(client, tenant, "GET", ENDPOINTS) == []
    await call(client, tenant, "DELETE", f"{ENDPOINTS}/{created['id']}", status=404)


@pytest.mark.parametrize(
    "body",
    [
        {"url": "ftp://merchant.example/hooks"},
        {"url": "https://user:pass@merchant.example/hooks"},
        {"url": "https://merchant.example/hooks", "events": ["no.such.event"]},
        {"url": "https://merchant.example/hooks", "events": []},
        # The operator's event: no company's endpoint would ever receive it.
        {"url": "https://merchant.example/hooks", "events": ["treasury.reconciliation.break"]},
        {},
    ],
)
async def test_bad_endpoints_are_refused(
    client: Client, tenant: Tenant, body: dict[str, Any]
) -> None:
    refused = await call(client, tenant, "POST", ENDPOINTS, body, status=400)
    assert refused["error"]["type"] == "invalid_request_error"
    if "treasury.reconciliation.break" in body.get("events", ()):
        assert "is the operator's event" in refused["error"]["message"]
    assert await call(client, tenant, "GET", ENDPOINTS) == []


async def test_deliveries_are_signed_per_standard_webhooks(
    client: Client, tenant: Tenant, treasury: Treasury, receiver: tuple[Receiver, str]
) -> None:
    sink, base = receiver
    endpoint = await call(client, tenant, "POST", ENDPOINTS, {"url": f"{base}/hooks"})
    intent = await create_intent(client, tenant)
    await treasury.notifications.run_due()
    [(headers, body)] = sink.at("/hooks")
    payload = Webhook(endpoint["secret"]).verify(body, headers)
    assert payload["type"] == "merchant_of_record.payment_intent.created"
    assert set(payload) == {"id", "type", "created", "data"}
    obj = payload["data"]["object"]
    assert obj["id"] == str(intent["id"])  # a string in webhook payloads (part 2.1)
    for field in (
        "status",
        "billing_amount",
        "processing_amount",
        "billing_currency",
        "processing_currency",
        "merchant_reference",
        "company_id",
        "account_id",
    ):
        assert field in obj
    assert headers["webhook-id"] == payload["id"]
    # Another secret does not verify it.
    other = await call(client, tenant, "POST", ENDPOINTS, {"url": f"{base}/other"})
    with pytest.raises(Exception, match=r"[Ss]ignature"):
        Webhook(other["secret"]).verify(body, headers)


async def test_a_failing_receiver_gets_the_event_again_with_the_same_id(
    client: Client, tenant: Tenant, treasury: Treasury, receiver: tuple[Receiver, str]
) -> None:
    sink, base = receiver
    await call(
        client,
        tenant,
        "POST",
        ENDPOINTS,
        {"url": f"{base}/flaky", "events": ["merchant_of_record.payment_intent.created"]},
    )
    sink.script = [500, 500]
    await create_intent(client, tenant)
    await treasury.notifications.run_due()
    assert len(sink.at("/flaky")) == 1
    await call(client, tenant, "POST", ADVANCE, {"seconds": 5})  # the first retry: 5 s
    assert len(sink.at("/flaky")) == 2
    await call(client, tenant, "POST", ADVANCE, {"seconds": 299})
    assert len(sink.at("/flaky")) == 2  # the second waits 5 minutes
    await call(client, tenant, "POST", ADVANCE, {"seconds": 1})
    deliveries = sink.at("/flaky")
    assert len(deliveries) == 3
    assert len({h["webhook-id"] for h, _ in deliveries}) == 1
    assert len({b for _, b in deliveries}) == 1  # the same bytes each time
    event_id = deliveries[0][0]["webhook-id"]
    [record] = await call(client, tenant, "GET", f"/api/v1/events/{event_id}/deliveries")
    assert record["status"] == "succeeded"
    assert [a["status_code"] for a in record["attempts"]] == [500, 500, 200]
    assert [a["error"] for a in record["attempts"]] == ["HTTP 500", "HTTP 500", None]


async def test_the_last_failure_marks_the_delivery_failed(
    client: Client, tenant: Tenant, treasury: Treasury, receiver: tuple[Receiver, str]
) -> None:
    sink, base = receiver
    await call(
        client,
        tenant,
        "POST",
        ENDPOINTS,
        {"url": f"{base}/down", "events": ["merchant_of_record.payment_intent.created"]},
    )
    sink.script = [503] * 20
    await create_intent(client, tenant)
    await treasury.notifications.run_due()
    for seconds in (5, 300, 1800, 7200, 18000, 36000, 36000):
        await call(client, tenant, "POST", ADVANCE, {"seconds": seconds})
    assert len(sink.at("/down")) == 8
    await call(client, tenant, "POST", ADVANCE, {"seconds": 100000})
    assert len(sink.at("/down")) == 8
    event_id = sink.at("/down")[0][0]["webhook-id"]
    [record] = await call(client, tenant, "GET", f"/api/v1/events/{event_id}/deliveries")
    assert record["status"] == "failed"


async def test_the_legacy_callback_has_the_shapes_of_part_6_3(
    client: Client, tenant: Tenant, treasury: Treasury, receiver: tuple[Receiver, str]
) -> None:
    sink, base = receiver
    intent = await create_intent(client, tenant, callback_url=f"{base}/shop")
    response = await client.post(
        f"/pay/{intent['payment_intent_lookup_id']}",
        json={
            "card_number": "4242424242424242",
            "expiry_month": 12,
            "expiry_year": 2030,
            "cvc": "123",
        },
    )
    assert response.status == 200
    await treasury.notifications.run_due()
    [(headers, body)] = sink.at("/shop/callback/payment/intent")
    secret = (await call(client, tenant, "GET", "/api/v1/callback-secret"))["secret"]
    payload = Webhook(secret).verify(body, headers)
    assert payload["type"] == "payment_intent.processed"
    assert payload["status"] == "processed"
    sent = payload["payment_intent"]
    assert sent["id"] == intent["id"]  # an integer here
    assert sent["status"] == {"name": "PROCESSED"}
    assert sent["billing_currency"] == {"code": "EUR"}
    assert sent["processing_currency"] == {"code": "EUR"}
    assert sent["billing_amount"] == 1500


async def test_a_callback_url_with_a_query_gets_the_path_appended_to_its_path(
    client: Client, tenant: Tenant, treasury: Treasury, receiver: tuple[Receiver, str]
) -> None:
    sink, base = receiver
    intent = await create_intent(client, tenant, callback_url=f"{base}/shop?key=1&order=7")
    response = await client.post(
        f"/pay/{intent['payment_intent_lookup_id']}",
        json={
            "card_number": "4242424242424242",
            "expiry_month": 12,
            "expiry_year": 2030,
            "cvc": "123",
        },
    )
    assert response.status == 200
    await treasury.notifications.run_due()
    assert len(sink.at("/shop/callback/payment/intent")) == 1
    assert sink.queries == ["key=1&order=7"]


async def test_events_api_lists_filters_and_redelivers(
    client: Client, tenant: Tenant, treasury: Treasury, receiver: tuple[Receiver, str]
) -> None:
    sink, base = receiver
    intent = await create_intent(client, tenant)
    await treasury.notifications.run_due()  # dispatched while no endpoint exists
    events = await call(client, tenant, "GET", "/api/v1/events")
    assert [e["type"] for e in events] == ["merchant_of_record.payment_intent.created"]
    assert events[0]["data"]["object"]["id"] == str(intent["id"])
    typed = await call(client, tenant, "GET", "/api/v1/events?type=treasury.deposit.completed")
    assert typed == []
    await call(client, tenant, "GET", "/api/v1/events?type=nope", status=400)
    one = await call(client, tenant, "GET", f"/api/v1/events/{events[0]['id']}")
    assert one == events[0]
    await call(client, tenant, "GET", "/api/v1/events/evt_nope", status=404)

    # An endpoint registered later gets the event when it is redelivered.
    await call(client, tenant, "POST", ENDPOINTS, {"url": f"{base}/late"})
    made = await call(client, tenant, "POST", f"/api/v1/events/{events[0]['id']}/redeliver")
    assert [d["url"] for d in made] == [f"{base}/late"]
    await treasury.notifications.run_due()
    [(headers, _)] = sink.at("/late")
    assert headers["webhook-id"] == events[0]["id"]


async def test_events_are_kept_for_thirty_days(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    await create_intent(client, tenant)
    [event] = await call(client, tenant, "GET", "/api/v1/events")
    await call(client, tenant, "POST", ADVANCE, {"seconds": 30 * 86400 + 1})
    assert await call(client, tenant, "GET", "/api/v1/events") == []
    await call(client, tenant, "GET", f"/api/v1/events/{event['id']}", status=404)


async def test_another_company_sees_none_of_it(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    await create_intent(client, tenant)
    [event] = await call(client, tenant, "GET", "/api/v1/events")
    created = await call(client, tenant, "POST", ENDPOINTS, {"url": "https://a.example/h"})
    assert await call(client, other_tenant, "GET", "/api/v1/events") == []
    await call(client, other_tenant, "GET", f"/api/v1/events/{event['id']}", status=404)
    await call(client, other_tenant, "POST", f"/api/v1/events/{event['id']}/redeliver", status=404)
    await call(client, other_tenant, "DELETE", f"{ENDPOINTS}/{created['id']}", status=404)
    assert await call(client, other_tenant, "GET", ENDPOINTS) == []


async def test_the_verification_helper(
    client: Client, tenant: Tenant, treasury: Treasury, receiver: tuple[Receiver, str]
) -> None:
    from treasury_core.notifications.verify import InvalidWebhook, verify_webhook

    sink, base = receiver
    endpoint = await call(client, tenant, "POST", ENDPOINTS, {"url": f"{base}/verify"})
    await create_intent(client, tenant)
    await treasury.notifications.run_due()
    [(headers, body)] = sink.at("/verify")
    shouted = {k.upper(): v for k, v in headers.items()}
    assert verify_webhook(body, shouted, endpoint["secret"])["data"]["object"]["status"] == (
        "INITIALIZED"
    )
    with pytest.raises(InvalidWebhook):
        verify_webhook(body.replace("INITIALIZED", "PROCESSED"), headers, endpoint["secret"])
    old = {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) - 3600)}
    with pytest.raises(InvalidWebhook):
        verify_webhook(body, old, endpoint["secret"])


async def test_a_hanging_receiver_times_out_and_is_retried(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    from treasury_aiohttp.notifier import HttpSender

    release = asyncio.Event()
    calls: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        calls.append(request.headers["webhook-id"])
        if len(calls) == 1:
            await release.wait()  # the first attempt never gets an answer in time
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/slow", handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        await call(
            client,
            tenant,
            "POST",
            ENDPOINTS,
            {
                "url": str(server.make_url("/slow")),
                "events": ["merchant_of_record.payment_intent.created"],
            },
        )
        await create_intent(client, tenant)
        async with HttpSender(allow_private=True, timeout_seconds=0.5) as sender:
            treasury.notifications.sender = sender
            await treasury.notifications.run_due()
            await call(client, tenant, "POST", ADVANCE, {"seconds": 5})
        assert len(calls) == 2 and calls[0] == calls[1]
        [record] = await call(client, tenant, "GET", f"/api/v1/events/{calls[0]}/deliveries")
        first, second = record["attempts"]
        assert first["status_code"] is None
        assert "did not answer in time" in first["error"]
        assert second["status_code"] == 200
        assert record["status"] == "succeeded"
    finally:
        release.set()
        await server.close()


def _check_shape(payload: dict[str, Any], headers: dict[str, str]) -> None:
    assert set(payload) == {"id", "type", "created", "data"}
    assert headers["webhook-id"] == payload["id"]
    assert EventType(payload["type"])
    obj = payload["data"]["object"]
    assert isinstance(obj["id"], str)
    if ".payment_intent." in payload["type"]:
        # Part 6.2, field by field.
        assert obj["object"] == "payment_intent"
        assert isinstance(obj["status"], str)
        for number in ("billing_amount", "processing_amount"):
            assert isinstance(obj[number], int)
        for code in ("billing_currency", "processing_currency"):
            assert isinstance(obj[code], str) and len(obj[code]) == 3
        for integer in ("company_id", "account_id"):
            assert isinstance(obj[integer], int)
        assert "merchant_reference" in obj
        assert isinstance(obj["metadata"], dict)


async def test_every_event_of_a_busy_day_has_its_payload_shape(
    client: Client, tenant: Tenant, treasury: Treasury, receiver: tuple[Receiver, str]
) -> None:
    sink, base = receiver
    endpoint = await call(client, tenant, "POST", ENDPOINTS, {"url": f"{base}/all"})
    card = {"expiry_month": 12, "expiry_year": 2030, "cvc": "123"}

    async def pay(intent: dict[str, Any], number: str) -> None:
        await client.post(
            f"/pay/{intent['payment_intent_lookup_id']}", json={**card, "card_number": number}
        )

    # Payments: a decline, a sale that is refunded and then disputed (lost), a 3-D Secure
    # challenge, an authorization that is voided; payouts after two days.
    paid = await create_intent(client, tenant)
    await pay(paid, "4000000000000002")
    await pay(paid, "4000000000000051")
    await call(
        client,
        tenant,
        "POST",
        "/api/v1/payments/intent/refund",
        {"payment_intent_id": paid["id"], "amount": 100},
    )
    sold = await create_intent(client, tenant)
    await pay(sold, "4242424242424242")  # paid out into the EUR wallet two days later
    challenged = await create_intent(client, tenant)
    await pay(challenged, "4000000000003220")
    held = await create_intent(client, tenant, capture_method="manual")
    await pay(held, "4242424242424242")
    await call(
        client,
        tenant,
        "POST",
        "/api/v1/payments/intent/cancel-authorization",
        {"payment_intent_id": held["id"]},
    )
    won = await create_intent(client, tenant)
    await pay(won, "4000000000000077")  # a chargeback the merchant wins
    unpaid = await create_intent(client, tenant, billing_currency="GBP")
    await pay(unpaid, "4242424242424242")  # no GBP wallet: the payout fails
    # Treasury: wallets, deposits that complete and fail, withdrawals, transfers.
    wallet = await call(
        client, tenant, "POST", "/api/v1/wallet", {"name": "Ops", "currency_id": "EUR"}
    )
    usd = await call(
        client, tenant, "POST", "/api/v1/wallet", {"name": "Dollars", "currency_id": "USD"}
    )
    usd2 = await call(
        client, tenant, "POST", "/api/v1/wallet", {"name": "More dollars", "currency_id": "USD"}
    )
    for target, outcome in ((wallet, "complete"), (wallet, "fail"), (usd, "complete")):
        deposit = await call(
            client,
            tenant,
            "POST",
            "/api/v1/deposit",
            {
                "wallet_id": target["id"],
                "from_amount": 50_000,
                "from_currency_id": target["currency"]["code"],
            },
        )
        await call(
            client, tenant, "POST", f"/api/v1/sandbox/deposits/{deposit['id']}/{outcome}", {}
        )
    bank = await call(
        client,
        tenant,
        "POST",
        "/api/v1/bank-account",
        {
            "bank_name": "JPMorgan Chase",
            "account_name": "Acme Ltd",
            "account_number": "000123456789",
            "routing_number": "021000021",
            "currency_id": "USD",
        },
    )
    for outcome in ("complete", "fail"):
        withdrawal = await call(
            client,
            tenant,
            "POST",
            "/api/v1/withdraw",
            {
                "wallet_id": usd["id"],
                "from_amount": 1000,
                "from_currency_id": "USD",
                "bank_account_id": bank["id"],
            },
        )
        await call(
            client, tenant, "POST", f"/api/v1/sandbox/withdrawals/{withdrawal['id']}/{outcome}", {}
        )
    await call(
        client,
        tenant,
        "POST",
        "/api/v1/transfer",
        {"from_wallet_id": usd["id"], "to_wallet_id": usd2["id"], "from_amount": 500},
    )
    cross = await call(
        client,
        tenant,
        "POST",
        "/api/v1/transfer",
        {"from_wallet_id": usd["id"], "to_wallet_id": wallet["id"], "from_amount": 500},
    )
    await call(client, tenant, "POST", f"/api/v1/sandbox/transfers/{cross['id']}/fail", {})
    # A payment link closed before it was paid.
    unpaid = await call(
        client,
        tenant,
        "POST",
        "/api/v1/payments/intent",
        {
            "account_id": tenant.account_id,
            "billing_amount": 1000,
            "billing_currency": "USD",
            "payment_type": "Card Payment",
            "metadata": {"order_id": "A-1"},
        },
    )
    await call(
        client,
        tenant,
        "POST",
        "/api/v1/payments/intent/expire",
        {"payment_intent_id": unpaid["id"]},
    )
    # Card on file: a card saved, a card declined.
    for number in ("4242424242424242", "4000000000000002"):
        pmti = await call(
            client,
            tenant,
            "POST",
            "/api/v1/payment_method_token_intent",
            {
                "account_id": tenant.account_id,
                "payment_type": "Tokenization",
                "customer_email": "a@example.com",
                "customer_phone_number": "+15555550100",
            },
        )
        confirm = pmti["latest_version"]["confirm_endpoint_url"].split("//", 1)[1]
        await client.post("/" + confirm.split("/", 1)[1], json={**card, "card_number": number})
    await call(client, tenant, "POST", ADVANCE, {"seconds": 3 * 86400})
    await treasury.notifications.run_due()

    received = sink.at("/all")
    types = set()
    for headers, body in received:
        payload = Webhook(endpoint["secret"]).verify(body, headers)
        _check_shape(payload, headers)
        types.add(payload["type"])
        if payload["type"] == EventType.PAYMENT_INTENT_EXPIRED:
            assert payload["data"]["object"]["metadata"] == {"order_id": "A-1"}
    # Every event type a company receives, each delivered with its shape checked.
    assert types == {t.value for t in EventType if t not in OPERATOR_EVENTS}
    events = await call(client, tenant, "GET", "/api/v1/events?limit=100")
    assert len(received) == len(events)  # every event, once


async def test_endpoint_creation_is_idempotent_without_storing_the_secret(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    headers = {**tenant.auth, "Idempotency-Key": "endpoint-1"}
    body = {"url": "https://merchant.example/hooks"}
    first = await (await client.post(ENDPOINTS, json=body, headers=headers)).json()
    again = await client.post(ENDPOINTS, json=body, headers=headers)
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert await again.json() == first
    record = await treasury.storage.run(
        lambda uow: uow.idempotency.get(tenant.company_id, "endpoint-1"), write=False
    )
    assert record is not None and record.result is not None
    assert b"whsec_" not in record.result.body


async def test_a_refused_create_is_replayed_as_it_was(client: Client, tenant: Tenant) -> None:
    headers = {**tenant.auth, "Idempotency-Key": "bad-endpoint"}
    for path, body in (
        (ENDPOINTS, {"url": "not a url"}),
        ("/api/v1/payment_method_token_intent", {"bogus": 1}),
    ):
        first = await client.post(path, json=body, headers=headers)
        again = await client.post(path, json=body, headers=headers)
        assert (first.status, again.status) == (400, 400)
        assert await first.json() == await again.json()
        headers["Idempotency-Key"] += "-2"


#: Hosts no resolver can be asked about: a label over 63 characters, an empty label, and an
#: ``xn--`` label that is not Punycode.
UNENCODABLE_HOSTS = ["a" * 64 + ".example", "merchant..example", "xn--zz.example"]


@pytest.mark.parametrize("host", UNENCODABLE_HOSTS)
async def test_a_host_that_cannot_be_encoded_for_dns_is_refused(
    client: Client, tenant: Tenant, host: str
) -> None:
    url = f"https://{host}/hooks"
    refused = await call(client, tenant, "POST", ENDPOINTS, {"url": url}, status=400)
    assert refused["error"]["param"] == "url"
    assert "cannot be encoded for DNS" in refused["error"]["message"]
    assert await call(client, tenant, "GET", ENDPOINTS) == []
    created = await call(client, tenant, "POST", ENDPOINTS, {"url": "https://merchant.example/"})
    changed = await call(
        client, tenant, "POST", f"{ENDPOINTS}/{created['id']}", {"url": url}, status=400
    )
    assert changed["error"]["param"] == "url"
    [kept] = await call(client, tenant, "GET", ENDPOINTS)
    assert kept["url"] == "https://merchant.example/"
    intent = await client.post(
        "/api/v1/payments/intent",
        json={
            "account_id": tenant.account_id,
            "billing_amount": 1500,
            "billing_currency": "EUR",
            "payment_type": "Card Payment",
            "callback_url": url,
        },
        headers=tenant.auth,
    )
    assert intent.status == 400
    assert (await intent.json())["error"]["param"] == "callback_url"


@pytest.mark.parametrize("host", UNENCODABLE_HOSTS)
async def test_a_stored_host_that_cannot_be_encoded_fails_in_one_log_line(
    client: Client,
    tenant: Tenant,
    treasury: Treasury,
    caplog: pytest.LogCaptureFixture,
    host: str,
) -> None:
    created = await call(
        client,
        tenant,
        "POST",
        ENDPOINTS,
        {
            "url": "https://merchant.example/",
            "events": ["merchant_of_record.payment_intent.created"],
        },
    )

    def store_bad_url(uow: UnitOfWork) -> None:
        # As an endpoint made before hosts were checked at creation would be stored.
        found = uow.records.get(WebhookEndpoint, created["id"], tenant.company_id)
        assert found is not None
        uow.records.update(found.model_copy(update={"url": f"https://{host}/hooks"}))

    await treasury.storage.run(store_bad_url)
    await create_intent(client, tenant)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="treasury"):
        await treasury.notifications.run_due()
    failures = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 1, caplog.text
    [failure] = failures
    assert failure.exc_info is None
    assert failure.levelno < logging.ERROR
    assert "cannot be encoded for DNS" in failure.getMessage()
    [event] = await call(client, tenant, "GET", "/api/v1/events")
    [record] = await call(client, tenant, "GET", f"/api/v1/events/{event['id']}/deliveries")
    assert record["status"] == "pending"  # retried on the schedule like any failure
    assert "cannot be encoded for DNS" in record["attempts"][0]["error"]
