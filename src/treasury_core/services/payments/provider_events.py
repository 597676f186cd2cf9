"""A card provider's events (its webhooks), applied to payment intents.

The provider's adapter verifies a delivery and reads it into a port-neutral
:class:`~treasury_core.ports.card_provider.CardProviderEvent`; this service applies it:

==========================  ==================================================================
event kind                  effect
==========================  ==================================================================
``authorized``,             the intent's attempt waiting for 3-D Secure is finished as the
``captured``                challenge page would (:meth:`PaymentService.complete_challenge`);
                            ``captured`` on an ``AUTHORIZED`` intent records the capture the
                            provider made (an answer lost, a dashboard), for the whole amount
                            and before the authorization expired here; otherwise nothing (the
                            API call already recorded the outcome)
``payment_failed``          the attempt waiting for 3-D Secure fails; otherwise nothing
``canceled``                an ``AUTHORIZED`` intent whose hold the provider released is
                            ``CANCELLED`` (reason ``expired``), its ledger hold released; an
                            attempt waiting for 3-D Secure fails
``dispute_opened``          a chargeback opens on the ``PROCESSED`` intent for the disputed
                            amount (at most what remains refundable)
``dispute_won`` / ``_lost`` the dispute's chargeback is decided (one the opening of which was
                            missed is opened first)
``refunded``                the charge's total refunded: our pending refunds it covers succeed
                            (those the provider took as pending wait for their own event),
                            and what it refunded beyond all of ours (at the provider's
                            dashboard) is recorded as a new refund, succeeded, with the
                            postings and ``refund.created`` of a refund through the API
``refund_succeeded``        our refund with that provider reference, pending, succeeds
``refund_failed``           our refund with that provider reference fails: a pending one
                            gives its reservation back, a succeeded one is reversed (the
                            money back into settlement); either way ``refund.updated``
==========================  ==================================================================

Events naming our records (``owner``, what our keyed calls set on the provider's objects) are
attached even when the call's answer was lost, so that no reference of it was kept here:

- ``authorized`` or ``captured`` about a charge no attempt of ours recorded, whose owner names
  an intent of that very company, hands the charge to ``PaymentService.adopt_charge`` (with the
  event's amount and currency): recorded on the intent if it still waits for payment, undone at
  the provider if the intent was paid otherwise or cancelled;
- ``refund_succeeded`` or ``refund_failed`` whose refund reference is unknown but whose owner
  names a pending refund of that intent with no provider reference yet (its answer was lost)
  settles that refund and keeps the reference.

An owner is trusted only as far as our records agree with it: the intent must exist with the
owner's company, the refund must be that intent's.

Each event is applied in one transaction that locks the intent first, as every path changing an
intent does, and records a :class:`~treasury_core.payments.records.ProviderEventReceipt` keyed
by the provider's event id: a redelivery finds it and changes nothing. An event about a charge
this treasury does not know, or of a kind the port does not map, changes nothing and records
nothing; it is logged and acknowledged, so the provider stops redelivering it.

The charge is found by its reference through the payment attempt that made it
(``Transaction.lookup_key``); an event naming a charge the intent no longer uses (it was
cancelled and paid again with a new one) changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import cast

from treasury_core.errors import CardError, InvalidRequestError
from treasury_core.payments.card_differences import CardDifferenceKind
from treasury_core.payments.intents import IntentStatus, PaymentIntent
from treasury_core.payments.records import (
    Chargeback,
    ChargebackStatus,
    ProviderEventReceipt,
    Refund,
    RefundStatus,
    Transaction,
    TransactionStatus,
    TransactionType,
    provider_event_key,
)
from treasury_core.payments.states import IllegalTransition, check_capturable
from treasury_core.ports import CardProvider, UnitOfWork
from treasury_core.ports.card_provider import (
    BadProviderEvent,
    CallOwner,
    CardProviderEvent,
    CardProviderEventKind,
    CardProviderEvents,
    CardProviderResult,
    CardProviderStatus,
    ChargebackOutcome,
)
from treasury_core.services.adapters import Adapters
from treasury_core.services.payments.capture import CaptureAndVoid
from treasury_core.services.payments.card_differences import resolve_difference
from treasury_core.services.payments.challenges import Challenges
from treasury_core.services.payments.chargebacks import open_chargeback, resolve_chargeback
from treasury_core.services.payments.charging import Charging
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.refund_outcomes import (
    refund_failed,
    refund_reversed,
    refund_succeeded,
)
from treasury_core.services.payments.refunds import Refunds
from treasury_core.services.payments.vocabulary import owner_tag

log = logging.getLogger("treasury.provider_events")

_K = CardProviderEventKind
#: The ``reason`` of a refund the provider made without us (from its dashboard, say).
PROVIDER_REFUND_REASON = "Refunded at the card provider"
#: The kinds that end a payment attempt waiting for 3-D Secure, and whether it passed.
_CHALLENGE_OUTCOMES: Mapping[CardProviderEventKind, bool] = {
    _K.AUTHORIZED: True,
    _K.CAPTURED: True,
    _K.PAYMENT_FAILED: False,
    _K.CANCELED: False,
}
#: The kinds that tell of a charge holding money, and the status a lookup would answer.
_HOLDING: Mapping[CardProviderEventKind, CardProviderStatus] = {
    _K.AUTHORIZED: CardProviderStatus.AUTHORIZED,
    _K.CAPTURED: CardProviderStatus.CAPTURED,
}


class EventResult(StrEnum):
    """What applying one provider event did."""

    APPLIED = "applied"  # the intent or its records changed
    NOTHING_TO_DO = "nothing_to_do"  # already so (recorded by the API call, or a stale charge)
    DUPLICATE = "duplicate"  # this event was applied before
    UNKNOWN_CHARGE = "unknown_charge"  # no intent of this treasury made the charge
    NOT_MAPPED = "not_mapped"  # a kind of event the port does not map


@dataclass(frozen=True, slots=True)
class EventOutcome:
    """The result of one event, and the intent it concerned (if any)."""

    result: EventResult
    payment_intent_id: int | None = None
    company_id: int | None = None


class ProviderEventService:
    """Verifies and applies the card provider's events (see the module docstring)."""

    def __init__(
        self,
        *,
        context: Adapters,
        steps: IntentSteps,
        provider: CardProvider,
        charging: Charging,
        challenges: Challenges,
        capture: CaptureAndVoid,
        refunds: Refunds,
    ) -> None:
        self._ctx = context
        self._steps = steps
        self._provider = provider
        self._charging = charging
        self._challenges = challenges
        self._capture = capture
        self._refunds = refunds

    def supported(self) -> bool:
        """Whether the card provider sends events this service can verify."""
        return self._provider.provider_events_supported() is True

    async def receive(self, body: bytes, headers: Mapping[str, str]) -> EventOutcome:
        """Verify one delivery and apply its event.

        Raises :class:`BadProviderEvent` (400) for a delivery that is not authentic, and when
        the provider sends no events (``provider_events_unsupported``); nothing is changed.
        """
        provider = self._provider
        if not self.supported():
            raise BadProviderEvent(
                "The card provider does not send events", code="provider_events_unsupported"
            )
        # The capability is optional, so not on the CardProvider protocol; the flag vouched.
        event = cast(CardProviderEvents, provider).parse_event(body, headers)
        return await self.apply(event)

    async def apply(self, event: CardProviderEvent) -> EventOutcome:
        """Apply a verified event once (see the module docstring)."""
        if event.kind is None or event.reference is None:
            log.info("provider event %s (%s) not mapped; ignored", event.id, event.type)
            return EventOutcome(EventResult.NOT_MAPPED)
        reference = event.reference
        txn = await self._ctx.storage.run(
            lambda uow: uow.records.find(Transaction, reference), write=False
        )
        if txn is None:
            owner = event.owner
            if owner is not None and event.kind in _HOLDING:
                owned = await self._owned_intent(owner)
                if owned is not None:
                    return await self._adopt(event, reference, owned)
            log.warning(
                "provider event %s (%s) names charge %s, which no intent made; ignored",
                event.id,
                event.type,
                reference,
            )
            return EventOutcome(EventResult.UNKNOWN_CHARGE)
        if txn.status is TransactionStatus.REQUIRES_ACTION and event.kind in _CHALLENGE_OUTCOMES:
            return await self._finish_challenge(event, txn, _CHALLENGE_OUTCOMES[event.kind])
        async with self._steps.lock(txn.payment_intent_id):
            return await self._ctx.storage.run(lambda uow: self._apply(uow, event, txn))

    # --- charges whose answers were lost -------------------------------------------------------

    async def _owned_intent(self, owner: CallOwner) -> PaymentIntent | None:
        """The intent ``owner`` names, if it exists with the owner's company (an owner naming
        another company's intent names nothing)."""
        return await self._ctx.storage.run(
            lambda uow: uow.intents.get(owner.payment_intent_id, owner.company_id), write=False
        )

    async def _adopt(
        self, event: CardProviderEvent, reference: str, intent: PaymentIntent
    ) -> EventOutcome:
        """A charge holding money that no attempt recorded, made for ``intent``: recorded on it
        or undone at the provider (``adopt_charge``, which takes the intent's lock itself),
        then the event recorded."""
        outcome = EventOutcome(EventResult.DUPLICATE, intent.id, intent.company_id)
        if await self._ctx.storage.run(lambda uow: _seen(uow, event), write=False):
            return outcome
        found = CardProviderResult(reference=reference, status=_HOLDING[cast(_K, event.kind)])
        # A ProviderError (undoing an orphan failed) propagates: no receipt, so the provider's
        # redelivery tries again.
        adopted = await self._charging.adopt_charge(
            intent.company_id,
            intent.id,
            found,
            amount=event.amount,
            currency=event.currency,
            owner=event.owner,
        )
        result = EventResult.APPLIED if adopted is not None else EventResult.NOTHING_TO_DO
        log.info(
            "provider event %s (%s) on intent %d, charge %s not recorded before: %s",
            event.id,
            event.type,
            intent.id,
            reference,
            "recorded on the intent" if adopted is not None else "undone or already recorded",
        )

        def record(uow: UnitOfWork) -> EventOutcome:
            if _seen(uow, event):
                return outcome
            self._receipt(uow, event, intent.company_id, result)
            return EventOutcome(result, intent.id, intent.company_id)

        return await self._ctx.storage.run(record)

    # --- 3-D Secure ---------------------------------------------------------------------------

    async def _finish_challenge(
        self, event: CardProviderEvent, txn: Transaction, passed: bool
    ) -> EventOutcome:
        """End the attempt waiting for 3-D Secure through the challenge path (which takes the
        intent's lock itself), then record the event."""
        outcome = EventOutcome(EventResult.DUPLICATE, txn.payment_intent_id, txn.company_id)
        if await self._ctx.storage.run(lambda uow: _seen(uow, event), write=False):
            return outcome
        intent = await self._steps.get(txn.company_id, txn.payment_intent_id)
        result = EventResult.APPLIED
        try:
            await self._challenges.complete_challenge(
                intent.payment_intent_lookup_id, passed=passed
            )
        except CardError:
            # The attempt failed and is recorded so: what this event asked for.
            pass
        except InvalidRequestError as exc:
            # No challenge pending any more (finished by the customer meanwhile), or a
            # provider that cannot finish one: the state stays as it is. (A provider that did
            # not answer is a ProviderError, left to propagate: no receipt, so the provider's
            # redelivery tries again.)
            log.info("provider event %s left the intent as it was: %s", event.id, exc.code)
            result = EventResult.NOTHING_TO_DO

        def record(uow: UnitOfWork) -> EventOutcome:
            if _seen(uow, event):
                return outcome
            self._receipt(uow, event, txn.company_id, result)
            return EventOutcome(result, txn.payment_intent_id, txn.company_id)

        return await self._ctx.storage.run(record)

    # --- one transaction ----------------------------------------------------------------------

    def _apply(self, uow: UnitOfWork, event: CardProviderEvent, txn: Transaction) -> EventOutcome:
        intent = uow.intents.get(txn.payment_intent_id, txn.company_id, for_update=True)
        if intent is None:  # pragma: no cover - intents are never deleted
            return EventOutcome(EventResult.UNKNOWN_CHARGE)
        if _seen(uow, event):
            return EventOutcome(EventResult.DUPLICATE, intent.id, intent.company_id)
        changed = False
        if intent.provider_reference == event.reference:
            changed = self._change(uow, event, intent)
        result = EventResult.APPLIED if changed else EventResult.NOTHING_TO_DO
        self._receipt(uow, event, intent.company_id, result)
        log.info("provider event %s (%s) on intent %d: %s", event.id, event.type, intent.id, result)
        return EventOutcome(result, intent.id, intent.company_id)

    def _change(self, uow: UnitOfWork, event: CardProviderEvent, intent: PaymentIntent) -> bool:
        """Make the intent what ``event`` says; whether anything changed."""
        now = self._ctx.clock.now()
        kind = event.kind
        if kind is _K.CANCELED:
            if intent.status is not IntentStatus.AUTHORIZED:
                return False
            self._capture.release_gone_hold(uow, intent, now)
            return True
        if kind is _K.DISPUTE_OPENED:
            return self._open_dispute(uow, event, intent) is not None
        if kind in (_K.DISPUTE_WON, _K.DISPUTE_LOST):
            return self._close_dispute(uow, event, intent)
        if kind is _K.REFUNDED:
            return self._refunded(uow, event, intent)
        if kind in (_K.REFUND_SUCCEEDED, _K.REFUND_FAILED):
            return self._refund_outcome(uow, event, intent)
        if kind is _K.CAPTURED and intent.status is IntentStatus.AUTHORIZED:
            return self._captured(uow, event, intent, now)
        # authorized, captured, payment_failed of an attempt that is not waiting for 3-D
        # Secure: the API call that made it recorded its outcome already.
        return False

    def _captured(
        self, uow: UnitOfWork, event: CardProviderEvent, intent: PaymentIntent, now: datetime
    ) -> bool:
        """The provider captured a hold we still hold as authorized (a capture whose answer was
        lost, or one made at its dashboard): record the capture as the API would."""
        if event.amount is not None and event.amount != intent.billing_amount:
            # Captures here are always of the whole amount; a partial one is for a person.
            log.error(
                "provider event %s: intent %d captured %d of %d at the provider; not recorded",
                event.id,
                intent.id,
                event.amount,
                intent.billing_amount,
            )
            return False
        try:
            check_capturable(intent, now)
        except IllegalTransition:
            log.error(
                "provider event %s: intent %d was captured at the provider after its "
                "authorization expired here; not recorded",
                event.id,
                intent.id,
            )
            return False
        txn = self._steps.transaction(intent, TransactionType.CAPTURE, TransactionStatus.COMPLETED)
        assert event.reference is not None  # checked before the intent was looked up
        self._capture.record_capture(uow, intent, txn, event.reference, now)
        return True

    def _dispute(self, uow: UnitOfWork, event: CardProviderEvent) -> Chargeback | None:
        if event.dispute is None:
            return None
        found = uow.records.find(Chargeback, event.dispute)
        if found is None:
            return None
        return uow.records.get(Chargeback, found.id, found.company_id, for_update=True)

    def _open_dispute(
        self, uow: UnitOfWork, event: CardProviderEvent, intent: PaymentIntent
    ) -> tuple[PaymentIntent, Chargeback] | None:
        """Open the dispute's chargeback unless it exists already (the provider may announce
        one dispute more than once: created, then funds withdrawn)."""
        if intent.status is not IntentStatus.PROCESSED or event.dispute is None:
            return None
        if self._dispute(uow, event) is not None:
            return None
        amount = intent.amount_refundable
        if event.amount is not None and event.currency == intent.billing_currency:
            amount = min(amount, event.amount)
        if amount <= 0:
            log.warning("dispute %s on intent %d: nothing left to hold", event.dispute, intent.id)
            return None
        return open_chargeback(self._steps, uow, intent, amount, provider_reference=event.dispute)

    def _close_dispute(
        self, uow: UnitOfWork, event: CardProviderEvent, intent: PaymentIntent
    ) -> bool:
        outcome: ChargebackOutcome = "won" if event.kind is _K.DISPUTE_WON else "lost"
        chargeback = self._dispute(uow, event)
        if chargeback is None:
            # Decided before its opening arrived: opened now and decided at once (a lost one's
            # money is gone all the same, a won one's released), so that the opening, when it
            # comes, finds the dispute decided rather than holding the money for ever.
            opened = self._open_dispute(uow, event, intent)
            if opened is None:
                return False
            intent, chargeback = opened
        if chargeback.status is not ChargebackStatus.OPEN:
            return False
        resolve_chargeback(self._steps, uow, intent, chargeback, outcome, self._ctx.clock.now())
        return True

    def _refunded(self, uow: UnitOfWork, event: CardProviderEvent, intent: PaymentIntent) -> bool:
        """Stripe's total refunded on the charge: our pending refunds it covers succeed (their
        answers were lost), and what it refunded beyond all of ours (a refund made at the
        provider, a dashboard) becomes a new refund, as if made through the API."""
        total = event.amount
        if intent.status is not IntentStatus.PROCESSED or total is None:
            return False
        if event.currency != intent.billing_currency:
            log.warning("refund event %s is in %s; ignored", event.id, event.currency)
            return False
        refunds = [
            uow.records.get(Refund, refund_id, intent.company_id, for_update=True)
            for refund_id in intent.refund_ids
        ]
        done = sum(r.amount for r in refunds if r and r.status is RefundStatus.SUCCEEDED)
        pending = [r for r in refunds if r and r.status is RefundStatus.PENDING]
        changed = False
        waiting: list[Refund] = []
        for refund in pending:  # oldest first, as the provider made them
            # One the provider took as pending is in its total already, but may still fail:
            # it waits for the provider's event about it.
            if not waiting and refund.provider_reference is None and done + refund.amount <= total:
                self._refunds.refund_succeeded(refund, None)(uow)
                done += refund.amount
                changed = True
            else:
                waiting.append(refund)
        # A total short of ours leaves our pending refunds pending (whether the provider has
        # them is unknown); only a total beyond all of them is a refund we did not make.
        beyond = total - done - sum(refund.amount for refund in waiting)
        if beyond > 0:
            changed = self._refund_beyond(uow, intent, beyond, event) or changed
        return changed

    def _refund_outcome(
        self, uow: UnitOfWork, event: CardProviderEvent, intent: PaymentIntent
    ) -> bool:
        """One refund of ours succeeded or failed at the provider; whether anything changed.

        A refund the provider made on its own (its dashboard) is not ours to find: its money
        is counted by the ``refunded`` totals instead.
        """
        found = None if event.refund is None else uow.records.find(Refund, event.refund)
        if found is None:
            found = self._owned_refund(uow, event, intent)
        if found is None or (found.company_id, found.payment_intent_id) != (
            intent.company_id,
            intent.id,
        ):
            return False
        steps = self._steps
        # Set when the refund's answer was lost: the reference by which later events find it.
        learnt = event.refund if found.provider_reference is None else None
        if event.kind is _K.REFUND_SUCCEEDED:
            if found.status is not RefundStatus.PENDING:
                return False
            refund_succeeded(steps, uow, found, learnt)
            self._no_longer_in_doubt(uow, found, "refund succeeded (provider event)")
            return True
        reason = event.failure_reason or "refund_failed"
        if found.status is RefundStatus.PENDING:
            failed = refund_failed(steps, uow, found, reason)
            if learnt is not None and failed.status is RefundStatus.FAILED:
                uow.records.update(failed.model_copy(update={"provider_reference": learnt}))
            self._no_longer_in_doubt(uow, found, "refund failed (provider event)")
            return True
        if found.status is RefundStatus.SUCCEEDED:
            refund_reversed(steps, uow, found, reason)
            return True
        return False

    def _owned_refund(
        self, uow: UnitOfWork, event: CardProviderEvent, intent: PaymentIntent
    ) -> Refund | None:
        """The refund of ``intent`` the event's owner names, if its answer was lost (it has no
        provider reference yet): any other is known by its reference, or is not this one. The
        owner's tag must be the intent's, as for a charge: ids alone can be typed into a refund
        made at the provider's dashboard."""
        owner = event.owner
        if (
            owner is None
            or owner.refund_id is None
            or event.refund is None
            or (owner.company_id, owner.payment_intent_id) != (intent.company_id, intent.id)
            or owner.tag != owner_tag(intent)
            or owner.refund_id not in intent.refund_ids
        ):
            return None
        refund = uow.records.get(Refund, owner.refund_id, intent.company_id, for_update=True)
        if refund is None or refund.provider_reference is not None:
            return None
        return refund

    def _no_longer_in_doubt(self, uow: UnitOfWork, refund: Refund, how: str) -> None:
        resolve_difference(self._ctx, uow, CardDifferenceKind.REFUND_IN_DOUBT, refund.id, how)

    def _refund_beyond(
        self, uow: UnitOfWork, intent: PaymentIntent, amount: int, event: CardProviderEvent
    ) -> bool:
        """Record ``amount`` refunded at the provider as a refund of ours, made and succeeded
        at once: the postings and ``refund.created`` of a refund through the API."""
        value = min(amount, intent.amount_refundable)
        if value < amount:
            log.warning(
                "refund event %s: the provider refunded %d more than intent %d has left; "
                "recording %d",
                event.id,
                amount - value,
                intent.id,
                value,
            )
        if value <= 0:
            return False
        ids = self._ctx.ids
        refund = self._refunds.reserve_refund(
            uow,
            intent,
            value,
            PROVIDER_REFUND_REASON,
            refund_id=ids.new_id(Refund.prefix),
            journal_id=ids.new_id("jr"),
            now=self._ctx.clock.now(),
        )
        self._refunds.refund_succeeded(refund, None)(uow)
        return True

    def _receipt(
        self, uow: UnitOfWork, event: CardProviderEvent, company_id: int, result: EventResult
    ) -> None:
        uow.records.add(
            ProviderEventReceipt(
                id=self._ctx.ids.new_id(ProviderEventReceipt.prefix),
                company_id=company_id,
                created_at=self._ctx.clock.now(),
                provider_event_id=event.id,
                type=event.type,
                kind=None if event.kind is None else event.kind.value,
                reference=event.reference,
                result=result.value,
            )
        )


def _seen(uow: UnitOfWork, event: CardProviderEvent) -> bool:
    return uow.records.find(ProviderEventReceipt, provider_event_key(event.id)) is not None
