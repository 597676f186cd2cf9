"""The payment intent state machine (interface part 3.1): one table and one :func:`transition`.

Rules:
1. :data:`TRANSITIONS` is the whole machine: ``(capture_method, from_state, trigger)`` gives the
   target state, the webhook events that fire and the fields that change. A key that is not in the
   table is an illegal move: :func:`transition` raises :class:`IllegalTransition` and returns
   nothing (intents are frozen, so nothing changed either).
2. An automatic-capture intent goes ``INITIALIZED`` → ``PROCESSED`` on a successful payment and
   never enters ``AUTHORIZED`` or ``CANCELLED``. A declined payment leaves any intent where it was
   and fires ``payment_failed`` (it can be paid again).
3. A manual-capture intent is ``AUTHORIZED`` on a successful payment, with ``authorized_at = now``
   and ``authorization_expires_at = now + 7 days``. A ``CANCELLED`` one can be paid again: it goes
   back to ``AUTHORIZED`` with fresh timestamps and no ``cancellation_reason``.
4. A capture, and a cancel, need an ``AUTHORIZED`` intent and ``now`` before
   ``authorization_expires_at`` (:func:`check_capturable`, with the interface's messages word for
   word), whatever the provider answers; past the deadline the hold is the expiry job's.
   ``EXPIRE`` needs ``now`` at or past ``authorization_expires_at``: at exactly that instant the
   hold has expired.
5. Refunds are allowed only on a ``PROCESSED`` intent and never exceed what was captured minus what
   was refunded (:func:`check_refundable`).

Pure: no I/O, no clock reads; ``now`` comes in as an argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from treasury_core.errors import InvalidRequestError, ValidationFailed
from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import (
    AUTHORIZATION_HOLD,
    CancellationReason,
    CaptureMethod,
    IntentStatus,
    PaymentIntent,
    check_create_rules,
)

#: The capture errors of the interface (part 7), word for word.
NOT_AUTHORIZED: Final = "Payment intent is not authorized"
ALREADY_CAPTURED: Final = "Payment intent has already been captured"
AUTHORIZATION_EXPIRED: Final = "Authorization has expired"
#: The refund rejection of decisions.md, word for word.
REFUND_WHILE_AUTHORIZED: Final = (
    "Refunds are not allowed on an authorized payment intent; capture or cancel it"
)


class IllegalTransition(InvalidRequestError):
    """The intent's state does not allow this move (400); the intent is unchanged."""

    default_code = "payment_intent_unexpected_state"


class Trigger(StrEnum):
    """What can happen to a payment intent."""

    CREATE = "create"
    PAY_SUCCEEDED = "pay_succeeded"
    PAY_DECLINED = "pay_declined"
    CAPTURE_SUCCEEDED = "capture_succeeded"
    CAPTURE_DECLINED = "capture_declined"
    CAPTURE_HOLD_GONE = "capture_hold_gone"
    CANCEL = "cancel"
    EXPIRE = "expire"


#: The triggers that are outcomes of a capture call: each needs :func:`check_capturable` to pass.
CAPTURE_TRIGGERS: Final = frozenset(
    {Trigger.CAPTURE_SUCCEEDED, Trigger.CAPTURE_DECLINED, Trigger.CAPTURE_HOLD_GONE}
)


class Effect(StrEnum):
    """Which fields besides ``status`` a transition changes."""

    NONE = "none"
    #: ``authorized_at = now``, ``authorization_expires_at = now + 7 days``, reason cleared.
    AUTHORIZE = "authorize"
    #: ``cancellation_reason = voided``.
    VOID = "void"
    #: ``cancellation_reason = expired``.
    EXPIRE = "expire"


