"""Parts 2.1, 3.1, 4.1, 5, 6 and 7 over HTTP: payment intents, the sandbox cards, capture,
cancel, refunds, lists, events, chargebacks and payouts, exactly as the interface writes them."""

from __future__ import annotations

import asyncio
import secrets
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from treasury_core import Treasury
from treasury_core.services.payments import new_lookup_id
from treasury_core.testing import check_invariants
from treasury_core.testing.fakes.clock import FakeClock

Client = TestClient[Any, Any]
INTENT = "/api/v1/payments/intent"
CAPTURE = "/api/v1/payments/intent/capture"
CANCEL = "/api/v1/payments/intent/cancel-authorization"
REFUND = "/api/v1/payments/intent/refund"
ADVANCE = "/api/v1/sandbox/clock/advance"
DAY = 24 * 3600

APPROVED = "4242424242424242"
THREE_D_SECURE = "4000000000003220"
CAPTURE_DECLINED = "4000000000000341"
HOLD_GONE = "4000000000000259"
CHARGEBACK_LOST = "4000000000000051"
CHARGEBACK_WON = "4000000000000077"
DECLINES = {
    "4000000000000002": "card_declined",
    "4000000000009995": "insufficient_funds",
    "4000000000000069": "expired_card",
    "4000000000000127": "incorrect_cvc",
}

PI = "merchant_of_record.payment_intent."
TXN = "merchant_of_record.transaction."
INTENT_FIELDS = {
    "id",
    "account_id",
    "billing_amount",
    "billing_currency",
    "processing_amount",
    "processing_currency",
    "payment_type",
    "merchant_reference",
    "checkin_date",
    "card_token",
    "callback_url",
    "capture_method",
    "status",
    "authorized_at",
    "authorization_expires_at",
    "cancellation_reason",
    "customer",
    "customer_email",
    "company_id",
    "payment_intent_lookup_id",
    "amount_refunded",
}


