"""Capturing and voiding a held authorization, and releasing a hold the provider let go."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from treasury_core.errors import (
    CardError,
    ProviderError,
)
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.ledger import ExpirePending, Leg, PostPending, VoidPending
from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import (
    IntentStatus,
    PaymentIntent,
)
from treasury_core.payments.records import (
    Transaction,
    TransactionStatus,
    TransactionType,
)
from treasury_core.payments.requests import IntentActionRequest
from treasury_core.payments.states import (
    IllegalTransition,
    Trigger,
    check_capturable,
    transition,
)
from treasury_core.ports import CardProvider, UnitOfWork
from treasury_core.ports.card_provider import (
    HoldGone,
    takes_keyed_calls,
)
from treasury_core.services.adapters import Adapters
from treasury_core.services.idempotency import bind, finish
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.vocabulary import (
    capture_key,
    intent_job_key,
    void_key,
)


class CaptureAndVoid:
    """Capture and cancel (for :class:`~treasury_core.services.payments.PaymentService`), and
    the recording steps the provider's events share with them."""

    def __init__(self, *, context: Adapters, steps: IntentSteps, provider: CardProvider) -> None:
        self._ctx = context
        self._steps = steps
        self.provider = provider

    # --- capture and cancel -------------------------------------------------------------------

    async def capture(
        self,
        company_id: int,
        intent_id: int,
        *,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentIntent:
        """Capture the full authorized amount (``AUTHORIZED`` → ``PROCESSED``).

        Refused with the interface's messages (400) unless ``AUTHORIZED`` and before
        ``authorization_expires_at``, whether or not the expiry job has run. A provider refusal
        is a 402 :class:`CardError` leaving the intent ``AUTHORIZED``; a hold gone at the
        provider cancels the intent (reason ``expired``) and raises the 402 too. A card provider
        that no longer says it captures holds is not asked (400
        ``provider_capability_unsupported``).
        """
        IntentActionRequest(payment_intent_id=intent_id)
        ctx = self._ctx
        async with self._steps.lock(intent_id):
            intent = await self._steps.get(company_id, intent_id)
            resumed = _resumed(idempotency, "capture", intent_id)
            if resumed is not None and intent.status is IntentStatus.PROCESSED:
                # The retry of a capture whose answer was lost, recorded meanwhile (the
                # provider's event, or the first call after all): the intent as it is.
                return await ctx.storage.run(lambda uow: finish(uow, idempotency, intent))
            now = ctx.clock.now()
            check_capturable(intent, now)
            self._steps.check_manual_capture()
            assert intent.provider_reference is not None  # an AUTHORIZED intent has a charge
            txn = self._steps.transaction(
                intent, TransactionType.CAPTURE, TransactionStatus.COMPLETED
            )
            if resumed:
                txn = txn.model_copy(update={"id": resumed})
            elif idempotency is not None:
                # Bound before the call: the retry after a lost answer is this same capture,
                # with the same provider key.
                resource = f"capture:{intent_id}:{txn.id}"
                await ctx.storage.run(lambda uow: bind(uow, idempotency, resource))
            try:
                if takes_keyed_calls(self.provider):
                    result = await self.provider.capture(  # type: ignore[call-arg]  # keyed
                        intent.provider_reference,
                        intent.billing_amount,
                        key=capture_key(intent, txn.id),
                    )
                else:
                    result = await self.provider.capture(
                        intent.provider_reference, intent.billing_amount
                    )
            except ProviderError as exc:
                # Not recorded: the intent stays AUTHORIZED until the retry, the provider's
                # event or the reconciliation says what the provider did.
                raise exc.leaving("payment_intent", intent.id, intent.status.value) from None
            except HoldGone as gone:
                await self._capture_refused(intent, txn, gone, Trigger.CAPTURE_HOLD_GONE, now)
                raise
            except CardError as refused:
                await self._capture_refused(intent, txn, refused, Trigger.CAPTURE_DECLINED, now)
                raise

            def write(uow: UnitOfWork) -> PaymentIntent:
                current = self._steps.locked(uow, intent)
                stored = self.record_capture(uow, current, txn, result.reference, now)
                return finish(uow, idempotency, stored)

            try:
                return await ctx.storage.run(write)
            except IllegalTransition:
                recorded = await self._steps.recorded_elsewhere(
                    intent, result.reference, captured=True
                )
                if recorded is not None:
                    return recorded
                await self._steps.undo(result.reference, intent.billing_amount)
                raise

    def record_capture(
        self,
        uow: UnitOfWork,
        current: PaymentIntent,
        txn: Transaction,
        reference: str,
        now: datetime,
    ) -> PaymentIntent:
        """Record the capture of the locked ``AUTHORIZED`` intent's hold (``txn``, a completed
        capture attempt) in the caller's transaction: ``PROCESSED``, the ledger hold posted,
        the payout (and a known chargeback) scheduled. The intent as stored."""
        moved = transition(current, Trigger.CAPTURE_SUCCEEDED, now=now)
        self._steps.ledger(uow, current, (PostPending(p) for p in current.hold_pending_ids), now)
        stored = moved.intent.model_copy(
            update={"provider_reference": reference, "hold_pending_ids": (), "captured_at": now}
        )
        uow.intents.update(stored)
        self._steps.transaction_events(uow, txn, EventType.TRANSACTION_COMPLETED)
        self._steps.intent_events(uow, moved, stored)
        uow.jobs.finish_for(intent_job_key(current.id))
        self._steps.after_capture(uow, stored, now)
        return stored

    async def _capture_refused(
        self,
        intent: PaymentIntent,
        txn: Transaction,
        error: CardError,
        trigger: Trigger,
        now: datetime,
    ) -> None:
        failed = txn.failed(error.failure_reason, error.message)

        def write(uow: UnitOfWork) -> None:
            current = self._steps.locked(uow, intent)
            transition(current, trigger, now=now)  # still a legal move: raises otherwise
            self._steps.transaction_events(uow, failed, EventType.TRANSACTION_FAILED)
            if trigger is Trigger.CAPTURE_HOLD_GONE:
                self.release_gone_hold(uow, current, now)

        await self._ctx.storage.run(write)

    def release_gone_hold(self, uow: UnitOfWork, current: PaymentIntent, now: datetime) -> None:
        """The provider no longer holds the money of the ``AUTHORIZED`` intent: ``CANCELLED``
        with reason ``expired``, the ledger hold released, its jobs finished.

        In the caller's transaction, ``current`` locked. Past ``authorization_expires_at`` it
        is the expiry the job would have made (the hold's pending movements expire); before,
        the provider let go early (they are voided).
        """
        deadline = current.authorization_expires_at
        if deadline is not None and now >= deadline:
            moved = transition(current, Trigger.EXPIRE, now=now)
            legs: Iterable[Leg] = (ExpirePending(p) for p in current.hold_pending_ids)
        else:
            moved = transition(current, Trigger.CAPTURE_HOLD_GONE, now=now)
            legs = (VoidPending(p) for p in current.hold_pending_ids)
        self._steps.ledger(uow, current, legs, now)
        uow.jobs.finish_for(intent_job_key(current.id))
        stored = moved.intent.model_copy(update={"hold_pending_ids": ()})
        uow.intents.update(stored)
        self._steps.intent_events(uow, moved, stored)

    async def cancel(
        self,
        company_id: int,
        intent_id: int,
        *,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentIntent:
        """Void the hold: ``AUTHORIZED`` → ``CANCELLED`` with reason ``voided``."""
        IntentActionRequest(payment_intent_id=intent_id)
        ctx = self._ctx
        async with self._steps.lock(intent_id):
            intent = await self._steps.get(company_id, intent_id)
            resumed = _resumed(idempotency, "cancel", intent_id)
            if resumed is not None and intent.status is IntentStatus.CANCELLED:
                # The retry of a cancel whose answer was lost, recorded meanwhile.
                return await ctx.storage.run(lambda uow: finish(uow, idempotency, intent))
            now = ctx.clock.now()
            # The capture checks: past the deadline the hold is gone (the expiry job will say so).
            check_capturable(intent, now)
            assert intent.provider_reference is not None  # an AUTHORIZED intent has a charge
            if idempotency is not None and resumed is None:
                resource = f"cancel:{intent_id}:"
                await ctx.storage.run(lambda uow: bind(uow, idempotency, resource))
            try:
                if takes_keyed_calls(self.provider):
                    result = await self.provider.void(  # type: ignore[call-arg]  # keyed
                        intent.provider_reference, key=void_key(intent)
                    )
                else:
                    result = await self.provider.void(intent.provider_reference)
            except ProviderError as exc:
                raise exc.leaving("payment_intent", intent.id, intent.status.value) from None

            def write(uow: UnitOfWork) -> PaymentIntent:
                current = self._steps.locked(uow, intent)
                moved = transition(current, Trigger.CANCEL, now=now)
                self._steps.ledger(
                    uow, current, (VoidPending(p) for p in current.hold_pending_ids), now
                )
                stored = moved.intent.model_copy(
                    update={"provider_reference": result.reference, "hold_pending_ids": ()}
                )
                uow.intents.update(stored)
                uow.jobs.finish_for(intent_job_key(intent_id))
                self._steps.intent_events(uow, moved, stored)
                return finish(uow, idempotency, stored)

            return await ctx.storage.run(write)


def _resumed(
    idempotency: IdempotencyTicket[PaymentIntent] | None, operation: str, intent_id: int
) -> str | None:
    """The attempt id a retry with the same ``Idempotency-Key`` resumes (``""`` for an
    operation that keeps none), or ``None`` when the key started no ``operation`` on this
    intent."""
    prefix = f"{operation}:{intent_id}:"
    resource = None if idempotency is None else idempotency.resource
    if resource is None or not resource.startswith(prefix):
        return None
    return resource.removeprefix(prefix)
