"""Stripe webhook deliveries read by the Stripe adapter: the signature check and the mapping of
Stripe's events onto the card provider port's events. Nothing here talks to Stripe."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests import stripe_hooks as hooks
from treasury_core.errors import ErrorKind
from treasury_core.ports.card_provider import (
    BadProviderEvent,
    CallOwner,
    CardProviderBase,
    CardProviderEventKind,
)
from treasury_core.testing import FakeClock
from treasury_stripe.amounts import from_stripe_amount, to_stripe_amount
from treasury_stripe.card_provider import StripeCardProvider
from treasury_stripe.events import (
    WEBHOOK_TOLERANCE_SECONDS,
    owner_from_metadata,
    owner_metadata,
    stripe_event,
)

K = CardProviderEventKind


def _provider(secret: str | None = hooks.SECRET) -> StripeCardProvider:
    # Never called: parse_event reads the delivery only.
    return StripeCardProvider("sk_test_unused", FakeClock(), webhook_secret=secret)


def test_a_signed_delivery_is_read() -> None:
    payload = hooks.event("charge.dispute.created", hooks.dispute("pi_abc", 1234))
    body, headers = hooks.delivery(payload)
    event = _provider().parse_event(body, headers)
    assert (event.id, event.type, event.kind) == (payload["id"], payload["type"], K.DISPUTE_OPENED)
    assert (event.reference, event.dispute, event.amount, event.currency) == (
        "pi_abc",
        "dp_test1",
        1234,
        "USD",
    )


def test_header_names_are_matched_without_case() -> None:
    body, headers = hooks.delivery(hooks.event("charge.refunded", {"id": "ch_1"}))
    lowered = {name.lower(): value for name, value in headers.items()}
    assert _provider().parse_event(body, lowered).type == "charge.refunded"


def _refused(body: bytes, headers: dict[str, str], code: str = "webhook_signature_invalid") -> str:
    with pytest.raises(BadProviderEvent) as refused:
        _provider().parse_event(body, headers)
    assert refused.value.kind is ErrorKind.INVALID_REQUEST
    assert refused.value.code == code
    return refused.value.message


def test_a_missing_signature_is_refused() -> None:
    body, _ = hooks.delivery(hooks.event("charge.refunded", {"id": "ch_1"}))
    assert "missing" in _refused(body, {})


def test_a_signature_under_another_secret_is_refused() -> None:
    body, headers = hooks.delivery(hooks.event("charge.refunded", {}), secret="whsec_other")
    message = _refused(body, headers)
    assert "whsec_other" not in message and hooks.SECRET not in message


def test_a_body_changed_after_signing_is_refused() -> None:
    body, headers = hooks.delivery(
        hooks.event("charge.dispute.created", hooks.dispute("pi_abc", 100))
    )
    _refused(body.replace(b"100", b"999"), headers)


def test_a_stale_signature_is_refused() -> None:
    body = json.dumps(hooks.event("charge.refunded", {})).encode()
    old = int(time.time()) - WEBHOOK_TOLERANCE_SECONDS - 60
    _refused(body, {"Stripe-Signature": hooks.signature(body, timestamp=old)})
    # Inside the tolerance it passes: the refusal above is about age, not the scheme.
    recent = int(time.time()) - WEBHOOK_TOLERANCE_SECONDS + 60
    _provider().parse_event(body, {"Stripe-Signature": hooks.signature(body, timestamp=recent)})


@pytest.mark.parametrize(
    "header", ["", "garbage", "t=notanumber,v1=abc", "t=1,v0=abc", "v1=" + "0" * 64]
)
def test_malformed_signature_headers_are_refused(header: str) -> None:
    body = json.dumps(hooks.event("charge.refunded", {})).encode()
    _refused(body, {"Stripe-Signature": header})


def test_a_body_that_is_not_utf8_is_refused() -> None:
    body = b"\xff\xfe{}"
    _refused(body, {"Stripe-Signature": hooks.signature(body)})


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"id": "evt_1"}', b'{"data": 1}'])
def test_a_signed_body_that_is_not_an_event_is_refused(body: bytes) -> None:
    code = "webhook_body_invalid"
    _refused(body, {"Stripe-Signature": hooks.signature(body)}, code=code)


def test_without_a_secret_the_provider_sends_no_events() -> None:
    provider = _provider(secret=None)
    assert provider.provider_events_supported() is False
    body, headers = hooks.delivery(hooks.event("charge.refunded", {}))
    with pytest.raises(BadProviderEvent) as refused:
        provider.parse_event(body, headers)
    assert refused.value.code == "provider_events_unsupported"
    assert _provider().provider_events_supported() is True


def test_the_base_class_has_no_events() -> None:
    class Minimal(CardProviderBase):
        async def authorize(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def capture(self, reference: str, amount: int) -> Any:
            raise NotImplementedError

        async def void(self, reference: str) -> Any:
            raise NotImplementedError

    assert Minimal().provider_events_supported() is False
    with pytest.raises(BadProviderEvent):
        Minimal().parse_event(b"{}", {})


@pytest.mark.parametrize(
    ("event_type", "status", "kind"),
    [
        ("payment_intent.succeeded", "succeeded", K.CAPTURED),
        # Only a captured intent is "succeeded"; anything else claiming it is not acted on.
        ("payment_intent.succeeded", "requires_capture", None),
        ("payment_intent.succeeded", "processing", None),
        ("payment_intent.amount_capturable_updated", "requires_capture", K.AUTHORIZED),
        ("payment_intent.canceled", "canceled", K.CANCELED),
        ("payment_intent.payment_failed", "requires_payment_method", K.PAYMENT_FAILED),
        ("payment_intent.created", "requires_confirmation", None),
        ("payment_intent.requires_action", "requires_action", None),
    ],
)
def test_payment_intent_events(event_type: str, status: str, kind: K | None) -> None:
    event = stripe_event(hooks.event(event_type, hooks.payment_intent("pi_123", status)))
    assert (event.kind, event.reference) == (kind, "pi_123")


def test_a_failed_payment_carries_the_decline_code_only() -> None:
    error = {"code": "card_declined", "decline_code": "insufficient_funds", "message": "4242…"}
    obj = hooks.payment_intent("pi_1", "requires_payment_method", last_payment_error=error)
    event = stripe_event(hooks.event("payment_intent.payment_failed", obj))
    assert event.failure_reason == "insufficient_funds"
    odd = {"code": "Card Declined: see 4242424242424242"}
    obj = hooks.payment_intent("pi_1", "requires_payment_method", last_payment_error=odd)
    assert stripe_event(hooks.event("payment_intent.payment_failed", obj)).failure_reason is None


@pytest.mark.parametrize(
    ("event_type", "status", "kind"),
    [
        ("charge.dispute.created", "needs_response", K.DISPUTE_OPENED),
        ("charge.dispute.funds_withdrawn", "needs_response", K.DISPUTE_OPENED),
        ("charge.dispute.closed", "won", K.DISPUTE_WON),
        ("charge.dispute.closed", "warning_closed", K.DISPUTE_WON),
        ("charge.dispute.closed", "lost", K.DISPUTE_LOST),
        ("charge.dispute.closed", "under_review", None),
        ("charge.dispute.funds_reinstated", "won", K.DISPUTE_WON),
        ("charge.dispute.updated", "under_review", None),
    ],
)
def test_dispute_events(event_type: str, status: str, kind: K | None) -> None:
    obj = hooks.dispute("pi_9", 500, status=status, dispute_id="dp_42")
    event = stripe_event(hooks.event(event_type, obj))
    assert (event.kind, event.reference, event.dispute, event.amount) == (
        kind,
        "pi_9",
        "dp_42",
        500,
    )


def test_a_refund_event_carries_the_charges_total_refunded() -> None:
    charge = {
        "id": "ch_1",
        "object": "charge",
        "payment_intent": "pi_7",
        "amount": 1000,
        "amount_refunded": 300,
        "currency": "eur",
    }
    event = stripe_event(hooks.event("charge.refunded", charge))
    assert (event.kind, event.reference, event.amount, event.currency) == (
        K.REFUNDED,
        "pi_7",
        300,
        "EUR",
    )


def _refund(status: str, **fields: Any) -> dict[str, Any]:
    """A Stripe Refund as charge.refund.updated and refund.* carry it."""
    return {
        "id": "re_3Abc",
        "object": "refund",
        "payment_intent": "pi_7",
        "amount": 300,
        "currency": "usd",
        "status": status,
        **fields,
    }


@pytest.mark.parametrize("event_type", ["charge.refund.updated", "refund.updated", "refund.failed"])
@pytest.mark.parametrize(("status", "kind"), [
    ("succeeded", K.REFUND_SUCCEEDED),
    ("failed", K.REFUND_FAILED),
    ("canceled", K.REFUND_FAILED),
    ("pending", None),  # not finished: nothing to act on yet
    ("requires_action", None),
])  # fmt: skip
def test_one_refunds_outcome_names_the_refund(event_type: str, status: str, kind: K | None) -> None:
    event = stripe_event(hooks.event(event_type, _refund(status)))
    assert (event.kind, event.reference, event.refund) == (kind, "pi_7", "re_3Abc")


def test_a_failed_refund_carries_stripes_failure_reason_or_a_default() -> None:
    failed = stripe_event(
        hooks.event("refund.failed", _refund("failed", failure_reason="lost_or_stolen_card"))
    )
    assert (failed.kind, failed.failure_reason) == (K.REFUND_FAILED, "lost_or_stolen_card")
    # A reason that is no code (a message, markup) is not passed on; the default stands in.
    odd = _refund("failed", failure_reason="<b>Card closed</b>")
    assert stripe_event(hooks.event("refund.failed", odd)).failure_reason == "refund_failed"
    assert (
        stripe_event(hooks.event("refund.failed", _refund("failed"))).failure_reason
        == "refund_failed"
    )


@pytest.mark.parametrize(("currency", "stripe_units", "iso_units"), [
    ("usd", 1234, 1234),
    ("jpy", 500, 500),
    ("isk", 50000, 500),  # Stripe's ISK has two decimals, ISO's none
    ("mga", 7, 700),  # and the other way round
])  # fmt: skip
def test_amounts_come_back_in_iso_minor_units(
    currency: str, stripe_units: int, iso_units: int
) -> None:
    obj = hooks.dispute("pi_1", stripe_units, currency=currency)
    assert stripe_event(hooks.event("charge.dispute.created", obj)).amount == iso_units
    assert from_stripe_amount(stripe_units, currency) == iso_units
    assert to_stripe_amount(iso_units, currency) == stripe_units


@pytest.mark.parametrize(
    "obj",
    [
        {"id": "dp_1", "payment_intent": "pi_1", "currency": "usd"},  # no amount
        {"id": "dp_1", "payment_intent": "pi_1", "amount": -5, "currency": "usd"},
        {"id": "dp_1", "payment_intent": "pi_1", "amount": True, "currency": "usd"},
        {"id": "dp_1", "payment_intent": "pi_1", "amount": 5},  # no currency
    ],
)
def test_an_amount_event_without_a_usable_amount_is_not_acted_on(obj: dict[str, Any]) -> None:
    assert stripe_event(hooks.event("charge.dispute.created", obj)).kind is None


@pytest.mark.parametrize("reference", ["ch_1", "pi_", "pi_1/../x", 17, None])
def test_references_that_are_no_payment_intent_are_dropped(reference: object) -> None:
    obj = {"id": "dp_1", "payment_intent": reference, "amount": 5, "currency": "usd"}
    assert stripe_event(hooks.event("charge.dispute.created", obj)).reference is None


def test_events_of_other_objects_are_not_mapped() -> None:
    event = stripe_event(hooks.event("customer.created", {"id": "cus_1"}))
    assert (event.kind, event.reference) == (None, None)


def test_a_capture_carries_the_amount_received() -> None:
    obj = hooks.payment_intent("pi_5", "succeeded", amount_received=50000, currency="isk")
    event = stripe_event(hooks.event("payment_intent.succeeded", obj))
    assert (event.kind, event.amount, event.currency) == (K.CAPTURED, 500, "ISK")


# --- the owner our calls set in Stripe's metadata ----------------------------------------------

#: A refund id of ours: ``re_`` and 26 digits of Crockford's base32.
OUR_REFUND = "re_01jq8m3v5x7z9b2d4f6h8k0n1p"
OWNED = {"treasury_company": "12", "treasury_intent": "9223372036854775807"}


@pytest.mark.parametrize(
    "event_type",
    [
        "payment_intent.succeeded",
        "payment_intent.amount_capturable_updated",
        "payment_intent.canceled",
        "payment_intent.payment_failed",
    ],
)
def test_a_payment_intent_event_names_its_owner(event_type: str) -> None:
    obj = hooks.payment_intent("pi_1", "succeeded", metadata={**OWNED, "treasury_attempt": "a"})
    event = stripe_event(hooks.event(event_type, obj))
    assert event.owner == CallOwner(12, 2**63 - 1, None)


def test_a_refund_event_names_its_owner_and_our_refund() -> None:
    metadata = {**OWNED, "treasury_refund": OUR_REFUND, "treasury_refund_key": "k"}
    event = stripe_event(hooks.event("refund.updated", _refund("succeeded", metadata=metadata)))
    assert event.owner == CallOwner(12, 2**63 - 1, OUR_REFUND)
    assert event.refund == "re_3Abc"  # Stripe's id of the refund, as before


def test_a_charge_refunded_event_names_the_owner_stripe_put_on_the_charge() -> None:
    charge = {"id": "ch_1", "payment_intent": "pi_1", "amount_refunded": 5, "currency": "usd"}
    owned = stripe_event(hooks.event("charge.refunded", {**charge, "metadata": OWNED}))
    assert owned.owner == CallOwner(12, 2**63 - 1, None)
    assert stripe_event(hooks.event("charge.refunded", charge)).owner is None


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        "treasury_company=12",
        {},
        {"treasury_company": "12"},  # the intent's id missing
        {"treasury_company": "12", "treasury_intent": ""},
        {"treasury_company": "012", "treasury_intent": "3"},  # not as our ids are written
        {"treasury_company": "-1", "treasury_intent": "3"},
        {"treasury_company": "0", "treasury_intent": "3"},
        {"treasury_company": "1.5", "treasury_intent": "3"},
        {"treasury_company": " 12", "treasury_intent": "3"},
        {"treasury_company": "١٢", "treasury_intent": "3"},  # digits, but not ASCII ones
        {"treasury_company": 12, "treasury_intent": 3},  # Stripe's metadata is strings only
        {"treasury_company": "9223372036854775808", "treasury_intent": "3"},  # over 64 bits
        {"treasury_company": "1" * 40, "treasury_intent": "3"},
    ],
)
def test_metadata_that_is_not_ours_names_no_owner(metadata: object) -> None:
    obj = hooks.payment_intent("pi_1", "canceled", metadata=metadata)
    assert stripe_event(hooks.event("payment_intent.canceled", obj)).owner is None
    refund = _refund("failed", metadata=metadata)
    assert stripe_event(hooks.event("refund.failed", refund)).owner is None


@pytest.mark.parametrize(
    "refund_id",
    [
        "re_3Abc",  # Stripe's, not ours
        "re_01JQ8M3V5X7Z9B2D4F6H8K0N1P",  # upper case
        "re_01jq8m3v5x7z9b2d4f6h8k0n1",  # 25 digits
        "re_01jq8m3v5x7z9b2d4f6h8k0n1i",  # i is not a Crockford digit
        "../re_01jq8m3v5x7z9b2d4f6h8k0n1p",
        17,
    ],
)
def test_a_refund_id_unlike_ours_is_dropped_from_the_owner(refund_id: object) -> None:
    metadata = {**OWNED, "treasury_refund": refund_id}
    event = stripe_event(hooks.event("refund.updated", _refund("succeeded", metadata=metadata)))
    assert event.owner == CallOwner(12, 2**63 - 1, None)


def test_a_payment_intents_metadata_names_no_refund() -> None:
    metadata = {**OWNED, "treasury_refund": OUR_REFUND}
    obj = hooks.payment_intent("pi_1", "succeeded", metadata=metadata)
    assert stripe_event(hooks.event("payment_intent.succeeded", obj)).owner == CallOwner(
        12, 2**63 - 1, None
    )


def test_disputes_name_no_owner() -> None:
    obj = {**hooks.dispute("pi_1", 100), "metadata": OWNED}
    assert stripe_event(hooks.event("charge.dispute.created", obj)).owner is None


def test_owner_metadata_is_read_back_as_the_owner() -> None:
    for owner in (
        CallOwner(1, 2, None),
        CallOwner(2**63 - 1, 5, OUR_REFUND),
        CallOwner(3, 4, OUR_REFUND, "0123456789abcdef01234567"),
    ):
        metadata = owner_metadata(owner)
        assert all(isinstance(v, str) for v in metadata.values())
        assert owner_from_metadata(metadata, refund=True) == owner
    assert owner_metadata(None) == {}


def test_an_owner_tag_not_of_our_shape_is_dropped() -> None:
    """The tag proves the owner; one edited at Stripe's dashboard into anything else is no tag."""
    for tag in ("ABCDEF0123456789abcdef01", "0" * 23, "0" * 25, 7):
        metadata = {"treasury_company": "3", "treasury_intent": "4", "treasury_tag": tag}
        assert owner_from_metadata(metadata) == CallOwner(3, 4, None, None)