async def post(
    client: Client,
    tenant: Tenant,
    path: str,
    body: Any,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> Any:
    response = await client.post(path, json=body, headers={**tenant.auth, **(headers or {})})
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def get(client: Client, tenant: Tenant, path: str, status: int = 200) -> Any:
    response = await client.get(path, headers=tenant.auth)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def create(client: Client, tenant: Tenant, status: int = 200, **fields: Any) -> Any:
    body = {
        "account_id": tenant.account_id,
        "billing_amount": 10_000,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "merchant_reference": "order-1",
        **fields,
    }
    return await post(client, tenant, INTENT, body, status)


def card(number: str = APPROVED) -> dict[str, Any]:
    return {
        "cardholder_name": "Jane Doe",
        "card_number": number,
        "expiry_month": 12,
        "expiry_year": 2030,
        # American Express prints a four-digit code; other brands three.
        "cvc": "1234" if number.startswith("3") else "123",
    }


async def pay(
    client: Client, lookup_id: str, number: str = APPROVED, status: int = 200, form: bool = False
) -> Any:
    if form:
        fields = {k: str(v) for k, v in card(number).items()}
        response = await client.post(f"/pay/{lookup_id}", data=fields)
    else:
        response = await client.post(f"/pay/{lookup_id}", json=card(number))
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def lookup(client: Client, tenant: Tenant, intent: Any) -> Any:
    lookup_id = intent["payment_intent_lookup_id"]
    return await get(client, tenant, f"{INTENT}?payment_intent_lookup_id={lookup_id}")


async def authorized(client: Client, tenant: Tenant, number: str = APPROVED, **fields: Any) -> Any:
    intent = await create(client, tenant, capture_method="manual", **fields)
    await pay(client, intent["payment_intent_lookup_id"], number)
    current = await lookup(client, tenant, intent)
    assert current["status"] == "AUTHORIZED"
    return current


def events_of(treasury: Treasury, company_id: int) -> list[Any]:
    return treasury.storage.run_sync(lambda uow: uow.outbox.list(company_id), write=False)


class Outbox:
    """The company's event types since the last :meth:`new` call."""

    def __init__(self, treasury: Treasury, company_id: int) -> None:
        self.treasury, self.company_id, self.seen = treasury, company_id, 0

    def new(self) -> list[str]:
        events = events_of(self.treasury, self.company_id)
        fresh = events[self.seen :]
        self.seen = len(events)
        return [e.type.value for e in fresh]


def check_intent_events(treasury: Treasury, tenant: Tenant) -> None:
    """Every intent event carries the webhook shape of part 6.2."""
    for event in events_of(treasury, tenant.company_id):
        if not event.type.value.startswith(PI):
            continue
        data = event.data["object"]
        assert isinstance(data["id"], str) and data["id"].isdigit()
        assert data["object"] == "payment_intent"
        assert data["status"] in ("INITIALIZED", "AUTHORIZED", "PROCESSED", "CANCELLED")
        for field in ("billing_amount", "processing_amount"):
            assert isinstance(data[field], int | float) and data[field] > 0
        for field in ("billing_currency", "processing_currency"):
            assert isinstance(data[field], str) and len(data[field]) == 3
        assert "merchant_reference" in data
        assert (data["company_id"], data["account_id"]) == (tenant.company_id, tenant.account_id)


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def error_of(payload: Any) -> dict[str, Any]:
    return dict(payload["error"])


# --- create and read ---------------------------------------------------------------------------


async def test_create_automatic_intent(client: Client, tenant: Tenant) -> None:
    intent = await create(client, tenant)
    assert set(intent) >= INTENT_FIELDS
    assert isinstance(intent["id"], int) and not isinstance(intent["id"], bool)
    assert intent["status"] == "INITIALIZED"
    assert intent["capture_method"] == "automatic"
    assert intent["account_id"] == tenant.account_id
    assert intent["company_id"] == tenant.company_id
    assert (intent["billing_amount"], intent["billing_currency"]) == (10_000, "USD")
    assert (intent["processing_amount"], intent["processing_currency"]) == (10_000, "USD")
    assert intent["payment_type"] == "Card Payment"
    assert intent["merchant_reference"] == "order-1"
    assert intent["amount_refunded"] == 0
    assert intent["authorized_at"] is None and intent["authorization_expires_at"] is None
    assert intent["cancellation_reason"] is None
    lookup_id = intent["payment_intent_lookup_id"]
    assert isinstance(lookup_id, str) and len(lookup_id) >= 20
    # Its time part is the intent's creation time (the service's clock), as new_lookup_id makes.
    assert lookup_id[:13] == new_lookup_id(ts(intent["created_at"]), secrets.token_urlsafe(24))[:13]
    assert lookup_id != str(intent["id"])
    other = await create(client, tenant)
    assert other["id"] != intent["id"]
    assert other["payment_intent_lookup_id"] != lookup_id
    assert ts(intent["created_at"]).utcoffset() is not None
    assert await lookup(client, tenant, intent) == intent


async def test_create_with_every_optional_field(client: Client, tenant: Tenant) -> None:
    intent = await create(
        client,
        tenant,
        capture_method="manual",
        payment_type="MOTO",
        merchant_reference="booking-77",
        checkin_date="2026-03-14",
        callback_url="https://merchant.example/hooks",
        processing_currency="EUR",
    )
    assert intent["capture_method"] == "manual"
    assert intent["payment_type"] == "MOTO"
    assert intent["merchant_reference"] == "booking-77"
    assert intent["checkin_date"] == "2026-03-14"
    assert intent["callback_url"] == "https://merchant.example/hooks"
    assert (intent["billing_amount"], intent["billing_currency"]) == (10_000, "USD")
    # USD → EUR at the sandbox rate 0.92, in EUR minor units.
    assert (intent["processing_amount"], intent["processing_currency"]) == (9_200, "EUR")
    for payment_type in ("Card Payment", "Virtual Card"):
        manual = await create(client, tenant, capture_method="manual", payment_type=payment_type)
        assert manual["capture_method"] == "manual"


async def test_publishable_key_creates_automatic_only(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    body = {
        "account_id": tenant.account_id,
        "billing_amount": 500,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "merchant_reference": "pk",
    }
    response = await client.post(INTENT, json=body, headers=tenant.publishable_auth)
    intent = await response.json()
    assert response.status == 200, intent
    assert intent["capture_method"] == "automatic"
    before = len(events_of(treasury, tenant.company_id))
    response = await client.post(
        INTENT, json={**body, "capture_method": "manual"}, headers=tenant.publishable_auth
    )
    assert response.status == 403
    error = error_of(await response.json())
    assert error["type"] == "permission_error"
    assert len(events_of(treasury, tenant.company_id)) == before
    # The publishable key may read an intent by lookup id, but not capture or list.
    path = f"{INTENT}?payment_intent_lookup_id={intent['payment_intent_lookup_id']}"
    response = await client.get(path, headers=tenant.publishable_auth)
    assert response.status == 200
    assert await response.json() == intent
    for method, target in (
        ("POST", CAPTURE),
        ("POST", CANCEL),
        ("POST", REFUND),
        ("GET", "/api/v1/payments/intents"),
        ("GET", "/api/v1/payments/intents/count"),
    ):
        response = await client.request(
            method,
            target,
            json={"payment_intent_id": intent["id"]} if method == "POST" else None,
            headers=tenant.publishable_auth,
        )
        assert response.status == 403, target
        assert error_of(await response.json())["type"] == "permission_error"


async def test_manual_capture_on_tokenization_is_refused(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    refused = await create(
        client, tenant, 400, payment_type="Tokenization", capture_method="manual"
    )
    error = error_of(refused)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "capture_method"
    assert "card" in error["message"]
    assert events_of(treasury, tenant.company_id) == []
    assert (await get(client, tenant, "/api/v1/payments/intents/count")) == {"count": 0}
    automatic = await create(client, tenant, payment_type="Tokenization")
    assert automatic["capture_method"] == "automatic"


async def test_lookup_is_scoped_to_the_company(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    intent = await create(client, tenant)
    lookup_id = intent["payment_intent_lookup_id"]
    for who in (other_tenant.auth, other_tenant.publishable_auth):
        response = await client.get(f"{INTENT}?payment_intent_lookup_id={lookup_id}", headers=who)
        assert response.status == 404
        assert error_of(await response.json())["type"] == "not_found"
    missing = await get(client, tenant, f"{INTENT}?payment_intent_lookup_id=pil_nope", 404)
    assert error_of(missing)["type"] == "not_found"
    absent = await get(client, tenant, INTENT, 400)
    assert error_of(absent)["param"] == "payment_intent_lookup_id"


# --- paying ------------------------------------------------------------------------------------


async def test_automatic_intent_is_processed_when_paid(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    outbox = Outbox(treasury, tenant.company_id)
    intent = await create(client, tenant)
    assert outbox.new() == [PI + "created"]
    answer = await pay(client, intent["payment_intent_lookup_id"])
    assert answer["status"] == "PROCESSED"
    assert answer["transaction"]["status"] == "completed"
    assert answer["transaction"]["card_last4"] == "4242"
    assert APPROVED not in str(answer)
    assert outbox.new() == [TXN + "created", TXN + "completed", PI + "succeeded"]
    current = await lookup(client, tenant, intent)
    assert current["status"] == "PROCESSED"
    assert current["authorized_at"] is None and current["cancellation_reason"] is None
    # A processed intent cannot be paid again, and nothing happens.
    again = await pay(client, intent["payment_intent_lookup_id"], status=400)
    assert error_of(again)["type"] == "invalid_request_error"
    assert outbox.new() == []
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_manual_intent_is_authorized_by_form_payment(
    client: Client, tenant: Tenant, treasury: Treasury, clock: FakeClock
) -> None:
    outbox = Outbox(treasury, tenant.company_id)
    intent = await create(client, tenant, capture_method="manual")
    outbox.new()
    answer = await pay(client, intent["payment_intent_lookup_id"], "5555555555554444", form=True)
    assert answer["status"] == "AUTHORIZED"
    assert outbox.new() == [TXN + "created", TXN + "completed", PI + "authorized"]
    current = await lookup(client, tenant, intent)
    assert current["status"] == "AUTHORIZED"
    # An authorized intent cannot be paid again: nothing is held twice.
    again = await pay(client, intent["payment_intent_lookup_id"], status=400)
    assert error_of(again)["type"] == "invalid_request_error"
    assert outbox.new() == []
    assert await lookup(client, tenant, intent) == current
    authorized_at = ts(current["authorized_at"])
    assert authorized_at == clock.now()
    assert ts(current["authorization_expires_at"]) - authorized_at == timedelta(days=7)
    assert current["cancellation_reason"] is None


async def test_json_payment_and_amex(client: Client, tenant: Tenant) -> None:
    intent = await create(client, tenant)
    answer = await pay(client, intent["payment_intent_lookup_id"], "378282246310005")
    assert answer["status"] == "PROCESSED"
    form = await create(client, tenant)
    answer = await pay(client, form["payment_intent_lookup_id"], form=True)
    assert answer["status"] == "PROCESSED"


async def test_declined_cards_leave_the_intent_payable(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    outbox = Outbox(treasury, tenant.company_id)
    for capture_method in ("automatic", "manual"):
        intent = await create(client, tenant, capture_method=capture_method)
        lookup_id = intent["payment_intent_lookup_id"]
        outbox.new()
        for number, reason in DECLINES.items():
            refused = await pay(client, lookup_id, number, status=402)
            error = error_of(refused)
            assert error["type"] == "card_error"
            assert error["failure_reason"] == reason
            assert number not in str(refused)
            assert outbox.new() == [TXN + "created", TXN + "failed", PI + "payment_failed"]
            assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"
        answer = await pay(client, lookup_id, form=True)
        expected = "PROCESSED" if capture_method == "automatic" else "AUTHORIZED"
        assert answer["status"] == expected
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_three_d_secure(client: Client, tenant: Tenant, treasury: Treasury) -> None:
    outbox = Outbox(treasury, tenant.company_id)
    for capture_method, done in (("automatic", "PROCESSED"), ("manual", "AUTHORIZED")):
        intent = await create(client, tenant, capture_method=capture_method)
        lookup_id = intent["payment_intent_lookup_id"]
        outbox.new()
        answer = await pay(client, lookup_id, THREE_D_SECURE)
        assert answer["status"] == "INITIALIZED"
        assert answer["next_action"]["url"] == f"/pay/{lookup_id}/challenge"
        assert answer["transaction"]["status"] == "requires_action"
        assert TXN + "requires_action" in outbox.new()
        assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"

        response = await client.post(f"/pay/{lookup_id}/challenge", json={"outcome": "fail"})
        assert response.status == 402
        assert error_of(await response.json())["failure_reason"]
        assert PI + "payment_failed" in outbox.new()
        assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"
        # Nothing pending any more: a second answer is refused.
        response = await client.post(f"/pay/{lookup_id}/challenge", json={"outcome": "pass"})
        assert response.status == 400

        await pay(client, lookup_id, THREE_D_SECURE)
        outbox.new()
        response = await client.post(f"/pay/{lookup_id}/challenge", json={"outcome": "pass"})
        passed = await response.json()
        assert response.status == 200, passed
        assert passed["status"] == done
        assert passed.get("next_action") is None
        event = PI + ("succeeded" if done == "PROCESSED" else "authorized")
        assert outbox.new() == [TXN + "completed", event]
        assert (await lookup(client, tenant, intent))["status"] == done
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_a_new_attempt_supersedes_a_waiting_challenge(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await create(client, tenant)
    lookup_id = intent["payment_intent_lookup_id"]
    waiting = (await pay(client, lookup_id, THREE_D_SECURE))["transaction"]
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    paid = await pay(client, lookup_id)
    assert paid["status"] == "PROCESSED"
    # The abandoned attempt is failed first, then the new one runs.
    assert outbox.new() == [TXN + "failed", TXN + "created", TXN + "completed", PI + "succeeded"]
    failed = [
        e.data["object"]
        for e in events_of(treasury, tenant.company_id)
        if e.type == TXN + "failed" and e.data["object"]["id"] == waiting["id"]
    ]
    assert [f["failure_reason"] for f in failed] == ["superseded"]
    # The old challenge cannot be completed any more.
    response = await client.post(f"/pay/{lookup_id}/challenge", json={"outcome": "pass"})
    assert response.status == 400
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


# --- capture and cancel ------------------------------------------------------------------------


async def test_capture(client: Client, tenant: Tenant, treasury: Treasury) -> None:
    outbox = Outbox(treasury, tenant.company_id)
    intent = await authorized(client, tenant)
    outbox.new()
    captured = await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]})
    assert captured["status"] == "PROCESSED"
    assert captured["id"] == intent["id"]
    assert captured["authorized_at"] == intent["authorized_at"]
    assert captured == await lookup(client, tenant, intent)
    assert outbox.new() == [TXN + "created", TXN + "completed", PI + "succeeded"]

    again = await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]}, 400)
    assert error_of(again)["message"] == "Payment intent has already been captured"
    initialized = await create(client, tenant, capture_method="manual")
    refused = await post(client, tenant, CAPTURE, {"payment_intent_id": initialized["id"]}, 400)
    assert error_of(refused)["message"] == "Payment intent is not authorized"
    automatic = await create(client, tenant)
    refused = await post(client, tenant, CAPTURE, {"payment_intent_id": automatic["id"]}, 400)
    assert error_of(refused)["message"] == "Payment intent is not authorized"
    outbox.new()
    # An automatic intent, once paid, is already captured.
    await pay(client, automatic["payment_intent_lookup_id"])
    outbox.new()
    again = await post(client, tenant, CAPTURE, {"payment_intent_id": automatic["id"]}, 400)
    assert error_of(again)["message"] == "Payment intent has already been captured"
    assert outbox.new() == []
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_capture_after_the_deadline_before_the_job_ran(
    client: Client, tenant: Tenant, treasury: Treasury, clock: FakeClock
) -> None:
    intent = await authorized(client, tenant)
    clock.advance(7 * DAY - 1)
    # One second before the deadline the hold is still good (capture a twin to prove it).
    twin = await authorized(client, tenant)
    clock.advance(2)
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    refused = await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]}, 400)
    assert error_of(refused)["message"] == "Authorization has expired"
    # Past the deadline the hold is the expiry job's: a cancel is refused the same way.
    refused = await post(client, tenant, CANCEL, {"payment_intent_id": intent["id"]}, 400)
    assert error_of(refused)["message"] == "Authorization has expired"
    assert (await lookup(client, tenant, intent))["status"] == "AUTHORIZED"  # no job yet
    assert outbox.new() == []
    ok = await post(client, tenant, CAPTURE, {"payment_intent_id": twin["id"]})
    assert ok["status"] == "PROCESSED"
    outbox.new()

    await post(client, tenant, ADVANCE, {"seconds": 1})
    expired = await lookup(client, tenant, intent)
    assert expired["status"] == "CANCELLED"
    assert expired["cancellation_reason"] == "expired"
    assert outbox.new() == [PI + "cancelled"]
    refused = await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]}, 400)
    assert error_of(refused)["message"] == "Authorization has expired"
    # Running the jobs again changes nothing.
    await post(client, tenant, ADVANCE, {"seconds": 60})
    assert await lookup(client, tenant, intent) == expired
    assert PI + "cancelled" not in outbox.new()
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_sandbox_clock_expires_the_hold(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await authorized(client, tenant)
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    await post(client, tenant, ADVANCE, {"seconds": 6 * DAY})
    assert (await lookup(client, tenant, intent))["status"] == "AUTHORIZED"
    await post(client, tenant, ADVANCE, {"seconds": DAY})
    expired = await lookup(client, tenant, intent)
    assert (expired["status"], expired["cancellation_reason"]) == ("CANCELLED", "expired")
    events = events_of(treasury, tenant.company_id)
    assert outbox.new() == [PI + "cancelled"]
    assert events[-1].data["object"]["cancellation_reason"] == "expired"
    refused = await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]}, 400)
    assert error_of(refused)["message"] == "Authorization has expired"
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_capture_declined_keeps_the_intent_authorized(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await authorized(client, tenant, CAPTURE_DECLINED)
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    for _ in range(2):
        refused = await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]}, 402)
        error = error_of(refused)
        assert error["type"] == "card_error"
        assert error["failure_reason"] == "capture_declined"
        assert await lookup(client, tenant, intent) == intent
        assert outbox.new() == [TXN + "created", TXN + "failed"]
    cancelled = await post(client, tenant, CANCEL, {"payment_intent_id": intent["id"]})
    assert (cancelled["status"], cancelled["cancellation_reason"]) == ("CANCELLED", "voided")
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_hold_gone_cancels_the_intent(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await authorized(client, tenant, HOLD_GONE)
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    refused = await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]}, 402)
    assert error_of(refused)["type"] == "card_error"
    assert error_of(refused)["failure_reason"]
    current = await lookup(client, tenant, intent)
    assert (current["status"], current["cancellation_reason"]) == ("CANCELLED", "expired")
    assert outbox.new() == [TXN + "created", TXN + "failed", PI + "cancelled"]
    # The hold is released: a later expiry job must not cancel it again.
    await post(client, tenant, ADVANCE, {"seconds": 8 * DAY})
    assert PI + "cancelled" not in outbox.new()
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_cancel_and_pay_again(
    client: Client, tenant: Tenant, treasury: Treasury, clock: FakeClock
) -> None:
    intent = await authorized(client, tenant)
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    cancelled = await post(client, tenant, CANCEL, {"payment_intent_id": intent["id"]})
    assert (cancelled["status"], cancelled["cancellation_reason"]) == ("CANCELLED", "voided")
    assert cancelled == await lookup(client, tenant, intent)
    assert outbox.new() == [PI + "cancelled"]
    again = await post(client, tenant, CANCEL, {"payment_intent_id": intent["id"]}, 400)
    assert error_of(again)["type"] == "invalid_request_error"
    refused = await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]}, 400)
    assert error_of(refused)["message"] == "Payment intent is not authorized"
    for target in (
        await create(client, tenant, capture_method="manual"),
        await create(client, tenant),
    ):
        refused = await post(client, tenant, CANCEL, {"payment_intent_id": target["id"]}, 400)
        assert error_of(refused)["type"] == "invalid_request_error"
    outbox.new()

    clock.advance(3600)
    # A declined card on the cancelled link leaves it cancelled.
    await pay(client, intent["payment_intent_lookup_id"], "4000000000000002", status=402)
    assert (await lookup(client, tenant, intent))["status"] == "CANCELLED"
    outbox.new()
    answer = await pay(client, intent["payment_intent_lookup_id"])
    assert answer["status"] == "AUTHORIZED"
    assert outbox.new() == [TXN + "created", TXN + "completed", PI + "authorized"]
    renewed = await lookup(client, tenant, intent)
    assert renewed["status"] == "AUTHORIZED"
    assert renewed["cancellation_reason"] is None
    assert ts(renewed["authorized_at"]) == clock.now()
    assert ts(renewed["authorized_at"]) > ts(intent["authorized_at"])
    assert ts(renewed["authorization_expires_at"]) == clock.now() + timedelta(days=7)
    # The old hold's expiry must not cancel the new authorization.
    await post(client, tenant, ADVANCE, {"seconds": 7 * DAY - 7200})
    assert (await lookup(client, tenant, intent))["status"] == "AUTHORIZED"
    captured = await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]})
    assert captured["status"] == "PROCESSED"
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


