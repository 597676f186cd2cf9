"""Payment intents: the entity and its state machine (interface part 3.1).

Pure, like the ledger: time comes in as ``now`` and ids come in on the intent. The service that
talks to the card provider and storage builds on :func:`transition`.
"""

from treasury_core.payments.intents import (
    AUTHORIZATION_HOLD,
    CARD_PAYMENT_TYPES,
    CancellationReason,
    CaptureMethod,
    IntentFilter,
    IntentStatus,
    PaymentIntent,
    PaymentType,
    check_create_rules,
)
from treasury_core.payments.states import (
    ALREADY_CAPTURED,
    AUTHORIZATION_EXPIRED,
    CAPTURE_TRIGGERS,
    NOT_AUTHORIZED,
    REFUND_WHILE_AUTHORIZED,
    TRANSITIONS,
    Effect,
    Guard,
    IllegalTransition,
    Rule,
    Transition,
    Trigger,
    check_capturable,
    check_refundable,
    state_diagram,
    transition,
)

# Plain sorted() order, as tests/unit/test_public_api.py checks for every package.
__all__ = [  # noqa: RUF022
    "ALREADY_CAPTURED",
    "AUTHORIZATION_EXPIRED",
    "AUTHORIZATION_HOLD",
    "CAPTURE_TRIGGERS",
    "CARD_PAYMENT_TYPES",
    "CancellationReason",
    "CaptureMethod",
    "Effect",
    "Guard",
    "IllegalTransition",
    "IntentFilter",
    "IntentStatus",
    "NOT_AUTHORIZED",
    "PaymentIntent",
    "PaymentType",
    "REFUND_WHILE_AUTHORIZED",
    "Rule",
    "TRANSITIONS",
    "Transition",
    "Trigger",
    "check_capturable",
    "check_create_rules",
    "check_refundable",
    "state_diagram",
    "transition",
]
