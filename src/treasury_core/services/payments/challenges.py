"""Finishing a payment attempt that waits for 3-D Secure."""

from __future__ import annotations

from treasury_core.errors import (
    CardError,
    InvalidRequestError,
)
from treasury_core.notifications.events import EventType
from treasury_core.payments.expiry import check_link_open
from treasury_core.payments.intents import (
    PaymentIntent,
)
from treasury_core.payments.records import (
    Transaction,
)
from treasury_core.payments.states import (
    IllegalTransition,
    Trigger,
    transition,
)
from treasury_core.ports import CardProvider, UnitOfWork
from treasury_core.ports.card_provider import (
    CardProviderResult,
)
from treasury_core.services.adapters import Adapters
from treasury_core.services.payments.charging import Charging
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.vocabulary import (
    AUTHENTICATION_INCOMPLETE,
    PaymentOutcome,
    unsupported,
)


class Challenges:
    """3-D Secure completion (for :class:`~treasury_core.services.payments.PaymentService`).

    A passed challenge is recorded by ``charging`` as any successful attempt is.
    """

    def __init__(
        self,
        *,
        context: Adapters,
        steps: IntentSteps,
        provider: CardProvider,
        charging: Charging,
    ) -> None:
        self._ctx = context
        self._steps = steps
        self.provider = provider
        self._charging = charging

    async def complete_challenge(self, lookup_id: str, *, passed: bool = True) -> PaymentOutcome:
        """Finish the intent's pending 3-D Secure attempt: ``passed`` authorizes or charges
        (per the capture method), otherwise the attempt fails as a decline would.

        With ``passed`` the provider's verdict decides (:meth:`CardProvider.complete_action`):
        while the customer has not finished at the provider's own page the attempt keeps
        waiting and :class:`InvalidRequestError` ``authentication_incomplete`` (400) is raised;
        a :class:`ProviderError` leaves it waiting too.
        """
        intent = await self._steps.get_by_lookup_id(None, lookup_id)
        async with self._steps.lock(intent.id):
            intent = await self._steps.get(intent.company_id, intent.id)
            check_link_open(intent, self._ctx.clock.now())
            txn = await self._pending_challenge(intent)
            assert txn.provider_reference is not None  # a requires_action attempt keeps one
            if not self.provider.three_d_secure_supported():
                raise unsupported("The card provider does not support 3-D Secure")
            failure: CardError | None = None
            result: CardProviderResult | None = None
            if passed:
                try:
                    result = await self.provider.complete_action(txn.provider_reference)
                except CardError as exc:
                    failure = exc
            else:
                await self._steps.undo(txn.provider_reference, None)
                failure = CardError(
                    "The customer did not pass 3-D Secure", failure_reason="authentication_failed"
                )
            if result is not None and result.requires_action:
                # No verdict yet: the customer has not finished at the provider's page.
                raise InvalidRequestError(
                    "The customer has not finished 3-D Secure at the card provider yet",
                    code=AUTHENTICATION_INCOMPLETE,
                )
            if failure is None and result is not None:
                done = txn.model_copy(update={"action_url": None})
                return await self._charging.record_success(
                    intent, txn.type, result, txn.card_last4, None, pending=done
                )
            assert failure is not None
            await self._fail_challenge(intent, txn, failure)
            raise failure

    async def waiting_challenge(self, intent: PaymentIntent) -> Transaction | None:
        """The intent's payment attempt waiting for 3-D Secure, if any (the hosted page asks)."""
        return await self._charging.waiting_challenge(intent)

    async def _pending_challenge(self, intent: PaymentIntent) -> Transaction:
        txn = await self._charging.waiting_challenge(intent)
        if txn is None:
            raise IllegalTransition(
                "No 3-D Secure challenge is pending for this payment intent",
                code="no_action_required",
            )
        self._steps.check_payable(intent)
        return txn

    async def _fail_challenge(
        self, intent: PaymentIntent, txn: Transaction, failure: CardError
    ) -> None:
        now = self._ctx.clock.now()
        failed = txn.failed(failure.failure_reason, failure.message)

        def write(uow: UnitOfWork) -> None:
            current = self._steps.locked(uow, intent)
            moved = transition(current, Trigger.PAY_DECLINED, now=now)
            uow.intents.update(moved.intent)
            uow.records.update(failed)
            self._ctx.events.write(uow, EventType.TRANSACTION_FAILED, failed)
            self._steps.intent_events(uow, moved)

        await self._ctx.storage.run(write)
