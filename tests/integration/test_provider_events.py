"""The provider-events service with the sandbox card provider, in memory and on an SQLite file.

The events are the port's own (:class:`CardProviderEvent`), as an adapter hands them over after
verifying a delivery; the Stripe adapter's reading of Stripe's JSON is tested on its own
(tests/unit/test_stripe_events.py) and end to end through HTTP
(tests/integration/test_stripe_webhooks.py, tests/e2e/test_stripe_webhook_delivery.py). Here:
an attempt waiting for 3-D Secure finished or failed by an event, a hold released at the
provider after its deadline, a charge the intent no longer uses, and a replay, on both storages
(the charge is found through the payment attempt's lookup key, which each must index).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.ledger.postings import PendingStatus
from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import (
    CancellationReason,
    CaptureMethod,
    IntentStatus,
    PaymentIntent,
)
from treasury_core.payments.records import Chargeback, Transaction, TransactionStatus
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports.card_provider import (
    BadProviderEvent,
    CardData,
    CardProviderEvent,
    CardProviderEventKind,
)
from treasury_core.services.payments.provider_events import EventResult
from treasury_core.testing import FakeClock, MemoryStorage, check_invariants

K = CardProviderEventKind
CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")
THREE_D_SECURE = CardData(number="4000000000003220", expiry_month=12, expiry_year=2040, cvc="123")
_ids = itertools.count(1)
_M, _A = CaptureMethod.MANUAL, CaptureMethod.AUTOMATIC


@dataclass
class World:
    treasury: Treasury
    clock: FakeClock
    company: int
    account: int

    async def create(self, capture: CaptureMethod) -> PaymentIntent:
        request = CreateIntentRequest(
            account_id=self.account,
            billing_amount=1_000,
            billing_currency="USD",
            payment_type="Card Payment",
            capture_method=capture,
        )
        return await self.treasury.payments.create(self.company, request)

    async def challenged(self, capture: CaptureMethod) -> tuple[PaymentIntent, Transaction]:
        intent = await self.create(capture)
        outcome = await self.treasury.payments.pay(intent.payment_intent_lookup_id, THREE_D_SECURE)
        assert outcome.transaction.status is TransactionStatus.REQUIRES_ACTION
        return outcome.intent, outcome.transaction

    async def get(self, intent: PaymentIntent) -> PaymentIntent:
        return await self.treasury.payments.get(self.company, intent.id)

    async def transaction(self, txn_id: str) -> Transaction:
        found = await self.treasury.storage.run(
            lambda uow: uow.records.get(Transaction, txn_id, self.company), write=False
        )
        assert found is not None
        return found

    async def event_types(self) -> list[str]:
        events = await self.treasury.storage.run(
            lambda uow: uow.outbox.list(self.company), write=False
        )
        return [event.type.value for event in events]

    async def apply(self, kind: K, reference: str | None, event_id: str | None = None) -> str:
        event = CardProviderEvent(
            id=event_id or f"evt_{next(_ids)}", type=f"test.{kind}", kind=kind, reference=reference
        )
        return (await self.treasury.provider_events.apply(event)).result.value


@pytest.fixture(params=["memory", "sqlite"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    clock = FakeClock()
    if request.param == "memory":
        treasury = bootstrap(
            TreasuryConfig(database_url="memory://"),
            storage=MemoryStorage(),
            clock=clock,
            wall_clock=clock,
        )
    else:
        config = TreasuryConfig(database_url=f"sqlite:///{tmp_path / 'events.db'}")
        treasury = bootstrap(config, clock=clock, wall_clock=clock)
    created = await treasury.companies.create_company("Acme")
    try:
        yield World(treasury, clock, created.company.id, created.merchant_account.id)
        check_invariants(treasury.storage)
    finally:
        treasury.close()


@pytest.mark.parametrize(
    ("capture", "kind", "status", "event"),
    [
        (_M, K.AUTHORIZED, IntentStatus.AUTHORIZED, EventType.PAYMENT_INTENT_AUTHORIZED),
        (_A, K.CAPTURED, IntentStatus.PROCESSED, EventType.PAYMENT_INTENT_SUCCEEDED),
    ],
)
async def test_an_event_finishes_an_attempt_waiting_for_3ds(
    world: World, capture: CaptureMethod, kind: K, status: IntentStatus, event: EventType
) -> None:
    intent, txn = await world.challenged(capture)
    assert await world.apply(kind, txn.provider_reference, "evt_3ds") == "applied"
    now = await world.get(intent)
    assert now.status is status
    assert (await world.transaction(txn.id)).status is TransactionStatus.COMPLETED
    types = await world.event_types()
    assert types[-2:] == [EventType.TRANSACTION_COMPLETED.value, event.value]
    # Delivered again: the attempt is no longer waiting, and nothing moves twice.
    assert await world.apply(kind, txn.provider_reference, "evt_3ds") != "applied"
    assert await world.event_types() == types
    assert await world.get(intent) == now


@pytest.mark.parametrize("kind", [K.PAYMENT_FAILED, K.CANCELED])
async def test_an_event_fails_an_attempt_waiting_for_3ds(world: World, kind: K) -> None:
    intent, txn = await world.challenged(CaptureMethod.AUTOMATIC)
    assert await world.apply(kind, txn.provider_reference) == "applied"
    assert (await world.get(intent)).status is IntentStatus.INITIALIZED
    assert (await world.transaction(txn.id)).status is TransactionStatus.FAILED
    assert (await world.event_types())[-1] == EventType.PAYMENT_INTENT_PAYMENT_FAILED.value
    # The customer can still pay.
    paid = await world.treasury.payments.pay(intent.payment_intent_lookup_id, CARD)
    assert paid.intent.status is IntentStatus.PROCESSED


async def test_a_hold_released_after_its_deadline_expires(world: World) -> None:
    intent = await world.create(CaptureMethod.MANUAL)
    intent = (await world.treasury.payments.pay(intent.payment_intent_lookup_id, CARD)).intent
    assert intent.authorization_expires_at is not None
    # Past the deadline, before the expiry job ran: the event does what the job would.
    world.clock.advance((intent.authorization_expires_at - world.clock.now()).total_seconds())
    assert await world.apply(K.CANCELED, intent.provider_reference) == "applied"
    now = await world.get(intent)
    assert (now.status, now.cancellation_reason) == (
        IntentStatus.CANCELLED,
        CancellationReason.EXPIRED,
    )
    [hold] = intent.hold_pending_ids
    pending = await world.treasury.storage.run(
        lambda uow: uow.ledger.get_pending(hold), write=False
    )
    assert pending is not None and pending.status is PendingStatus.EXPIRED
    # The job finds nothing left to do.
    await world.treasury.jobs.run_due()
    assert await world.get(intent) == now


async def test_an_event_about_a_charge_the_intent_no_longer_uses(world: World) -> None:
    intent = await world.create(CaptureMethod.MANUAL)
    first = (await world.treasury.payments.pay(intent.payment_intent_lookup_id, CARD)).intent
    await world.treasury.payments.cancel(world.company, intent.id)
    again = (await world.treasury.payments.pay(intent.payment_intent_lookup_id, CARD)).intent
    assert again.status is IntentStatus.AUTHORIZED
    assert first.provider_reference != again.provider_reference
    # The first charge's hold is announced released: the intent holds the second one.
    assert await world.apply(K.CANCELED, first.provider_reference) == "nothing_to_do"
    assert await world.get(intent) == again


async def test_events_without_a_known_charge_change_nothing(world: World) -> None:
    events = await world.event_types()
    assert await world.apply(K.CANCELED, "ch_unknown") == EventResult.UNKNOWN_CHARGE.value
    assert await world.apply(K.CANCELED, None) == EventResult.NOT_MAPPED.value
    assert await world.event_types() == events


async def test_the_sandbox_sends_no_events(world: World) -> None:
    assert world.treasury.provider_events.supported() is False
    with pytest.raises(BadProviderEvent) as refused:
        await world.treasury.provider_events.receive(b"{}", {})
    assert refused.value.code == "provider_events_unsupported"


@pytest.fixture(params=["sqlite", "postgres"])
def shared_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One database that two treasuries (two processes' worth of services) share."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return str(request.getfixturevalue("postgres_url"))


async def test_one_event_delivered_to_two_processes_at_once_applies_once(
    shared_database: str,
) -> None:
    clock = FakeClock()
    config = TreasuryConfig(database_url=shared_database, pool_size=4)
    first = bootstrap(config, clock=clock, wall_clock=clock)
    second = bootstrap(config, clock=clock, wall_clock=clock, migrate=False)
    try:
        created = await first.companies.create_company("Acme")
        world = World(first, clock, created.company.id, created.merchant_account.id)
        intent = await world.create(CaptureMethod.AUTOMATIC)
        intent = (await first.payments.pay(intent.payment_intent_lookup_id, CARD)).intent
        event = CardProviderEvent(
            id="evt_twice",
            type="charge.dispute.created",
            kind=K.DISPUTE_OPENED,
            reference=intent.provider_reference,
            amount=1_000,
            currency="USD",
            dispute="dp_twice",
        )
        # Each process has its own in-process locks: only the database keeps them apart.
        outcomes = await asyncio.gather(
            first.provider_events.apply(event), second.provider_events.apply(event)
        )
        assert sorted(o.result.value for o in outcomes) == ["applied", "duplicate"]
        chargebacks = await first.storage.run(
            lambda uow: uow.records.list(Chargeback, world.company, 10, None), write=False
        )
        assert [c.amount for c in chargebacks] == [1_000]
        check_invariants(first.storage)
    finally:
        second.close()
        first.close()
