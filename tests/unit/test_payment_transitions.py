"""Every key of TRANSITIONS and every illegal (capture_method, state, trigger), on every path.

test_payment_states.py checks the table against the spec on one path per state at one time.
Here each from-state is reached every way the table allows (a CANCELLED intent voided, expired or
cancelled because its hold vanished; an AUTHORIZED one on its first or a later authorization),
moves are tried just before, at and after the hold's deadline, guards are held to their edges,
and every illegal move must raise IllegalTransition without returning anything.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from treasury_core.errors import ErrorKind
from treasury_core.payments import (
    ALREADY_CAPTURED,
    AUTHORIZATION_EXPIRED,
    AUTHORIZATION_HOLD,
    CAPTURE_TRIGGERS,
    NOT_AUTHORIZED,
    TRANSITIONS,
    CancellationReason,
    CaptureMethod,
    Effect,
    Guard,
    IllegalTransition,
    IntentStatus,
    PaymentIntent,
    PaymentType,
    Transition,
    Trigger,
    transition,
)

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
A, M = CaptureMethod.AUTOMATIC, CaptureMethod.MANUAL
I_, AU, P, C = (
    IntentStatus.INITIALIZED,
    IntentStatus.AUTHORIZED,
    IntentStatus.PROCESSED,
    IntentStatus.CANCELLED,
)

#: Ways to leave AUTHORIZED for CANCELLED, and when each may happen (relative to the deadline).
CANCELLATIONS = {
    Trigger.CANCEL: -timedelta(hours=1),
    Trigger.EXPIRE: timedelta(0),
    Trigger.CAPTURE_HOLD_GONE: -timedelta(seconds=1),
}


def fresh(method: CaptureMethod) -> PaymentIntent:
    return PaymentIntent(
        id=7,
        company_id=1,
        account_id=2,
        billing_amount=1_234,
        billing_currency="JPY",
        processing_amount=11,
        processing_currency="USD",
        payment_type=PaymentType.MOTO,
        capture_method=method,
        payment_intent_lookup_id="pil_test",
        created_at=T0,
    )


def paths(method: CaptureMethod, state: IntentStatus) -> Iterator[tuple[str, PaymentIntent]]:
    """Every intent in ``state`` the table can produce within two authorizations."""
    start = fresh(method)
    if state is I_:
        yield "fresh", start
        yield "declined", transition(start, Trigger.PAY_DECLINED, now=T0).intent
        return
    if method is A:
        if state is P:
            yield "sold", transition(start, Trigger.PAY_SUCCEEDED, now=T0).intent
        return
    first = transition(start, Trigger.PAY_SUCCEEDED, now=T0).intent
    assert first.authorization_expires_at is not None
    deadline = first.authorization_expires_at
    cancelled = {
        how: transition(first, how, now=deadline + offset).intent
        for how, offset in CANCELLATIONS.items()
    }
    if state is C:
        for how, intent in cancelled.items():
            yield f"cancelled by {how.value}", intent
            again = transition(intent, Trigger.PAY_DECLINED, now=deadline + timedelta(days=1))
            yield f"cancelled by {how.value}, declined again", again.intent
        return
    authorized = {"first authorization": first}
    for how, intent in cancelled.items():
        later = deadline + timedelta(days=1)
        authorized[f"re-authorized after {how.value}"] = transition(
            intent, Trigger.PAY_SUCCEEDED, now=later
        ).intent
    if state is AU:
        yield from authorized.items()
        return
    for name, intent in authorized.items():
        assert intent.authorized_at is not None
        captured = transition(
            intent, Trigger.CAPTURE_SUCCEEDED, now=intent.authorized_at + timedelta(minutes=1)
        )
        yield f"captured on {name}", captured.intent


def moments(intent: PaymentIntent) -> list[datetime]:
    """Before, at and after the hold's deadline (or around creation without a hold)."""
    edge = intent.authorization_expires_at or T0 + AUTHORIZATION_HOLD
    return [edge - timedelta(days=3), edge - timedelta(microseconds=1), edge, edge + timedelta(1)]


def guard_allows(guard: Guard, intent: PaymentIntent, now: datetime) -> bool:
    deadline = intent.authorization_expires_at
    if guard is Guard.CAPTURABLE:
        return deadline is not None and now < deadline
    if guard is Guard.EXPIRY_DUE:
        return deadline is not None and now >= deadline
    return True


LEGAL: list[Any] = [
    pytest.param(key, name, intent, id=f"{key[0].value}-{key[1]}-{key[2].value}-{name}")
    for key in TRANSITIONS
    for name, intent in (
        [("fresh", fresh(key[0]))] if key[1] is None else list(paths(key[0], key[1]))
    )
]