# --- refunds -----------------------------------------------------------------------------------


async def test_refunds(client: Client, tenant: Tenant, treasury: Treasury) -> None:
    intent = await authorized(client, tenant)
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    refused = await post(client, tenant, REFUND, {"payment_intent_id": intent["id"]}, 400)
    assert (
        error_of(refused)["message"]
        == "Refunds are not allowed on an authorized payment intent; capture or cancel it"
    )
    assert outbox.new() == []
    await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]})
    outbox.new()

    partial = await post(
        client,
        tenant,
        REFUND,
        {"payment_intent_id": intent["id"], "amount": 2_500, "reason": "damaged"},
    )
    assert partial["id"].startswith("re_")
    assert (partial["amount"], partial["currency"]) == (2_500, "USD")
    assert partial["payment_intent_id"] == intent["id"]
    assert partial["reason"] == "damaged"
    assert partial["status"] == "succeeded"
    # Reserved pending, then the provider's answer: the change is an event of its own.
    assert outbox.new() == ["merchant_of_record.refund.created", "treasury.refund.updated"]
    assert (await lookup(client, tenant, intent))["amount_refunded"] == 2_500

    over = await post(
        client, tenant, REFUND, {"payment_intent_id": intent["id"], "amount": 7_501}, 400
    )
    assert error_of(over)["param"] == "amount"
    assert outbox.new() == []
    assert (await lookup(client, tenant, intent))["amount_refunded"] == 2_500

    rest = await post(client, tenant, REFUND, {"payment_intent_id": intent["id"]})
    assert rest["amount"] == 7_500
    current = await lookup(client, tenant, intent)
    assert (current["amount_refunded"], current["status"]) == (10_000, "PROCESSED")
    nothing = await post(client, tenant, REFUND, {"payment_intent_id": intent["id"]}, 400)
    assert error_of(nothing)["type"] == "invalid_request_error"
    one = await post(client, tenant, REFUND, {"payment_intent_id": intent["id"], "amount": 1}, 400)
    assert error_of(one)["type"] == "invalid_request_error"

    for target in (
        await create(client, tenant),
        await create(client, tenant, capture_method="manual"),
    ):
        refused = await post(client, tenant, REFUND, {"payment_intent_id": target["id"]}, 400)
        assert error_of(refused)["type"] == "invalid_request_error"
    cancelled = await authorized(client, tenant)
    await post(client, tenant, CANCEL, {"payment_intent_id": cancelled["id"]})
    refused = await post(client, tenant, REFUND, {"payment_intent_id": cancelled["id"]}, 400)
    assert error_of(refused)["type"] == "invalid_request_error"
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_refund_of_a_converted_intent(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await create(client, tenant, billing_amount=999, processing_currency="EUR")
    await pay(client, intent["payment_intent_lookup_id"])
    for amount in (333, 333, 333):
        await post(client, tenant, REFUND, {"payment_intent_id": intent["id"], "amount": amount})
    assert (await lookup(client, tenant, intent))["amount_refunded"] == 999
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


# --- lists -------------------------------------------------------------------------------------


async def test_list_and_count(
    client: Client, tenant: Tenant, other_tenant: Tenant, clock: FakeClock
) -> None:
    created = []
    for i in range(5):
        created.append(
            await create(client, tenant, capture_method="manual", merchant_reference=f"r{i}")
        )
        clock.advance(60)
    await create(client, other_tenant)
    await pay(client, created[1]["payment_intent_lookup_id"])
    await pay(client, created[3]["payment_intent_lookup_id"])

    listed = await get(client, tenant, "/api/v1/payments/intents")
    assert [i["id"] for i in listed] == [i["id"] for i in reversed(created)]
    assert await get(client, tenant, "/api/v1/payments/intents/count") == {"count": 5}

    response = await client.get("/api/v1/payments/intents?limit=2", headers=tenant.auth)
    first = await response.json()
    assert [i["id"] for i in first] == [created[4]["id"], created[3]["id"]]
    link = response.headers["Link"]
    assert link.endswith('rel="next"') and f"starting_after={created[3]['id']}" in link
    second = await get(
        client, tenant, f"/api/v1/payments/intents?limit=2&starting_after={created[3]['id']}"
    )
    assert [i["id"] for i in second] == [created[2]["id"], created[1]["id"]]
    response = await client.get(
        f"/api/v1/payments/intents?limit=2&starting_after={created[1]['id']}", headers=tenant.auth
    )
    assert [i["id"] for i in await response.json()] == [created[0]["id"]]
    assert "Link" not in response.headers

    authorized_ids = [created[3]["id"], created[1]["id"]]
    got = await get(client, tenant, "/api/v1/payments/intents?status=AUTHORIZED")
    assert [i["id"] for i in got] == authorized_ids
    assert await get(client, tenant, "/api/v1/payments/intents/count?status=AUTHORIZED") == {
        "count": 2
    }
    assert await get(client, tenant, "/api/v1/payments/intents/count?status=INITIALIZED") == {
        "count": 3
    }
    for path in ("/api/v1/payments/intents?status=paid", "/api/v1/payments/intents?status="):
        refused = await get(client, tenant, path, status=400)
        assert refused["error"]["param"] == "status"
        assert refused["error"]["message"] == (
            "status must be one of INITIALIZED, AUTHORIZED, PROCESSED, CANCELLED"
        )
    got = await get(client, tenant, f"/api/v1/payments/intents?account_id={tenant.account_id}")
    assert len(got) == 5
    unknown = other_tenant.account_id
    assert await get(client, tenant, f"/api/v1/payments/intents?account_id={unknown}") == []

    gte = quote(created[1]["created_at"])
    lt = quote(created[3]["created_at"])
    window = await get(
        client, tenant, f"/api/v1/payments/intents?created_gte={gte}&created_lt={lt}"
    )
    assert [i["id"] for i in window] == [created[2]["id"], created[1]["id"]]
    count = await get(
        client, tenant, f"/api/v1/payments/intents/count?created_gte={gte}&created_lt={lt}"
    )
    assert count == {"count": 2}


async def test_bounds_beyond_what_utc_can_hold_are_before_or_after_everything(
    client: Client, tenant: Tenant
) -> None:
    # Valid RFC 3339 (what the document's date-time promises), with no instant datetime can
    # hold in UTC: the year 9999 at -14:00 is after every record, the year 1 at +14:00 before.
    await create(client, tenant)
    for query in (
        "created_gte=9999-12-31T23:59:59-14:00",
        "created_lt=0001-01-01T00:00:00%2B14:00",
    ):
        assert await get(client, tenant, f"/api/v1/payments/intents?{query}") == []
        assert await get(client, tenant, f"/api/v1/payments/intents/count?{query}") == {"count": 0}
    for query in (
        "created_lt=9999-12-31T23:59:59-14:00",
        "created_gte=0001-01-01T00:00:00%2B14:00",
    ):
        assert await get(client, tenant, f"/api/v1/payments/intents/count?{query}") == {"count": 1}


async def test_whole_numbers_in_the_query_are_integers(client: Client, tenant: Tenant) -> None:
    # The document types limit and account_id as integers, which 2.0 is.
    await create(client, tenant)
    await create(client, tenant)
    page = await get(
        client, tenant, f"/api/v1/payments/intents?limit=1.0&account_id={tenant.account_id}.0"
    )
    assert len(page) == 1
    for query in ("limit=1.5", "limit=%201", "limit=1_0", "account_id=1e400"):
        refused = await get(client, tenant, f"/api/v1/payments/intents?{query}", 400)
        assert error_of(refused)["param"] == query.split("=")[0], query


async def test_bad_list_filters(client: Client, tenant: Tenant) -> None:
    for query, param in (
        ("status=authorized", "status"),
        ("status=NOPE", "status"),
        ("account_id=abc", "account_id"),
        ("account_id=-1", "account_id"),
        ("created_gte=yesterday", "created_gte"),
        ("created_lt=2026-01-01T00:00:00", "created_lt"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=x", "limit"),
        ("starting_after=abc", "starting_after"),
    ):
        for path in ("/api/v1/payments/intents", "/api/v1/payments/intents/count"):
            if path.endswith("count") and param in ("limit", "starting_after"):
                continue
            refused = await get(client, tenant, f"{path}?{query}", 400)
            assert error_of(refused)["param"] == param, query


# --- events ------------------------------------------------------------------------------------


async def test_intent_events_carry_the_webhook_shape(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await create(client, tenant, capture_method="manual", processing_currency="GBP")
    await pay(client, intent["payment_intent_lookup_id"])
    await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]})
    intent_events = [
        e for e in events_of(treasury, tenant.company_id) if e.type.value.startswith(PI)
    ]
    assert [e.type.value for e in intent_events] == [
        PI + "created",
        PI + "authorized",
        PI + "succeeded",
    ]
    for event, status in zip(
        intent_events, ("INITIALIZED", "AUTHORIZED", "PROCESSED"), strict=True
    ):
        data = event.data["object"]
        assert data["id"] == str(intent["id"])
        assert data["object"] == "payment_intent"
        assert data["status"] == status
        assert (data["billing_amount"], data["billing_currency"]) == (10_000, "USD")
        assert data["processing_currency"] == "GBP"
        assert data["processing_amount"] == intent["processing_amount"]
        assert data["merchant_reference"] == "order-1"
        assert data["company_id"] == tenant.company_id
        assert data["account_id"] == tenant.account_id
        assert event.company_id == tenant.company_id
    assert intent_events[1].data["object"]["authorized_at"] is not None


