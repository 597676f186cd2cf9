"""What a merchant does to a payment intent besides moving money: close its payment link, and
change its metadata (decisions.md, "Stopping a payment link" and "Metadata").

Kept apart from :mod:`treasury_core.services.payments`, which moves intents between states:
neither operation here changes an intent's state, calls the card provider or touches the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from treasury_core.errors import NotFound
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.jobs import Job
from treasury_core.metadata import merged_metadata
from treasury_core.notifications.events import EventType
from treasury_core.payments.expiry import OPEN_STATES, is_expired
from treasury_core.payments.intents import PaymentIntent
from treasury_core.payments.requests import IntentActionRequest
from treasury_core.payments.states import IllegalTransition
from treasury_core.ports import UnitOfWork
from treasury_core.services.adapters import Adapters
from treasury_core.services.idempotency import finish
from treasury_core.services.payments.intent_steps import IntentSteps

#: The job that fires ``payment_intent.expired`` when a link reaches its ``expires_at``.
LINK_EXPIRY: Final = "link_expiry"


def link_job_key(intent_id: int) -> str:
    """The ``resource_id`` of an intent's link-expiry job: apart from the intent's other jobs
    (``pi:…``), which capture and cancel finish, while a voided intent's link stays open."""
    return f"link:{intent_id}"


def schedule_link_expiry(uow: UnitOfWork, ctx: Adapters, intent: PaymentIntent) -> None:
    """In the create's transaction: the job announcing the link's expiry, if it has one."""
    if intent.expires_at is None:
        return
    uow.jobs.schedule(
        Job(
            id=ctx.ids.new_id("job"),
            kind=LINK_EXPIRY,
            resource_id=link_job_key(intent.id),
            company_id=intent.company_id,
            due_at=intent.expires_at,
        )
    )


def _not_found(intent_id: int) -> NotFound:
    return NotFound(f"No such payment intent: {intent_id}", param="payment_intent_id")


class PaymentLinkService:
    """Closing payment links and intents' metadata, under the payments service's intent locks
    (``steps``); ``context`` gives storage, ids and the clock."""

    def __init__(self, *, context: Adapters, steps: IntentSteps) -> None:
        self._ctx = context
        self._steps = steps

    def _event(self, uow: UnitOfWork, intent: PaymentIntent) -> None:
        uow.outbox.add(self._ctx.events.event(EventType.PAYMENT_INTENT_EXPIRED, intent))

    async def expire(
        self,
        company_id: int,
        intent_id: int,
        *,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentIntent:
        """Close the intent's payment link now: ``expires_at`` becomes the business time and
        ``payment_intent.expired`` fires. A link already closed is returned as it is; an intent
        that is authorized or processed raises :class:`IllegalTransition`."""
        IntentActionRequest(payment_intent_id=intent_id)
        ctx = self._ctx
        async with self._steps.lock(intent_id):

            def write(uow: UnitOfWork) -> PaymentIntent:
                now = ctx.clock.now()
                intent = uow.intents.get(intent_id, company_id, for_update=True)
                if intent is None:
                    raise _not_found(intent_id)
                if intent.status not in OPEN_STATES:
                    raise IllegalTransition(
                        f"Payment intent {intent_id} is {intent.status.value}; only an unpaid "
                        "intent's link can be closed",
                        code="payment_intent_unexpected_state",
                    )
                if is_expired(intent, now):
                    return finish(uow, idempotency, intent)
                stored = intent.model_copy(update={"expires_at": now})
                uow.intents.update(stored)
                uow.jobs.finish_for(link_job_key(intent_id))
                self._event(uow, stored)
                return finish(uow, idempotency, stored)

            return await ctx.storage.run(write)

    async def update_metadata(
        self,
        company_id: int,
        intent_id: int,
        metadata: Mapping[str, str],
        *,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentIntent:
        """Merge ``metadata`` into the intent's (``""`` deletes a key); no event fires."""
        ctx = self._ctx
        async with self._steps.lock(intent_id):

            def write(uow: UnitOfWork) -> PaymentIntent:
                intent = uow.intents.get(intent_id, company_id, for_update=True)
                if intent is None:
                    raise _not_found(intent_id)
                merged = merged_metadata(intent.metadata, metadata)
                if merged == intent.metadata:
                    return finish(uow, idempotency, intent)
                stored = intent.model_copy(update={"metadata": merged})
                uow.intents.update(stored)
                return finish(uow, idempotency, stored)

            return await ctx.storage.run(write)

    def link_expiry(self, uow: UnitOfWork, job: Job) -> bool:
        """The job at an intent's ``expires_at``: ``payment_intent.expired`` fires if the link is
        still the one scheduled (not closed earlier, not paid)."""
        key = job.resource_id
        intent = None
        if key.startswith("link:") and key[5:].isdigit():
            intent = uow.intents.get(int(key[5:]), job.company_id, for_update=True)
        if uow.jobs.claim(job.id) is None:
            return False
        if (
            intent is not None
            and intent.status in OPEN_STATES
            and intent.expires_at == job.due_at
            and is_expired(intent, self._ctx.clock.now())
        ):
            self._event(uow, intent)
        uow.jobs.finish(job.id)
        return True
