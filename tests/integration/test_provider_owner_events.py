"""Provider events about a charge or refund whose answer was lost, found by their owner.

The flaky provider's events name the owner our keyed call set (as Stripe's metadata does).
Each case is applied in both orders against the resolution job (event first, job first) and
delivered twice, on every storage.
"""

from __future__ import annotations

import pytest

from tests.lost_answers import AMOUNT, World, lost_attempt, lost_refund, make_world, opened
from treasury_core.payments.intents import CaptureMethod, IntentStatus
from treasury_core.payments.records import RefundStatus
from treasury_core.ports import Storage
from treasury_core.ports.card_provider import (
    CallOwner,
    CardData,
    CardProviderEvent,
    CardProviderEventKind,
    CardProviderStatus,
)
from treasury_core.services.payments.vocabulary import RESOLVE_CHARGE, call_owner
from treasury_core.testing.fakes.card_providers import FLAKY_THREE_D_SECURE_CARD, Call

K = CardProviderEventKind
S = CardProviderStatus


@pytest.fixture
async def world(storage: Storage) -> World:
    return await opened(make_world(storage))


async def apply(world: World, event: CardProviderEvent) -> str:
    return (await world.treasury.provider_events.apply(event)).result.value


@pytest.mark.parametrize(
    ("capture", "kind", "status"),
    [
        (CaptureMethod.MANUAL, K.AUTHORIZED, IntentStatus.AUTHORIZED),
        (CaptureMethod.AUTOMATIC, K.CAPTURED, IntentStatus.PROCESSED),
    ],
)
async def test_an_event_before_the_job_records_the_charge(
    world: World, capture: CaptureMethod, kind: K, status: IntentStatus
) -> None:
    intent = await world.intent(capture)
    key = await lost_attempt(world, intent)
    charge = world.provider.charge_for(key)
    event = world.provider.event(kind, charge.reference)
    assert await apply(world, event) == "applied"
    now = await world.get(intent)
    assert (now.status, now.provider_reference) == (status, charge.reference)
    types = [e.type for e in await world.events()]
    # Delivered again: recorded once.
    assert await apply(world, event) == "duplicate"
    # The job runs after: the charge is the intent's already, nothing changes.
    await world.run_jobs()
    assert await world.get(intent) == now
    assert [e.type for e in await world.events()] == types
    assert charge.holds_money and len(world.provider.charges) == 1
    assert await world.pending_jobs(RESOLVE_CHARGE) == []
    world.check()


async def test_an_event_after_the_job_changes_nothing(world: World) -> None:
    intent = await world.intent()
    key = await lost_attempt(world, intent)
    await world.run_jobs()
    recorded = await world.get(intent)
    assert recorded.status is IntentStatus.PROCESSED
    event = world.provider.event(K.CAPTURED, world.provider.charge_for(key).reference)
    assert await apply(world, event) == "nothing_to_do"
    assert await world.get(intent) == recorded
    world.check()


async def test_a_3ds_charge_passed_at_the_provider_is_recorded_by_its_event(
    world: World,
) -> None:
    intent = await world.intent(CaptureMethod.MANUAL)
    three_ds = CardData(FLAKY_THREE_D_SECURE_CARD, 12, 2040, "123")
    key = await lost_attempt(world, intent, card=three_ds, schedule=False)
    event = world.provider.finish_challenge(world.provider.charge_for(key).reference)
    assert await apply(world, event) == "applied"
    assert (await world.get(intent)).status is IntentStatus.AUTHORIZED
    world.check()


async def test_an_owner_naming_another_companys_intent_is_not_trusted(world: World) -> None:
    intent = await world.intent()
    key = await lost_attempt(world, intent, schedule=False)
    other = await world.treasury.companies.create_company("Other")
    charge = world.provider.charge_for(key)
    for owner in (CallOwner(other.company.id, intent.id), CallOwner(world.company, 10**9)):
        event = world.provider.event(K.CAPTURED, charge.reference)
        forged = CardProviderEvent(
            id=event.id,
            type=event.type,
            kind=event.kind,
            reference=event.reference,
            amount=event.amount,
            currency=event.currency,
            owner=owner,
        )
        assert await apply(world, forged) == "unknown_charge"
    assert (await world.get(intent)).status is IntentStatus.INITIALIZED
    assert charge.holds_money  # nothing undone on the word of a forged owner
    world.check()


async def test_another_treasurys_charge_under_the_same_ids_is_left_alone(world: World) -> None:
    """A treasury sharing the provider account (a test database, a restored backup) repeats our
    company and intent ids, but cannot know the intent's tag: its charge, even one that would be
    an orphan here, is neither recorded nor undone."""
    intent = await world.intent()
    await world.paid_by_card(intent)
    key = await lost_attempt(world, intent, key="another-treasurys-attempt", schedule=False)
    theirs = world.provider.charge_for(key)
    event = world.provider.event(K.CAPTURED, theirs.reference)
    for tag in (None, "0" * 24):
        assert event.owner is not None
        owner = CallOwner(event.owner.company_id, event.owner.payment_intent_id, None, tag)
        forged = CardProviderEvent(
            id=f"{event.id}-{tag}",
            type=event.type,
            kind=event.kind,
            reference=event.reference,
            amount=event.amount,
            currency=event.currency,
            owner=owner,
        )
        assert await apply(world, forged) == "nothing_to_do"
    assert theirs.holds_money  # not refunded on a claim we cannot prove
    world.check()