async def test_lost_chargeback(client: Client, tenant: Tenant, treasury: Treasury) -> None:
    intent = await create(client, tenant)
    await pay(client, intent["payment_intent_lookup_id"], CHARGEBACK_LOST)
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    await post(client, tenant, ADVANCE, {"seconds": 4 * DAY})
    types = [t for t in outbox.new() if ".chargeback." in t]
    assert types == [
        "merchant_of_record.chargeback.created",
        "merchant_of_record.chargeback.failed",
    ]
    refused = await post(client, tenant, REFUND, {"payment_intent_id": intent["id"]}, 400)
    assert error_of(refused)["type"] == "invalid_request_error"
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_won_chargeback(client: Client, tenant: Tenant, treasury: Treasury) -> None:
    wallet = await post(client, tenant, "/api/v1/wallet", {"name": "USD", "currency_id": "USD"})
    intent = await authorized(client, tenant, CHARGEBACK_WON)
    await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]})
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    for _ in range(4):
        await post(client, tenant, ADVANCE, {"seconds": DAY})
    new = outbox.new()
    assert [t for t in new if ".chargeback." in t] == [
        "merchant_of_record.chargeback.created",
        "merchant_of_record.chargeback.completed",
        "merchant_of_record.chargeback.reversed",
    ]
    # The money released by the won dispute is paid out in the end.
    balance = await get(client, tenant, f"/api/v1/wallet/{wallet['id']}/balance")
    assert balance["balance"] == 10_000
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


