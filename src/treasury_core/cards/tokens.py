"""Payment method token intents (PMTI, part 2.2) and the saved-card tokens they produce.

Rules:
- A PMTI is ``requires_payment_method`` until a card is submitted once, through the hosted form
  or the server-to-server confirm endpoint; it then ends ``succeeded`` (with a ``pmt_…`` token)
  or ``failed`` (the card was declined by the verification). A second submission is refused.
  A card that fails the number, expiry or CVC checks is not a submission: the PMTI stays open.
- A PMTI takes its card within ``tokenization_ttl_seconds`` of creation (business time).
- The two URLs of ``latest_version`` carry secrets derived by the vault from the PMTI's id and a
  random salt (:meth:`treasury_core.ports.Vault.derive_secret`): the server recomputes them,
  nothing stored is enough to rebuild them. The form's secret does not open the confirm call.
- A token charges only for the company that created it, until its ``expiry_date`` (inclusive)
  and the card's own expiry month; the card number inside it is sealed by the vault, or, with a
  card provider that keeps saved cards, not held at all (the token names the provider's card).
"""

from __future__ import annotations

from datetime import date
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from treasury_core.metadata import MetadataField, MetadataInput
from treasury_core.movements.records import TreasuryRecord
from treasury_core.payments.intents import PaymentType
from treasury_core.payments.requests import CardSubmission
from treasury_core.serialization import Timestamp
from treasury_core.validation import Email, SchemaRule, StrictRequest, Url

#: E.164: a plus, a country code not starting with 0, at most 15 digits in all.
__all__ = [
    "E164",
    "CardSubmission",
    "CardSummary",
    "CreateTokenIntentRequest",
    "PaymentMethodToken",
    "TokenIntent",
    "TokenIntentStatus",
    "TokenIntentVersion",
    "TokenizationError",
    "TokenizationResult",
]

E164 = Annotated[
    str,
    StringConstraints(pattern=r"^\+[1-9][0-9]{1,14}$"),
    Field(description="E.164, e.g. +14155550100."),
]


class TokenIntentStatus(StrEnum):
    """Where a PMTI stands."""

    REQUIRES_PAYMENT_METHOD = "requires_payment_method"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class CardSummary(_Frozen):
    """What may be shown of a saved card."""

    brand: str
    last4: str
    expiry_month: int
    expiry_year: int


class TokenizationError(_Frozen):
    """Why a tokenization failed: the card provider's ``failure_reason`` and its message."""

    code: str
    message: str


class TokenIntentVersion(_Frozen):
    """``latest_version``: the hosted form and the confirm endpoint of this PMTI."""

    version: int = 1
    status: TokenIntentStatus
    provider_tokenization_url: str | None = None
    confirm_endpoint_url: str | None = None
    expires_at: Timestamp


class TokenIntent(TreasuryRecord):
    """A stored PMTI: what the API shows of it and the salt its URL secrets are derived with."""

    prefix: ClassVar[str] = "pmti"

    id: str
    company_id: int
    created_at: Timestamp
    metadata: MetadataField = Field(default_factory=dict)
    account_id: int
    payment_type: PaymentType = PaymentType.TOKENIZATION
    customer_email: str
    customer_phone_number: str
    callback_url: str | None = None
    expiry_date: date | None = None
    status: TokenIntentStatus = TokenIntentStatus.REQUIRES_PAYMENT_METHOD
    payment_method_token: str | None = None
    card: CardSummary | None = None
    error: TokenizationError | None = None
    expires_at: Timestamp
    url_salt: str

    @property
    def is_open(self) -> bool:
        """Whether a card may still be submitted (expiry aside)."""
        return self.status is TokenIntentStatus.REQUIRES_PAYMENT_METHOD

    def result(self) -> TokenizationResult:
        """The tokenization result (decisions.md): the confirm answer and the callback body."""
        return TokenizationResult(
            payment_method_token_intent_id=self.id,
            payment_method_token=self.payment_method_token,
            status=self.status,
            card=self.card,
            error=self.error,
        )


class TokenizationResult(_Frozen):
    """``{"payment_method_token", "status", "card", "error"}`` of decisions.md, plus the PMTI's
    id so a receiver serving many PMTIs on one ``callback_url`` knows which one finished."""

    payment_method_token_intent_id: str
    payment_method_token: str | None
    status: TokenIntentStatus
    card: CardSummary | None
    error: TokenizationError | None

    @classmethod
    def from_event_object(cls, obj: dict[str, Any]) -> TokenizationResult:
        """The result carried by a PMTI event's ``data.object`` (the PMTI's API record)."""
        return cls(
            payment_method_token_intent_id=obj["id"],
            payment_method_token=obj.get("payment_method_token"),
            status=obj["status"],
            card=obj.get("card"),
            error=obj.get("error"),
        )


class PaymentMethodToken(TreasuryRecord):
    """A stored saved-card token: the card sealed by the vault, its fingerprint, the name.

    With a card provider that keeps saved cards itself, ``provider_reference`` is the card's
    reference there (a Stripe PaymentMethod's ``pm_…``) and ``sealed_card`` is ``None``: the
    treasury holds no card number, sealed or not. Exactly one of the two is set.
    """

    prefix: ClassVar[str] = "pmt"

    id: str
    object: Literal["payment_method_token"] = "payment_method_token"
    account_id: int
    payment_method_token_intent_id: str
    card: CardSummary
    customer_email: str
    expiry_date: date | None
    created_at: Timestamp
    company_id: int
    metadata: MetadataField = Field(default_factory=dict)
    sealed_card: str | None = None
    provider_reference: str | None = None
    fingerprint: str
    cardholder_name: str | None = None
    status: str = "active"

    def expired(self, today: date) -> bool:
        """Past its ``expiry_date`` or past the card's own expiry month."""
        if self.expiry_date is not None and today > self.expiry_date:
            return True
        return (today.year, today.month) > (self.card.expiry_year, self.card.expiry_month)


class CreateTokenIntentRequest(StrictRequest):
    """``POST /api/v1/payment_method_token_intent`` (part 2.2)."""

    account_id: Annotated[int, Field(gt=0, lt=2**63)]
    # Not strict, as on payment intents; only ``Tokenization`` is accepted (the service says so,
    # with its own message; the document states it).
    payment_type: Annotated[
        PaymentType, Field(strict=False), SchemaRule(enum=[PaymentType.TOKENIZATION.value])
    ]
    customer_email: Email
    customer_phone_number: E164
    callback_url: Url | None = None
    expiry_date: date | None = None
    metadata: MetadataInput | None = None
