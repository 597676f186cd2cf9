"""What payment events carry: the webhook object (part 6.2) and the legacy callback (part 6.3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from treasury_core.interface.projections import webhook_object
from treasury_core.interface.records import PaymentIntentRecord
from treasury_core.notifications.events import EventType
from treasury_core.payments import CaptureMethod, IntentStatus, PaymentIntent, PaymentType
from treasury_core.payments.payloads import (
    LEGACY_CALLBACK_TYPES,
    intent_from_webhook_object,
    legacy_callback_body,
    legacy_callback_url,
)

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def intent(**extra: object) -> PaymentIntent:
    fields: dict[str, object] = {
        "id": 4242,
        "company_id": 3,
        "account_id": 9,
        "billing_amount": 12_500,
        "billing_currency": "JPY",
        "processing_amount": 8_123,
        "processing_currency": "EUR",
        "payment_type": PaymentType.CARD_PAYMENT,
        "capture_method": CaptureMethod.MANUAL,
        "merchant_reference": "booking-17",
        "customer": "Ada Lovelace",
        "customer_email": "ada@example.com",
        "payment_intent_lookup_id": "pil_abcdefgh",
        "created_at": T0,
        "status": IntentStatus.AUTHORIZED,
        "authorized_at": T0,
        "authorization_expires_at": T0 + timedelta(days=7),
        "provider_reference": "ch_secret",
        "hold_pending_ids": ("jr_1.0",),
    }
    fields.update(extra)
    return PaymentIntent.model_validate(fields)


def test_webhook_object_has_every_field_of_6_2() -> None:
    body = webhook_object(intent())
    assert body["id"] == "4242"
    assert body["object"] == "payment_intent"
    assert body["status"] == "AUTHORIZED"
    assert (body["billing_amount"], body["processing_amount"]) == (12_500, 8_123)
    assert (body["billing_currency"], body["processing_currency"]) == ("JPY", "EUR")
    assert body["merchant_reference"] == "booking-17"
    assert (body["company_id"], body["account_id"]) == (3, 9)
    assert all(isinstance(body[k], int) for k in ("billing_amount", "company_id", "account_id"))
    assert body["authorized_at"] == "2026-01-02T03:04:05+00:00"
    assert body["authorization_expires_at"] == "2026-01-09T03:04:05+00:00"


def test_webhook_object_keeps_internal_fields_out_and_round_trips() -> None:
    stored = intent()
    body = webhook_object(stored)
    for internal in ("provider_reference", "hold_pending_ids", "processing_refunded"):
        assert internal not in body
    carried = intent_from_webhook_object(body)
    assert PaymentIntentRecord.of(carried) == PaymentIntentRecord.of(stored)
    assert webhook_object(carried) == body  # what an event carries renders the same


MAPPED = {
    EventType.PAYMENT_INTENT_SUCCEEDED: ("payment_intent.processed", "processed"),
    EventType.PAYMENT_INTENT_AUTHORIZED: ("payment_intent.authorized", "authorized"),
    EventType.PAYMENT_INTENT_CANCELLED: ("payment_intent.cancelled", "cancelled"),
    EventType.PAYMENT_INTENT_PAYMENT_FAILED: ("payment_intent.failed", "failed"),
    EventType.REFUND_CREATED: ("payment_intent.refunded", "refunded"),
}


def test_the_five_legacy_types_of_decisions_md() -> None:
    assert dict(LEGACY_CALLBACK_TYPES) == MAPPED


@pytest.mark.parametrize(("event_type", "expected"), MAPPED.items(), ids=str)
def test_legacy_callback_body(event_type: EventType, expected: tuple[str, str]) -> None:
    body = legacy_callback_body(event_type, intent())
    assert body is not None
    type_, status = expected
    assert body["type"] == type_
    assert body["status"] == status == status.lower()
    pi = body["payment_intent"]
    assert pi["id"] == 4242 and isinstance(pi["id"], int)
    assert pi["status"] == {"name": "AUTHORIZED"}
    assert pi["billing_currency"] == {"code": "JPY"}
    assert pi["processing_currency"] == {"code": "EUR"}
    assert (pi["billing_amount"], pi["processing_amount"]) == (12_500, 8_123)
    assert pi["merchant_reference"] == "booking-17"
    assert (pi["customer"], pi["customer_email"]) == ("Ada Lovelace", "ada@example.com")
    assert set(body) == {"type", "status", "payment_intent"}


@pytest.mark.parametrize(
    "event_type", [e for e in EventType if e not in MAPPED], ids=lambda e: e.value
)
def test_no_legacy_callback_for_other_types(event_type: EventType) -> None:
    assert legacy_callback_body(event_type, intent()) is None


def test_legacy_callback_url() -> None:
    assert legacy_callback_url("https://shop.example/hooks/") == (
        "https://shop.example/hooks/callback/payment/intent"
    )
    assert legacy_callback_url("https://shop.example") == (
        "https://shop.example/callback/payment/intent"
    )


def test_legacy_callback_url_keeps_the_query_after_the_path() -> None:
    # Appended to the text, the path would become part of the last query value.
    assert legacy_callback_url("https://shop.example/hooks?key=a%2Fb&x=1") == (
        "https://shop.example/hooks/callback/payment/intent?key=a%2Fb&x=1"
    )
    assert legacy_callback_url("https://shop.example?order=7") == (
        "https://shop.example/callback/payment/intent?order=7"
    )
    assert legacy_callback_url("https://shop.example:8443/a/?q=1#frag") == (
        "https://shop.example:8443/a/callback/payment/intent?q=1"
    )
