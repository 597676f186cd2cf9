"""Recording a :class:`~treasury_core.payments.card_differences.CardDifference` once, and
resolving it, in the caller's transaction.

Used by the resolution jobs (a lost answer they could not resolve), the provider-event service
(an event that resolved one) and card reconciliation (what it found). One record per kind and
subject: finding it again updates its figures without a new event; finding it again after it
was resolved opens it again, announced as when it first opened.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from treasury_core.movements.bank_files import OPERATOR
from treasury_core.notifications.events import EventType
from treasury_core.payments.card_differences import (
    CardDifference,
    CardDifferenceKind,
    CardDifferenceStatus,
)
from treasury_core.ports import UnitOfWork
from treasury_core.services.adapters import Adapters

log = logging.getLogger("treasury.card_reconciliation")


@dataclass(frozen=True, slots=True)
class Found:
    """What was found about one subject: the figures a difference keeps."""

    kind: CardDifferenceKind
    subject: str
    detail: str
    merchant_company_id: int | None = None
    payment_intent_id: int | None = None
    refund_id: str | None = None
    provider_reference: str | None = None
    attempt_key: str | None = None
    currency: str | None = None
    provider_amount: int | None = None
    recorded_amount: int | None = None


def note_difference(
    ctx: Adapters, uow: UnitOfWork, found: Found, *, resolved: bool = False
) -> CardDifference:
    """Keep ``found`` as its kind's one record about its subject, in the caller's transaction:
    new (announced), opened again (announced), or updated with its figures (silently).
    ``resolved`` records a difference that was repaired as it was found (still announced)."""
    record_id = CardDifference.id_for(found.kind, found.subject)
    known = uow.records.get(CardDifference, record_id, OPERATOR, for_update=True)
    now = ctx.clock.now()
    status = CardDifferenceStatus.RESOLVED if resolved else CardDifferenceStatus.OPEN
    figures: dict[str, object] = {
        "merchant_company_id": found.merchant_company_id,
        "payment_intent_id": found.payment_intent_id,
        "refund_id": found.refund_id,
        "provider_reference": found.provider_reference,
        "attempt_key": found.attempt_key,
        "currency": found.currency,
        "provider_amount": found.provider_amount,
        "recorded_amount": found.recorded_amount,
        "detail": found.detail,
    }
    if known is None:
        difference = CardDifference(
            id=record_id,
            company_id=OPERATOR,
            kind=found.kind,
            status=status,
            created_at=now,
            resolved_at=now if resolved else None,
            **figures,
        )
        ctx.events.add_announced(uow, difference, EventType.CARD_RECONCILIATION_DIFFERENCE)
        _log(difference)
        return difference
    reopened = known.status is CardDifferenceStatus.RESOLVED and not resolved
    current = known.model_copy(
        update={
            **figures,
            "status": known.status if not reopened else CardDifferenceStatus.OPEN,
            "resolved_at": None if reopened else known.resolved_at,
        }
    )
    if current != known:
        uow.records.update(current)
    if reopened:
        ctx.events.write(uow, EventType.CARD_RECONCILIATION_DIFFERENCE, current)
        _log(current)
    return current


def resolve_difference(
    ctx: Adapters, uow: UnitOfWork, kind: CardDifferenceKind, subject: str, detail: str
) -> bool:
    """Mark the open difference of ``kind`` about ``subject`` resolved, saying how; whether
    there was one."""
    record_id = CardDifference.id_for(kind, subject)
    known = uow.records.get(CardDifference, record_id, OPERATOR, for_update=True)
    if known is None or known.status is CardDifferenceStatus.RESOLVED:
        return False
    uow.records.update(
        known.model_copy(
            update={
                "status": CardDifferenceStatus.RESOLVED,
                "resolved_at": ctx.clock.now(),
                "detail": f"{known.detail}; resolved: {detail}",
            }
        )
    )
    log.info("card difference %s (%s %s) resolved: %s", record_id, kind.value, subject, detail)
    return True


def _log(difference: CardDifference) -> None:
    # In doubt and disagreeing amounts need a person; what was repaired is news only.
    repaired = difference.status is CardDifferenceStatus.RESOLVED
    log.log(
        logging.WARNING if repaired else logging.ERROR,
        "card difference %s (%s): intent %s of company %s, provider reference %s: %s",
        difference.id,
        difference.kind.value,
        difference.payment_intent_id,
        difference.merchant_company_id,
        difference.provider_reference,
        difference.detail,
    )
