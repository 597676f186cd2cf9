"""The records around a payment intent: payment attempts, refunds, chargebacks and payouts.

The interface names them only by their events (part 2.9); decisions.md fixes the refund's
``re_`` prefix. Each stored model holds what the events carry as ``data.object`` (and what the
API returns, for refunds) and what stays inside (provider references, the
ledger pending movements the record reserved); :mod:`treasury_core.interface.records` projects
them.

Rules:
- A transaction is one attempt at the card provider: ``authorization`` (a manual-capture payment:
  a hold), ``sale`` (an automatic-capture payment: authorize and capture at once) or ``capture``
  (capturing a hold). It is ``requires_action`` while 3-D Secure waits for the customer, then
  ``completed`` or ``failed``; both are terminal.
- A refund is ``pending`` from the moment its amount is reserved against the intent until the
  provider answers, then ``succeeded`` or ``failed``. A failed refund gives its amount back to
  what may still be refunded.
- A chargeback is ``open`` while disputed (its amount held out of the settlement balance), then
  ``won`` (released) or ``lost`` (posted back to the card network).
- A payout is ``pending`` once settled funds are reserved towards the company's wallet, then
  ``completed`` when applied; ``failed`` (with ``error``) when it cannot be made.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from treasury_core.metadata import MetadataField
from treasury_core.movements.records import MovementError, TreasuryRecord
from treasury_core.payments.disputes import ChargebackEvidence
from treasury_core.serialization import Timestamp


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class TransactionType(StrEnum):
    """What a payment attempt asked of the card provider."""

    AUTHORIZATION = "authorization"
    SALE = "sale"
    CAPTURE = "capture"


class TransactionStatus(StrEnum):
    """Where a payment attempt stands."""

    REQUIRES_ACTION = "requires_action"
    COMPLETED = "completed"
    FAILED = "failed"


#: The longest provider reference a record can be found by (the storage's lookup-key column).
MAX_LOOKUP_KEY = 64


def _findable(reference: str | None) -> str | None:
    return reference if reference is not None and len(reference) <= MAX_LOOKUP_KEY else None


class Transaction(TreasuryRecord):
    """A stored payment attempt and the provider's reference of its charge.

    The reference is kept while 3-D Secure is pending and once the attempt completed, so that
    the provider's events about the charge find the attempt (and through it the intent); a
    failed attempt drops it, nothing being left to do at the provider. ``action_url`` is the
    provider's page where the customer authenticates, while 3-D Secure waits, when it has one.
    """

    prefix: ClassVar[str] = "txn"

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
    company_id: int
    metadata: MetadataField = Field(default_factory=dict)
    provider_reference: str | None = None
    action_url: str | None = None

    @property
    def lookup_key(self) -> str | None:
        """The provider's reference of the charge, when the storage can index it."""
        return _findable(self.provider_reference)

    def failed(self, reason: str | None, message: str) -> Transaction:
        """This attempt, failed for ``reason``; nothing is left to do at the provider."""
        return self.model_copy(
            update={
                "status": TransactionStatus.FAILED,
                "failure_reason": reason,
                "failure_message": message,
                "provider_reference": None,
                "action_url": None,
            }
        )


class RefundStatus(StrEnum):
    """Where a refund stands."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Refund(TreasuryRecord):
    """A stored refund: its share of ``processing_amount``, its ledger reservations and the
    provider's reference of it (``None`` until the provider answered), by which the provider's
    later events about it find it."""

    prefix: ClassVar[str] = "re"

    id: str
    object: Literal["refund"] = "refund"
    payment_intent_id: int
    #: In minor units of the intent's billing currency (what goes back to the card).
    amount: int
    currency: str
    reason: str | None
    status: RefundStatus
    failure_reason: str | None
    created_at: Timestamp
    company_id: int
    metadata: MetadataField = Field(default_factory=dict)
    processing_amount: int = 0
    pending_ids: tuple[str, ...] = ()
    provider_reference: str | None = None

    @property
    def lookup_key(self) -> str | None:
        """The provider's reference of the refund, when the storage can index it."""
        return _findable(self.provider_reference)


class ChargebackStatus(StrEnum):
    """Where a chargeback stands."""

    OPEN = "open"
    WON = "won"
    LOST = "lost"


class Chargeback(TreasuryRecord):
    """A stored chargeback: its processing-currency share, its hold on settlement, its outcome.

    ``amount`` is in the billing currency. ``evidence_due_by``: until when evidence is taken
    (business time; ``None`` for a provider's dispute, which the provider's dashboard handles);
    ``evidence``: what the merchant submitted (``None`` before), at ``evidence_submitted_at``;
    ``accepted``: the merchant accepted the chargeback (it is then ``lost``).
    """

    prefix: ClassVar[str] = "cb"

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
    company_id: int
    metadata: MetadataField = Field(default_factory=dict)
    processing_amount: int = 0
    pending_ids: tuple[str, ...] = ()
    #: How a simulated dispute ends (known in advance); a provider's dispute is decided by its
    #: closing event instead, whatever this says.
    outcome: Literal["lost", "won"] = "lost"
    #: The provider's id of the dispute, for a chargeback its event opened.
    provider_reference: str | None = None

    @property
    def lookup_key(self) -> str | None:
        """The provider's id of the dispute, when the storage can index it."""
        return _findable(self.provider_reference)


class PayoutStatus(StrEnum):
    """Where a payout stands."""

    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class Payout(TreasuryRecord):
    """A stored payout and its reservation on the settlement balance."""

    prefix: ClassVar[str] = "po"

    id: str
    object: Literal["payout"] = "payout"
    payment_intent_id: int
    wallet_id: str | None
    amount: int
    currency: str
    status: PayoutStatus
    error: MovementError | None
    created_at: Timestamp
    company_id: int
    metadata: MetadataField = Field(default_factory=dict)
    pending_ids: tuple[str, ...] = ()


class ProviderEventView(_Frozen):
    """A card provider's event as treasury-core applied it (internal: never served)."""

    id: str
    provider_event_id: str
    type: str
    kind: str | None
    reference: str | None
    result: str
    created_at: Timestamp


class ProviderEventReceipt(TreasuryRecord, ProviderEventView):
    """The mark that a provider's event was applied: a redelivery finds it and changes nothing.

    Found by the provider's event id (hashed when longer than the storage's lookup key).
    """

    prefix: ClassVar[str] = "pev"

    company_id: int
    metadata: MetadataField = {}

    @property
    def status_value(self) -> str:
        """What applying the event did (``applied``, ``nothing_to_do``, …)."""
        return self.result

    @property
    def lookup_key(self) -> str:
        """The provider's event id."""
        return provider_event_key(self.provider_event_id)


def provider_event_key(provider_event_id: str) -> str:
    """The lookup key of a provider's event id: itself, or its SHA-256 when too long to index."""
    if len(provider_event_id) <= MAX_LOOKUP_KEY:
        return provider_event_id
    return hashlib.sha256(provider_event_id.encode()).hexdigest()