@pytest.mark.parametrize(("key", "path", "intent"), LEGAL)
def test_every_legal_key_on_every_path(key: Any, path: str, intent: PaymentIntent) -> None:
    _, source, trigger = key
    rule = TRANSITIONS[key]
    before = intent.model_dump()
    for now in moments(intent):
        if not guard_allows(rule.guard, intent, now):
            result: Transition | None = None
            with pytest.raises(IllegalTransition):
                result = transition(intent, trigger, now=now)
            assert result is None
            continue
        result = transition(intent, trigger, now=now)
        moved = result.intent
        assert (moved.status, result.events, result.previous, result.trigger) == (
            rule.target,
            rule.events,
            source,
            trigger,
        )
        if rule.effect is Effect.AUTHORIZE:
            assert moved.authorized_at == now
            assert moved.authorization_expires_at == now + AUTHORIZATION_HOLD
            assert moved.cancellation_reason is None
        else:
            assert moved.authorized_at == intent.authorized_at
            assert moved.authorization_expires_at == intent.authorization_expires_at
        reason = {
            Effect.VOID: CancellationReason.VOIDED,
            Effect.EXPIRE: CancellationReason.EXPIRED,
            Effect.AUTHORIZE: None,
        }.get(rule.effect, intent.cancellation_reason)
        assert moved.cancellation_reason == reason
        same = set(PaymentIntent.model_fields) - {
            "status",
            "authorized_at",
            "authorization_expires_at",
            "cancellation_reason",
        }
        assert moved.model_dump(include=same) == intent.model_dump(include=same)
    assert intent.model_dump() == before, "transition changed its input"


def test_every_legal_key_is_walked() -> None:
    assert {p.values[0] for p in LEGAL} == set(TRANSITIONS)


COMBINATIONS = list(itertools.product(CaptureMethod, IntentStatus, Trigger))
ILLEGAL: list[Any] = [
    pytest.param(method, state, trigger, name, intent, id=f"{method}-{state}-{trigger}-{name}")
    for method, state, trigger in COMBINATIONS
    for name, intent in paths(method, state)
    if trigger is Trigger.CREATE or (method, state, trigger) not in TRANSITIONS
    # CREATE takes any never-authorized INITIALIZED intent as fresh (a declined one looks alike).
    if not (trigger is Trigger.CREATE and state is I_)
]


@pytest.mark.parametrize(("method", "state", "trigger", "path", "intent"), ILLEGAL)
def test_every_illegal_move_raises_and_returns_nothing(
    method: CaptureMethod,
    state: IntentStatus,
    trigger: Trigger,
    path: str,
    intent: PaymentIntent,
) -> None:
    before = intent.model_dump()
    for now in moments(intent):
        result: Transition | None = None
        with pytest.raises(IllegalTransition) as caught:
            result = transition(intent, trigger, now=now)
        assert result is None
        assert caught.value.kind is ErrorKind.INVALID_REQUEST
        if trigger in CAPTURE_TRIGGERS:
            expired = intent.authorization_expires_at is not None and (
                now >= intent.authorization_expires_at
            )
            want = {P: ALREADY_CAPTURED}.get(state) or (
                AUTHORIZATION_EXPIRED if state is C and expired else NOT_AUTHORIZED
            )
            assert caught.value.message == want
    assert intent.model_dump() == before


def test_every_combination_is_legal_illegal_or_impossible() -> None:
    """Each of the 2 × 4 × 8 combinations is walked here, or cannot exist at all."""
    walked = {(m, s, t) for m, s, t, *_ in (p.values for p in ILLEGAL)}
    walked |= {(k[0], s, k[2]) for k in TRANSITIONS for s in IntentStatus if k[1] in (s, None)}
    for method, state, trigger in COMBINATIONS:
        if (method, state, trigger) in walked:
            continue
        # Only an automatic intent that is AUTHORIZED or CANCELLED is missing: it cannot exist.
        assert method is A and state in (AU, C), (method, state, trigger)
        assert not list(paths(method, state))
        with pytest.raises(ValidationError):
            fresh(A).model_validate({**fresh(A).model_dump(), "status": state})


@pytest.mark.parametrize("state", [AU, P, C])
def test_create_needs_a_fresh_intent(state: IntentStatus) -> None:
    for _, intent in paths(M, state):
        result: Transition | None = None
        with pytest.raises(IllegalTransition, match="already exists"):
            result = transition(intent, Trigger.CREATE, now=T0)
        assert result is None
