"""Bad input to the payment calls: a clear error, never a 500, and nothing changed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from tests.e2e.test_payments_api import (
    CANCEL,
    CAPTURE,
    INTENT,
    REFUND,
    authorized,
    card,
    create,
    error_of,
    events_of,
    lookup,
    pay,
    post,
)
from treasury_core import Treasury
from treasury_core.testing import check_invariants

Client = TestClient[Any, Any]


def good_body(tenant: Tenant) -> dict[str, Any]:
    return {
        "account_id": tenant.account_id,
        "billing_amount": 10_000,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "merchant_reference": "order-1",
    }


async def intent_count(client: Client, tenant: Tenant) -> int:
    response = await client.get("/api/v1/payments/intents/count", headers=tenant.auth)
    return int((await response.json())["count"])


@pytest.mark.parametrize(
    ("change", "param", "status"),
    [
        ({"payment_type": "Bank Transfer"}, "payment_type", 400),
        ({"payment_type": "card payment"}, "payment_type", 400),
        ({"billing_amount": 0}, "billing_amount", 400),
        ({"billing_amount": -1}, "billing_amount", 400),
        ({"billing_amount": 1.5}, "billing_amount", 400),
        ({"billing_amount": 100.5}, "billing_amount", 400),
        ({"billing_amount": "100"}, "billing_amount", 400),
        ({"billing_amount": True}, "billing_amount", 400),
        ({"billing_amount": None}, "billing_amount", 400),
        ({"billing_amount": 10**30}, "billing_amount", 400),
        ({"billing_currency": "ZZZ"}, "billing_currency", 400),
        ({"billing_currency": "usd"}, "billing_currency", 400),
        ({"billing_currency": 840}, "billing_currency", 400),
        ({"processing_currency": "XYZ"}, "processing_currency", 400),
        ({"account_id": 999_999}, "account_id", 404),
        ({"account_id": "1"}, "account_id", 400),
        ({"account_id": 0}, "account_id", 400),
        ({"capture_method": "later"}, "capture_method", 400),
        ({"checkin_date": "14/03/2026"}, "checkin_date", 400),
        ({"callback_url": "not a url"}, "callback_url", 400),
        ({"card_token": "tok_123"}, "card_token", 400),
        ({"card_token": "pmt_01J0000000000000000000000"}, "card_token", 404),
        ({"colour": "red"}, "colour", 400),
        ({"amount": 100}, "amount", 400),
    ],
)
async def test_bad_create_bodies(
    client: Client,
    tenant: Tenant,
    treasury: Treasury,
    change: dict[str, Any],
    param: str,
    status: int,
) -> None:
    body = {**good_body(tenant), **change}
    refused = await post(client, tenant, INTENT, body, status)
    error = error_of(refused)
    assert error["param"] == param
    assert error["message"]
    assert error["type"] == ("not_found" if status == 404 else "invalid_request_error")
    assert await intent_count(client, tenant) == 0
    assert events_of(treasury, tenant.company_id) == []


@pytest.mark.parametrize("missing", ["account_id", "billing_amount", "billing_currency"])
async def test_missing_create_fields(
    client: Client, tenant: Tenant, treasury: Treasury, missing: str
) -> None:
    body = good_body(tenant)
    del body[missing]
    refused = await post(client, tenant, INTENT, body, 400)
    assert error_of(refused)["param"] == missing
    assert await intent_count(client, tenant) == 0


@pytest.mark.parametrize("raw", [b"", b"{", b"[]", b"null", b'"x"'])
async def test_malformed_create_bodies(client: Client, tenant: Tenant, raw: bytes) -> None:
    response = await client.post(
        INTENT, data=raw, headers={**tenant.auth, "Content-Type": "application/json"}
    )
    assert response.status == 400
    assert error_of(await response.json())["type"] == "invalid_request_error"
    assert await intent_count(client, tenant) == 0


async def test_another_companys_account(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury
) -> None:
    body = {**good_body(tenant), "account_id": other_tenant.account_id}
    refused = await post(client, tenant, INTENT, body, 404)
    assert error_of(refused)["param"] == "account_id"
    assert await intent_count(client, tenant) == 0
    assert await intent_count(client, other_tenant) == 0
    assert events_of(treasury, tenant.company_id) == []
    assert events_of(treasury, other_tenant.company_id) == []


async def test_unknown_or_foreign_intents_are_404(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury
) -> None:
    theirs = await authorized(client, other_tenant)
    processed = await create(client, other_tenant)
    await pay(client, processed["payment_intent_lookup_id"])
    before = events_of(treasury, other_tenant.company_id)
    for path in (CAPTURE, CANCEL, REFUND):
        for intent_id in (theirs["id"], processed["id"], 987_654_321):
            refused = await post(client, tenant, path, {"payment_intent_id": intent_id}, 404)
            error = error_of(refused)
            assert error["type"] == "not_found"
            assert error["param"] == "payment_intent_id"
    assert await lookup(client, other_tenant, theirs) == theirs
    assert (await lookup(client, other_tenant, processed))["amount_refunded"] == 0
    assert events_of(treasury, other_tenant.company_id) == before
    assert events_of(treasury, tenant.company_id) == []


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "payment_intent_id"),
        ({"payment_intent_id": "1"}, "payment_intent_id"),
        ({"payment_intent_id": 0}, "payment_intent_id"),
        ({"payment_intent_id": -5}, "payment_intent_id"),
        ({"payment_intent_id": 1.5}, "payment_intent_id"),
        ({"payment_intent_id": True}, "payment_intent_id"),
        ({"payment_intent_id": 2**64}, "payment_intent_id"),
        ({"payment_intent_id": 1, "amount": 5}, "amount"),
    ],
)
async def test_bad_capture_and_cancel_bodies(
    client: Client, tenant: Tenant, treasury: Treasury, body: dict[str, Any], param: str
) -> None:
    intent = await authorized(client, tenant)
    before = events_of(treasury, tenant.company_id)
    for path in (CAPTURE, CANCEL):
        refused = await post(client, tenant, path, body, 400)
        assert error_of(refused)["param"] == param
    assert await lookup(client, tenant, intent) == intent
    assert events_of(treasury, tenant.company_id) == before


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"amount": 0}, "amount"),
        ({"amount": -1}, "amount"),
        ({"amount": 1.5}, "amount"),
        ({"amount": "100"}, "amount"),
        ({"amount": True}, "amount"),
        ({"amount": 10_001}, "amount"),
        ({"reason": 5}, "reason"),
        ({"currency": "USD"}, "currency"),
    ],
)
async def test_bad_refund_bodies(
    client: Client, tenant: Tenant, treasury: Treasury, change: dict[str, Any], param: str
) -> None:
    intent = await create(client, tenant)
    await pay(client, intent["payment_intent_lookup_id"])
    before = events_of(treasury, tenant.company_id)
    body = {"payment_intent_id": intent["id"], **change}
    refused = await post(client, tenant, REFUND, body, 400)
    assert error_of(refused)["param"] == param
    assert (await lookup(client, tenant, intent))["amount_refunded"] == 0
    assert events_of(treasury, tenant.company_id) == before
    check_invariants(treasury.storage)


async def test_refund_above_what_remains(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await create(client, tenant, billing_amount=500)
    await pay(client, intent["payment_intent_lookup_id"])
    await post(client, tenant, REFUND, {"payment_intent_id": intent["id"], "amount": 300})
    before = events_of(treasury, tenant.company_id)
    refused = await post(
        client, tenant, REFUND, {"payment_intent_id": intent["id"], "amount": 201}, 400
    )
    assert error_of(refused)["param"] == "amount"
    assert (await lookup(client, tenant, intent))["amount_refunded"] == 300
    assert events_of(treasury, tenant.company_id) == before
    check_invariants(treasury.storage)


@pytest.mark.parametrize("number", ["4242424242424241", "1234", "4242-4242-4242-424x"])
async def test_invalid_card_numbers(
    client: Client, tenant: Tenant, treasury: Treasury, number: str
) -> None:
    intent = await create(client, tenant)
    response = await client.post(f"/pay/{intent['payment_intent_lookup_id']}", json=card(number))
    text = await response.text()
    assert response.status in (400, 402), text
    assert number not in text and "424242424242" not in text
    if response.status == 402:
        error = json.loads(text)["error"]
        assert error["type"] == "card_error"
        assert error["failure_reason"]
    assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"
    for event in events_of(treasury, tenant.company_id):
        assert number not in json.dumps(event.data)
    # Still payable.
    assert (await pay(client, intent["payment_intent_lookup_id"]))["status"] == "PROCESSED"


async def test_luhn_failure_is_refused_before_any_attempt(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await create(client, tenant)
    refused = await pay(client, intent["payment_intent_lookup_id"], "4242424242424241", 400)
    assert error_of(refused)["code"] == "incorrect_number"
    assert error_of(refused)["param"] == "card_number"
    assert "4242424242424241" not in json.dumps(refused)
    # A typo is not a payment attempt: no transaction, no event.
    events = await treasury.storage.run(lambda uow: uow.outbox.list(tenant.company_id))
    assert not any(e.type.value.startswith("merchant_of_record.transaction.") for e in events)


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"expiry_month": 13}, "expiry_month"),
        ({"expiry_month": "12"}, "expiry_month"),
        ({"expiry_year": 1999}, "expiry_year"),
        ({"card_number": 4242424242424242}, "card_number"),
        ({"cvc": 123}, "cvc"),
        # Digits outside ASCII (full-width) are not a card number.
        ({"card_number": "\uff14\uff12\uff14\uff12" * 4}, "card_number"),
        ({"pin": "0000"}, "pin"),
    ],
)
async def test_bad_pay_bodies(
    client: Client, tenant: Tenant, treasury: Treasury, change: dict[str, Any], param: str
) -> None:
    intent = await create(client, tenant)
    before = events_of(treasury, tenant.company_id)
    response = await client.post(
        f"/pay/{intent['payment_intent_lookup_id']}", json={**card(), **change}
    )
    text = await response.text()
    assert response.status == 400, text
    assert json.loads(text)["error"]["param"] == param
    assert "4242424242424242" not in text
    assert events_of(treasury, tenant.company_id) == before
    assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"


async def test_bad_form_payment(client: Client, tenant: Tenant, treasury: Treasury) -> None:
    intent = await create(client, tenant)
    fields = {k: str(v) for k, v in card().items()}
    response = await client.post(
        f"/pay/{intent['payment_intent_lookup_id']}", data={**fields, "expiry_month": "xx"}
    )
    assert response.status == 400
    assert error_of(await response.json())["param"] == "expiry_month"
    response = await client.post(
        f"/pay/{intent['payment_intent_lookup_id']}", data={**fields, "extra": "1"}
    )
    assert response.status == 400
    assert error_of(await response.json())["param"] == "extra"
    assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"


@pytest.mark.parametrize(
    ("content_type", "raw"),
    [
        ("application/x-www-form-urlencoded", b"card_number=\xff\xfe&cvc=123"),
        ("application/x-www-form-urlencoded; charset=bogus", b"card_number=4242&cvc=123"),
    ],
)
async def test_undecodable_form_payment(
    client: Client, tenant: Tenant, treasury: Treasury, content_type: str, raw: bytes
) -> None:
    intent = await create(client, tenant)
    before = events_of(treasury, tenant.company_id)
    response = await client.post(
        f"/pay/{intent['payment_intent_lookup_id']}",
        data=raw,
        headers={"Content-Type": content_type},
    )
    assert response.status == 400
    assert error_of(await response.json())["code"] == "body_invalid"
    assert events_of(treasury, tenant.company_id) == before
    assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"


@pytest.mark.parametrize("lookup_id", ["pil_doesnotexist00000000", "nothing", "1"])
async def test_unknown_lookup_ids(client: Client, tenant: Tenant, lookup_id: str) -> None:
    for path in (f"/pay/{lookup_id}", f"/pay/{lookup_id}/challenge"):
        body = card() if path.count("/") == 2 else {"outcome": "pass"}
        response = await client.post(path, json=body)
        assert response.status == 404
        assert error_of(await response.json())["type"] == "not_found"
    response = await client.get(
        f"{INTENT}?payment_intent_lookup_id={lookup_id}", headers=tenant.auth
    )
    assert response.status == 404


async def test_challenge_without_a_pending_challenge(client: Client, tenant: Tenant) -> None:
    intent = await create(client, tenant)
    response = await client.post(
        f"/pay/{intent['payment_intent_lookup_id']}/challenge", json={"outcome": "pass"}
    )
    assert response.status == 400
    response = await client.post(
        f"/pay/{intent['payment_intent_lookup_id']}/challenge", json={"outcome": "maybe"}
    )
    assert response.status == 400
    assert error_of(await response.json())["param"] == "outcome"
    assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"
