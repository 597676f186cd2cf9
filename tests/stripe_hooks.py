"""Stripe webhook deliveries built in the tests, signed as Stripe signs them.

Stripe signs ``"{t}.{body}"`` with HMAC-SHA256 under the endpoint's secret and sends
``Stripe-Signature: t={t},v1={hex}``. The signature is computed here from that definition, not
with the SDK the code under test verifies with, so a mistake in either shows.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import Any

SECRET = "whsec_treasury_test"

_ids = itertools.count(1)


def signature(body: bytes, secret: str = SECRET, timestamp: int | None = None) -> str:
    """The ``Stripe-Signature`` header of ``body``."""
    t = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


def event(event_type: str, obj: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
    """A Stripe event of ``event_type`` about ``obj`` (a fresh id unless given)."""
    return {
        "id": event_id or f"evt_test{next(_ids):06d}{int(time.time())}",
        "object": "event",
        "type": event_type,
        "created": int(time.time()),
        "livemode": False,
        "data": {"object": obj},
    }


def dispute(
    intent_id: str,
    amount: int,
    *,
    status: str = "needs_response",
    dispute_id: str = "dp_test1",
    currency: str = "usd",
) -> dict[str, Any]:
    """A Stripe Dispute on the charge of PaymentIntent ``intent_id``."""
    return {
        "id": dispute_id,
        "object": "dispute",
        "amount": amount,
        "currency": currency,
        "charge": "ch_test1",
        "payment_intent": intent_id,
        "reason": "fraudulent",
        "status": status,
    }


def payment_intent(intent_id: str, status: str, **fields: Any) -> dict[str, Any]:
    """A Stripe PaymentIntent as events carry it."""
    return {"id": intent_id, "object": "payment_intent", "status": status, **fields}


def delivery(payload: dict[str, Any], secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    """The body and headers of ``payload``'s delivery, as Stripe posts it."""
    body = json.dumps(payload, indent=2).encode()
    return body, {
        "Content-Type": "application/json; charset=utf-8",
        "Stripe-Signature": signature(body, secret),
    }
