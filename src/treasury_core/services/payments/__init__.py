"""Payment intents: create, pay, capture, cancel, refund, read and list (parts 3.1, 4.1, 7).

Every change of an intent goes through :func:`treasury_core.payments.states.transition`, and is
written with its ledger legs, its records and its events in one storage transaction.

Talking to the card provider: a provider call is slow and outside any database transaction, so
each operation is

1. read the intent and check the move is allowed (the interface's errors come from here);
2. ask the provider;
3. in one transaction, lock the intent, check it is still where step 1 saw it, and write.

Within one process, operations on one intent are serialized by a lock, so step 3's check only
fails when another process changed the intent meanwhile; the provider's work is then undone
(a hold voided, a charge refunded) and the caller told what happened. A refund reserves its
amount in a transaction *before* asking the provider, so concurrent refunds can never promise
more than was captured (ledger invariant 10).
"""

from __future__ import annotations

from treasury_core.services.payments.service import PaymentService
from treasury_core.services.payments.vocabulary import (
    AUTHENTICATION_INCOMPLETE,
    CAPABILITY_UNSUPPORTED,
    CHARGEBACK_OPEN,
    CHARGEBACK_RESOLVE,
    DEFAULT_DELAYS,
    EXPIRE_AUTHORIZATION,
    PAYOUT,
    PAYOUT_APPLY,
    RELEASE_HOLD,
    PaymentOutcome,
    SavedCards,
    attempt_key,
    check_publishable_create,
    intent_job_key,
    is_lookup_id,
    new_lookup_id,
    processing_share,
)

__all__ = [
    "AUTHENTICATION_INCOMPLETE",
    "CAPABILITY_UNSUPPORTED",
    "CHARGEBACK_OPEN",
    "CHARGEBACK_RESOLVE",
    "DEFAULT_DELAYS",
    "EXPIRE_AUTHORIZATION",
    "PAYOUT",
    "PAYOUT_APPLY",
    "RELEASE_HOLD",
    "PaymentOutcome",
    "PaymentService",
    "SavedCards",
    "attempt_key",
    "check_publishable_create",
    "intent_job_key",
    "is_lookup_id",
    "new_lookup_id",
    "processing_share",
]
