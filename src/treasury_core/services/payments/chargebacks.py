"""The ledger side of a chargeback, shared by the sandbox's jobs and the provider's events.

A chargeback opens by holding the disputed amount out of the settlement balance
(``chargeback.created``); it is then won (the hold released: ``chargeback.completed`` and
``chargeback.reversed``, and the money is paid out again) or lost (the hold posted to the card
network: ``chargeback.failed``). Both functions run inside the caller's transaction, with the
intent already locked (intent first, then the record: the order every path uses).
"""

from __future__ import annotations

from datetime import datetime

from treasury_core.ledger import Journal, Leg, PostPending, VoidPending
from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import PaymentIntent
from treasury_core.payments.ledger import chargeback_legs
from treasury_core.payments.records import Chargeback, ChargebackStatus
from treasury_core.ports import UnitOfWork
from treasury_core.ports.card_provider import ChargebackOutcome
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.vocabulary import PAYOUT, intent_job_key, processing_share


def apply_legs(
    steps: IntentSteps,
    uow: UnitOfWork,
    company_id: int,
    legs: tuple[Leg, ...],
    op: str,
    source_id: str | None = None,
) -> str:
    """Write ``legs`` as one journal of operation ``op`` (for ``source_id``, shown on wallet
    transactions) in the caller's transaction; its id."""
    ctx = steps.context
    journal = Journal(
        ctx.ids.new_id("jr"), legs, operation=op, company_id=company_id, source_id=source_id
    )
    uow.ledger.apply(journal, ctx.clock.now())
    return journal.id


def open_chargeback(
    steps: IntentSteps,
    uow: UnitOfWork,
    intent: PaymentIntent,
    amount: int,
    *,
    outcome: ChargebackOutcome = "lost",
    provider_reference: str | None = None,
    evidence_due_by: datetime | None = None,
) -> tuple[PaymentIntent, Chargeback]:
    """Hold ``amount`` (billing minor units, at most ``intent.amount_refundable``) of the
    ``PROCESSED`` intent out of settlement; the intent as updated and the open chargeback.

    The processing share is what remains of the processing amount when the whole remainder is
    disputed (so nothing is left over by rounding), else its share by the one rounding rule,
    differenced against what refunds and earlier chargebacks took.
    """
    ctx = steps.context
    taken = intent.processing_refunded + intent.processing_disputed
    if amount >= intent.amount_refundable:
        share = intent.processing_amount - taken
    else:
        share = processing_share(intent, intent.amount_refunded + intent.amount_disputed + amount)
        share = max(0, share - taken)
    legs = chargeback_legs(
        intent.company_id, intent.processing_currency, share, intent.billing_currency, amount
    )
    journal_id = apply_legs(steps, uow, intent.company_id, legs, "chargeback")
    chargeback = Chargeback(
        id=ctx.ids.new_id(Chargeback.prefix),
        company_id=intent.company_id,
        payment_intent_id=intent.id,
        amount=amount,
        currency=intent.billing_currency,
        status=ChargebackStatus.OPEN,
        created_at=ctx.clock.now(),
        processing_amount=share,
        pending_ids=tuple(f"{journal_id}.{i}" for i in range(len(legs))),
        outcome=outcome,
        provider_reference=provider_reference,
        evidence_due_by=evidence_due_by,
    )
    uow.records.add(chargeback)
    updated = intent.model_copy(
        update={
            "amount_disputed": intent.amount_disputed + amount,
            "processing_disputed": intent.processing_disputed + share,
        }
    )
    uow.intents.update(updated)
    ctx.events.write(uow, EventType.CHARGEBACK_CREATED, chargeback)
    return updated, chargeback


def resolve_chargeback(
    steps: IntentSteps,
    uow: UnitOfWork,
    intent: PaymentIntent,
    chargeback: Chargeback,
    outcome: ChargebackOutcome,
    payout_due: datetime,
) -> Chargeback:
    """Decide the open ``chargeback`` of ``intent``: ``won`` releases the hold (and schedules a
    payout at ``payout_due``, the released money being the company's again), ``lost`` posts it
    to the card network. The chargeback as stored."""
    ctx = steps.context
    if outcome == "won":
        legs: tuple[Leg, ...] = tuple(VoidPending(p) for p in chargeback.pending_ids)
        apply_legs(steps, uow, chargeback.company_id, legs, "chargeback_won")
        uow.intents.update(
            intent.model_copy(
                update={
                    "amount_disputed": intent.amount_disputed - chargeback.amount,
                    "processing_disputed": intent.processing_disputed
                    - chargeback.processing_amount,
                }
            )
        )
        done = chargeback.model_copy(update={"status": ChargebackStatus.WON})
        uow.records.update(done)
        ctx.events.write(uow, EventType.CHARGEBACK_COMPLETED, done)
        ctx.events.write(uow, EventType.CHARGEBACK_REVERSED, done)
        steps.schedule(uow, PAYOUT, intent_job_key(intent.id), intent, payout_due)
        return done
    legs = tuple(PostPending(p) for p in chargeback.pending_ids)
    apply_legs(steps, uow, chargeback.company_id, legs, "chargeback_lost")
    done = chargeback.model_copy(update={"status": ChargebackStatus.LOST})
    uow.records.update(done)
    ctx.events.write(uow, EventType.CHARGEBACK_FAILED, done)
    return done
