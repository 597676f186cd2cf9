"""Refunds of a captured intent: reserved in the ledger before the provider is asked, so
concurrent refunds never promise more than was captured (ledger invariant 10)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import cast

from treasury_core.errors import (
    CardError,
    NotFound,
    ProviderDidNotAct,
    ProviderError,
)
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.jobs import Job
from treasury_core.ledger import Journal
from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import (
    PaymentIntent,
)
from treasury_core.payments.ledger import refund_legs
from treasury_core.payments.records import (
    Refund,
    RefundStatus,
)
from treasury_core.payments.requests import RefundRequest
from treasury_core.payments.states import (
    check_refundable,
)
from treasury_core.ports import CardProvider, UnitOfWork
from treasury_core.ports.card_provider import (
    CardProviderLookups,
    CardProviderStatus,
    answers_lookups,
    takes_keyed_calls,
)
from treasury_core.services.adapters import Adapters
from treasury_core.services.idempotency import bind, finish
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.refund_outcomes import (
    refund_failed,
    refund_in_progress,
    refund_succeeded,
)
from treasury_core.services.payments.vocabulary import (
    RESOLVE_REFUND,
    call_owner,
    log,
    processing_share,
    refund_key,
    unsupported,
)
from treasury_core.services.record_reads import read_record


class Refunds:
    """Refunds (for :class:`~treasury_core.services.payments.PaymentService`), and the
    reservation and settling steps the provider's events share with them."""

    def __init__(self, *, context: Adapters, steps: IntentSteps, provider: CardProvider) -> None:
        self._ctx = context
        self._steps = steps
        self.provider = provider

    # --- refunds ------------------------------------------------------------------------------

    async def refund(
        self,
        company_id: int,
        intent_id: int,
        *,
        amount: int | None = None,
        reason: str | None = None,
        idempotency: IdempotencyTicket[Refund] | None = None,
    ) -> Refund:
        """Refund ``amount`` (default: all that remains) of a ``PROCESSED`` intent.

        The amount is reserved first (``refund.created``), then the provider refunds; a refusal
        marks the refund ``failed``, gives its amount back, and raises the :class:`CardError`.
        A card provider without refunds, or without partial refunds for less than the captured
        amount, is not asked: :class:`InvalidRequestError` (``provider_capability_unsupported``)
        and nothing reserved.

        A provider call whose answer was lost (:class:`ProviderError`) leaves the refund
        ``pending``, its key bound to it and a job to ask the provider what happened; the 502
        names the refund. The retry with the same ``Idempotency-Key`` resumes that refund (see
        :meth:`_resume_refund`) rather than making another. A provider that certainly did
        nothing (:class:`ProviderDidNotAct`) fails the refund at once, its amount given back.
        """
        # The values a refund body would carry, checked as the HTTP app checks that body.
        RefundRequest(payment_intent_id=intent_id, amount=amount, reason=reason)
        ctx = self._ctx
        async with self._steps.lock(intent_id):
            if idempotency is not None and idempotency.resource is not None:
                resumed = await self._resume_refund(company_id, intent_id, idempotency)
                if resumed is not None:
                    return resumed
            now = ctx.clock.now()
            refund_id = ctx.ids.new_id(Refund.prefix)
            journal_id = ctx.ids.new_id("jr")

            def reserve(uow: UnitOfWork) -> tuple[PaymentIntent, Refund]:
                intent = uow.intents.get(intent_id, company_id, for_update=True)
                if intent is None:
                    raise NotFound(
                        f"No such payment intent: {intent_id}", param="payment_intent_id"
                    )
                # The intent's own state first: a refund the interface refuses anyway says why
                # in its terms, whatever the provider could do.
                value = check_refundable(intent, amount)
                if not self.provider.refunds_supported():
                    raise unsupported("The card provider does not support refunds")
                if value < intent.billing_amount and not self.provider.partial_refunds_supported():
                    raise unsupported(
                        "The card provider refunds only the whole captured amount "
                        f"({intent.billing_amount}), in one refund",
                        "amount",
                    )
                refund = self.reserve_refund(
                    uow, intent, value, reason, refund_id=refund_id, journal_id=journal_id, now=now
                )
                bind(uow, idempotency, refund.id)
                return intent, refund

            intent, refund = await ctx.storage.run(reserve)
            return await self._ask_refund(intent, refund, idempotency)

    async def _ask_refund(
        self,
        intent: PaymentIntent,
        refund: Refund,
        idempotency: IdempotencyTicket[Refund] | None,
    ) -> Refund:
        """Ask the provider for the reserved ``refund`` and record its answer."""
        ctx = self._ctx
        assert intent.provider_reference is not None  # a PROCESSED intent has a charge
        try:
            if takes_keyed_calls(self.provider):
                result = await self.provider.refund(  # type: ignore[call-arg]  # keyed calls
                    intent.provider_reference,
                    refund.amount,
                    key=refund_key(intent, refund.id),
                    owner=call_owner(intent, refund.id),
                )
            else:
                result = await self.provider.refund(intent.provider_reference, refund.amount)
        except CardError as exc:
            await ctx.storage.run(self._refund_failed(refund, exc))
            raise
        except ProviderDidNotAct as exc:
            # Nothing happened at the provider: the refund fails now and gives its amount back,
            # and the key is unbound, so the retry is a refund of its own.
            def did_not_act(uow: UnitOfWork) -> None:
                refund_failed(self._steps, uow, refund, "provider_did_not_act")
                bind(uow, idempotency, None)

            await ctx.storage.run(did_not_act)
            raise exc.leaving("refund", refund.id, RefundStatus.FAILED.value) from None
        except ProviderError as exc:
            # The provider may have paid it: the refund stays pending with its reservation,
            # counted as refunded, until the provider is asked (the job) or tells (an event).
            await ctx.storage.run(lambda uow: self._schedule_resolution(uow, refund))
            raise exc.leaving("refund", refund.id, RefundStatus.PENDING.value) from None
        if result.status is CardProviderStatus.REFUND_PENDING:
            # The provider's event about this reference settles it, either way.
            return await ctx.storage.run(
                lambda uow: finish(
                    uow, idempotency, refund_in_progress(uow, refund, result.reference)
                )
            )
        return await ctx.storage.run(self.refund_succeeded(refund, idempotency, result.reference))

    def _schedule_resolution(self, uow: UnitOfWork, refund: Refund) -> None:
        """A job to ask the provider what became of ``refund`` (see :data:`RESOLVE_REFUND`);
        due at once, as the answer was lost just now."""
        if not answers_lookups(self.provider):
            # Nothing can be asked: the provider's events (or the reconciliation) settle it.
            log.warning("refund %s is in doubt and the card provider cannot be asked", refund.id)
            return
        uow.jobs.schedule(
            Job(
                id=self._ctx.ids.new_id("job"),
                kind=RESOLVE_REFUND,
                resource_id=refund.id,
                company_id=refund.company_id,
                due_at=self._ctx.clock.now(),
            )
        )

    async def _resume_refund(
        self, company_id: int, intent_id: int, idempotency: IdempotencyTicket[Refund]
    ) -> Refund | None:
        """The retry of a refund request whose answer was lost: the refund it started, as it
        stands, asked again when still in doubt. ``None`` when the key names no refund of this
        intent that is still to be answered (the request then starts afresh)."""
        ctx = self._ctx
        resource = idempotency.resource
        found = None
        if resource is not None and resource.startswith(Refund.prefix + "_"):
            found = await ctx.storage.run(
                lambda uow: uow.records.get(Refund, resource, company_id), write=False
            )
        if found is None or found.payment_intent_id != intent_id:
            return None
        refund = found
        if refund.status is RefundStatus.FAILED:
            return None
        if refund.status is RefundStatus.SUCCEEDED or refund.provider_reference is not None:
            # Settled, or taken by the provider and waiting for its event: answer it as it is.
            return await ctx.storage.run(lambda uow: finish(uow, idempotency, refund))
        if not takes_keyed_calls(self.provider):
            # Asking again without a key could refund twice: the pending refund is the answer,
            # settled later by the provider's events or the resolution job.
            return await ctx.storage.run(lambda uow: finish(uow, idempotency, refund))
        intent = await self._steps.get(company_id, intent_id)
        if answers_lookups(self.provider):
            return await self._ask_about_refund(intent, refund, idempotency)
        # The same key as the first call: a provider that keeps keys answers with that refund.
        # (Only where nothing else asks: no resolution job runs for a provider without lookups.)
        return await self._ask_refund(intent, refund, idempotency)

    async def _ask_about_refund(
        self,
        intent: PaymentIntent,
        refund: Refund,
        idempotency: IdempotencyTicket[Refund],
    ) -> Refund:
        """The retry of a refund in doubt, with a provider that can be asked: ask what the
        first call did and settle by the answer, never call it again.

        Calling again, even under the same key, could cross the resolution job in another
        process, which may have just found no refund and failed it: the provider would then
        pay a refund recorded failed, and its amount could be refunded a second time. So only
        the first call ever asks the provider to act; after it, the retry and the job only ask.
        No refund found yet is a 502 naming the refund still pending (the job decides, after
        asking over a while, that none was made; a retry then starts a new refund).
        """
        ctx = self._ctx
        assert intent.provider_reference is not None  # a refunded intent has a charge
        lookups = cast(CardProviderLookups, self.provider)  # answers_lookups vouched
        pending = RefundStatus.PENDING.value
        try:
            found = await lookups.find_refund(
                intent.provider_reference, refund_key(intent, refund.id)
            )
        except ProviderError as exc:
            raise exc.leaving("refund", refund.id, pending) from None
        if found is None:
            raise ProviderError(
                "The card provider has not said yet whether it made this refund; retry later"
            ).leaving("refund", refund.id, pending)
        if found.status is CardProviderStatus.REFUNDED:
            return await ctx.storage.run(
                self.refund_succeeded(refund, idempotency, found.reference)
            )
        if found.status is CardProviderStatus.REFUND_PENDING:
            return await ctx.storage.run(
                lambda uow: finish(
                    uow, idempotency, refund_in_progress(uow, refund, found.reference)
                )
            )
        refused = CardError("The card provider refused the refund", failure_reason="refund_failed")
        await ctx.storage.run(self._refund_failed(refund, refused))
        raise refused

    def reserve_refund(
        self,
        uow: UnitOfWork,
        intent: PaymentIntent,
        value: int,
        reason: str | None,
        *,
        refund_id: str,
        journal_id: str,
        now: datetime,
    ) -> Refund:
        """Reserve a ``pending`` refund of ``value`` out of the locked ``PROCESSED`` intent's
        settlement (``refund.created``), in the caller's transaction; checked by the caller."""
        ctx = self._ctx
        company_id = intent.company_id
        # Differenced against what earlier refunds actually took, so the shares add up to the
        # processing amount even after a refund failed in between.
        share = max(
            0,
            processing_share(intent, intent.amount_refunded + value) - intent.processing_refunded,
        )
        journal = Journal(
            journal_id,
            refund_legs(
                company_id, intent.processing_currency, share, intent.billing_currency, value
            ),
            operation="refund",
            company_id=company_id,
        )
        uow.ledger.apply(journal, now)
        refund = Refund(
            id=refund_id,
            company_id=company_id,
            payment_intent_id=intent.id,
            amount=value,
            currency=intent.billing_currency,
            reason=reason,
            status=RefundStatus.PENDING,
            failure_reason=None,
            created_at=now,
            processing_amount=share,
            pending_ids=tuple(journal.leg_id(i) for i in range(len(journal.legs))),
        )
        uow.records.add(refund)
        uow.intents.update(
            intent.model_copy(
                update={
                    "amount_refunded": intent.amount_refunded + value,
                    "processing_refunded": intent.processing_refunded + share,
                    "refund_ids": (*intent.refund_ids, refund_id),
                }
            )
        )
        ctx.events.write(uow, EventType.REFUND_CREATED, refund)
        return refund

    def refund_succeeded(
        self,
        refund: Refund,
        idempotency: IdempotencyTicket[Refund] | None,
        provider_reference: str | None = None,
    ) -> Callable[[UnitOfWork], Refund]:
        """The write settling ``refund`` as made by the provider (answering ``idempotency``),
        for the caller's transaction."""

        # The provider's refund event may have settled it meanwhile (another process).
        def write(uow: UnitOfWork) -> Refund:
            settled = refund_succeeded(self._steps, uow, refund, provider_reference)
            if settled.status is RefundStatus.FAILED:
                # Failed meanwhile (the resolution job, in another process, found no refund
                # before this call made it): the provider paid what we record as failed. The
                # card reconciliation reports the difference in refunded amounts.
                log.error(
                    "refund %s of payment intent %s was made by the card provider (%s) after "
                    "it was recorded failed; the card reconciliation will report it",
                    refund.id,
                    refund.payment_intent_id,
                    provider_reference,
                )
            return finish(uow, idempotency, settled)

        return write

    def _refund_failed(self, refund: Refund, error: CardError) -> Callable[[UnitOfWork], None]:
        def write(uow: UnitOfWork) -> None:
            refund_failed(self._steps, uow, refund, error.failure_reason or error.code)

        return write

    async def get_refund(self, company_id: int, refund_id: str) -> Refund:
        """The company's refund, or :class:`NotFound`."""
        return await read_record(
            self._ctx.storage, Refund, company_id, refund_id, "refund", "refund_id"
        )

    async def refunds(self, company_id: int, intent_id: int) -> list[Refund]:
        """Every refund of the company's intent, newest first."""
        intent = await self._steps.get(company_id, intent_id)

        def read(uow: UnitOfWork) -> list[Refund]:
            found = (uow.records.get(Refund, r, company_id) for r in reversed(intent.refund_ids))
            return [refund for refund in found if refund is not None]

        return await self._ctx.storage.run(read, write=False)