async def test_an_event_about_an_orphan_charge_undoes_it(world: World) -> None:
    intent = await world.intent()
    await lost_attempt(world, intent, key="an-earlier-attempt", schedule=False)
    paid = await world.paid_by_card(intent)
    orphan = world.provider.charge_for("an-earlier-attempt")
    assert await apply(world, world.provider.event(K.CAPTURED, orphan.reference)) == (
        "nothing_to_do"
    )
    assert not orphan.holds_money  # its capture refunded at the provider
    assert (await world.get(intent)).provider_reference == paid.provider_reference
    world.check()


async def test_an_event_with_other_amounts_is_not_adopted(world: World) -> None:
    intent = await world.intent()
    key = await lost_attempt(world, intent, schedule=False)
    charge = world.provider.charge_for(key)
    event = world.provider.event(K.CAPTURED, charge.reference)
    odd = CardProviderEvent(
        id=event.id,
        type=event.type,
        kind=event.kind,
        reference=event.reference,
        amount=AMOUNT + 1,
        currency=event.currency,
        owner=event.owner,
    )
    assert await apply(world, odd) != "applied"
    assert (await world.get(intent)).status is IntentStatus.INITIALIZED
    world.check()


# --- refunds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("succeeded", [True, False])
async def test_a_refund_event_before_the_job_settles_the_refund(
    world: World, succeeded: bool
) -> None:
    intent = await world.paid()
    world.provider.hold_refunds()
    refund = await lost_refund(world, intent, 400)
    [made] = world.provider.refunds.values()
    event = world.provider.settle_refund(made.reference, succeeded=succeeded)
    assert await apply(world, event) == "applied"
    settled = await world.refund(refund)
    wanted = RefundStatus.SUCCEEDED if succeeded else RefundStatus.FAILED
    assert (settled.status, settled.provider_reference) == (wanted, made.reference)
    assert (await world.get(intent)).amount_refunded == (400 if succeeded else 0)
    assert await apply(world, event) == "duplicate"
    await world.run_jobs()
    assert Call.FIND_REFUND not in world.provider.calls  # no longer pending: not asked
    assert await world.refund(refund) == settled
    assert len(await world.refund_updates()) == 1
    world.check()


async def test_a_refund_event_after_the_job_finds_it_by_reference(world: World) -> None:
    intent = await world.paid()
    world.provider.hold_refunds()
    refund = await lost_refund(world, intent, 400)
    await world.run_jobs()  # pending at the provider: kept pending, with its reference
    [made] = world.provider.refunds.values()
    assert (await world.refund(refund)).provider_reference == made.reference
    event = world.provider.settle_refund(made.reference)
    assert await apply(world, event) == "applied"
    assert (await world.refund(refund)).status is RefundStatus.SUCCEEDED
    world.check()


async def test_a_refund_owner_without_the_intents_tag_is_not_trusted(world: World) -> None:
    """Ids alone can be typed into a refund made at the provider's dashboard: without the
    intent's tag, an event naming our refund in doubt settles nothing."""
    intent = await world.paid()
    world.provider.hold_refunds()
    refund = await lost_refund(world, intent, 400, reached=False)
    world.provider.hold_refunds()
    dashboard = await world.provider.refund(intent.provider_reference or "", 400)
    event = world.provider.settle_refund(dashboard.reference)
    for tag in (None, "f" * 24):
        forged = CardProviderEvent(
            id=f"{event.id}-{tag}",
            type=event.type,
            kind=event.kind,
            reference=event.reference,
            refund=event.refund,
            owner=CallOwner(world.company, intent.id, refund.id, tag),
        )
        await apply(world, forged)
        assert (await world.refund(refund)).provider_reference is None
    world.check()


async def test_an_owner_naming_a_refund_with_another_reference_is_not_trusted(
    world: World,
) -> None:
    intent = await world.paid()
    world.provider.hold_refunds(2)
    first = await lost_refund(world, intent, 400)
    await world.run_jobs()  # first: pending at the provider, its reference known
    second = await lost_refund(world, intent, 300, reached=False)
    [made] = world.provider.refunds.values()
    event = world.provider.settle_refund(made.reference)
    # The event names the second refund as owner, but the refund it is about is the first's.
    forged = CardProviderEvent(
        id=event.id,
        type=event.type,
        kind=event.kind,
        reference=event.reference,
        refund="fk_re_unknown",
        owner=call_owner(intent, first.id),
    )
    assert await apply(world, forged) == "nothing_to_do"
    assert (await world.refund(first)).status is RefundStatus.PENDING
    assert (await world.refund(second)).status is RefundStatus.PENDING
    world.check()
