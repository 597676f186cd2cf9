"""How a refund ends: ``succeeded`` or ``failed``, told by ``treasury.refund.updated``.

A refund is reserved ``pending`` first (``refund.created``, its amount held out of settlement),
then the card provider answers, at once or later (Stripe may keep a refund pending and report
it by a webhook, with the refund's reference this keeps on the record). Either way the change
is written here, in the caller's transaction, with the event that tells receivers of it, so a
refund that fails later is as visible as one refused at once:

- **succeeded**: the reservation is posted (the money goes back to the card);
- **failed** while pending: the reservation is voided and the intent's refunded amounts are
  given back, so what the refund held is refundable again; nothing is written to a balance
  directly;
- **failed after it succeeded** (a card issuer that could not take the money back, which
  Stripe reports days later): the money comes back from the card network into settlement by
  a journal of its own, the posted one stays as it was, and the amounts are given back as
  above.

A refund already in the state an answer would put it in is left as it is (the other path
settled it first, or the answer came twice).
"""

from __future__ import annotations

from treasury_core.ledger import PostPending, VoidPending
from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import PaymentIntent
from treasury_core.payments.ledger import card_payment_legs
from treasury_core.payments.records import Refund, RefundStatus
from treasury_core.ports import UnitOfWork
from treasury_core.services.payments.intent_steps import IntentSteps


def refund_succeeded(
    steps: IntentSteps,
    uow: UnitOfWork,
    refund: Refund,
    provider_reference: str | None = None,
) -> Refund:
    """Post the pending ``refund``'s reservation and mark it ``succeeded`` (keeping the
    provider's ``provider_reference`` of it when given); the refund as stored (unchanged when
    it was no longer pending)."""
    current = uow.records.get(Refund, refund.id, refund.company_id, for_update=True) or refund
    if current.status is not RefundStatus.PENDING:
        return current
    steps.ledger(uow, current, (PostPending(p) for p in current.pending_ids))
    update: dict[str, object] = {"status": RefundStatus.SUCCEEDED}
    if provider_reference is not None:
        update["provider_reference"] = provider_reference
    done = current.model_copy(update=update)
    uow.records.update(done)
    steps.event(uow, EventType.REFUND_UPDATED, done)
    return done


def refund_in_progress(uow: UnitOfWork, refund: Refund, provider_reference: str) -> Refund:
    """The provider took the pending ``refund`` and finishes it later: it stays ``pending``
    (no event: nothing a receiver sees changed), now with the provider's reference by which
    the provider's event about it finds it. The refund as stored."""
    current = uow.records.get(Refund, refund.id, refund.company_id, for_update=True) or refund
    if current.status is not RefundStatus.PENDING:
        return current  # its event came first and settled it
    kept = current.model_copy(update={"provider_reference": provider_reference})
    uow.records.update(kept)
    return kept


def refund_failed(
    steps: IntentSteps, uow: UnitOfWork, refund: Refund, reason: str | None
) -> Refund:
    """Void the pending ``refund``'s reservation, give its amounts back to the intent and mark
    it ``failed`` for ``reason``; the refund as stored (unchanged when no longer pending)."""
    # Intent first, then the record: the order every path that changes an intent uses.
    intent = uow.intents.get(refund.payment_intent_id, refund.company_id, for_update=True)
    current = uow.records.get(Refund, refund.id, refund.company_id, for_update=True)
    if intent is None or current is None or current.status is not RefundStatus.PENDING:
        return current or refund
    steps.ledger(uow, current, (VoidPending(p) for p in current.pending_ids))
    return _failed(steps, uow, intent, current, reason)


def refund_reversed(
    steps: IntentSteps, uow: UnitOfWork, refund: Refund, reason: str | None
) -> Refund:
    """The ``succeeded`` ``refund`` failed at the provider after all: its money comes back
    from the card network into settlement, its amounts are given back to the intent, and it is
    marked ``failed`` for ``reason``. The refund as stored (unchanged unless it had
    succeeded)."""
    intent = uow.intents.get(refund.payment_intent_id, refund.company_id, for_update=True)
    current = uow.records.get(Refund, refund.id, refund.company_id, for_update=True)
    if intent is None or current is None or current.status is not RefundStatus.SUCCEEDED:
        return current or refund
    # The refund's own amounts back the way card money arrives: the posted refund journal
    # stays as history, this one undoes its effect on settlement.
    legs = card_payment_legs(
        current.company_id,
        current.currency,
        current.amount,
        intent.processing_currency,
        current.processing_amount,
        hold_until=None,
    )
    steps.ledger(uow, current, legs, operation="refund_reversal")
    return _failed(steps, uow, intent, current, reason)


def _failed(
    steps: IntentSteps,
    uow: UnitOfWork,
    intent: PaymentIntent,
    refund: Refund,
    reason: str | None,
) -> Refund:
    """Give ``refund``'s amounts back to the locked ``intent`` and mark it ``failed``."""
    uow.intents.update(
        intent.model_copy(
            update={
                "amount_refunded": intent.amount_refunded - refund.amount,
                "processing_refunded": intent.processing_refunded - refund.processing_amount,
            }
        )
    )
    failed = refund.model_copy(update={"status": RefundStatus.FAILED, "failure_reason": reason})
    uow.records.update(failed)
    steps.event(uow, EventType.REFUND_UPDATED, failed)
    return failed
