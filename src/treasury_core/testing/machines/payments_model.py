"""What :class:`~treasury_core.testing.machines.payments.PaymentsMachine` predicts with: the test
cards, the model's intents and holds, and the events and refusals it expects."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from treasury_core.errors import TreasuryError, ValidationFailed
from treasury_core.ledger import PendingStatus
from treasury_core.ledger.invariants import LedgerSnapshot
from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import (
    AUTHORIZATION_HOLD,
    CancellationReason,
    CaptureMethod,
    IntentStatus,
)
from treasury_core.payments.states import IllegalTransition

#: A predicted refusal that changes nothing: the exception class and its ``code``.
Refusal = tuple[type[TreasuryError], str]


@dataclass(frozen=True)
class ModelCard:
    """A test card and what the machine predicts for it (the sandbox's table by default,
    decisions.md; :attr:`~treasury_core.testing.machines.payments.PaymentsMachine.cards` names
    another provider's)."""

    number: str
    #: ``failure_reason`` of a decline at authorization, or ``None`` when approved.
    declined: str | None = None
    #: Behaviour after approval: ``ok``, ``cd`` (captures refused), ``hg`` (hold vanishes),
    #: ``cl``/``cw`` (chargeback lost/won later).
    behaviour: str = "ok"
    three_d_secure: bool = False


#: Every card of the sandbox card table.
CARDS: tuple[ModelCard, ...] = (
    ModelCard("4242424242424242"),
    ModelCard("5555555555554444"),
    ModelCard("378282246310005"),
    ModelCard("4000000000000002", declined="card_declined"),
    ModelCard("4000000000009995", declined="insufficient_funds"),
    ModelCard("4000000000000069", declined="expired_card"),
    ModelCard("4000000000000127", declined="incorrect_cvc"),
    ModelCard("4000000000003220", three_d_secure=True),
    ModelCard("4000000000000341", behaviour="cd"),
    ModelCard("4000000000000259", behaviour="hg"),
    ModelCard("4000000000000051", behaviour="cl"),
    ModelCard("4000000000000077", behaviour="cw"),
)

E = EventType
INTENT_EVENTS = (
    E.PAYMENT_INTENT_CREATED,
    E.PAYMENT_INTENT_PROCESSING,
    E.PAYMENT_INTENT_SUCCEEDED,
    E.PAYMENT_INTENT_PAYMENT_FAILED,
    E.PAYMENT_INTENT_AUTHORIZED,
    E.PAYMENT_INTENT_CANCELLED,
)
RECORD_EVENTS = (
    E.REFUND_CREATED,
    E.CHARGEBACK_CREATED,
    E.CHARGEBACK_COMPLETED,
    E.CHARGEBACK_REVERSED,
    E.CHARGEBACK_FAILED,
)
REFUND_AMOUNTS = ("all", "some", "remaining", "too_much", "huge")
UNEXPECTED_STATE: Refusal = (IllegalTransition, "payment_intent_unexpected_state")


@dataclass
class ModelHold:
    """The ledger pending movements of one authorization and the state they must be in."""

    pending_ids: tuple[str, ...]
    expected: PendingStatus = PendingStatus.PENDING


@dataclass
class ModelIntent:
    """The model's view of one payment intent."""

    id: int
    lookup_id: str
    method: CaptureMethod
    billing_amount: int
    billing_currency: str
    processing_amount: int
    processing_currency: str
    status: IntentStatus = IntentStatus.INITIALIZED
    reason: CancellationReason | None = None
    authorized_at: datetime | None = None
    #: Behaviour of the card behind the current charge (see :class:`ModelCard`).
    behaviour: str = "ok"
    #: A 3-D Secure challenge waits for the customer.
    challenge: bool = False
    captured_at: datetime | None = None
    refunded: int = 0
    disputed: int = 0
    #: ``None`` until the chargeback job ran, then ``none``, ``open``, ``lost`` or ``won``.
    chargeback: str | None = None
    chargeback_amount: int = 0
    holds: list[ModelHold] = field(default_factory=list)
    events: Counter[EventType] = field(default_factory=Counter)

    @property
    def expires_at(self) -> datetime | None:
        """``authorized_at`` plus the 7-day hold."""
        return None if self.authorized_at is None else self.authorized_at + AUTHORIZATION_HOLD

    @property
    def refundable(self) -> int:
        """Captured minus refunded minus disputed."""
        captured = self.billing_amount if self.status is IntentStatus.PROCESSED else 0
        return captured - self.refunded - self.disputed


def is_authorized(intent: ModelIntent) -> bool:
    return intent.status is IntentStatus.AUTHORIZED


def is_challenged(intent: ModelIntent) -> bool:
    return intent.challenge


def is_refundable(intent: ModelIntent) -> bool:
    return intent.refundable > 0


def is_payable(intent: ModelIntent) -> bool:
    """Whether a payment may be attempted (automatic: once; manual: again after a cancel)."""
    if intent.method is CaptureMethod.AUTOMATIC:
        return intent.status is IntentStatus.INITIALIZED
    return intent.status in (IntentStatus.INITIALIZED, IntentStatus.CANCELLED)


def cancelled(intent: ModelIntent, reason: CancellationReason, hold: PendingStatus) -> None:
    """The intent is ``CANCELLED`` for ``reason``; its latest hold must end as ``hold``."""
    intent.status = IntentStatus.CANCELLED
    intent.reason = reason
    intent.holds[-1].expected = hold
    intent.events[E.PAYMENT_INTENT_CANCELLED] += 1


def capture_refusal(intent: ModelIntent, now: datetime) -> Refusal | None:
    """What a capture of ``intent`` at ``now`` is refused with, or ``None``."""
    kind = IllegalTransition
    if intent.status is IntentStatus.PROCESSED:
        return (kind, "payment_intent_already_captured")
    expired = intent.expires_at is not None and now >= intent.expires_at
    if intent.status is IntentStatus.CANCELLED and expired:
        return (kind, "authorization_expired")
    if intent.status is not IntentStatus.AUTHORIZED:
        return UNEXPECTED_STATE
    if expired:
        return (kind, "authorization_expired")
    return None


def refund_refusal(intent: ModelIntent, amount: int | None) -> Refusal | None:
    """What a refund of ``amount`` (``None``: all) is refused with, or ``None``."""
    kind = IllegalTransition
    if intent.status is not IntentStatus.PROCESSED:
        return (kind, "refund_not_allowed")
    remaining = intent.refundable
    if remaining <= 0:
        return (kind, "charge_disputed" if intent.disputed else "charge_already_refunded")
    if amount is not None and amount > remaining:
        return (ValidationFailed, "amount_too_large")
    return None


def chargeback_step(
    intent: ModelIntent, now: datetime, open_delay: timedelta, resolve_delay: timedelta
) -> None:
    """The card network's dispute of a ``0051`` (lost) or ``0077`` (won) card."""
    if intent.captured_at is None or intent.behaviour not in ("cl", "cw"):
        return
    opens = intent.captured_at + open_delay
    if intent.chargeback is None and now >= opens:
        if intent.refundable <= 0:
            intent.chargeback = "none"
            return
        intent.chargeback = "open"
        intent.chargeback_amount = intent.refundable
        intent.disputed += intent.chargeback_amount
        intent.events[E.CHARGEBACK_CREATED] += 1
    resolves = opens + resolve_delay
    if intent.chargeback == "open" and now >= resolves:
        if intent.behaviour == "cl":
            intent.chargeback = "lost"
            intent.events[E.CHARGEBACK_FAILED] += 1
        else:
            intent.chargeback = "won"
            intent.disputed -= intent.chargeback_amount
            intent.events[E.CHARGEBACK_COMPLETED] += 1
            intent.events[E.CHARGEBACK_REVERSED] += 1


def assert_unchanged(
    before: tuple[LedgerSnapshot, tuple[object, ...]],
    after: tuple[LedgerSnapshot, tuple[object, ...]],
    what: str,
) -> None:
    """Invariant 8: a refused call wrote nothing."""
    (ledger_before, rest_before), (ledger_after, rest_after) = before, after
    assert ledger_after.postings == ledger_before.postings, f"refused {what} wrote postings"
    assert ledger_after.pendings == ledger_before.pendings, f"refused {what} changed reservations"
    assert ledger_after.accounts == ledger_before.accounts, f"refused {what} changed accounts"
    labels = ("intents", "records", "events", "jobs")
    for label, was, now in zip(labels, rest_before, rest_after, strict=True):
        assert now == was, f"refused {what} changed the stored {label}"
