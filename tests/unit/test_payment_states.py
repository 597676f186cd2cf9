"""The payment intent entity and its state machine (interface part 3.1, decisions.md)."""

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from treasury_core.errors import ErrorKind, InvalidRequestError, ValidationFailed
from treasury_core.interface.projections import record_dict
from treasury_core.notifications.events import EventType
from treasury_core.payments import (
    AUTHORIZATION_HOLD,
    CARD_PAYMENT_TYPES,
    TRANSITIONS,
    CancellationReason,
    CaptureMethod,
    IllegalTransition,
    IntentStatus,
    PaymentIntent,
    PaymentType,
    Trigger,
    check_capturable,
    check_create_rules,
    check_refundable,
    state_diagram,
    transition,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PAID_AT = T0 + timedelta(minutes=5)
EXPIRES = PAID_AT + timedelta(days=7)
LATER = PAID_AT + timedelta(hours=1)

A = CaptureMethod.AUTOMATIC
M = CaptureMethod.MANUAL
I_ = IntentStatus.INITIALIZED
AU = IntentStatus.AUTHORIZED
P = IntentStatus.PROCESSED
C = IntentStatus.CANCELLED
Tr = Trigger
E = EventType


def fresh(method: CaptureMethod = M, **extra: Any) -> PaymentIntent:
    fields: dict[str, Any] = {
        "id": 42,
        "company_id": 1,
        "account_id": 7,
        "billing_amount": 10_000,
        "billing_currency": "USD",
        "payment_type": PaymentType.CARD_PAYMENT,
        "capture_method": method,
        "merchant_reference": "order-1",
        "payment_intent_lookup_id": "lk_abc",
        "created_at": T0,
    }
    fields.update(extra)
    return PaymentIntent(**fields)


def in_state(method: CaptureMethod, status: IntentStatus | None) -> PaymentIntent:
    """An intent brought to ``status`` through the machine itself."""
    intent = fresh(method)
    if status is None or status is I_:
        return intent
    if method is A:
        assert status is P
        return transition(intent, Tr.PAY_SUCCEEDED, now=PAID_AT).intent
    authorized = transition(intent, Tr.PAY_SUCCEEDED, now=PAID_AT).intent
    if status is AU:
        return authorized
    if status is P:
        return transition(authorized, Tr.CAPTURE_SUCCEEDED, now=LATER).intent
    return transition(authorized, Tr.CANCEL, now=LATER).intent


def now_for(trigger: Trigger) -> datetime:
    return EXPIRES if trigger is Tr.EXPIRE else LATER


# The spec's machine, written out by hand from part 3.1 and decisions.md: a typo in the table
# (or here) fails one of the two tests that compare them.
SPEC: list[tuple[CaptureMethod, IntentStatus | None, Trigger, IntentStatus, tuple[EventType, ...]]]
SPEC = [
    (A, None, Tr.CREATE, I_, (E.PAYMENT_INTENT_CREATED,)),
    (A, I_, Tr.PAY_SUCCEEDED, P, (E.PAYMENT_INTENT_SUCCEEDED,)),
    (A, I_, Tr.PAY_DECLINED, I_, (E.PAYMENT_INTENT_PAYMENT_FAILED,)),
    (M, None, Tr.CREATE, I_, (E.PAYMENT_INTENT_CREATED,)),
    (M, I_, Tr.PAY_SUCCEEDED, AU, (E.PAYMENT_INTENT_AUTHORIZED,)),
    (M, I_, Tr.PAY_DECLINED, I_, (E.PAYMENT_INTENT_PAYMENT_FAILED,)),
    (M, AU, Tr.CAPTURE_SUCCEEDED, P, (E.PAYMENT_INTENT_SUCCEEDED,)),
    (M, AU, Tr.CAPTURE_DECLINED, AU, ()),
    (M, AU, Tr.CAPTURE_HOLD_GONE, C, (E.PAYMENT_INTENT_CANCELLED,)),
    (M, AU, Tr.CANCEL, C, (E.PAYMENT_INTENT_CANCELLED,)),
    (M, AU, Tr.EXPIRE, C, (E.PAYMENT_INTENT_CANCELLED,)),
    (M, C, Tr.PAY_SUCCEEDED, AU, (E.PAYMENT_INTENT_AUTHORIZED,)),
    (M, C, Tr.PAY_DECLINED, C, (E.PAYMENT_INTENT_PAYMENT_FAILED,)),
]

REASON_AFTER: dict[tuple[IntentStatus | None, Trigger], CancellationReason] = {
    (AU, Tr.CAPTURE_HOLD_GONE): CancellationReason.EXPIRED,
    (AU, Tr.CANCEL): CancellationReason.VOIDED,
    (AU, Tr.EXPIRE): CancellationReason.EXPIRED,
    (C, Tr.PAY_DECLINED): CancellationReason.VOIDED,  # stays as it was (cancelled by CANCEL)
}


def test_table_is_exactly_the_spec() -> None:
    table = {key: (rule.target, rule.events) for key, rule in TRANSITIONS.items()}
    spec = {(m, s, t): (to, events) for m, s, t, to, events in SPEC}
    assert table == spec


@pytest.mark.parametrize(("method", "source", "trigger", "target", "events"), SPEC)
def test_spec_transition(
    method: CaptureMethod,
    source: IntentStatus | None,
    trigger: Trigger,
    target: IntentStatus,
    events: tuple[EventType, ...],
) -> None:
    before = in_state(method, source)
    result = transition(before, trigger, now=now_for(trigger))
    assert result.intent.status is target
    assert result.events == events
    assert result.previous is source
    assert result.trigger is trigger
    assert result.intent.cancellation_reason == REASON_AFTER.get((source, trigger))
    assert (result.intent.cancellation_reason is None) == (target is not C)
    # Only the table's fields move; identity and money stay.
    keep = {"id", "company_id", "account_id", "billing_amount", "billing_currency", "created_at"}
    assert result.intent.model_dump(include=keep) == before.model_dump(include=keep)


@pytest.mark.parametrize(("key", "rule"), list(TRANSITIONS.items()), ids=str)
def test_table_transition(key: Any, rule: Any) -> None:
    method, source, trigger = key
    result = transition(in_state(method, source), trigger, now=now_for(trigger))
    assert result.intent.status is rule.target
    assert result.events == rule.events


ALL_STATES: dict[CaptureMethod, list[IntentStatus]] = {A: [I_, P], M: [I_, AU, P, C]}
ILLEGAL = [
    (method, state, trigger)
    for method, states in ALL_STATES.items()
    for state in states
    for trigger in Trigger
    if (method, None if trigger is Tr.CREATE else state, trigger) not in TRANSITIONS
    or (trigger is Tr.CREATE and state is not I_)
]


def test_illegal_list_is_complete() -> None:
    # Automatic: 2 states × 8 triggers − 3 legal (create on a fresh intent, pay ok, pay declined);
    # manual: 4 states × 8 triggers − 10 legal (create, and the 9 moves out of a state).
    assert len(ILLEGAL) == (2 * 8 - 3) + (4 * 8 - 10)


@pytest.mark.parametrize(("method", "state", "trigger"), ILLEGAL)
def test_illegal_move_raises_and_changes_nothing(
    method: CaptureMethod, state: IntentStatus, trigger: Trigger
) -> None:
    intent = in_state(method, state)
    snapshot = intent.model_dump()
    with pytest.raises(IllegalTransition) as caught:
        transition(intent, trigger, now=now_for(trigger))
    assert caught.value.kind is ErrorKind.INVALID_REQUEST
    assert isinstance(caught.value, InvalidRequestError)
    assert intent.model_dump() == snapshot


def test_automatic_never_reaches_authorized_or_cancelled() -> None:
    reachable = {rule.target for (method, _, _), rule in TRANSITIONS.items() if method is A}
    assert reachable == {I_, P}
    with pytest.raises(ValidationError):
        fresh(A, status=AU, authorized_at=PAID_AT, authorization_expires_at=EXPIRES)
    with pytest.raises(ValidationError):
        fresh(A, status=C, cancellation_reason=CancellationReason.VOIDED)


def test_manual_payment_sets_the_hold_window() -> None:
    result = transition(fresh(), Tr.PAY_SUCCEEDED, now=PAID_AT)
    assert result.intent.authorized_at == PAID_AT
    assert result.intent.authorization_expires_at == PAID_AT + timedelta(days=7)
    assert timedelta(days=7) == AUTHORIZATION_HOLD


# --- the three capture messages, word for word ----------------------------------------------


@pytest.mark.parametrize(
    ("method", "state", "message"),
    [
        (M, I_, "Payment intent is not authorized"),
        (M, C, "Payment intent is not authorized"),
        (A, I_, "Payment intent is not authorized"),
        (M, P, "Payment intent has already been captured"),
        (A, P, "Payment intent has already been captured"),
    ],
)
@pytest.mark.parametrize("trigger", [Tr.CAPTURE_SUCCEEDED, Tr.CAPTURE_DECLINED])
def test_capture_messages(
    method: CaptureMethod, state: IntentStatus, message: str, trigger: Trigger
) -> None:
    intent = in_state(method, state)
    with pytest.raises(IllegalTransition) as caught:
        check_capturable(intent, LATER)
    assert caught.value.message == message
    with pytest.raises(IllegalTransition) as caught:
        transition(intent, trigger, now=LATER)
    assert caught.value.message == message


def test_second_capture_is_already_captured() -> None:
    captured = transition(in_state(M, AU), Tr.CAPTURE_SUCCEEDED, now=LATER).intent
    with pytest.raises(IllegalTransition, match=r"^Payment intent has already been captured$"):
        transition(captured, Tr.CAPTURE_SUCCEEDED, now=LATER)


@pytest.mark.parametrize(
    "trigger", [Tr.CAPTURE_SUCCEEDED, Tr.CAPTURE_DECLINED, Tr.CAPTURE_HOLD_GONE]
)
def test_capture_at_expiry_is_expired_even_before_the_job_runs(trigger: Trigger) -> None:
    authorized = in_state(M, AU)
    just_before = EXPIRES - timedelta(microseconds=1)
    check_capturable(authorized, just_before)
    assert transition(authorized, trigger, now=just_before).intent.status in (AU, P, C)
    for when in (EXPIRES, EXPIRES + timedelta(days=1)):
        with pytest.raises(IllegalTransition) as caught:
            transition(authorized, trigger, now=when)
        assert caught.value.message == "Authorization has expired"
        assert caught.value.kind is ErrorKind.INVALID_REQUEST


# --- expiry --------------------------------------------------------------------------------


def test_expire_boundary() -> None:
    authorized = in_state(M, AU)
    assert authorized.authorization_expires_at == EXPIRES
    with pytest.raises(IllegalTransition):
        transition(authorized, Tr.EXPIRE, now=EXPIRES - timedelta(microseconds=1))
    expired = transition(authorized, Tr.EXPIRE, now=EXPIRES)
    assert expired.intent.status is C
    assert expired.intent.cancellation_reason is CancellationReason.EXPIRED
    assert expired.events == (E.PAYMENT_INTENT_CANCELLED,)
    # The hold's timestamps stay as they were: they say when the expired hold was placed.
    assert expired.intent.authorized_at == PAID_AT


def test_cancel_voids_and_hold_gone_expires() -> None:
    voided = transition(in_state(M, AU), Tr.CANCEL, now=LATER).intent
    assert voided.cancellation_reason is CancellationReason.VOIDED
    gone = transition(in_state(M, AU), Tr.CAPTURE_HOLD_GONE, now=LATER).intent
    assert gone.cancellation_reason is CancellationReason.EXPIRED


def test_capture_declined_keeps_the_intent_authorized_and_retryable() -> None:
    authorized = in_state(M, AU)
    result = transition(authorized, Tr.CAPTURE_DECLINED, now=LATER)
    assert result.intent == authorized
    assert result.events == ()
    assert transition(result.intent, Tr.CAPTURE_SUCCEEDED, now=LATER).intent.status is P


@pytest.mark.parametrize("how", [Tr.CANCEL, Tr.EXPIRE, Tr.CAPTURE_HOLD_GONE])
def test_cancelled_intent_can_be_paid_again_with_a_fresh_hold(how: Trigger) -> None:
    cancelled = transition(in_state(M, AU), how, now=now_for(how)).intent
    repaid_at = EXPIRES + timedelta(days=3)
    result = transition(cancelled, Tr.PAY_SUCCEEDED, now=repaid_at)
    assert result.intent.status is AU
    assert result.intent.cancellation_reason is None
    assert result.intent.authorized_at == repaid_at
    assert result.intent.authorization_expires_at == repaid_at + timedelta(days=7)
    assert result.events == (E.PAYMENT_INTENT_AUTHORIZED,)
    # The fresh hold can be captured.
    captured = transition(result.intent, Tr.CAPTURE_SUCCEEDED, now=repaid_at + timedelta(hours=1))
    assert captured.intent.status is P


def test_declined_repayment_leaves_cancelled_as_it_was() -> None:
    cancelled = in_state(M, C)
    result = transition(cancelled, Tr.PAY_DECLINED, now=LATER)
    assert result.intent == cancelled
    assert result.events == (E.PAYMENT_INTENT_PAYMENT_FAILED,)


# --- refunds -------------------------------------------------------------------------------


def test_refund_rejected_while_authorized() -> None:
    with pytest.raises(IllegalTransition) as caught:
        check_refundable(in_state(M, AU))
    assert caught.value.message == (
        "Refunds are not allowed on an authorized payment intent; capture or cancel it"
    )
    assert caught.value.kind is ErrorKind.INVALID_REQUEST


@pytest.mark.parametrize(("method", "state"), [(M, I_), (M, C), (A, I_)])
def test_refund_needs_processed(method: CaptureMethod, state: IntentStatus) -> None:
    with pytest.raises(IllegalTransition):
        check_refundable(in_state(method, state), 100)


def test_refund_amounts() -> None:
    processed = in_state(A, P)
    assert processed.amount_captured == 10_000
    assert check_refundable(processed) == 10_000
    assert check_refundable(processed, 2_500) == 2_500
    partly = processed.model_copy(update={"amount_refunded": 9_000})
    assert check_refundable(partly) == 1_000
    assert check_refundable(partly, 1_000) == 1_000
    with pytest.raises(ValidationFailed) as caught:
        check_refundable(partly, 1_001)
    assert caught.value.param == "amount"
    for bad in (0, -5):
        with pytest.raises(ValidationFailed):
            check_refundable(processed, bad)
    done = processed.model_copy(update={"amount_refunded": 10_000})
    with pytest.raises(IllegalTransition):
        check_refundable(done)


def test_refunds_only_recorded_on_processed_intents() -> None:
    with pytest.raises(ValidationError):
        fresh(amount_refunded=1)
    with pytest.raises(ValidationError):
        PaymentIntent.model_validate({**in_state(A, P).model_dump(), "amount_refunded": 10_001})


# --- create rules --------------------------------------------------------------------------


@pytest.mark.parametrize("payment_type", list(PaymentType))
@pytest.mark.parametrize("method", list(CaptureMethod))
def test_create_rules(payment_type: PaymentType, method: CaptureMethod) -> None:
    intent = fresh(method, payment_type=payment_type)
    if method is M and payment_type not in CARD_PAYMENT_TYPES:
        with pytest.raises(ValidationFailed) as caught:
            check_create_rules(payment_type, method)
        assert caught.value.param == "capture_method"
        assert caught.value.kind is ErrorKind.INVALID_REQUEST
        assert caught.value.message
        with pytest.raises(ValidationFailed):
            transition(intent, Tr.CREATE, now=T0)
    else:
        check_create_rules(payment_type, method)
        result = transition(intent, Tr.CREATE, now=T0)
        assert result.intent == intent
        assert result.events == (E.PAYMENT_INTENT_CREATED,)


def test_card_payment_types() -> None:
    assert {
        PaymentType.CARD_PAYMENT,
        PaymentType.VIRTUAL_CARD,
        PaymentType.MOTO,
    } == CARD_PAYMENT_TYPES


# --- the entity and its record -------------------------------------------------------------


def test_enum_values() -> None:
    assert [s.value for s in IntentStatus] == [
        "INITIALIZED",
        "AUTHORIZED",
        "PROCESSED",
        "CANCELLED",
    ]
    assert [t.value for t in PaymentType] == [
        "Card Payment",
        "Virtual Card",
        "MOTO",
        "Tokenization",
    ]
    assert [m.value for m in CaptureMethod] == ["automatic", "manual"]
    assert [r.value for r in CancellationReason] == ["voided", "expired"]


def test_processing_defaults_to_billing() -> None:
    intent = fresh()
    assert (intent.processing_amount, intent.processing_currency) == (10_000, "USD")
    other = fresh(processing_amount=9_200, processing_currency="EUR")
    assert (other.processing_amount, other.processing_currency) == (9_200, "EUR")
    with pytest.raises(ValidationError):
        fresh(processing_currency="EUR")


def test_entity_rules() -> None:
    with pytest.raises(ValidationError):
        fresh(created_at=datetime(2026, 1, 1))  # naive
    with pytest.raises(ValidationError):
        fresh(status=AU, authorized_at=PAID_AT, authorization_expires_at=PAID_AT)
    with pytest.raises(ValidationError):
        fresh(status=C, authorized_at=PAID_AT, authorization_expires_at=EXPIRES)
    with pytest.raises(ValidationError):
        fresh(billing_amount=0)
    with pytest.raises(ValidationError):
        fresh(billing_currency="usd")
    with pytest.raises(ValidationError):
        PaymentIntent.model_validate(
            {**in_state(M, P).model_dump(), "cancellation_reason": "voided"}
        )


def test_api_record() -> None:
    intent = in_state(M, AU).model_copy(
        update={"checkin_date": date(2026, 2, 3), "card_token": "pmt_1", "customer": "Ada"}
    )
    body = record_dict(intent)
    assert body == {
        "id": 42,
        "object": "payment_intent",
        "company_id": 1,
        "account_id": 7,
        "status": "AUTHORIZED",
        "billing_amount": 10_000,
        "billing_currency": "USD",
        "processing_amount": 10_000,
        "processing_currency": "USD",
        "amount_refunded": 0,
        "payment_type": "Card Payment",
        "capture_method": "manual",
        "merchant_reference": "order-1",
        "checkin_date": "2026-02-03",
        "card_token": "pmt_1",
        "callback_url": None,
        "customer": "Ada",
        "customer_email": None,
        "payment_intent_lookup_id": "lk_abc",
        "authorized_at": "2026-01-01T12:05:00+00:00",
        "authorization_expires_at": "2026-01-08T12:05:00+00:00",
        "cancellation_reason": None,
        "expires_at": None,
        "metadata": {},
        "created_at": "2026-01-01T12:00:00+00:00",
    }


# --- the diagram ---------------------------------------------------------------------------


def test_diagram_has_every_edge_and_the_doc_holds_it() -> None:
    diagram = state_diagram()
    assert diagram.startswith("stateDiagram-v2\n")
    edges = diagram.splitlines()[1:]
    pairs = {(m, s, t): rule for (m, s, t), rule in TRANSITIONS.items()}
    for (_, source, trigger), rule in pairs.items():
        start = source.value if source else "[*]"
        assert any(
            e.strip().startswith(f"{start} --> {rule.target.value}: {trigger.value}") for e in edges
        )
    doc = Path(__file__).resolve().parents[2] / "docs" / "payments.md"
    assert f"```mermaid\n{diagram}```" in doc.read_text(encoding="utf-8")
