"""Stripe's webhooks: the ``Stripe-Signature`` check and the event read into the port's
:class:`~treasury_core.ports.card_provider.CardProviderEvent`; Stripe's JSON goes no further.

Also the metadata our calls set on Stripe's objects (``treasury_company``, ``treasury_intent``,
``treasury_attempt``, ``treasury_refund``, ``treasury_refund_key``), written by the card
provider and read back here from events and by its lookups."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import stripe

from treasury_core.ports.card_provider import (
    BadProviderEvent,
    CallOwner,
    CardProviderEvent,
    CardProviderEventKind,
)
from treasury_stripe.amounts import from_stripe_amount
from treasury_stripe.errors import CODE

#: A charge's reference: a PaymentIntent's id (checked before it is put in a URL path).
REFERENCE = re.compile(r"pi_[A-Za-z0-9]{1,200}")


#: The metadata our calls set on what they make at Stripe (:class:`CallOwner`, the keys):
#: the company's and the payment intent's ids, on PaymentIntents and Refunds ...
METADATA_COMPANY = "treasury_company"
METADATA_INTENT = "treasury_intent"
#: ... the attempt key, on PaymentIntents (``find_charge`` searches by it) ...
METADATA_ATTEMPT = "treasury_attempt"
#: ... and our refund's id and the refund's key, on Refunds (``find_refund`` matches the key).
METADATA_REFUND = "treasury_refund"
METADATA_REFUND_KEY = "treasury_refund_key"
#: ... and, on both, the owner's tag (:attr:`CallOwner.tag`), which proves the owner is ours.
METADATA_TAG = "treasury_tag"
#: An owner's tag: 24 hex digits.
_TAG = re.compile(r"[0-9a-f]{24}")

#: A key of ours as it may stand in Stripe's metadata and in a search query: no quote,
#: backslash or space can break out of ``metadata['…']:'…'``.
CALL_KEY = re.compile(r"[0-9A-Za-z_-]{1,200}")
#: A company's or a payment intent's id: a positive 64-bit integer, in digits.
_RECORD_NUMBER = re.compile(r"[1-9][0-9]{0,18}")
_LARGEST_RECORD_NUMBER = 2**63 - 1
#: One of our refunds' ids: ``re_`` and 26 digits of Crockford's base32 (the id port's).
_OUR_REFUND = re.compile(r"re_[0-9a-hjkmnp-tv-z]{26}")

#: How old a webhook's signature may be, in seconds (Stripe's own libraries' default).
WEBHOOK_TOLERANCE_SECONDS = 300

#: An id of a Stripe object (``dp_…``, ``ch_…``, ``evt_…``).
_STRIPE_ID = re.compile(r"[a-z]{2,6}_[A-Za-z0-9]{1,200}")

_K = CardProviderEventKind
#: The dispute statuses of ``charge.dispute.closed``: an inquiry closed without a chargeback
#: (``warning_closed``) took no money, like a dispute won.
_DISPUTE_CLOSED: dict[str, CardProviderEventKind] = {
    "won": _K.DISPUTE_WON,
    "warning_closed": _K.DISPUTE_WON,
    "lost": _K.DISPUTE_LOST,
}
#: The events about one refund (Stripe sends charge.refund.updated; accounts on newer API
#: versions also refund.updated and refund.failed) and what its status then says.
_REFUND_EVENTS = frozenset({"charge.refund.updated", "refund.updated", "refund.failed"})
_REFUND_OUTCOMES: dict[str, CardProviderEventKind] = {
    "succeeded": _K.REFUND_SUCCEEDED,
    "failed": _K.REFUND_FAILED,
    "canceled": _K.REFUND_FAILED,
}


def _header(headers: Mapping[str, str], name: str) -> str | None:
    # aiohttp's headers ignore case; a plain dict (an embedding application's) may not.
    value = headers.get(name)
    if value is None:
        lowered = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == lowered), None)
    return value


def _text(value: object, pattern: re.Pattern[str]) -> str | None:
    return value if isinstance(value, str) and pattern.fullmatch(value) else None


def _record_number(value: object) -> int | None:
    text = _text(value, _RECORD_NUMBER)
    if text is None or int(text) > _LARGEST_RECORD_NUMBER:
        return None
    return int(text)


def owner_metadata(owner: CallOwner | None) -> dict[str, str]:
    """The metadata naming ``owner`` on what a call makes at Stripe (none without one)."""
    if owner is None:
        return {}
    metadata = {
        METADATA_COMPANY: str(owner.company_id),
        METADATA_INTENT: str(owner.payment_intent_id),
    }
    if owner.refund_id is not None:
        metadata[METADATA_REFUND] = owner.refund_id
    if owner.tag is not None:
        metadata[METADATA_TAG] = owner.tag
    return metadata


def owner_from_metadata(metadata: object, *, refund: bool = False) -> CallOwner | None:
    """The :class:`CallOwner` our call set in a Stripe object's ``metadata``, or ``None``.

    Metadata can be edited at Stripe's dashboard, so it is read as untrusted: the company's
    and the intent's ids must both be positive 64-bit integers in plain digits, or there is no
    owner; with ``refund`` (the metadata of a Refund) our refund's id is kept only when it has
    the shape of our ids (``re_`` and 26 base32 digits), else the owner has none.
    """
    if not isinstance(metadata, Mapping):
        return None
    company = _record_number(metadata.get(METADATA_COMPANY))
    intent = _record_number(metadata.get(METADATA_INTENT))
    if company is None or intent is None:
        return None
    refund_id = _text(metadata.get(METADATA_REFUND), _OUR_REFUND) if refund else None
    return CallOwner(company, intent, refund_id, _text(metadata.get(METADATA_TAG), _TAG))


def stripe_event(payload: object) -> CardProviderEvent:
    """A verified Stripe event (the webhook's JSON) in the port's terms.

    Mapped: ``payment_intent.succeeded`` (captured),
    ``.amount_capturable_updated`` (authorized), ``.payment_failed``, ``.canceled``;
    ``charge.dispute.created`` and ``.funds_withdrawn`` (opened), ``.funds_reinstated`` (won),
    ``.closed`` (won or lost);
    ``charge.refunded`` (the charge's total refunded); ``charge.refund.updated``,
    ``refund.updated`` and ``refund.failed`` (one refund: succeeded, or failed or cancelled,
    with its ``failure_reason``; still pending maps to nothing). Any other type keeps ``kind``
    ``None``.
    Amounts come back in ISO 4217 minor units (:func:`from_stripe_amount`). ``owner`` is what
    our call set in the metadata (:func:`owner_from_metadata`) of the PaymentIntent, the
    charge (``charge.refunded``, where Stripe has any) or the Refund, with the refund's id for
    the latter; disputes carry none.
    """
    not_an_event = BadProviderEvent(
        "The webhook body is not a Stripe event", code="webhook_body_invalid"
    )
    if not isinstance(payload, dict):
        raise not_an_event
    event_id, event_type, data = payload.get("id"), payload.get("type"), payload.get("data")
    obj = data.get("object") if isinstance(data, dict) else None
    if not (
        isinstance(obj, dict)
        and isinstance(event_id, str)
        and isinstance(event_type, str)
        and 0 < len(event_id) <= 255
        and len(event_type) <= 255
    ):
        raise not_an_event
    kind: CardProviderEventKind | None = None
    reference: str | None = None
    dispute: str | None = None
    refund: str | None = None
    amount_field: str | None = None
    failure_reason: str | None = None
    owner: CallOwner | None = None
    status = obj.get("status")
    if event_type.startswith("payment_intent."):
        reference = _text(obj.get("id"), REFERENCE)
        owner = owner_from_metadata(obj.get("metadata"))
        action = event_type.removeprefix("payment_intent.")
        if action == "succeeded" and status == "succeeded":
            kind = _K.CAPTURED  # a hold is announced by amount_capturable_updated instead
            # What was captured; localstripe's intents have no amount_received.
            amount_field = "amount_received" if "amount_received" in obj else None
        elif action == "amount_capturable_updated":
            kind = _K.AUTHORIZED
        elif action == "canceled":
            kind = _K.CANCELED
        elif action == "payment_failed":
            kind = _K.PAYMENT_FAILED
            error = obj.get("last_payment_error")
            if isinstance(error, dict):
                failure_reason = _text(error.get("decline_code"), CODE) or _text(
                    error.get("code"), CODE
                )
    elif event_type.startswith("charge.dispute."):
        reference = _text(obj.get("payment_intent"), REFERENCE)
        dispute = _text(obj.get("id"), _STRIPE_ID)
        amount_field = "amount"
        action = event_type.removeprefix("charge.dispute.")
        if action in ("created", "funds_withdrawn"):
            kind = _K.DISPUTE_OPENED
        elif action == "funds_reinstated":
            # Stripe gives the withdrawn money back when the merchant wins.
            kind = _K.DISPUTE_WON
        elif action == "closed" and isinstance(status, str):
            kind = _DISPUTE_CLOSED.get(status)
    elif event_type == "charge.refunded":
        reference = _text(obj.get("payment_intent"), REFERENCE)
        owner = owner_from_metadata(obj.get("metadata"))
        kind = _K.REFUNDED
        amount_field = "amount_refunded"
    elif event_type in _REFUND_EVENTS:
        reference = _text(obj.get("payment_intent"), REFERENCE)
        refund = _text(obj.get("id"), _STRIPE_ID)
        owner = owner_from_metadata(obj.get("metadata"), refund=True)
        kind = _REFUND_OUTCOMES.get(status) if isinstance(status, str) else None
        if kind is _K.REFUND_FAILED:
            failure_reason = _text(obj.get("failure_reason"), CODE) or "refund_failed"
    amount: int | None = None
    currency = obj.get("currency")
    currency = currency.upper() if isinstance(currency, str) and len(currency) == 3 else None
    if amount_field is not None and currency is not None:
        raw = obj.get(amount_field)
        if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
            amount = from_stripe_amount(raw, currency)
    if kind is not None and (amount_field is not None and amount is None):
        kind = None  # an amount event without its amount: nothing safe to do with it
    return CardProviderEvent(
        id=event_id,
        type=event_type,
        kind=kind,
        reference=reference,
        amount=amount,
        currency=currency,
        dispute=dispute,
        failure_reason=failure_reason,
        refund=refund,
        owner=owner,
    )


def verified_event(body: bytes, headers: Mapping[str, str], secret: str) -> CardProviderEvent:
    """The event of one webhook delivery whose ``Stripe-Signature`` the SDK verified with
    ``secret``; refused as :meth:`StripeCardProvider.parse_event` says."""
    signature = _header(headers, "Stripe-Signature")
    if not signature:
        raise BadProviderEvent("The Stripe-Signature header is missing")
    try:
        text = body.decode("utf-8")
        stripe.WebhookSignature.verify_header(
            text, signature, secret, tolerance=WEBHOOK_TOLERANCE_SECONDS
        )
    except (UnicodeDecodeError, stripe.SignatureVerificationError):
        # The SDK's message is not passed on (it names what it expected).
        raise BadProviderEvent(
            "The Stripe-Signature header does not sign this body with the webhook secret, "
            f"or is older than {WEBHOOK_TOLERANCE_SECONDS} seconds"
        ) from None
    try:
        payload = json.loads(text)
    except ValueError:
        raise BadProviderEvent(
            "The webhook body is not JSON", code="webhook_body_invalid"
        ) from None
    return stripe_event(payload)
