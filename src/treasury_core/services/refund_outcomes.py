"""How a pending refund ends: ``succeeded`` or ``failed``, told by ``treasury.refund.updated``.

A refund is reserved ``pending`` first (``refund.created``, its amount held out of settlement),
then the card provider answers, at once or later (Stripe may keep a refund pending and report
it by a webhook). Either way the change is written here, in the caller's transaction, with the
event that tells receivers of it, so a refund that fails later is as visible as one refused at
once:

- **succeeded**: the reservation is posted (the money goes back to the card);
- **failed**: the reservation is voided and the intent's refunded amounts are given back, so
  what the refund held is refundable again; nothing is written to a balance directly.

A refund that is no longer pending is left as it is (the other path settled it first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treasury_core.events import EventType
from treasury_core.ledger import PostPending, VoidPending
from treasury_core.payments.records import Refund, RefundStatus
from treasury_core.ports import UnitOfWork

if TYPE_CHECKING:
    from treasury_core.services.payments.core import PaymentCore


def refund_succeeded(payments: PaymentCore, uow: UnitOfWork, refund: Refund) -> Refund:
    """Post the pending ``refund``'s reservation and mark it ``succeeded``; the refund as
    stored (unchanged when it was no longer pending)."""
    current = uow.records.get(Refund, refund.id, refund.company_id, for_update=True)
    if current is not None and current.status is not RefundStatus.PENDING:
        return current
    payments._ledger(uow, refund, (PostPending(p) for p in refund.pending_ids))
    done = refund.model_copy(update={"status": RefundStatus.SUCCEEDED})
    uow.records.update(done)
    payments._ctx.event(uow, EventType.REFUND_UPDATED, done)
    return done


def refund_failed(
    payments: PaymentCore, uow: UnitOfWork, refund: Refund, reason: str | None
) -> Refund:
    """Void the pending ``refund``'s reservation, give its amounts back to the intent and mark
    it ``failed`` for ``reason``; the refund as stored (unchanged when no longer pending)."""
    # Intent first, then the record: the order every path that changes an intent uses.
    intent = uow.intents.get(refund.payment_intent_id, refund.company_id, for_update=True)
    current = uow.records.get(Refund, refund.id, refund.company_id, for_update=True)
    if intent is None or current is None or current.status is not RefundStatus.PENDING:
        return current or refund
    payments._ledger(uow, current, (VoidPending(p) for p in current.pending_ids))
    uow.intents.update(
        intent.model_copy(
            update={
                "amount_refunded": intent.amount_refunded - current.amount,
                "processing_refunded": intent.processing_refunded - current.processing_amount,
            }
        )
    )
    failed = current.model_copy(update={"status": RefundStatus.FAILED, "failure_reason": reason})
    uow.records.update(failed)
    payments._ctx.event(uow, EventType.REFUND_UPDATED, failed)
    return failed
