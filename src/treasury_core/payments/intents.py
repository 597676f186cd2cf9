"""The payment intent (interface part 2.1) as stored; the interface's record of it is
:class:`treasury_core.interface.records.PaymentIntentRecord`.

Rules:
1. Amounts are ``int`` minor units: ``billing_amount`` of ``billing_currency``,
   ``processing_amount`` of ``processing_currency``; both processing fields default to the billing
   ones.
2. ``capture_method`` ``manual`` is allowed only for a card payment type
   (:data:`CARD_PAYMENT_TYPES`); :func:`check_create_rules` says so with a 400 naming
   ``capture_method``.
3. ``authorized_at`` and ``authorization_expires_at`` are set together, exactly
   :data:`AUTHORIZATION_HOLD` (7 days) apart, and only on a manual-capture intent.
4. ``cancellation_reason`` is set exactly when the intent is ``CANCELLED``.
5. An automatic-capture intent is never ``AUTHORIZED`` or ``CANCELLED``.
6. ``amount_refunded`` stays between 0 and ``billing_amount``, and is above 0 only once
   ``PROCESSED``.

The model only holds these rules; moving an intent from state to state is
:mod:`treasury_core.payments.states`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from treasury_core.errors import ValidationFailed
from treasury_core.metadata import MetadataField, metadata_matches
from treasury_core.serialization import Timestamp

#: How long an authorization hold lasts: ``authorization_expires_at = authorized_at + 7 days``.
AUTHORIZATION_HOLD: Final = timedelta(days=7)


class IntentStatus(StrEnum):
    """States of a payment intent (part 3.1)."""

    INITIALIZED = "INITIALIZED"
    AUTHORIZED = "AUTHORIZED"
    PROCESSED = "PROCESSED"
    CANCELLED = "CANCELLED"


class PaymentType(StrEnum):
    """Payment types the interface names (part 2.1)."""

    CARD_PAYMENT = "Card Payment"
    VIRTUAL_CARD = "Virtual Card"
    MOTO = "MOTO"
    TOKENIZATION = "Tokenization"


class CaptureMethod(StrEnum):
    """``automatic`` (the default) moves funds at payment; ``manual`` holds them until capture."""

    AUTOMATIC = "automatic"
    MANUAL = "manual"


class CancellationReason(StrEnum):
    """Why an authorization ended without capture."""

    VOIDED = "voided"
    EXPIRED = "expired"


#: The payment types that charge a card, and so may hold funds for a later capture. Tokenization
#: saves a card without charging it, so it has nothing to hold.
CARD_PAYMENT_TYPES: Final = frozenset(
    {PaymentType.CARD_PAYMENT, PaymentType.VIRTUAL_CARD, PaymentType.MOTO}
)


def check_create_rules(payment_type: PaymentType, capture_method: CaptureMethod) -> None:
    """Raise :class:`ValidationFailed` (400, ``param`` ``capture_method``) for a manual capture
    on a payment type that is not a card type.

    Which keys may ask for manual capture is the HTTP layer's rule, not this one.
    """
    if capture_method is CaptureMethod.MANUAL and payment_type not in CARD_PAYMENT_TYPES:
        allowed = ", ".join(sorted(t.value for t in CARD_PAYMENT_TYPES))
        raise ValidationFailed(
            f"capture_method manual is only available for card payment types ({allowed}); "
            f"{payment_type.value!r} is not one",
            code="capture_method_not_supported",
            param="capture_method",
        )


@dataclass(frozen=True, slots=True)
class IntentFilter:
    """The filters of the intent list and count (decisions.md); ``None`` means any.

    ``created_gte`` is inclusive and ``created_lt`` exclusive, so consecutive windows never
    count an intent twice.
    """

    status: IntentStatus | None = None
    account_id: int | None = None
    created_gte: datetime | None = None
    created_lt: datetime | None = None
    #: ``metadata[key]=value`` pairs the intent's metadata must all hold.
    metadata: Mapping[str, str] | None = None
    #: Exact matches of the intent's own fields (``currency`` is ``billing_currency``).
    merchant_reference: str | None = None
    customer_email: str | None = None
    currency: str | None = None

    def field_filters(self) -> dict[str, str]:
        """The document-field filters that are set, by the intent field each one matches."""
        wanted = {
            "merchant_reference": self.merchant_reference,
            "customer_email": self.customer_email,
            "billing_currency": self.currency,
        }
        return {name: value for name, value in wanted.items() if value is not None}

    def matches(self, intent: PaymentIntent) -> bool:
        """Whether ``intent`` passes every filter (what storage adapters must agree with)."""
        return (
            (self.status is None or intent.status is self.status)
            and (self.account_id is None or intent.account_id == self.account_id)
            and (self.created_gte is None or intent.created_at >= self.created_gte)
            and (self.created_lt is None or intent.created_at < self.created_lt)
            and all(getattr(intent, k) == v for k, v in self.field_filters().items())
            and metadata_matches(intent.metadata, self.metadata)
        )


def _aware(value: datetime | None, name: str) -> None:
    if value is not None and value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware")


class PaymentIntent(BaseModel):
    """A stored payment intent, holding the rules in this module's docstring.

    Frozen: a change is a new intent, made by :func:`treasury_core.payments.states.transition`
    (state) or ``model_copy`` by the payments service (the bookkeeping fields below).

    Its first fields are what the interface shows
    (:class:`treasury_core.interface.records.PaymentIntentRecord`); the rest stays inside the
    service: the card provider's latest reference for the charge, the ledger pending movements
    of the current authorization hold, the refunded share of ``processing_amount``, and the
    latest payment attempt.
    """

    model_config = ConfigDict(frozen=True)

    id: int
    object: Literal["payment_intent"] = "payment_intent"
    company_id: int
    account_id: int
    status: IntentStatus = IntentStatus.INITIALIZED
    billing_amount: int = Field(gt=0)
    billing_currency: str = Field(pattern=r"^[A-Z]{3}$")
    # Filled from the billing fields when not given (rule 1), so never None once validated.
    processing_amount: int = Field(  # type: ignore[assignment]
        default=None, gt=0
    )
    processing_currency: str = Field(  # type: ignore[assignment]
        default=None, pattern=r"^[A-Z]{3}$"
    )
    amount_refunded: int = Field(default=0, ge=0)
    payment_type: PaymentType = PaymentType.CARD_PAYMENT
    capture_method: CaptureMethod = CaptureMethod.AUTOMATIC
    merchant_reference: str | None = None
    checkin_date: date | None = None
    card_token: str | None = None
    callback_url: str | None = None
    customer: str | None = None
    customer_email: str | None = None
    payment_intent_lookup_id: str
    authorized_at: Timestamp | None = None
    authorization_expires_at: Timestamp | None = None
    cancellation_reason: CancellationReason | None = None
    #: When the payment link closes (business time): from then on the intent cannot be paid
    #: (decisions.md, "Stopping a payment link"). ``None``: it stays open.
    expires_at: Timestamp | None = None
    metadata: MetadataField = {}
    created_at: Timestamp

    provider_reference: str | None = None
    hold_pending_ids: tuple[str, ...] = ()
    processing_refunded: int = Field(default=0, ge=0)
    #: What a chargeback took or holds (open or lost), billing and processing shares.
    amount_disputed: int = Field(default=0, ge=0)
    processing_disputed: int = Field(default=0, ge=0)
    #: What payouts took out of settlement into the company's wallet (processing currency).
    processing_paid_out: int = Field(default=0, ge=0)
    latest_transaction_id: str | None = None
    #: Every refund of this intent, oldest first (failed ones included).
    refund_ids: tuple[str, ...] = ()
    captured_at: Timestamp | None = None

    @model_validator(mode="before")
    @classmethod
    def _processing_defaults_to_billing(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if data.get("processing_currency") is None:
                data["processing_currency"] = data.get("billing_currency")
            if data.get("processing_amount") is None:
                if data["processing_currency"] != data.get("billing_currency"):
                    raise ValueError("processing_amount is required in another currency")
                data["processing_amount"] = data.get("billing_amount")
        return data

    @model_validator(mode="after")
    def _check_rules(self) -> PaymentIntent:
        _aware(self.created_at, "created_at")
        _aware(self.authorized_at, "authorized_at")
        _aware(self.authorization_expires_at, "authorization_expires_at")
        _aware(self.expires_at, "expires_at")
        if (self.authorized_at is None) != (self.authorization_expires_at is None):
            raise ValueError("authorized_at and authorization_expires_at are set together")
        if (
            self.authorized_at is not None
            and self.authorization_expires_at != self.authorized_at + AUTHORIZATION_HOLD
        ):
            raise ValueError("authorization_expires_at must be authorized_at + 7 days")
        manual = self.capture_method is CaptureMethod.MANUAL
        if not manual and self.authorized_at is not None:
            raise ValueError("an automatic-capture intent is never authorized")
        if not manual and self.status in (IntentStatus.AUTHORIZED, IntentStatus.CANCELLED):
            raise ValueError(f"an automatic-capture intent is never {self.status.value}")
        if self.status in (IntentStatus.AUTHORIZED, IntentStatus.CANCELLED) and (
            self.authorized_at is None
        ):
            raise ValueError(f"a {self.status.value} intent has authorized_at")
        if (self.status is IntentStatus.CANCELLED) != (self.cancellation_reason is not None):
            raise ValueError("cancellation_reason is set exactly when the intent is CANCELLED")
        if self.amount_refunded + self.amount_disputed > self.billing_amount:
            raise ValueError("refunds and chargebacks cannot exceed billing_amount")
        if self.processing_refunded + self.processing_disputed > self.processing_amount:
            raise ValueError("refunds and chargebacks cannot exceed processing_amount")
        if (self.amount_refunded or self.amount_disputed) and (
            self.status is not IntentStatus.PROCESSED
        ):
            raise ValueError("only a PROCESSED intent has refunds or chargebacks")
        return self

    @property
    def amount_captured(self) -> int:
        """What the customer was charged: the full billing amount once ``PROCESSED``, else 0.

        A capture is always for the full authorized amount (part 3.1, rule 3).
        """
        return self.billing_amount if self.status is IntentStatus.PROCESSED else 0

    @property
    def amount_refundable(self) -> int:
        """What may still be refunded: captured minus refunded and minus any chargeback."""
        return self.amount_captured - self.amount_refunded - self.amount_disputed

    @property
    def processing_unpaid(self) -> int:
        """Settled money of this intent not yet paid out: processing amount once captured, net
        of refunds, chargebacks and earlier payouts."""
        if self.status is not IntentStatus.PROCESSED:
            return 0
        return (
            self.processing_amount
            - self.processing_refunded
            - self.processing_disputed
            - self.processing_paid_out
        )
