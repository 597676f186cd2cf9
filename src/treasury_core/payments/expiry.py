"""Closing a payment link: an intent's ``expires_at`` (decisions.md, "Stopping a payment link").

Rules:
1. ``expires_at`` is optional on create and must then lie in the future (business time, the
   sandbox clock's, as every deadline of the service); ``None`` keeps the link open.
2. From ``expires_at`` on, an intent that has not been paid cannot be: ``POST /pay/…``, the
   hosted form and a 3-D Secure answer are refused with 400 ``payment_intent_expired``, and the
   hosted page says the link has expired (410).
3. Expiry is not a state: the intent stays ``INITIALIZED`` (or ``CANCELLED``, a voided manual
   one), so part 3.1's rule that an automatic-capture intent never enters ``CANCELLED`` holds.
4. ``POST /api/v1/payments/intent/expire`` closes the link now: ``expires_at`` becomes the
   current business time and ``merchant_of_record.payment_intent.expired`` fires. On a link
   already closed it changes nothing and fires nothing; on an authorized or processed intent
   it is 400 ``payment_intent_unexpected_state`` (capture, cancel or refund apply there).
5. A link that closes by itself at its ``expires_at`` fires the same event then, from a job on
   the business clock.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from treasury_core.errors import InvalidRequestError, ValidationFailed
from treasury_core.payments.intents import IntentStatus, PaymentIntent

#: The states in which an intent can still be paid, and so can expire.
OPEN_STATES: Final = frozenset({IntentStatus.INITIALIZED, IntentStatus.CANCELLED})

EXPIRED_MESSAGE: Final = "This payment link has expired"


def link_expiry(expires_at: datetime | None, now: datetime) -> datetime | None:
    """``expires_at`` of a new intent, checked against ``now`` (rule 1)."""
    if expires_at is not None and expires_at <= now:
        raise ValidationFailed(
            f"expires_at must be in the future (it is now {now.isoformat()})",
            code="expires_at_in_past",
            param="expires_at",
        )
    return expires_at


def is_expired(intent: PaymentIntent, now: datetime) -> bool:
    """Whether the intent's link has closed (an unpaid intent past its ``expires_at``)."""
    return intent.expires_at is not None and now >= intent.expires_at


def check_link_open(intent: PaymentIntent, now: datetime) -> None:
    """Raise :class:`InvalidRequestError` ``payment_intent_expired`` for a closed link (rule 2)."""
    if is_expired(intent, now) and intent.status in OPEN_STATES:
        raise InvalidRequestError(
            f"{EXPIRED_MESSAGE} (at {intent.expires_at.isoformat()})"
            if intent.expires_at
            else EXPIRED_MESSAGE,
            code="payment_intent_expired",
        )