# --- payouts -----------------------------------------------------------------------------------


async def test_payout_into_the_wallet_of_the_processing_currency(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    eur = await post(client, tenant, "/api/v1/wallet", {"name": "EUR", "currency_id": "EUR"})
    usd = await post(client, tenant, "/api/v1/wallet", {"name": "USD", "currency_id": "USD"})
    intent = await create(client, tenant, processing_currency="EUR")
    await pay(client, intent["payment_intent_lookup_id"])
    await post(client, tenant, REFUND, {"payment_intent_id": intent["id"], "amount": 1_000})
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()

    await post(client, tenant, ADVANCE, {"seconds": 2 * DAY - 60})
    assert not [t for t in outbox.new() if ".payout." in t]
    await post(client, tenant, ADVANCE, {"seconds": 60})
    assert outbox.new() == [
        "merchant_of_record.payout.created",
        "merchant_of_record.payout.confirmed",
    ]
    await post(client, tenant, ADVANCE, {"seconds": 3600})
    assert outbox.new() == [
        "merchant_of_record.payout.applied",
        "merchant_of_record.payout.completed",
    ]
    # 9,200 EUR cents captured, 920 of them refunded (a tenth of the billing amount).
    balance = await get(client, tenant, f"/api/v1/wallet/{eur['id']}/balance")
    assert balance["balance"] == 9_200 - 920
    assert balance["available_balance"] == 9_200 - 920
    assert (await get(client, tenant, f"/api/v1/wallet/{usd['id']}/balance"))["balance"] == 0
    payouts = [e for e in events_of(treasury, tenant.company_id) if ".payout." in e.type.value]
    assert payouts[-1].data["object"]["amount"] == 8_280
    # Nothing more is paid out later.
    await post(client, tenant, ADVANCE, {"seconds": 5 * DAY})
    assert not [t for t in outbox.new() if ".payout." in t]
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_payout_without_a_wallet_fails(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    await post(client, tenant, "/api/v1/wallet", {"name": "EUR", "currency_id": "EUR"})
    intent = await create(client, tenant, billing_currency="GBP", billing_amount=700)
    await pay(client, intent["payment_intent_lookup_id"])
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    await post(client, tenant, ADVANCE, {"seconds": 2 * DAY + 3600})
    assert [t for t in outbox.new() if ".payout." in t] == [
        "merchant_of_record.payout.created",
        "merchant_of_record.payout.failed",
    ]
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


# --- idempotency -------------------------------------------------------------------------------


async def test_idempotent_create_and_capture(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    body = {
        "account_id": tenant.account_id,
        "billing_amount": 1_234,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "merchant_reference": "idem",
        "capture_method": "manual",
    }
    headers = {**tenant.auth, "Idempotency-Key": "create-1"}
    first = await client.post(INTENT, json=body, headers=headers)
    intent = await first.json()
    assert first.status == 200
    again = await client.post(INTENT, json=body, headers=headers)
    assert again.status == 200
    assert await again.json() == intent
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert await get(client, tenant, "/api/v1/payments/intents/count") == {"count": 1}
    mismatch = await client.post(INTENT, json={**body, "billing_amount": 1}, headers=headers)
    assert mismatch.status == 400
    assert error_of(await mismatch.json())["type"] == "idempotency_error"

    await pay(client, intent["payment_intent_lookup_id"])
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    capture_headers = {**tenant.auth, "Idempotency-Key": "capture-1"}
    first = await client.post(
        CAPTURE, json={"payment_intent_id": intent["id"]}, headers=capture_headers
    )
    captured = await first.json()
    assert first.status == 200 and captured["status"] == "PROCESSED"
    events = outbox.new()
    again = await client.post(
        CAPTURE, json={"payment_intent_id": intent["id"]}, headers=capture_headers
    )
    assert again.status == 200
    assert await again.json() == captured
    assert outbox.new() == []
    assert events.count(PI + "succeeded") == 1


# --- concurrency -------------------------------------------------------------------------------


async def test_concurrent_calls_on_one_intent(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await create(client, tenant, capture_method="manual")
    lookup_id = intent["payment_intent_lookup_id"]
    paid = await asyncio.gather(*(client.post(f"/pay/{lookup_id}", json=card()) for _ in range(3)))
    assert sorted(r.status for r in paid) == [200, 400, 400]
    events = [e.type.value for e in events_of(treasury, tenant.company_id)]
    assert events.count(PI + "authorized") == 1

    captures = await asyncio.gather(
        *(
            client.post(CAPTURE, json={"payment_intent_id": intent["id"]}, headers=tenant.auth)
            for _ in range(3)
        )
    )
    assert sorted(r.status for r in captures) == [200, 400, 400]
    for response in captures:
        if response.status == 400:
            message = error_of(await response.json())["message"]
            assert message == "Payment intent has already been captured"
    events = [e.type.value for e in events_of(treasury, tenant.company_id)]
    assert events.count(PI + "succeeded") == 1

    refunds = await asyncio.gather(
        *(
            client.post(
                REFUND,
                json={"payment_intent_id": intent["id"], "amount": 4_000},
                headers=tenant.auth,
            )
            for _ in range(4)
        )
    )
    assert sorted(r.status for r in refunds) == [200, 200, 400, 400]
    assert (await lookup(client, tenant, intent))["amount_refunded"] == 8_000
    check_invariants(treasury.storage)
    check_intent_events(treasury, tenant)


async def test_list_link_keeps_the_filters(client: Client, tenant: Tenant) -> None:
    for _ in range(3):
        await create(client, tenant)
    await create(client, tenant, capture_method="manual")
    response = await client.get(
        "/api/v1/payments/intents?status=INITIALIZED&limit=1", headers=tenant.auth
    )
    assert response.status == 200
    link = response.headers["Link"]
    assert "status=INITIALIZED" in link and "limit=1" in link
    seen = [i["id"] for i in await response.json()]
    while "Link" in response.headers:
        target = response.headers["Link"].split(">")[0].lstrip("<")
        response = await client.get(target, headers=tenant.auth)
        seen += [i["id"] for i in await response.json()]
    assert len(seen) == len(set(seen)) == 4
