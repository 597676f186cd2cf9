"""The legacy callback of payment events (part 6.3).

The webhook object (part 6.2) is the interface's
(:func:`treasury_core.interface.projections.webhook_object`); the legacy callback is built here
from the intent an event carries, so every delivery path renders it the same way.

Rules:
- The legacy callback body is ``{"type", "status", "payment_intent"}`` with an integer ``id``,
  ``status`` as ``{"name": …}``, currencies as ``{"code": …}`` and a lower-case top-level
  ``status``; it exists for the five types of decisions.md and no others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import PaymentIntent

#: Webhook event type → (legacy callback ``type``, lower-case ``status``), per decisions.md.
LEGACY_CALLBACK_TYPES: Final[Mapping[EventType, tuple[str, str]]] = {
    EventType.PAYMENT_INTENT_SUCCEEDED: ("payment_intent.processed", "processed"),
    EventType.PAYMENT_INTENT_AUTHORIZED: ("payment_intent.authorized", "authorized"),
    EventType.PAYMENT_INTENT_CANCELLED: ("payment_intent.cancelled", "cancelled"),
    EventType.PAYMENT_INTENT_PAYMENT_FAILED: ("payment_intent.failed", "failed"),
    EventType.REFUND_CREATED: ("payment_intent.refunded", "refunded"),
}

#: The path appended to an intent's ``callback_url`` (part 6.3).
LEGACY_CALLBACK_PATH: Final = "/callback/payment/intent"


def legacy_callback_url(callback_url: str) -> str:
    """Where the legacy callback of an intent with ``callback_url`` is sent: the path
    :data:`LEGACY_CALLBACK_PATH` appended to the URL's path, its query and fragment kept.

    ``https://shop.test/hooks?key=1`` calls ``https://shop.test/hooks/callback/payment/intent?key=1``
    (decisions.md): appended to the text, the path would land inside the query's last value.
    """
    parts = urlsplit(callback_url)
    path = parts.path.rstrip("/") + LEGACY_CALLBACK_PATH
    # A fragment is for browsers; it is not part of what an HTTP request names.
    return urlunsplit(parts._replace(path=path, fragment=""))


def legacy_callback_body(event_type: EventType, intent: PaymentIntent) -> dict[str, Any] | None:
    """The legacy callback body for ``event_type`` about ``intent``; ``None`` for a type the
    legacy callback does not have (it is then not sent)."""
    mapped = LEGACY_CALLBACK_TYPES.get(event_type)
    if mapped is None:
        return None
    type_, status = mapped
    return {
        "type": type_,
        "status": status,
        "payment_intent": {
            "id": intent.id,
            "status": {"name": intent.status.value},
            "billing_amount": intent.billing_amount,
            "billing_currency": {"code": intent.billing_currency},
            "processing_amount": intent.processing_amount,
            "processing_currency": {"code": intent.processing_currency},
            "merchant_reference": intent.merchant_reference,
            "customer": intent.customer,
            "customer_email": intent.customer_email,
        },
    }


def intent_from_webhook_object(data: Mapping[str, Any]) -> PaymentIntent:
    """The intent an intent event carries (the inverse of
    :func:`treasury_core.interface.projections.webhook_object`): what the API shows of it, its
    bookkeeping fields at their defaults."""
    return PaymentIntent.model_validate({**data, "id": int(data["id"])})
