"""The steps every payment operation shares: reading and locking an intent, undoing a provider
call, writing ledger journals, jobs and events.

One :class:`IntentSteps` is handed to each collaborator of the payments service (charging,
3-D Secure, capture and void, refunds) and to the services acting on intents from outside
(jobs, provider events, links), so they all hold the same per-intent locks.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from treasury_core.errors import (
    CardError,
    NotFound,
    TreasuryError,
    ValidationFailed,
)
from treasury_core.jobs import Job
from treasury_core.ledger import Journal, Leg
from treasury_core.movements.records import TreasuryRecord
from treasury_core.notifications.events import EventType
from treasury_core.pagination import DEFAULT_LIMIT, MAX_LIMIT, MIN_LIMIT, Page, page_of
from treasury_core.payments.intents import (
    IntentFilter,
    IntentStatus,
    PaymentIntent,
)
from treasury_core.payments.records import (
    Refund,
    Transaction,
    TransactionStatus,
    TransactionType,
)
from treasury_core.payments.states import (
    TRANSITIONS,
    IllegalTransition,
    Transition,
    Trigger,
)
from treasury_core.ports import CardProvider, UnitOfWork
from treasury_core.services.adapters import Adapters
from treasury_core.services.movements.fx_quotes import FxQuotes
from treasury_core.services.payments.vocabulary import (
    CHARGEBACK_OPEN,
    DEFAULT_DELAYS,
    PAYOUT,
    intent_job_key,
    is_lookup_id,
    log,
    unsupported,
)


class IntentSteps:
    """Reads, the per-intent locks and the writing steps the payment services share.

    ``context`` gives storage, ids, the clock and event writing; ``provider`` is asked to undo
    what could not be recorded and whether a captured card will be disputed;
    ``delays_seconds`` overrides :data:`DEFAULT_DELAYS` by job kind.
    """

    def __init__(
        self,
        *,
        context: Adapters,
        provider: CardProvider,
        delays_seconds: Mapping[str, float] | None = None,
    ) -> None:
        self._ctx = context
        self.quotes = FxQuotes(
            fx=context.fx,
            clock=context.clock,
            currencies=context.currencies,
            max_age_seconds=context.config.fx_max_age_seconds,
        )
        self.provider = provider
        delays = {**DEFAULT_DELAYS, **(delays_seconds or {})}
        self._delays = {kind: timedelta(seconds=s) for kind, s in delays.items()}
        self._locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()

    @property
    def context(self) -> Adapters:
        """The storage, ids, clock and event writing these steps use."""
        return self._ctx

    def delay(self, kind: str) -> timedelta:
        """How long after its cause a job of ``kind`` falls due."""
        return self._delays[kind]

    def lock(self, intent_id: int) -> asyncio.Lock:
        """The lock serializing this process's operations on one intent."""
        lock = self._locks.get(intent_id)
        if lock is None:
            lock = self._locks[intent_id] = asyncio.Lock()
        return lock

    # --- reads --------------------------------------------------------------------------------

    async def get(self, company_id: int, intent_id: int) -> PaymentIntent:
        """The company's intent, or :class:`NotFound`."""
        found = await self._ctx.storage.run(
            lambda uow: uow.intents.get(intent_id, company_id), write=False
        )
        if found is None:
            raise NotFound(f"No such payment intent: {intent_id}", param="payment_intent_id")
        return found

    async def get_by_lookup_id(self, company_id: int | None, lookup_id: str) -> PaymentIntent:
        """The intent with this lookup id (of ``company_id`` unless ``None``), or NotFound."""
        found = None
        if is_lookup_id(lookup_id):
            found = await self._ctx.storage.run(
                lambda uow: uow.intents.by_lookup_id(lookup_id, company_id), write=False
            )
        if found is None:
            raise NotFound("No such payment intent", param="payment_intent_lookup_id")
        return found

    async def list(
        self,
        company_id: int,
        filters: IntentFilter,
        *,
        limit: int = DEFAULT_LIMIT,
        starting_after: int | None = None,
    ) -> Page[PaymentIntent]:
        """A page of the company's intents passing ``filters``, newest first."""
        if isinstance(limit, bool) or not MIN_LIMIT <= limit <= MAX_LIMIT:
            raise ValidationFailed(
                f"limit must be an integer from {MIN_LIMIT} to {MAX_LIMIT}", param="limit"
            )
        rows = await self._ctx.storage.run(
            lambda uow: uow.intents.list(company_id, filters, limit + 1, starting_after),
            write=False,
        )
        return page_of(rows, limit)

    async def count(self, company_id: int, filters: IntentFilter) -> int:
        """How many of the company's intents pass ``filters``."""
        return await self._ctx.storage.run(
            lambda uow: uow.intents.count(company_id, filters), write=False
        )

    def check_manual_capture(self, param: str | None = None) -> None:
        """Refuse (before any call) what needs holds captured later, unless the provider can."""
        if not self.provider.manual_capture_supported():
            raise unsupported(
                "The card provider cannot capture a hold later, so capture_method manual is "
                "not available",
                param,
            )

    def check_payable(self, intent: PaymentIntent) -> None:
        """Refuse paying an intent that cannot take a payment now."""
        if (intent.capture_method, intent.status, Trigger.PAY_SUCCEEDED) not in TRANSITIONS:
            raise IllegalTransition(
                f"Payment intent {intent.id} is {intent.status.value} and cannot be paid",
                code="payment_intent_unexpected_state",
            )

    def transaction(
        self,
        intent: PaymentIntent,
        kind: TransactionType,
        status: TransactionStatus,
        *,
        brand: str | None = None,
        last4: str | None = None,
        error: CardError | None = None,
        reference: str | None = None,
    ) -> Transaction:
        """A new attempt record of ``kind`` on ``intent``, stamped now (not yet written)."""
        ctx = self._ctx
        return Transaction(
            id=ctx.ids.new_id(Transaction.prefix),
            company_id=intent.company_id,
            payment_intent_id=intent.id,
            type=kind,
            status=status,
            amount=intent.billing_amount,
            currency=intent.billing_currency,
            card_brand=brand,
            card_last4=last4,
            failure_reason=None if error is None else error.failure_reason,
            failure_message=None if error is None else error.message,
            created_at=ctx.clock.now(),
            provider_reference=reference,
        )

    async def recorded_elsewhere(
        self, intent: PaymentIntent, reference: str, *, captured: bool
    ) -> PaymentIntent | None:
        """The intent, if what this call got from the provider was recorded meanwhile by
        another path (the provider's event about the same charge, handled by another process):
        then there is nothing to undo. ``None`` when the intent moved some other way."""
        current = await self.get(intent.company_id, intent.id)
        wanted = (
            {IntentStatus.PROCESSED}
            if captured
            else {IntentStatus.AUTHORIZED, IntentStatus.PROCESSED}
        )
        if current.provider_reference == reference and current.status in wanted:
            return current
        return None

    # --- shared -------------------------------------------------------------------------------

    def locked(self, uow: UnitOfWork, seen: PaymentIntent) -> PaymentIntent:
        """The intent locked for this transaction, refused if it moved since ``seen`` was read
        (another process got there first)."""
        current = uow.intents.get(seen.id, seen.company_id, for_update=True)
        if current is None:  # pragma: no cover - intents are never deleted
            raise NotFound(f"No such payment intent: {seen.id}", param="payment_intent_id")
        if (current.status, current.provider_reference, current.latest_transaction_id) != (
            seen.status,
            seen.provider_reference,
            seen.latest_transaction_id,
        ):
            raise IllegalTransition(
                f"Payment intent {seen.id} changed while this request ran; it is now "
                f"{current.status.value}",
                code="payment_intent_changed",
            )
        return current

    async def undo(self, reference: str, captured: int | None) -> None:
        """Best effort: release a hold (``captured`` ``None``) or refund a charge the service
        could not record. Logged, never raised: the caller is already failing."""
        try:
            if captured is None:
                await self.provider.void(reference)
            elif self.provider.refunds_supported():
                await self.provider.refund(reference, captured)
            else:
                # Named in full: someone has to refund it by hand at the provider.
                log.error(
                    "could not undo provider charge %s of %d after a lost race: the card "
                    "provider has no refunds; refund it at the provider",
                    reference,
                    captured,
                )
        except TreasuryError:
            log.exception("could not undo provider charge %s after a lost race", reference)

    def ledger(
        self,
        uow: UnitOfWork,
        owner: PaymentIntent | Refund,
        legs: Iterable[Leg],
        now: datetime | None = None,
        operation: str = "card",
    ) -> None:
        """Apply ``legs`` (if any) as one journal of ``owner``'s company, in the caller's
        transaction."""
        legs = tuple(legs)
        if legs:
            journal = Journal(
                self._ctx.ids.new_id("jr"), legs, operation=operation, company_id=owner.company_id
            )
            uow.ledger.apply(journal, now or self._ctx.clock.now())

    def schedule(
        self, uow: UnitOfWork, kind: str, resource_id: str, owner: PaymentIntent, due: datetime
    ) -> None:
        """Schedule a job of ``kind`` on ``resource_id``, due at ``due``, in ``uow``."""
        uow.jobs.schedule(
            Job(
                id=self._ctx.ids.new_id("job"),
                kind=kind,
                resource_id=resource_id,
                company_id=owner.company_id,
                due_at=due,
            )
        )

    def after_capture(self, uow: UnitOfWork, intent: PaymentIntent, now: datetime) -> None:
        """Captured money is paid out after the payout delay; a card the provider knows will
        be disputed opens its chargeback after the chargeback delay."""
        key = intent_job_key(intent.id)
        self.schedule(uow, PAYOUT, key, intent, now + self.delay(PAYOUT))
        reference = intent.provider_reference
        if reference is not None and self.provider.chargeback_outcome(reference) is not None:
            self.schedule(uow, CHARGEBACK_OPEN, key, intent, now + self.delay(CHARGEBACK_OPEN))

    def intent_event(self, uow: UnitOfWork, intent: PaymentIntent, type_: EventType) -> None:
        """Write the intent's event ``type_`` to the outbox, in the caller's transaction."""
        uow.outbox.add(self._ctx.events.event(type_, intent))

    def intent_events(
        self, uow: UnitOfWork, moved: Transition, stored: PaymentIntent | None = None
    ) -> None:
        """The events of a transition, about ``stored`` (the intent as written) if given."""
        for type_ in moved.events:
            self.intent_event(uow, stored or moved.intent, type_)

    def transaction_events(self, uow: UnitOfWork, txn: Transaction, outcome: EventType) -> None:
        """Store the new attempt ``txn`` with ``transaction.created``, then its ``outcome``."""
        self._ctx.events.add_announced(uow, txn, EventType.TRANSACTION_CREATED)
        self._ctx.events.write(uow, outcome, txn)

    def event(self, uow: UnitOfWork, type_: EventType, record: TreasuryRecord) -> None:
        """Write ``type_`` for ``record`` to the outbox, in the caller's transaction."""
        self._ctx.events.write(uow, type_, record)
