"""A treasury over the flaky card provider, and the states a lost answer leaves behind.

:func:`lost_refund` and :func:`lost_attempt` leave what the payments service leaves after a
refund or a payment attempt whose answer was lost: the record in doubt (a refund pending with
its reservation; an intent still waiting), the provider's side as the call left it (made under
the record's key with its owner, or not made at all), and the resolution job due now. They
stand for the service's part, so the resolution jobs, the provider events and reconciliation
are tested on exactly that state.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import ProviderError
from treasury_core.jobs import Job
from treasury_core.movements.bank_files import OPERATOR
from treasury_core.notifications.events import Event, EventType
from treasury_core.payments.card_differences import CardDifference
from treasury_core.payments.intents import CaptureMethod, PaymentIntent, PaymentType
from treasury_core.payments.records import Refund
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.ports.card_provider import CardData
from treasury_core.services.payments.vocabulary import (
    RESOLVE_CHARGE,
    RESOLVE_REFUND,
    attempt_key,
    call_owner,
    charge_attempt_resource,
    refund_key,
)
from treasury_core.testing import FakeClock, FlakyCardProvider, check_invariants
from treasury_core.testing.fakes.card_providers import Call

CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")
AMOUNT = 1_000


@dataclass
class World:
    """A treasury, its clock, its flaky provider and one company."""

    treasury: Treasury
    clock: FakeClock
    provider: FlakyCardProvider
    company: int
    account: int

    async def intent(self, capture: CaptureMethod = CaptureMethod.AUTOMATIC) -> PaymentIntent:
        request = CreateIntentRequest(
            account_id=self.account,
            billing_amount=AMOUNT,
            billing_currency="USD",
            payment_type=PaymentType.CARD_PAYMENT,
            capture_method=capture,
        )
        return await self.treasury.payments.create(self.company, request)

    async def paid(self) -> PaymentIntent:
        """A captured intent, its charge made with its owner (as a keyed call makes it)."""
        intent = await self.intent()
        key = await lost_attempt(self, intent)
        await self.run_jobs()
        adopted = await self.get(intent)
        assert adopted.provider_reference == self.provider.charge_for(key).reference
        return adopted

    async def paid_by_card(self, intent: PaymentIntent | None = None) -> PaymentIntent:
        """An intent paid through the payments service, its answer received."""
        intent = intent or await self.intent()
        outcome = await self.treasury.payments.pay(intent.payment_intent_lookup_id, CARD)
        return outcome.intent

    async def get(self, intent: PaymentIntent) -> PaymentIntent:
        return await self.treasury.payments.get(intent.company_id, intent.id)

    async def refund(self, refund: Refund) -> Refund:
        return await self.treasury.payments.get_refund(refund.company_id, refund.id)

    async def run_jobs(self) -> int:
        return await self.treasury.jobs.run_all_due()

    async def pending_jobs(self, kind: str | None = None) -> list[Job]:
        later = self.clock.now() + timedelta(days=365)
        jobs = await self.treasury.storage.run(lambda uow: uow.jobs.due(later, 100), write=False)
        return [job for job in jobs if kind is None or job.kind == kind]

    async def events(self, company: int | None = None) -> list[Event]:
        wanted = self.company if company is None else company
        return await self.treasury.storage.run(lambda uow: uow.outbox.list(wanted), write=False)

    async def refund_updates(self) -> list[dict[str, object]]:
        return [
            dict(e.data["object"])
            for e in await self.events()
            if e.type is EventType.REFUND_UPDATED
        ]

    async def differences(self) -> list[CardDifference]:
        return await self.treasury.card_reconciliation.differences(None)

    async def difference_events(self) -> list[dict[str, object]]:
        return [
            dict(e.data["object"])
            for e in await self.events(OPERATOR)
            if e.type is EventType.CARD_RECONCILIATION_DIFFERENCE
        ]

    async def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await self.run_jobs()

    def check(self) -> None:
        check_invariants(self.treasury.storage)


def make_world(
    storage: Storage, provider_class: type[FlakyCardProvider] = FlakyCardProvider
) -> World:
    clock = FakeClock()
    provider = provider_class(clock)
    treasury = bootstrap(
        TreasuryConfig(database_url="memory://"),
        storage=storage,
        clock=clock,
        wall_clock=clock,
        card_provider=provider,
    )
    return World(treasury, clock, provider, 0, 0)


async def opened(world: World) -> World:
    created = await world.treasury.companies.create_company("Acme")
    world.company, world.account = created.company.id, created.merchant_account.id
    return world


async def _schedule(world: World, kind: str, resource: str) -> None:
    job = Job(world.treasury.ids.new_id("job"), kind, resource, world.company, world.clock.now())
    await world.treasury.storage.run(lambda uow: uow.jobs.schedule(job))


async def lost_attempt(
    world: World,
    intent: PaymentIntent,
    *,
    reached: bool = True,
    key: str | None = None,
    schedule: bool = True,
    card: CardData = CARD,
) -> str:
    """An ``authorize`` whose answer was lost: made at the provider with ``key`` (the intent's
    attempt key by default) and the intent as owner, unless it never ``reached`` it; and its
    ``resolve_charge`` job due now, unless not to ``schedule`` it. The attempt's key."""
    key = key or attempt_key(intent)
    if reached:
        world.provider.lose_answers(Call.AUTHORIZE)
        with pytest.raises(ProviderError):
            await world.provider.authorize(
                card,
                intent.billing_amount,
                intent.billing_currency,
                capture=intent.capture_method is CaptureMethod.AUTOMATIC,
                attempt_key=key,
                owner=call_owner(intent),
            )
    if schedule:
        await _schedule(world, RESOLVE_CHARGE, charge_attempt_resource(intent.id, key))
    return key


async def lost_refund(
    world: World, intent: PaymentIntent, amount: int, *, reached: bool = True
) -> Refund:
    """A ``refund`` whose answer was lost: reserved here (pending), made at the provider under
    the refund's key with its owner (unless it never ``reached`` it), and its
    ``resolve_refund`` job due now."""
    payments = world.treasury.payments
    ids = world.treasury.ids

    def reserve(uow: UnitOfWork) -> Refund:
        locked = uow.intents.get(intent.id, intent.company_id, for_update=True)
        assert locked is not None
        return payments.reserve_refund(
            uow,
            locked,
            amount,
            None,
            refund_id=ids.new_id(Refund.prefix),
            journal_id=ids.new_id("jr"),
            now=world.clock.now(),
        )

    refund = await world.treasury.storage.run(reserve)
    if reached:
        assert intent.provider_reference is not None
        world.provider.lose_answers(Call.REFUND)
        with pytest.raises(ProviderError):
            await world.provider.refund(
                intent.provider_reference,
                amount,
                key=refund_key(intent, refund.id),
                owner=call_owner(intent, refund.id),
            )
    await _schedule(world, RESOLVE_REFUND, refund.id)
    return refund
