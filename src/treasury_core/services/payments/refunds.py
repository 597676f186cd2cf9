"""Refunds of a captured intent: reserved in the ledger before the provider is asked, so
concurrent refunds never promise more than was captured (ledger invariant 10)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from treasury_core.errors import (
    CardError,
    NotFound,
)
from treasury_core.events import EventType
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.ledger import Journal
from treasury_core.payments.intents import (
    PaymentIntent,
)
from treasury_core.payments.ledger import refund_legs
from treasury_core.payments.records import (
    Refund,
    RefundStatus,
)
from treasury_core.payments.states import (
    check_refundable,
)
from treasury_core.ports import UnitOfWork
from treasury_core.ports.card_provider import CardProviderStatus
from treasury_core.services.idempotency import finish
from treasury_core.services.payments.common import (
    processing_share,
    unsupported,
)
from treasury_core.services.payments.core import PaymentCore
from treasury_core.services.refund_outcomes import (
    refund_failed,
    refund_in_progress,
    refund_succeeded,
)


class Refunds(PaymentCore):
    """Refunds (part of :class:`~treasury_core.services.payments.PaymentService`)."""

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
        """
        ctx = self._ctx
        async with self._lock(intent_id):
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
                return intent, refund

            intent, refund = await ctx.storage.run(reserve)
            assert intent.provider_reference is not None  # a PROCESSED intent has a charge
            try:
                result = await self.provider.refund(intent.provider_reference, refund.amount)
            except CardError as exc:
                await ctx.storage.run(self._refund_failed(refund, exc))
                raise
            # Any other failure (a timeout: ProviderError) may have moved the money: the refund
            # stays pending with its reservation, counted as refunded, until reconciled.
            if result.status is CardProviderStatus.REFUND_PENDING:
                # The provider's event about this reference settles it, either way.
                return await ctx.storage.run(
                    lambda uow: finish(
                        uow, idempotency, refund_in_progress(uow, refund, result.reference)
                    )
                )
            return await ctx.storage.run(
                self._refund_succeeded(refund, idempotency, result.reference)
            )

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
        ctx.event(uow, EventType.REFUND_CREATED, refund)
        return refund

    def _refund_succeeded(
        self,
        refund: Refund,
        idempotency: IdempotencyTicket[Refund] | None,
        provider_reference: str | None = None,
    ) -> Callable[[UnitOfWork], Refund]:
        # The provider's refund event may have settled it meanwhile (another process).
        return lambda uow: finish(
            uow, idempotency, refund_succeeded(self, uow, refund, provider_reference)
        )

    def _refund_failed(self, refund: Refund, error: CardError) -> Callable[[UnitOfWork], None]:
        def write(uow: UnitOfWork) -> None:
            refund_failed(self, uow, refund, error.failure_reason or error.code)

        return write

    async def get_refund(self, company_id: int, refund_id: str) -> Refund:
        """The company's refund, or :class:`NotFound`."""
        return await self._ctx.read_record(Refund, company_id, refund_id, "refund", "refund_id")

    async def refunds(self, company_id: int, intent_id: int) -> list[Refund]:
        """Every refund of the company's intent, newest first."""
        intent = await self.get(company_id, intent_id)

        def read(uow: UnitOfWork) -> list[Refund]:
            found = (uow.records.get(Refund, r, company_id) for r in reversed(intent.refund_ids))
            return [refund for refund in found if refund is not None]

        return await self._ctx.storage.run(read, write=False)
