"""The interface's records: what the HTTP interface returns and what events carry as
``data.object``, each one a projection built from an entity.

The entities (:mod:`treasury_core.movements.records`, :mod:`treasury_core.payments`,
:mod:`treasury_core.cards.tokens`, :mod:`treasury_core.notifications.endpoints`,
:mod:`treasury_core.wallets`) hold what the domain needs; the models here say exactly what the
interface shows of them, and the OpenAPI document is built from these models. An embedding app
(Django, FastAPI, Flask) answers exactly as the bundled app does by rendering these.

Rules:
- A record is built from an entity by ``Record.of(entity)`` (or :func:`record_of` for any
  entity), never validated again: the entity was validated against every rule the record has.
- Fields the interface gained after its first version (``metadata``, ``virtual_account_id``,
  ``exchange_rate_date``) come last with a default, so older stored records still render.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal, Self, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from treasury_core.cards.tokens import (
    CardSummary,
    TokenIntentStatus,
    TokenIntentVersion,
    TokenizationError,
)
from treasury_core.currency import Currency, CurrencyType
from treasury_core.metadata import MetadataField
from treasury_core.movements.records import (
    MovementError,
    MovementStatus,
    PaymentInstructionRecord,
    Rate,
)
from treasury_core.notifications.events import EventType
from treasury_core.payments.disputes import ChargebackEvidence
from treasury_core.payments.intents import (
    CancellationReason,
    CaptureMethod,
    IntentStatus,
    PaymentType,
)
from treasury_core.payments.records import (
    ChargebackStatus,
    PayoutStatus,
    RefundStatus,
    TransactionStatus,
    TransactionType,
)
from treasury_core.serialization import Timestamp
from treasury_core.wallets import CurrencyObject, Wallet, WalletStatus


class Projection(BaseModel):
    """A record of the interface, built from an entity with :meth:`of`."""

    model_config = ConfigDict(frozen=True)

    @classmethod
    def of(cls, entity: BaseModel) -> Self:
        """The record of ``entity``: its fields of the same names, copied without validating
        them again (this is on every response's path)."""
        values = entity.__dict__
        names = cls.model_fields.keys()
        if not names <= values.keys():
            # A field the entity lacks takes the record's default.
            record = cls.model_construct(**{n: values[n] for n in names if n in values})
            return cast(Self, record)
        # What model_construct does when every field is given, without its per-field checks
        # for defaults (a list of a hundred intents builds a hundred records).
        record = cls.__new__(cls)
        object.__setattr__(record, "__dict__", {name: values[name] for name in names})
        object.__setattr__(record, "__pydantic_fields_set__", set(names))
        object.__setattr__(record, "__pydantic_extra__", None)
        object.__setattr__(record, "__pydantic_private__", None)
        return record


def _without_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


class PaymentIntentRecord(Projection):
    """A payment intent as the interface shows it (part 2.1), and the ``data.object`` of its events.

    As JSON: ``object`` is ``"payment_intent"``, timestamps are ISO 8601 with ``+00:00``,
    ``checkin_date`` is ``YYYY-MM-DD``.
    """

    id: int
    object: Literal["payment_intent"] = "payment_intent"
    company_id: int
    account_id: int
    status: IntentStatus = IntentStatus.INITIALIZED
    billing_amount: int = Field(gt=0)
    billing_currency: str = Field(pattern=r"^[A-Z]{3}$")
    # Filled from the billing fields when not given, so never None once validated: the schema
    # shows no default, since a ``null`` one would contradict the field's own type.
    processing_amount: int = Field(  # type: ignore[assignment]
        default=None, gt=0, json_schema_extra=_without_default
    )
    processing_currency: str = Field(  # type: ignore[assignment]
        default=None, pattern=r"^[A-Z]{3}$", json_schema_extra=_without_default
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


class DepositRecord(Projection):
    """A deposit as the interface shows it (part 2.7)."""

    id: str
    wallet_id: str
    from_amount: int
    from_currency_id: str
    to_amount: int
    to_currency_id: str
    exchange_rate_from_to: Rate
    reference: str | None
    description: str | None
    status: MovementStatus
    payment_instructions: list[PaymentInstructionRecord]
    error: MovementError | None
    created_at: Timestamp
    #: The virtual account the funds arrived at, for a deposit a virtual-account credit made;
    #: null for an announced deposit (decisions.md).
    virtual_account_id: str | None = None
    #: ``{}`` for records stored without metadata.
    metadata: MetadataField = {}


class WithdrawalRecord(Projection):
    """A withdrawal as the interface shows it (part 2.4)."""

    id: str
    wallet_id: str
    from_amount: int
    from_currency_id: str
    to_amount: int
    to_currency_id: str
    exchange_rate_from_to: Rate
    bank_account_id: str
    reference: str | None
    description: str | None
    withdraw_fee: int
    status: MovementStatus
    error: MovementError | None
    created_at: Timestamp
    #: ``{}`` for records stored without metadata.
    metadata: MetadataField = {}


class TransferRecord(Projection):
    """A transfer as the interface shows it (part 2.6)."""

    id: str
    from_wallet_id: str
    to_wallet_id: str
    from_amount: int
    from_currency_id: str
    to_amount: int
    to_currency_id: str
    exchange_rate_from_to: Rate
    reference: str | None
    description: str | None
    status: MovementStatus
    error: MovementError | None
    created_at: Timestamp
    #: The business day of a published reference rate (the ECB's date), ``YYYY-MM-DD``; null
    #: for the same currency or an FX adapter with live rates, and for records stored without it.
    exchange_rate_date: date | None = None
    #: ``{}`` for records stored without metadata.
    metadata: MetadataField = {}


class BankAccountRecord(Projection):
    """A registered bank account as the interface shows it: the number masked but for ``last4``."""

    id: str
    bank_name: str
    account_name: str
    account_number: str
    last4: str
    routing_number: str
    currency_id: str
    status: str
    created_at: Timestamp
    metadata: MetadataField = {}

    @classmethod
    def of(cls, entity: BaseModel) -> Self:
        """The record, with the account number masked."""
        values = entity.__dict__
        number: str = values["account_number"]
        last4 = number[-4:]
        return cls(
            id=values["id"],
            bank_name=values["bank_name"],
            account_name=values["account_name"],
            account_number="•" * max(len(number) - 4, 0) + last4,
            last4=last4,
            routing_number=values["routing_number"],
            currency_id=values["currency_id"],
            status=values["status"],
            created_at=values["created_at"],
            metadata=values["metadata"],
        )


class VirtualAccountRecord(Projection):
    """A virtual account as the interface shows it (part 2.8)."""

    id: str
    wallet_id: str
    source_currency: str
    status: str
    account_name: str
    bank_name: str
    account_number: str | None
    routing_number: str | None
    iban: str | None
    bic: str | None
    swift_code: str | None
    sort_code: str | None
    branch_code: str | None
    created_at: Timestamp
    #: ``{}`` for records stored without metadata.
    metadata: MetadataField = {}


class TransactionRecord(Projection):
    """A payment attempt as its events show it."""

    id: str
    object: Literal["transaction"] = "transaction"
    payment_intent_id: int
    type: TransactionType
    status: TransactionStatus
    amount: int
    currency: str
    card_brand: str | None
    card_last4: str | None
    failure_reason: str | None
    failure_message: str | None
    created_at: Timestamp


class RefundRecord(Projection):
    """A refund as the API returns it and ``refund.created`` carries it.

    ``amount`` is in minor units of the intent's billing currency (what goes back to the card).
    """

    id: str
    object: Literal["refund"] = "refund"
    payment_intent_id: int
    amount: int
    currency: str
    reason: str | None
    status: RefundStatus
    failure_reason: str | None
    created_at: Timestamp


class ChargebackRecord(Projection):
    """A chargeback as its events show it; ``amount`` in the billing currency.

    ``evidence_due_by``: until when evidence is taken (business time; ``None`` for a
    provider's dispute, which the provider's dashboard handles); ``evidence``: what the
    merchant submitted (``None`` before), at ``evidence_submitted_at``; ``accepted``: the
    merchant accepted the chargeback (it is then ``lost``).
    """

    id: str
    object: Literal["chargeback"] = "chargeback"
    payment_intent_id: int
    amount: int
    currency: str
    status: ChargebackStatus
    created_at: Timestamp
    evidence_due_by: Timestamp | None = None
    evidence: ChargebackEvidence | None = None
    evidence_submitted_at: Timestamp | None = None
    accepted: bool = False


class PayoutRecord(Projection):
    """A payout of settled card funds into the company's wallet, as its events show it."""

    id: str
    object: Literal["payout"] = "payout"
    payment_intent_id: int
    wallet_id: str | None
    amount: int
    currency: str
    status: PayoutStatus
    error: MovementError | None
    created_at: Timestamp


class TokenIntentRecord(Projection):
    """A PMTI as the API returns it."""

    id: str
    object: Literal["payment_method_token_intent"] = "payment_method_token_intent"
    account_id: int
    payment_type: PaymentType
    customer_email: str
    customer_phone_number: str
    callback_url: str | None
    expiry_date: date | None
    status: TokenIntentStatus
    payment_method_token: str | None
    card: CardSummary | None
    error: TokenizationError | None
    latest_version: TokenIntentVersion
    created_at: Timestamp
    metadata: MetadataField = {}

    @classmethod
    def of(
        cls,
        entity: BaseModel,
        *,
        tokenization_url: str | None = None,
        confirm_url: str | None = None,
    ) -> Self:
        """The API record, with the URLs when the caller has them (derived by the service)."""
        values = entity.__dict__
        return cls(
            **{name: values[name] for name in cls.model_fields if name in values},
            latest_version=TokenIntentVersion(
                status=values["status"],
                provider_tokenization_url=tokenization_url,
                confirm_endpoint_url=confirm_url,
                expires_at=values["expires_at"],
            ),
        )


class PaymentMethodTokenRecord(Projection):
    """A saved-card token as the API shows it."""

    id: str
    object: Literal["payment_method_token"] = "payment_method_token"
    account_id: int
    payment_method_token_intent_id: str
    card: CardSummary
    customer_email: str
    expiry_date: date | None
    created_at: Timestamp


class WebhookEndpointRecord(Projection):
    """A webhook endpoint as the API returns it; ``secret`` only when it was just created."""

    id: str
    object: Literal["webhook_endpoint"] = "webhook_endpoint"
    url: str
    events: list[EventType] | None
    status: str
    created_at: Timestamp
    #: Until when the secret replaced by the last rotation still signs deliveries.
    previous_secret_expires_at: Timestamp | None = None
    secret: str | None = None

    @classmethod
    def of(cls, entity: BaseModel, *, secret: str | None = None) -> Self:
        """The API record (with ``secret`` at creation)."""
        values = entity.__dict__
        events = values["events"]
        return cls(
            id=values["id"],
            url=values["url"],
            events=list(events) if events is not None else None,
            status=values["status"],
            created_at=values["created_at"],
            previous_secret_expires_at=values["previous_secret_expires_at"],
            secret=secret,
        )


class WalletRecord(BaseModel):
    """A wallet as the interface returns it; ``company_id`` is a string there (part 2.3)."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    description: str | None
    company_id: str
    currency: CurrencyObject
    status: WalletStatus
    created_at: Timestamp
    metadata: MetadataField = {}

    @classmethod
    def of(cls, wallet: Wallet, currency: Currency) -> WalletRecord:
        """The record of ``wallet`` whose currency is ``currency``."""
        return cls(
            id=wallet.id,
            name=wallet.name,
            description=wallet.description,
            company_id=str(wallet.company_id),
            currency=CurrencyObject.of(currency),
            status=wallet.status,
            created_at=wallet.created_at,
            metadata=wallet.metadata,
        )


class CurrencyRecord(BaseModel):
    """One item of ``GET /api/v1/currencies``."""

    model_config = ConfigDict(frozen=True)

    code: str
    name: str
    symbol: str
    currency_type: CurrencyType
    decimal_places: int
    can_vban: bool

    @classmethod
    def of(cls, currency: Currency) -> CurrencyRecord:
        """The record of an enabled currency."""
        return cls(
            code=currency.code,
            name=currency.name,
            symbol=currency.symbol,
            currency_type=currency.currency_type,
            decimal_places=currency.decimal_places,
            can_vban=currency.can_vban,
        )
