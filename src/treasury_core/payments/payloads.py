"""What payment events carry: the webhook object (part 6.2) and the legacy callback (part 6.3).

Built here, in the core, so that every delivery path (webhooks, the legacy callback, the events
API, in-process subscribers) renders one intent the same way.

Rules:
- A webhook's ``data.object`` for an intent event is the intent as the API returns it, except
  that ``id`` is a string (part 2.1: "string in webhook payloads").
- The legacy callback body is ``{"type", "status", "payment_intent"}`` with an integer ``id``,
  ``status`` as ``{"name": …}``, currencies as ``{"code": …}`` and a lower-case top-level
  ``status``; it exists for the five types of decisions.md and no others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import PaymentIntentRecord

#: Webhook event type → (legacy callback ``type``, lower-case ``status``), per decisions.md.
LEGACY_CALLBACK_TYPES: Final[Mapping[EventType, tuple[str, str]]] = {
    EventType.PAYMENT_INTENT_SUCCEEDED: ("payment_intent.processed", "processed"),
    EventType.PAYMENT_INTENT_AUTHORIZED: ("payment_intent.authorized", "authorized"),
    EventType.PAYMENT_INTENT_CANCELLED: ("payment_intent.cancelled", "cancelled"),
    EventType.PAYMENT_INTENT_PAYMENT_FAILED: ("payment_intent.failed", "failed"),
    EventType.REFUND_CREATED: ("payment_intent.refunded", "refunded"),
}

_RECORD_FIELDS: Final[set[str]] = set(PaymentIntentRecord.model_fields)

#: The path appended to an intent's ``callback_url`` (part 6.3).
LEGACY_CALLBACK_PATH: Final = "/callback/payment/intent"


def webhook_object(intent: PaymentIntentRecord) -> dict[str, Any]:
    """``data.object`` of an intent event: the API's intent with ``id`` as a string."""
    # A stored intent dumps the record's fields exactly as the record would.
    body = intent.model_dump(mode="json", include=_RECORD_FIELDS)
    body["id"] = str(intent.id)
    return body


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


def legacy_callback_body(
    event_type: EventType, intent: PaymentIntentRecord
) -> dict[str, Any] | None:
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


def intent_from_webhook_object(data: Mapping[str, Any]) -> PaymentIntentRecord:
    """The intent an intent event carries (the inverse of :func:`webhook_object`)."""
    return PaymentIntentRecord.model_validate({**data, "id": int(data["id"])})
