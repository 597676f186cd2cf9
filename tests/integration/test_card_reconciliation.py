"""Card reconciliation: the flaky provider's recent charges against the records, every storage."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tests.lost_answers import AMOUNT, CARD, World, lost_attempt, make_world, opened
from treasury_aiohttp.worker import work_loop
from treasury_core.interface.urls import INTERFACE_PATHS
from treasury_core.payments.card_differences import CardDifferenceKind, CardDifferenceStatus
from treasury_core.payments.intents import CaptureMethod, IntentStatus
from treasury_core.ports import Storage
from treasury_core.ports.card_provider import CallOwner, CardProviderEventKind, CardProviderStatus
from treasury_core.services.payments.card_reconciliation import CardReconciliation
from treasury_core.services.payments.charging import Charging
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.jobs import RELEASE_ATTEMPTS
from treasury_core.testing import MemoryStorage
from treasury_core.testing.fakes.card_providers import Call

D = CardDifferenceKind
OPEN, RESOLVED = CardDifferenceStatus.OPEN, CardDifferenceStatus.RESOLVED


@pytest.fixture
async def world(storage: Storage) -> World:
    return await opened(make_world(storage))


async def kinds(world: World) -> dict[D, CardDifferenceStatus]:
    return {d.kind: d.status for d in await world.differences()}


async def test_a_charge_for_a_waiting_intent_is_adopted_once(world: World) -> None:
    intent = await world.intent()
    key = await lost_attempt(world, intent, schedule=False)  # its job and event both lost
    report = await world.treasury.card_reconciliation.run()
    assert (report.charges, report.adopted) == (1, 1)
    now = await world.get(intent)
    assert (now.status, now.provider_reference) == (
        IntentStatus.PROCESSED,
        world.provider.charge_for(key).reference,
    )
    assert await kinds(world) == {D.CHARGE_ADOPTED: RESOLVED}
    # Run again: the charge is the intent's own now and agrees; nothing recorded twice.
    again = await world.treasury.card_reconciliation.run()
    assert (again.adopted, again.differing) == (0, 0)
    assert len(await world.difference_events()) == 1
    world.check()


async def test_an_orphan_is_undone_reported_and_resolved_when_it_holds_nothing(
    world: World,
) -> None:
    intent = await world.intent()
    await lost_attempt(world, intent, key="an-earlier-attempt", schedule=False)
    paid = await world.paid_by_card(intent)
    report = await world.treasury.card_reconciliation.run()
    assert report.orphans == 1
    orphan = world.provider.charge_for("an-earlier-attempt")
    assert not orphan.holds_money
    [difference] = await world.differences()
    assert (difference.kind, difference.status, difference.provider_reference) == (
        D.ORPHAN_CHARGE,
        OPEN,
        orphan.reference,
    )
    assert paid.provider_reference is not None
    assert paid.provider_reference in difference.detail
    # The next run finds it holding nothing: resolved, still one record, one announcement.
    await world.treasury.card_reconciliation.run()
    assert await kinds(world) == {D.ORPHAN_CHARGE: RESOLVED}
    assert len(await world.difference_events()) == 1
    assert (await world.get(intent)).provider_reference == paid.provider_reference
    world.check()


async def test_refunded_amounts_that_differ_are_reported_not_repaired(world: World) -> None:
    intent = await world.paid()
    assert intent.provider_reference is not None
    # Refunded at the provider's dashboard, its event lost.
    await world.provider.refund(intent.provider_reference, 100)
    reconciliation = world.treasury.card_reconciliation
    assert (await reconciliation.run()).differing == 1
    [difference] = await world.differences()
    assert (difference.kind, difference.provider_amount, difference.recorded_amount) == (
        D.REFUNDED_DIFFERS,
        100,
        0,
    )
    assert (await world.get(intent)).amount_refunded == 0  # not repaired by itself
    await reconciliation.run()
    assert len(await world.difference_events()) == 1  # found again: not announced again
    # The provider's refunded total arrives after all: recorded, and the next run agrees.
    event = world.provider.event(CardProviderEventKind.REFUNDED, intent.provider_reference)
    assert (await world.treasury.provider_events.apply(event)).result.value == "applied"
    await reconciliation.run()
    assert await kinds(world) == {D.REFUNDED_DIFFERS: RESOLVED}
    world.check()


async def test_a_captured_amount_that_differs_is_reported(world: World) -> None:
    intent = await world.intent(CaptureMethod.MANUAL)
    key = await lost_attempt(world, intent)
    await world.run_jobs()
    reference = world.provider.charge_for(key).reference
    await world.provider.capture(reference, AMOUNT)  # at the provider, its event lost
    await world.treasury.card_reconciliation.run()
    [difference] = await world.differences()
    assert (difference.kind, difference.provider_amount, difference.recorded_amount) == (
        D.CAPTURED_DIFFERS,
        AMOUNT,
        0,
    )
    assert (await world.get(intent)).status is IntentStatus.AUTHORIZED
    world.check()


async def test_charges_made_without_us_are_ignored(world: World) -> None:
    intent = await world.intent()
    unowned = await world.provider.authorize(CARD, AMOUNT, "USD", capture=True)
    stranger = await world.provider.authorize(
        CARD, AMOUNT, "USD", capture=True, owner=CallOwner(world.company + 1, intent.id)
    )
    report = await world.treasury.card_reconciliation.run()
    assert (report.charges, report.adopted, report.orphans) == (2, 0, 0)
    assert world.provider.charges[unowned.reference].holds_money
    assert world.provider.charges[stranger.reference].holds_money
    assert await world.differences() == []
    assert (await world.get(intent)).status is IntentStatus.INITIALIZED


async def test_only_charges_in_the_window_are_asked_for(world: World) -> None:
    intent = await world.intent()
    await lost_attempt(world, intent, schedule=False)
    world.clock.advance(world.treasury.card_reconciliation.window.total_seconds() + 1)
    report = await world.treasury.card_reconciliation.run()
    assert (report.charges, report.adopted) == (0, 0)
    assert (await world.get(intent)).status is IntentStatus.INITIALIZED


async def test_a_provider_that_does_not_list_is_tried_next_run(world: World) -> None:
    world.provider.lose_answers(Call.RECENT_CHARGES)
    report = await world.treasury.card_reconciliation.run()
    assert report.failed is not None
    assert (await world.treasury.card_reconciliation.run()).failed is None


async def test_workers_run_it_once_per_period_between_them(world: World) -> None:
    first = world.treasury.card_reconciliation
    assert first.every == timedelta(hours=1)
    # A second worker over the same database.
    second = _reconciliation(world, every=first.every, window=first.window)
    assert await first.run_if_due() is not None
    assert await second.run_if_due() is None
    assert await first.run_if_due() is None
    assert world.provider.calls.count(Call.RECENT_CHARGES) == 1
    world.clock.advance(3600)
    ran = [await second.run_if_due(), await first.run_if_due()]
    assert ran[0] is not None and ran[1] is None
    assert world.provider.calls.count(Call.RECENT_CHARGES) == 2


async def test_the_worker_loop_resolves_and_reconciles() -> None:
    world = await opened(make_world(MemoryStorage()))
    resolved = await world.intent()
    await lost_attempt(world, resolved)  # its job due now
    missed = await world.intent()
    await lost_attempt(world, missed, schedule=False)  # only reconciliation finds it
    stop = asyncio.Event()
    await work_loop(world.treasury, stop, after_pass=stop.set)  # one whole pass
    assert world.provider.calls.count(Call.RECENT_CHARGES) == 1
    for intent in (resolved, missed):
        assert (await world.get(intent)).status is IntentStatus.PROCESSED
    assert await kinds(world) == {D.CHARGE_ADOPTED: RESOLVED}
    world.check()


async def test_a_hold_released_here_but_not_at_the_provider_is_released_there(
    world: World,
) -> None:
    intent = await world.intent(CaptureMethod.MANUAL)
    key = await lost_attempt(world, intent)
    await world.run_jobs()
    hold = world.provider.charge_for(key)
    # The authorization expires here; every release at the provider is refused.
    world.provider.refuse_calls(Call.VOID, RELEASE_ATTEMPTS)
    await world.advance(7 * 24 * 3600 + 1)
    for _ in range(RELEASE_ATTEMPTS):
        await world.advance(6 * 3600)
    assert (await world.get(intent)).status is IntentStatus.CANCELLED
    assert hold.status is CardProviderStatus.AUTHORIZED
    # A window reaching back past the authorization's 7 days (the default's 48 h does not).
    reconciliation = _reconciliation(world, every=None, window=timedelta(days=30))
    report = await reconciliation.run()
    assert report.orphans == 1
    assert hold.status is CardProviderStatus.VOIDED
    assert await kinds(world) == {D.ORPHAN_CHARGE: OPEN}
    await reconciliation.run()
    assert await kinds(world) == {D.ORPHAN_CHARGE: RESOLVED}
    world.check()


def _reconciliation(
    world: World, *, every: timedelta | None, window: timedelta
) -> CardReconciliation:
    """A reconciliation over the world's database and provider, built as another worker
    process builds its own."""
    context, provider = world.treasury.adapters, world.treasury.payments.provider
    steps = IntentSteps(context=context, provider=provider)
    charging = Charging(
        context=context, steps=steps, provider=provider, hosted_pages=INTERFACE_PATHS
    )
    return CardReconciliation(
        context=context,
        steps=steps,
        provider=provider,
        charging=charging,
        every=every,
        window=window,
    )
