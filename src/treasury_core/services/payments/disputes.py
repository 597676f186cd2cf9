"""Acting on a chargeback (sandbox): read it, submit evidence, or accept it.

A simulated chargeback (the sandbox's test cards) opens with an evidence window: its
``evidence_due_by`` is when the ``chargeback_resolve`` job decides it (the ``chargeback_resolve``
delay after it opened, business time). Until then the merchant may submit evidence, as often
as it likes (the fields merge); the job still decides by the test card, as before, once the
window has closed. Accepting ends the dispute at once: the chargeback is ``lost``
(``chargeback.failed``, the hold posted to the card network) and the job later finds nothing
to do. A provider's dispute (Stripe's) is contested at the provider: both are refused.

Each change is one transaction that locks the intent, then the chargeback (the order every
path that changes an intent uses).
"""

from __future__ import annotations

from collections.abc import Callable

from treasury_core.errors import InvalidRequestError, NotFound
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.payments.disputes import ChargebackEvidence
from treasury_core.payments.intents import PaymentIntent
from treasury_core.payments.records import Chargeback, ChargebackStatus
from treasury_core.ports import UnitOfWork
from treasury_core.services.adapters import Adapters
from treasury_core.services.idempotency import finish
from treasury_core.services.payments.chargebacks import resolve_chargeback
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.vocabulary import CAPABILITY_UNSUPPORTED
from treasury_core.services.record_reads import read_record, require_id

_PARAM = "chargeback_id"


class DisputeService:
    """Reads a company's chargebacks and takes the merchant's answer to them (``context``:
    storage, reads and the clock; ``steps``: the payments service's ledger and job steps)."""

    def __init__(self, *, context: Adapters, steps: IntentSteps) -> None:
        self._ctx = context
        self._steps = steps

    async def get(self, company_id: int, chargeback_id: str) -> Chargeback:
        """The company's chargeback, or :class:`NotFound`."""
        return await read_record(
            self._ctx.storage, Chargeback, company_id, chargeback_id, "chargeback", _PARAM
        )

    async def submit_evidence(
        self,
        company_id: int,
        chargeback_id: str,
        evidence: ChargebackEvidence,
        *,
        idempotency: IdempotencyTicket[Chargeback] | None = None,
    ) -> Chargeback:
        """Merge ``evidence`` into the open chargeback's, before ``evidence_due_by``; the
        chargeback as stored. No event: nothing moved."""
        now = self._ctx.clock.now()

        def change(uow: UnitOfWork, _: PaymentIntent, chargeback: Chargeback) -> Chargeback:
            due = chargeback.evidence_due_by
            if due is not None and now >= due:
                raise InvalidRequestError(
                    f"The evidence window of chargeback {chargeback.id} closed at "
                    f"{due.isoformat()}",
                    code="chargeback_evidence_window_closed",
                )
            updated = chargeback.model_copy(
                update={
                    "evidence": evidence.merged_into(chargeback.evidence),
                    "evidence_submitted_at": now,
                }
            )
            uow.records.update(updated)
            return updated

        return await self._ctx.storage.run(
            self._on_open(company_id, chargeback_id, change, idempotency)
        )

    async def accept(
        self,
        company_id: int,
        chargeback_id: str,
        *,
        idempotency: IdempotencyTicket[Chargeback] | None = None,
    ) -> Chargeback:
        """Give the open chargeback up: ``lost`` now (``chargeback.failed``)."""
        now = self._ctx.clock.now()

        def change(uow: UnitOfWork, intent: PaymentIntent, chargeback: Chargeback) -> Chargeback:
            accepted = chargeback.model_copy(update={"accepted": True})
            return resolve_chargeback(self._steps, uow, intent, accepted, "lost", now)

        return await self._ctx.storage.run(
            self._on_open(company_id, chargeback_id, change, idempotency)
        )

    def _on_open(
        self,
        company_id: int,
        chargeback_id: str,
        change: Callable[[UnitOfWork, PaymentIntent, Chargeback], Chargeback],
        idempotency: IdempotencyTicket[Chargeback] | None,
    ) -> Callable[[UnitOfWork], Chargeback]:
        """A transaction applying ``change`` to the company's open, simulated chargeback."""
        require_id(chargeback_id, Chargeback.prefix, "chargeback", _PARAM)

        def write(uow: UnitOfWork) -> Chargeback:
            seen = uow.records.get(Chargeback, chargeback_id, company_id)
            if seen is None:
                raise NotFound(f"No such chargeback: {chargeback_id}", param=_PARAM)
            intent = uow.intents.get(seen.payment_intent_id, company_id, for_update=True)
            chargeback = uow.records.get(Chargeback, chargeback_id, company_id, for_update=True)
            # Neither is ever deleted.
            assert intent is not None
            assert chargeback is not None
            if chargeback.provider_reference is not None:
                raise InvalidRequestError(
                    "This chargeback is a dispute at the card provider; answer it there",
                    code=CAPABILITY_UNSUPPORTED,
                )
            if chargeback.status is not ChargebackStatus.OPEN:
                raise InvalidRequestError(
                    f"Chargeback {chargeback.id} is already {chargeback.status.value}",
                    code="chargeback_closed",
                )
            return finish(uow, idempotency, change(uow, intent, chargeback))

        return write