class Guard(StrEnum):
    """A condition on ``now`` a transition needs besides its from-state."""

    NONE = "none"
    #: :func:`check_capturable` passes: ``now < authorization_expires_at``.
    CAPTURABLE = "before authorization_expires_at"
    #: ``now >= authorization_expires_at``.
    EXPIRY_DUE = "at or after authorization_expires_at"


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the table: where the intent goes, what fires, what else changes."""

    target: IntentStatus
    events: tuple[EventType, ...] = ()
    effect: Effect = Effect.NONE
    guard: Guard = Guard.NONE


#: ``(capture_method, from_state, trigger)``; ``from_state`` ``None`` is "before the intent exists".
Key = tuple[CaptureMethod, IntentStatus | None, Trigger]

_A = CaptureMethod.AUTOMATIC
_M = CaptureMethod.MANUAL
_I = IntentStatus.INITIALIZED
_AU = IntentStatus.AUTHORIZED
_P = IntentStatus.PROCESSED
_C = IntentStatus.CANCELLED
_E = EventType

#: The whole machine (rule 1). Order is the order of the state diagram.
TRANSITIONS: Final[Mapping[Key, Rule]] = MappingProxyType(
    {
        # Automatic capture: INITIALIZED → PROCESSED, nothing else.
        (_A, None, Trigger.CREATE): Rule(_I, (_E.PAYMENT_INTENT_CREATED,)),
        (_A, _I, Trigger.PAY_SUCCEEDED): Rule(_P, (_E.PAYMENT_INTENT_SUCCEEDED,)),
        (_A, _I, Trigger.PAY_DECLINED): Rule(_I, (_E.PAYMENT_INTENT_PAYMENT_FAILED,)),
        # Manual capture: the interface's table, plus "a cancelled payment link can be paid again".
        (_M, None, Trigger.CREATE): Rule(_I, (_E.PAYMENT_INTENT_CREATED,)),
        (_M, _I, Trigger.PAY_SUCCEEDED): Rule(
            _AU, (_E.PAYMENT_INTENT_AUTHORIZED,), Effect.AUTHORIZE
        ),
        (_M, _I, Trigger.PAY_DECLINED): Rule(_I, (_E.PAYMENT_INTENT_PAYMENT_FAILED,)),
        (_M, _AU, Trigger.CAPTURE_SUCCEEDED): Rule(
            _P, (_E.PAYMENT_INTENT_SUCCEEDED,), guard=Guard.CAPTURABLE
        ),
        (_M, _AU, Trigger.CAPTURE_DECLINED): Rule(_AU, guard=Guard.CAPTURABLE),
        (_M, _AU, Trigger.CAPTURE_HOLD_GONE): Rule(
            _C, (_E.PAYMENT_INTENT_CANCELLED,), Effect.EXPIRE, Guard.CAPTURABLE
        ),
        (_M, _AU, Trigger.CANCEL): Rule(
            _C, (_E.PAYMENT_INTENT_CANCELLED,), Effect.VOID, Guard.CAPTURABLE
        ),
        (_M, _AU, Trigger.EXPIRE): Rule(
            _C, (_E.PAYMENT_INTENT_CANCELLED,), Effect.EXPIRE, Guard.EXPIRY_DUE
        ),
        (_M, _C, Trigger.PAY_SUCCEEDED): Rule(
            _AU, (_E.PAYMENT_INTENT_AUTHORIZED,), Effect.AUTHORIZE
        ),
        (_M, _C, Trigger.PAY_DECLINED): Rule(_C, (_E.PAYMENT_INTENT_PAYMENT_FAILED,)),
    }
)


@dataclass(frozen=True, slots=True)
class Transition:
    """The result of a legal move: the new intent and the webhook events to write to the outbox."""

    intent: PaymentIntent
    events: tuple[EventType, ...]
    previous: IntentStatus | None
    trigger: Trigger


def check_capturable(intent: PaymentIntent, now: datetime) -> None:
    """Raise :class:`IllegalTransition` with the interface's message unless a capture may go ahead.

    Checked before the provider is asked, so an expired hold is refused even while the intent is
    still ``AUTHORIZED`` because the expiry job has not run yet.
    """
    if intent.status is IntentStatus.PROCESSED:
        raise IllegalTransition(ALREADY_CAPTURED, code="payment_intent_already_captured")
    expired = intent.authorization_expires_at is not None and (
        now >= intent.authorization_expires_at
    )
    if intent.status is IntentStatus.CANCELLED and expired:
        # Past the deadline the answer is the same whether or not the expiry job has run yet.
        raise IllegalTransition(AUTHORIZATION_EXPIRED, code="authorization_expired")
    if intent.status is not IntentStatus.AUTHORIZED:
        raise IllegalTransition(NOT_AUTHORIZED)
    if expired:
        raise IllegalTransition(AUTHORIZATION_EXPIRED, code="authorization_expired")


def check_refundable(intent: PaymentIntent, amount: int | None = None) -> int:
    """The amount to refund (``None``: all that remains), or raise why it cannot be refunded.

    Only a ``PROCESSED`` intent is refundable, and never beyond captured minus refunded.
    """
    if intent.status is IntentStatus.AUTHORIZED:
        raise IllegalTransition(REFUND_WHILE_AUTHORIZED, code="refund_not_allowed")
    if intent.status is not IntentStatus.PROCESSED:
        raise IllegalTransition(
            f"Refunds are allowed only on a processed payment intent; this one is "
            f"{intent.status.value}",
            code="refund_not_allowed",
        )
    remaining = intent.amount_refundable
    if remaining <= 0 and intent.amount_disputed:
        raise IllegalTransition(
            "Payment intent is disputed by a chargeback; nothing remains to refund",
            code="charge_disputed",
        )
    if remaining <= 0:
        raise IllegalTransition(
            "Payment intent has already been fully refunded", code="charge_already_refunded"
        )
    if amount is None:
        return remaining
    if amount <= 0:
        raise ValidationFailed("amount must be a positive integer", param="amount")
    if amount > remaining:
        raise ValidationFailed(
            f"amount {amount} exceeds the {remaining} that remains refundable",
            code="amount_too_large",
            param="amount",
        )
    return amount


def _check_guard(rule: Rule, intent: PaymentIntent, now: datetime) -> None:
    if rule.guard is Guard.CAPTURABLE:
        check_capturable(intent, now)
    elif rule.guard is Guard.EXPIRY_DUE:
        assert intent.authorization_expires_at is not None  # an AUTHORIZED intent has one
        if now < intent.authorization_expires_at:
            raise IllegalTransition("Authorization has not expired yet")


def _illegal(intent: PaymentIntent, trigger: Trigger, now: datetime) -> IllegalTransition:
    if trigger in CAPTURE_TRIGGERS or trigger is Trigger.CANCEL:
        check_capturable(intent, now)  # raises the interface's message for the state
    if trigger is Trigger.CREATE:
        return IllegalTransition(f"Payment intent {intent.id} already exists")
    return IllegalTransition(
        f"Cannot {trigger.value.replace('_', ' ')} a payment intent that is "
        f"{intent.status.value} (capture_method {intent.capture_method.value})"
    )


def transition(intent: PaymentIntent, trigger: Trigger, *, now: datetime) -> Transition:
    """Move ``intent`` by ``trigger`` at ``now`` per :data:`TRANSITIONS`, or raise.

    For :attr:`Trigger.CREATE` pass the freshly built intent (``INITIALIZED``, nothing authorized):
    the create rules are checked and ``.created`` fires. Raises :class:`IllegalTransition` (or
    :class:`~treasury_core.errors.ValidationFailed` for a create rule) and returns nothing when the
    move is not allowed.
    """
    fresh = (
        trigger is Trigger.CREATE
        and intent.status is IntentStatus.INITIALIZED
        and intent.authorized_at is None
    )
    from_state = None if trigger is Trigger.CREATE else intent.status
    rule = TRANSITIONS.get((intent.capture_method, from_state, trigger))
    if rule is None or (trigger is Trigger.CREATE and not fresh):
        raise _illegal(intent, trigger, now)
    if trigger is Trigger.CREATE:
        check_create_rules(intent.payment_type, intent.capture_method)
    _check_guard(rule, intent, now)
    changes: dict[str, object] = {"status": rule.target}
    if rule.effect is Effect.AUTHORIZE:
        changes.update(
            authorized_at=now,
            authorization_expires_at=now + AUTHORIZATION_HOLD,
            cancellation_reason=None,
        )
    elif rule.effect is Effect.VOID:
        changes["cancellation_reason"] = CancellationReason.VOIDED
    elif rule.effect is Effect.EXPIRE:
        changes["cancellation_reason"] = CancellationReason.EXPIRED
    if all(getattr(intent, name) == value for name, value in changes.items()):
        new = intent  # nothing changes (a create, a decline): the intent is already valid
    else:
        # Re-validate so the new intent obeys every rule of the model, not only what changed.
        new = PaymentIntent.model_validate({**intent.model_dump(), **changes})
    return Transition(intent=new, events=rule.events, previous=from_state, trigger=trigger)


def _event_label(event: EventType) -> str:
    return event.value.rsplit(".", 1)[-1]


def state_diagram() -> str:
    """A Mermaid ``stateDiagram-v2`` drawn from :data:`TRANSITIONS`; ``docs/payments.md`` holds it.

    An edge reads ``trigger [condition] / events``; the condition names the capture method when
    only one of them has the edge, and the guard on ``now`` when there is one.
    """
    edges: dict[tuple[str, str, str, str, str], set[CaptureMethod]] = {}
    for (method, source, trigger), rule in TRANSITIONS.items():
        events = ", ".join(_event_label(e) for e in rule.events)
        guard = "" if rule.guard is Guard.NONE else rule.guard.value
        edge = (source.value if source else "[*]", rule.target.value, trigger.value, guard, events)
        edges.setdefault(edge, set()).add(method)
    lines = ["stateDiagram-v2"]
    for (source_name, target_name, trigger_name, guard, events), methods in edges.items():
        conditions = [] if len(methods) == len(CaptureMethod) else sorted(m.value for m in methods)
        if guard:
            conditions.append(guard)
        label = trigger_name
        if conditions:
            label += f" [{', '.join(conditions)}]"
        if events:
            label += f" / {events}"
        lines.append(f"    {source_name} --> {target_name}: {label}")
    return "\n".join(lines) + "\n"
