"""The payments service: one facade over the collaborators beside this module."""

from __future__ import annotations

import builtins
from datetime import datetime, timedelta

from treasury_core.idempotency import IdempotencyTicket
from treasury_core.pagination import DEFAULT_LIMIT, Page
from treasury_core.payments.intents import IntentFilter, PaymentIntent
from treasury_core.payments.records import Refund, Transaction
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports import CardProvider, UnitOfWork
from treasury_core.ports.card_provider import CallOwner, CardData, CardProviderResult
from treasury_core.services.payments.capture import CaptureAndVoid
from treasury_core.services.payments.challenges import Challenges
from treasury_core.services.payments.charging import Charging
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.refunds import Refunds
from treasury_core.services.payments.vocabulary import PaymentOutcome


class PaymentService:
    """Payment intents over a card provider (see the package docstring for the call pattern).

    A facade: each operation is its collaborator's, and they share one ``steps``
    (:class:`~treasury_core.services.payments.intent_steps.IntentSteps`: reads, the per-intent
    locks, the writing steps). Create and pay are ``charging``'s
    (:class:`~treasury_core.services.payments.charging.Charging`), 3-D Secure ``challenges``'
    (:class:`~treasury_core.services.payments.challenges.Challenges`), capture and cancel
    ``capture``'s (:class:`~treasury_core.services.payments.capture.CaptureAndVoid`), refunds
    ``refunds``' (:class:`~treasury_core.services.payments.refunds.Refunds`). Every public
    method takes the company's id first (when the caller is a merchant), then the record's id,
    then the request.
    """

    def __init__(
        self,
        *,
        steps: IntentSteps,
        charging: Charging,
        challenges: Challenges,
        capture: CaptureAndVoid,
        refunds: Refunds,
    ) -> None:
        self._steps = steps
        self._charging = charging
        self._challenges = challenges
        self._capture = capture
        self._refunds = refunds

    @property
    def provider(self) -> CardProvider:
        """The card provider the intents are charged with."""
        return self._steps.provider

    @property
    def steps(self) -> IntentSteps:
        """The shared intent steps (what the chargeback and refund-outcome functions take)."""
        return self._steps

    def delay(self, kind: str) -> timedelta:
        """How long after its cause a job of ``kind`` falls due."""
        return self._steps.delay(kind)

    # --- reads --------------------------------------------------------------------------------

    async def get(self, company_id: int, intent_id: int) -> PaymentIntent:
        """The company's intent, or :class:`NotFound`."""
        return await self._steps.get(company_id, intent_id)

    async def get_by_lookup_id(self, company_id: int | None, lookup_id: str) -> PaymentIntent:
        """The intent with this lookup id (of ``company_id`` unless ``None``), or NotFound."""
        return await self._steps.get_by_lookup_id(company_id, lookup_id)

    async def list(
        self,
        company_id: int,
        filters: IntentFilter,
        *,
        limit: int = DEFAULT_LIMIT,
        starting_after: int | None = None,
    ) -> Page[PaymentIntent]:
        """A page of the company's intents passing ``filters``, newest first."""
        return await self._steps.list(
            company_id, filters, limit=limit, starting_after=starting_after
        )

    async def count(self, company_id: int, filters: IntentFilter) -> int:
        """How many of the company's intents pass ``filters``."""
        return await self._steps.count(company_id, filters)

    # --- create and pay -----------------------------------------------------------------------

    async def create(
        self,
        company_id: int,
        request: CreateIntentRequest,
        *,
        publishable: bool = False,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentIntent:
        """Create an intent; with ``card_token``, charge the saved card at once (see
        :meth:`Charging.create <treasury_core.services.payments.charging.Charging.create>`)."""
        return await self._charging.create(
            company_id, request, publishable=publishable, idempotency=idempotency
        )

    async def pay(self, lookup_id: str, card: CardData) -> PaymentOutcome:
        """See :meth:`Charging.pay <treasury_core.services.payments.charging.Charging.pay>`."""
        return await self._charging.pay(lookup_id, card)

    async def adopt_charge(
        self,
        company_id: int,
        intent_id: int,
        result: CardProviderResult,
        *,
        amount: int | None = None,
        currency: str | None = None,
        owner: CallOwner | None = None,
    ) -> PaymentIntent | None:
        """See :meth:`Charging.adopt_charge
        <treasury_core.services.payments.charging.Charging.adopt_charge>`."""
        return await self._charging.adopt_charge(
            company_id, intent_id, result, amount=amount, currency=currency, owner=owner
        )

    # --- 3-D Secure ---------------------------------------------------------------------------

    async def complete_challenge(self, lookup_id: str, *, passed: bool = True) -> PaymentOutcome:
        """See :meth:`Challenges.complete_challenge
        <treasury_core.services.payments.challenges.Challenges.complete_challenge>`."""
        return await self._challenges.complete_challenge(lookup_id, passed=passed)

    async def waiting_challenge(self, intent: PaymentIntent) -> Transaction | None:
        """The intent's payment attempt waiting for 3-D Secure, if any (the hosted page asks)."""
        return await self._challenges.waiting_challenge(intent)

    # --- capture and cancel -------------------------------------------------------------------

    async def capture(
        self,
        company_id: int,
        intent_id: int,
        *,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentIntent:
        """See :meth:`CaptureAndVoid.capture
        <treasury_core.services.payments.capture.CaptureAndVoid.capture>`."""
        return await self._capture.capture(company_id, intent_id, idempotency=idempotency)

    def record_capture(
        self,
        uow: UnitOfWork,
        current: PaymentIntent,
        txn: Transaction,
        reference: str,
        now: datetime,
    ) -> PaymentIntent:
        """See :meth:`CaptureAndVoid.record_capture
        <treasury_core.services.payments.capture.CaptureAndVoid.record_capture>`."""
        return self._capture.record_capture(uow, current, txn, reference, now)

    def release_gone_hold(self, uow: UnitOfWork, current: PaymentIntent, now: datetime) -> None:
        """See :meth:`CaptureAndVoid.release_gone_hold
        <treasury_core.services.payments.capture.CaptureAndVoid.release_gone_hold>`."""
        self._capture.release_gone_hold(uow, current, now)

    async def cancel(
        self,
        company_id: int,
        intent_id: int,
        *,
        idempotency: IdempotencyTicket[PaymentIntent] | None = None,
    ) -> PaymentIntent:
        """See :meth:`CaptureAndVoid.cancel
        <treasury_core.services.payments.capture.CaptureAndVoid.cancel>`."""
        return await self._capture.cancel(company_id, intent_id, idempotency=idempotency)

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
        """See :meth:`Refunds.refund <treasury_core.services.payments.refunds.Refunds.refund>`."""
        return await self._refunds.refund(
            company_id, intent_id, amount=amount, reason=reason, idempotency=idempotency
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
        """See :meth:`Refunds.reserve_refund
        <treasury_core.services.payments.refunds.Refunds.reserve_refund>`."""
        return self._refunds.reserve_refund(
            uow, intent, value, reason, refund_id=refund_id, journal_id=journal_id, now=now
        )

    async def get_refund(self, company_id: int, refund_id: str) -> Refund:
        """The company's refund, or :class:`NotFound`."""
        return await self._refunds.get_refund(company_id, refund_id)

    async def refunds(self, company_id: int, intent_id: int) -> builtins.list[Refund]:
        """Every refund of the company's intent, newest first."""
        return await self._refunds.refunds(company_id, intent_id)
