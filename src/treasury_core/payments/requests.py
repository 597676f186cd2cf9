"""Request bodies of the payment calls (part 4.1 and decisions.md), validated strictly.

Amounts are integers in minor units; ``"100"``, ``true`` and ``1.5`` are refused, as are unknown
fields (over HTTP, a JSON number written ``100.0`` is the integer 100: see the app's body
parser). Whether a currency is enabled, an account is the caller's and an amount is within the
configured maximum is the payments service's to check. :class:`MetadataUpdateRequest`, the
body of every ``…/metadata`` call, is defined beside the metadata rules and named here too.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated

from pydantic import AwareDatetime, Field, StringConstraints

from treasury_core.metadata import MetadataInput
from treasury_core.metadata import MetadataUpdateRequest as MetadataUpdateRequest
from treasury_core.payments.intents import CaptureMethod, PaymentType
from treasury_core.validation import (
    Amount,
    CurrencyCode,
    Email,
    SchemaPattern,
    SingleLine,
    StrictRequest,
    Url,
    id_pattern,
)

IntentId = Annotated[int, Field(gt=0, lt=2**63, description="The payment intent's id.")]
Reference = Annotated[SingleLine, StringConstraints(max_length=255)]


class CreateIntentRequest(StrictRequest):
    """``POST /api/v1/payments/intent``.

    ``processing_currency`` (default: the billing currency) is the currency the company is paid
    in; ``processing_amount`` is then converted at the current rate. ``customer`` and
    ``customer_email`` appear in the legacy callback.
    """

    account_id: Annotated[int, Field(gt=0, lt=2**63)]
    billing_amount: Amount
    billing_currency: CurrencyCode
    # Not strict: embedding code may pass the plain strings (``"Card Payment"``) too.
    payment_type: Annotated[PaymentType, Field(strict=False)]
    merchant_reference: Reference | None = None
    capture_method: Annotated[CaptureMethod, Field(strict=False)] = CaptureMethod.AUTOMATIC
    checkin_date: date | None = None
    # The service checks the shape, with its own message: the document states it.
    card_token: (
        Annotated[
            str,
            StringConstraints(min_length=1, max_length=128),
            SchemaPattern(id_pattern("pmt")),
        ]
        | None
    ) = None
    callback_url: Url | None = None
    processing_currency: CurrencyCode | None = None
    customer: Annotated[SingleLine, StringConstraints(max_length=255)] | None = None
    customer_email: Email | None = None
    #: When the payment link closes; a future time with a UTC offset (business clock).
    expires_at: AwareDatetime | None = None
    metadata: MetadataInput | None = None


class IntentActionRequest(StrictRequest):
    """``POST /api/v1/payments/intent/capture`` and ``/cancel-authorization``."""

    payment_intent_id: IntentId


class RefundRequest(StrictRequest):
    """``POST /api/v1/payments/intent/refund``; ``amount`` defaults to all that remains."""

    payment_intent_id: IntentId
    amount: Amount | None = None
    reason: Reference | None = None


class CardSubmission(StrictRequest):
    """A card as the customer or the client's server sends it: ``POST /pay/{lookup_id}`` and
    the PMTI's confirm call and hosted form (the field names of part 2.2).

    Shapes only: the Luhn digit, the length per brand, the expiry and the CVC's length are
    checked by :func:`treasury_core.cards.numbers.check_card`, whose messages never echo them.
    The number and the CVC are left out of ``repr``, so a logged or traced model leaks neither.
    Two-digit years (``30``) mean 2030.
    """

    cardholder_name: Annotated[SingleLine, StringConstraints(max_length=255)] | None = None
    # ASCII digits, optionally grouped by spaces or dashes as printed on the card.
    card_number: Annotated[
        str,
        StringConstraints(min_length=1, max_length=32, pattern=r"^[0-9][0-9 -]*$"),
        Field(repr=False),
    ]
    expiry_month: Annotated[int, Field(ge=1, le=12)]
    expiry_year: Annotated[int, Field(ge=0, le=2200)]
    cvc: Annotated[
        str,
        StringConstraints(min_length=1, max_length=8, pattern=r"^[0-9]+$"),
        Field(repr=False),
    ]


#: ``POST /pay/{payment_intent_lookup_id}`` takes the card submission of part 2.2.
PayRequest = CardSubmission


class ChallengeRequest(StrictRequest):
    """``POST /pay/{payment_intent_lookup_id}/challenge``: the customer's 3-D Secure answer."""

    outcome: Annotated[str, StringConstraints(pattern=r"^(pass|fail)$")] = "pass"
