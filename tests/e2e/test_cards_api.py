"""Parts 2.2, 4.2 and 5.4 over HTTP: payment method token intents, the confirm call, saved
cards charged as ``card_token``, and the result sent to the PMTI's ``callback_url``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.e2e.conftest import Tenant
from treasury_core import Treasury
from treasury_core.testing.fakes.clock import FakeClock

Client = TestClient[Any, Any]
PMTI = "/api/v1/payment_method_token_intent"
INTENT = "/api/v1/payments/intent"
ADVANCE = "/api/v1/sandbox/clock/advance"
VISA = "4242424242424242"
DECLINED = "4000000000000002"
INSUFFICIENT = "4000000000009995"
CARD = {
    "cardholder_name": "Ada Lovelace",
    "card_number": VISA,
    "expiry_month": 12,
    "expiry_year": 2030,
    "cvc": "123",
}
RESULT_FIELDS = {
    "payment_method_token_intent_id",
    "payment_method_token",
    "status",
    "card",
    "error",
}


def pmti_body(tenant: Tenant, **extra: Any) -> dict[str, Any]:
    return {
        "account_id": tenant.account_id,
        "payment_type": "Tokenization",
        "customer_email": "ada@example.com",
        "customer_phone_number": "+447700900123",
        **extra,
    }


async def create_pmti(
    client: Client, tenant: Tenant, *, publishable: bool = False, **extra: Any
) -> dict[str, Any]:
    auth = tenant.publishable_auth if publishable else tenant.auth
    response = await client.post(PMTI, json=pmti_body(tenant, **extra), headers=auth)
    body = await response.json()
    assert response.status == 200, body
    return body


def confirm_path(pmti: dict[str, Any]) -> str:
    return urlsplit(pmti["latest_version"]["confirm_endpoint_url"]).path


async def confirm(
    client: Client, pmti: dict[str, Any], card: dict[str, Any], status: int = 200
) -> dict[str, Any]:
    response = await client.post(confirm_path(pmti), json=card)
    body = await response.json()
    assert response.status == status, body
    return body


async def tokenize(client: Client, tenant: Tenant, number: str = VISA, **extra: Any) -> str:
    pmti = await create_pmti(client, tenant, **extra)
    result = await confirm(client, pmti, {**CARD, "card_number": number})
    assert result["status"] == "succeeded", result
    token: str = result["payment_method_token"]
    return token


async def test_create_answers_the_pmti_with_its_two_urls(client: Client, tenant: Tenant) -> None:
    body = await create_pmti(
        client, tenant, callback_url="https://merchant.example/cards", expiry_date="2027-06-30"
    )
    assert body["id"].startswith("pmti_")
    assert body["object"] == "payment_method_token_intent"
    assert body["status"] == "requires_payment_method"
    assert body["payment_type"] == "Tokenization"
    assert body["customer_phone_number"] == "+447700900123"
    assert body["expiry_date"] == "2027-06-30"
    assert body["payment_method_token"] is None
    version = body["latest_version"]
    base = f"http://{client.server.host}:{client.server.port}"
    assert version["provider_tokenization_url"].startswith(f"{base}/tokenize/{body['id']}/")
    assert version["confirm_endpoint_url"].startswith(f"{base}{PMTI}/{body['id']}/confirm/")
    # Two different secrets: the browser's URL cannot be used as the server-to-server one.
    form_secret = version["provider_tokenization_url"].rsplit("/", 1)[1]
    confirm_secret = version["confirm_endpoint_url"].rsplit("/", 1)[1]
    assert form_secret != confirm_secret
    assert len(confirm_secret) >= 40


async def test_a_publishable_key_may_create_but_not_read(client: Client, tenant: Tenant) -> None:
    body = await create_pmti(client, tenant, publishable=True)
    response = await client.get(f"{PMTI}/{body['id']}", headers=tenant.publishable_auth)
    assert response.status == 403
    response = await client.get(f"{PMTI}/{body['id']}", headers=tenant.auth)
    read = await response.json()
    assert read["status"] == "requires_payment_method"
    # The URLs are derived again (nothing stored rebuilds them): the same as at creation.
    assert read["latest_version"] == body["latest_version"]


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"payment_type": "Card Payment"}, "payment_type"),
        ({"payment_type": "Bitcoin"}, "payment_type"),
        ({"customer_email": "not-an-email"}, "customer_email"),
        ({"customer_phone_number": "447700900123"}, "customer_phone_number"),
        ({"customer_phone_number": "+0447700900123"}, "customer_phone_number"),
        ({"customer_phone_number": "+1234567890123456"}, "customer_phone_number"),
        ({"expiry_date": "2027-02-30"}, "expiry_date"),
        ({"expiry_date": "2025-12-31"}, "expiry_date"),  # the fake clock says 2026-01-01
        ({"callback_url": "ftp://merchant.example"}, "callback_url"),
        ({"account_id": "1"}, "account_id"),
        ({"surprise": True}, "surprise"),
    ],
)
async def test_bad_pmti_requests_are_refused(
    client: Client, tenant: Tenant, treasury: Treasury, change: dict[str, Any], param: str
) -> None:
    response = await client.post(PMTI, json={**pmti_body(tenant), **change}, headers=tenant.auth)
    body = await response.json()
    assert response.status == 400, body
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["param"] == param


async def test_missing_fields_and_foreign_accounts(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    for field in ("account_id", "payment_type", "customer_email", "customer_phone_number"):
        body = pmti_body(tenant)
        del body[field]
        response = await client.post(PMTI, json=body, headers=tenant.auth)
        error = (await response.json())["error"]
        assert (response.status, error["message"]) == (
            400,
            f"Missing required parameter: {field}",
        )
    response = await client.post(
        PMTI, json=pmti_body(tenant, account_id=other_tenant.account_id), headers=tenant.auth
    )
    assert response.status == 404
    response = await client.post(PMTI, json=pmti_body(tenant))
    assert response.status == 401


async def test_confirm_tokenizes_once(client: Client, tenant: Tenant, treasury: Treasury) -> None:
    pmti = await create_pmti(client, tenant)
    result = await confirm(client, pmti, {**CARD, "card_number": "4242 4242-4242 4242"})
    assert set(result) == RESULT_FIELDS
    assert result["status"] == "succeeded"
    assert result["error"] is None
    assert result["payment_method_token_intent_id"] == pmti["id"]
    assert result["payment_method_token"].startswith("pmt_")
    assert result["card"] == {
        "brand": "visa",
        "last4": "4242",
        "expiry_month": 12,
        "expiry_year": 2030,
    }

    again = await confirm(client, pmti, CARD, status=400)
    assert again["error"]["message"] == (
        "A card has already been submitted for this payment method token intent"
    )
    read = await (await client.get(f"{PMTI}/{pmti['id']}", headers=tenant.auth)).json()
    assert read["status"] == "succeeded"
    assert read["payment_method_token"] == result["payment_method_token"]
    token = await (
        await client.get(
            f"/api/v1/payment_method_tokens/{result['payment_method_token']}", headers=tenant.auth
        )
    ).json()
    assert token["card"]["last4"] == "4242"
    assert token["payment_method_token_intent_id"] == pmti["id"]
    assert VISA not in str(token)
    events = [
        e
        for e in await treasury.storage.run(lambda uow: uow.outbox.list(tenant.company_id))
        if "payment_method_token_intent" in e.type.value
    ]
    assert [e.type.value for e in events] == [
        "merchant_of_record.payment_method_token_intent.succeeded"
    ]
    assert events[0].data["object"]["payment_method_token"] == result["payment_method_token"]
    assert "url_salt" not in events[0].data["object"]


async def test_the_confirm_url_needs_its_exact_secret(client: Client, tenant: Tenant) -> None:
    pmti = await create_pmti(client, tenant)
    path = confirm_path(pmti)
    form_secret = pmti["latest_version"]["provider_tokenization_url"].rsplit("/", 1)[1]
    for wrong in (path[:-1] + ("A" if path[-1] != "A" else "B"), path.rsplit("/", 1)[0] + "/x"):
        response = await client.post(wrong, json=CARD)
        assert response.status == 404
    # The hosted form's secret does not open the server-to-server endpoint.
    response = await client.post(path.rsplit("/", 1)[0] + "/" + form_secret, json=CARD)
    assert response.status == 404
    # Another PMTI's id with this secret does not either.
    other = await create_pmti(client, tenant)
    response = await client.post(path.replace(pmti["id"], other["id"]), json=CARD)
    assert response.status == 404
    assert (await confirm(client, pmti, CARD))["status"] == "succeeded"


@pytest.mark.parametrize(
    ("change", "code", "param"),
    [
        ({"card_number": "4242424242424241"}, "incorrect_number", "card_number"),
        ({"card_number": "42424242"}, "invalid_number", "card_number"),
        ({"card_number": "4242x42424242424"}, "parameter_invalid", "card_number"),
        ({"expiry_month": 13}, "parameter_invalid", "expiry_month"),
        ({"expiry_month": 12, "expiry_year": 2025}, "expired_card", "expiry_year"),
        ({"card_number": "378282246310005", "cvc": "123"}, "invalid_cvc", "cvc"),
        ({"cvc": "12a"}, "parameter_invalid", "cvc"),
        ({"expiry_year": "2030"}, "parameter_invalid", "expiry_year"),
    ],
)
async def test_invalid_cards_are_refused_and_the_pmti_stays_open(
    client: Client, tenant: Tenant, change: dict[str, Any], code: str, param: str
) -> None:
    pmti = await create_pmti(client, tenant)
    refused = await confirm(client, pmti, {**CARD, **change}, status=400)
    assert (refused["error"]["code"], refused["error"]["param"]) == (code, param)
    number = str(change.get("card_number", VISA)).replace(" ", "")
    assert number[4:] not in refused["error"]["message"]
    assert (await confirm(client, pmti, CARD))["status"] == "succeeded"


async def test_a_declined_card_finishes_the_pmti_failed(client: Client, tenant: Tenant) -> None:
    pmti = await create_pmti(client, tenant)
    result = await confirm(client, pmti, {**CARD, "card_number": DECLINED})
    assert result["status"] == "failed"
    assert result["payment_method_token"] is None
    assert result["card"] is None
    assert result["error"] == {"code": "card_declined", "message": "Your card was declined"}
    await confirm(client, pmti, CARD, status=400)


async def test_a_pmti_takes_its_card_within_a_day(
    client: Client, tenant: Tenant, clock: FakeClock
) -> None:
    pmti = await create_pmti(client, tenant)
    clock.advance(24 * 3600)
    refused = await confirm(client, pmti, CARD, status=400)
    assert refused["error"] == {
        "type": "invalid_request_error",
        "code": "payment_method_token_intent_expired",
        "message": "This payment method token intent has expired",
    }


async def test_a_browser_on_another_site_cannot_post_the_card(
    client: Client, tenant: Tenant
) -> None:
    pmti = await create_pmti(client, tenant)
    response = await client.post(
        confirm_path(pmti), json=CARD, headers={"Origin": "https://evil.example"}
    )
    assert response.status == 403
    response = await client.post(
        confirm_path(pmti), json=CARD, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert response.status == 403
    assert (await confirm(client, pmti, CARD))["status"] == "succeeded"


async def test_saved_cards_charge_as_card_token(client: Client, tenant: Tenant) -> None:
    token = await tokenize(client, tenant)
    for method, status in (("automatic", "PROCESSED"), ("manual", "AUTHORIZED")):
        response = await client.post(
            INTENT,
            json={
                "account_id": tenant.account_id,
                "billing_amount": 2500,
                "billing_currency": "EUR",
                "payment_type": "Card Payment",
                "merchant_reference": f"order-{method}",
                "capture_method": method,
                "card_token": token,
            },
            headers=tenant.auth,
        )
        intent = await response.json()
        assert response.status == 200, intent
        assert intent["status"] == status
        assert intent["card_token"] == token


async def test_a_publishable_key_cannot_charge_a_saved_card(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    """Issue 20: a ``pmt_`` id and the publishable key (both in a browser's reach) must not be
    enough to charge the customer; charging a saved card needs the secret key."""
    token = await tokenize(client, tenant)
    body = {
        "account_id": tenant.account_id,
        "billing_amount": 99_999,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "merchant_reference": "not-yours",
        "card_token": token,
    }
    refused = {
        "error": {
            "type": "permission_error",
            "code": "secret_key_required",
            "message": "card_token requires a secret key",
            "param": "card_token",
        }
    }
    for extra in ({}, {"capture_method": "automatic"}, {"capture_method": "manual"}):
        response = await client.post(
            INTENT, json={**body, **extra}, headers=tenant.publishable_auth
        )
        assert response.status == 403, extra
        payload = await response.json()
        if extra.get("capture_method") != "manual":  # manual capture is refused on its own
            assert payload == refused, extra
        assert payload["error"]["type"] == "permission_error", extra
    # Nothing was created or charged ...
    count = await client.get("/api/v1/payments/intents/count", headers=tenant.auth)
    assert await count.json() == {"count": 0}
    # ... and the secret key charges the same card with the same body.
    response = await client.post(INTENT, json=body, headers=tenant.auth)
    intent = await response.json()
    assert response.status == 200, intent
    assert intent["status"] == "PROCESSED"


async def test_card_tokens_belong_to_their_company(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    token = await tokenize(client, tenant)
    response = await client.post(
        INTENT,
        json={
            "account_id": other_tenant.account_id,
            "billing_amount": 2500,
            "billing_currency": "EUR",
            "payment_type": "Card Payment",
            "card_token": token,
        },
        headers=other_tenant.auth,
    )
    body = await response.json()
    assert response.status == 404, body
    assert body["error"]["param"] == "card_token"
    response = await client.get(f"/api/v1/payment_method_tokens/{token}", headers=other_tenant.auth)
    assert response.status == 404


async def test_a_token_is_usable_until_its_expiry_date(
    client: Client, tenant: Tenant, clock: FakeClock
) -> None:
    token = await tokenize(client, tenant, expiry_date="2026-01-02")
    intent = {
        "account_id": tenant.account_id,
        "billing_amount": 100,
        "billing_currency": "USD",
        "payment_type": "MOTO",
        "card_token": token,
    }
    clock.advance(24 * 3600)  # 2026-01-02: still usable
    response = await client.post(INTENT, json=intent, headers=tenant.auth)
    assert (await response.json())["status"] == "PROCESSED"
    clock.advance(24 * 3600)
    response = await client.post(INTENT, json=intent, headers=tenant.auth)
    body = await response.json()
    assert response.status == 400
    assert body["error"] == {
        "type": "invalid_request_error",
        "code": "payment_method_token_expired",
        "message": "This payment method token has expired",
        "param": "card_token",
    }


async def test_a_saved_card_declined_at_charge_time(client: Client, tenant: Tenant) -> None:
    # 4000000000009995 passes the zero-amount check and is declined when charged.
    token = await tokenize(client, tenant, INSUFFICIENT)
    intent = {
        "account_id": tenant.account_id,
        "billing_amount": 100,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "card_token": token,
    }
    headers = {**tenant.auth, "Idempotency-Key": "charge-1"}
    first = await client.post(INTENT, json=intent, headers=headers)
    body = await first.json()
    assert first.status == 402
    assert body["error"]["failure_reason"] == "insufficient_funds"
    # A retry with the same key replays the decline; it does not charge (or create) again.
    again = await client.post(INTENT, json=intent, headers=headers)
    assert again.status == 402
    assert again.headers.get("Idempotent-Replayed") == "true"
    count = await (await client.get("/api/v1/payments/intents/count", headers=tenant.auth)).json()
    assert count == {"count": 1}


class Receiver:
    """A real HTTP receiver on loopback recording what it is sent."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], Any]] = []
        self.arrived = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((dict(request.headers), await request.json()))
        self.arrived.set()
        return web.Response(status=200)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/cards", receiver.handle)
    server = TestServer(app)
    await server.start_server()
    try:
        yield receiver, str(server.make_url("/cards"))
    finally:
        await server.close()


async def test_the_result_reaches_the_callback_url(
    client: Client, tenant: Tenant, treasury: Treasury, receiver: tuple[Receiver, str]
) -> None:
    sink, url = receiver
    pmti = await create_pmti(client, tenant, callback_url=url)
    result = await confirm(client, pmti, CARD)
    await treasury.notifications.run_due()  # what the worker loop of `treasury serve` does
    await asyncio.wait_for(sink.arrived.wait(), 10)
    headers, body = sink.received[0]
    assert body == result
    event = next(
        e
        for e in await treasury.storage.run(lambda uow: uow.outbox.list(tenant.company_id))
        if e.type.value.endswith("payment_method_token_intent.succeeded")
    )
    assert headers["webhook-id"] == event.id

    declined = await create_pmti(client, tenant, callback_url=url)
    sink.arrived.clear()
    failed = await confirm(client, declined, {**CARD, "card_number": DECLINED})
    await treasury.notifications.run_due()
    await asyncio.wait_for(sink.arrived.wait(), 10)
    assert sink.received[1][1] == failed
    assert failed["status"] == "failed"


async def test_pmti_creation_is_idempotent(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    headers = {**tenant.auth, "Idempotency-Key": "pmti-1"}
    first = await client.post(PMTI, json=pmti_body(tenant), headers=headers)
    created = await first.json()
    second = await client.post(PMTI, json=pmti_body(tenant), headers=headers)
    assert await second.json() == created
    assert second.headers.get("Idempotent-Replayed") == "true"
    # The stored answer holds no working URL: they are derived again for the replay.
    record = await treasury.storage.run(
        lambda uow: uow.idempotency.get(tenant.company_id, "pmti-1"), write=False
    )
    assert record is not None and record.result is not None
    secret = created["latest_version"]["confirm_endpoint_url"].rsplit("/", 1)[1]
    assert secret.encode() not in record.result.body
    # A replay after the card was submitted still answers what was answered first.
    await confirm(client, created, CARD)
    third = await client.post(PMTI, json=pmti_body(tenant), headers=headers)
    assert await third.json() == created
