"""Event types and the event record written to the outbox.

An event is written in the same transaction as the change it reports and delivered after commit,
at least once; its ``id`` is stable so receivers can drop duplicates.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict


class EventType(StrEnum):
    """Every event type of the interface (part 6.1) and of decisions.md."""

    PAYMENT_INTENT_CREATED = "merchant_of_record.payment_intent.created"
    PAYMENT_INTENT_PROCESSING = "merchant_of_record.payment_intent.processing"
    PAYMENT_INTENT_SUCCEEDED = "merchant_of_record.payment_intent.succeeded"
    PAYMENT_INTENT_PAYMENT_FAILED = "merchant_of_record.payment_intent.payment_failed"
    PAYMENT_INTENT_AUTHORIZED = "merchant_of_record.payment_intent.authorized"
    PAYMENT_INTENT_CANCELLED = "merchant_of_record.payment_intent.cancelled"
    #: The payment link closed (decisions.md, "Stopping a payment link").
    PAYMENT_INTENT_EXPIRED = "merchant_of_record.payment_intent.expired"
    TRANSACTION_CREATED = "merchant_of_record.transaction.created"
    TRANSACTION_COMPLETED = "merchant_of_record.transaction.completed"
    TRANSACTION_FAILED = "merchant_of_record.transaction.failed"
    TRANSACTION_REQUIRES_ACTION = "merchant_of_record.transaction.requires_action"
    REFUND_CREATED = "merchant_of_record.refund.created"
    #: A refund's status changed after its creation (decisions.md, "Refund outcomes").
    REFUND_UPDATED = "treasury.refund.updated"
    CHARGEBACK_CREATED = "merchant_of_record.chargeback.created"
    CHARGEBACK_COMPLETED = "merchant_of_record.chargeback.completed"
    CHARGEBACK_REVERSED = "merchant_of_record.chargeback.reversed"
    CHARGEBACK_FAILED = "merchant_of_record.chargeback.failed"
    PAYOUT_CREATED = "merchant_of_record.payout.created"
    PAYOUT_CONFIRMED = "merchant_of_record.payout.confirmed"
    PAYOUT_APPLIED = "merchant_of_record.payout.applied"
    PAYOUT_COMPLETED = "merchant_of_record.payout.completed"
    PAYOUT_FAILED = "merchant_of_record.payout.failed"
    PAYMENT_METHOD_TOKEN_INTENT_SUCCEEDED = (
        "merchant_of_record.payment_method_token_intent.succeeded"
    )
    PAYMENT_METHOD_TOKEN_INTENT_FAILED = "merchant_of_record.payment_method_token_intent.failed"
    DEPOSIT_COMPLETED = "treasury.deposit.completed"
    DEPOSIT_FAILED = "treasury.deposit.failed"
    WITHDRAWAL_COMPLETED = "treasury.withdrawal.completed"
    WITHDRAWAL_FAILED = "treasury.withdrawal.failed"
    TRANSFER_COMPLETED = "treasury.transfer.completed"
    TRANSFER_FAILED = "treasury.transfer.failed"
    #: A statement's balance disagrees with the ledger (decisions.md, "Safeguarding
    #: reconciliation"); the operator's (company 0), never a merchant's.
    RECONCILIATION_BREAK = "treasury.reconciliation.break"
    #: The card provider and the treasury disagree, or a call whose answer was lost could not
    #: be resolved (docs/reliability.md, "Card provider calls whose answer was lost"); the
    #: operator's, never a merchant's.
    CARD_RECONCILIATION_DIFFERENCE = "treasury.card.reconciliation.difference"


#: Events of the operator (company 0): written to the outbox like any other, but no company's
#: events list or webhook endpoint ever carries them.
OPERATOR_EVENTS = frozenset(
    {EventType.RECONCILIATION_BREAK, EventType.CARD_RECONCILIATION_DIFFERENCE}
)


class Event(BaseModel):
    """One event in the outbox; ``data`` is ``{"object": <the resource as the API shows it>}``.

    (Payload shapes per event type belong to the notifications issue.)
    """

    model_config = ConfigDict(frozen=True)

    id: str
    type: EventType
    company_id: int
    created_at: datetime
    data: dict[str, Any]


class EventHead(NamedTuple):
    """An outbox event without its payload: what the dispatcher decides on first.

    Most events make no delivery (no endpoint of the company takes their type, and no callback
    applies), so the dispatcher reads these and parses the payloads of only the events that
    may make one.
    """

    id: str
    company_id: int
    type: EventType
