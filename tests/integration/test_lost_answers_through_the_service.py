"""Lost and refused provider answers through the payments service itself, on every storage:
what the service leaves, what the resolution jobs make of it, and the test bed's invariant
(:func:`~treasury_core.testing.provider_agreement.provider_disagreements`) before and after."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.lost_answers import AMOUNT, CARD, World, make_world, opened
from treasury_core.errors import ProviderDidNotAct, ProviderError
from treasury_core.payments.intents import CaptureMethod, IntentStatus
from treasury_core.payments.records import RefundStatus
from treasury_core.ports import Storage
from treasury_core.services.payments.common import RESOLVE_CHARGE, RESOLVE_REFUND
from treasury_core.testing.card_providers import Call
from treasury_core.testing.provider_agreement import provider_disagreements


@pytest.fixture
async def world(storage: Storage) -> World:
    return await opened(make_world(storage))


async def disagreements(world: World) -> list[str]:
    since = world.clock.now() - timedelta(days=1)
    return await provider_disagreements(
        world.treasury.storage, world.provider, [world.company], since
    )


@pytest.mark.parametrize("capture", [CaptureMethod.AUTOMATIC, CaptureMethod.MANUAL])
async def test_a_payment_whose_answer_was_lost_is_found_and_recorded(
    world: World, capture: CaptureMethod
) -> None:
    intent = await world.intent(capture)
    world.provider.lose_answers(Call.AUTHORIZE)
    with pytest.raises(ProviderError) as lost:
        await world.treasury.payments.pay(intent.payment_intent_lookup_id, CARD)
    assert lost.value.resource == {
        "object": "payment_intent",
        "id": intent.id,
        "status": "INITIALIZED",
    }
    assert [j.kind for j in await world.pending_jobs(RESOLVE_CHARGE)] == [RESOLVE_CHARGE]
    # The provider holds money the intent does not record: the invariant says so.
    assert len(await disagreements(world)) == 1
    await world.run_jobs()
    paid = await world.get(intent)
    wanted = (
        IntentStatus.PROCESSED if capture is CaptureMethod.AUTOMATIC else IntentStatus.AUTHORIZED
    )
    assert paid.status is wanted
    assert len(world.provider.charges) == 1
    assert await disagreements(world) == []
    world.check()


async def test_a_payment_the_provider_refused_leaves_nothing_to_ask(world: World) -> None:
    intent = await world.intent()
    world.provider.refuse_calls(Call.AUTHORIZE)
    with pytest.raises(ProviderDidNotAct):
        await world.treasury.payments.pay(intent.payment_intent_lookup_id, CARD)
    assert await world.pending_jobs(RESOLVE_CHARGE) == []
    assert (await world.get(intent)).status is IntentStatus.INITIALIZED
    # Paid again: one charge, under the same attempt key.
    await world.paid_by_card(intent)
    assert len(world.provider.charges) == 1
    assert await disagreements(world) == []


async def test_a_refund_whose_answer_was_lost_is_found_and_settled(world: World) -> None:
    intent = await world.paid_by_card()
    world.provider.lose_answers(Call.REFUND)
    with pytest.raises(ProviderError) as lost:
        await world.treasury.payments.refund(intent.company_id, intent.id, amount=AMOUNT // 4)
    resource = lost.value.resource
    assert resource is not None
    assert (resource["object"], resource["status"]) == ("refund", "pending")
    assert await disagreements(world)  # refunded there, pending here with nobody's reference
    await world.run_jobs()
    [refund] = await world.treasury.payments.refunds(intent.company_id, intent.id)
    assert (refund.id, refund.status) == (resource["id"], RefundStatus.SUCCEEDED)
    assert await world.pending_jobs(RESOLVE_REFUND) == []
    assert await disagreements(world) == []
    world.check()


async def test_a_refund_the_provider_never_made_fails_and_gives_its_amount_back(
    world: World,
) -> None:
    intent = await world.paid_by_card()
    world.provider.refuse_calls(Call.REFUND)
    with pytest.raises(ProviderDidNotAct) as refused:
        await world.treasury.payments.refund(intent.company_id, intent.id, amount=AMOUNT)
    assert refused.value.resource is not None
    assert refused.value.resource["status"] == "failed"
    [refund] = await world.treasury.payments.refunds(intent.company_id, intent.id)
    assert (refund.status, refund.failure_reason) == (RefundStatus.FAILED, "provider_did_not_act")
    assert (await world.get(intent)).amount_refundable == AMOUNT
    assert await world.pending_jobs(RESOLVE_REFUND) == []
    assert await disagreements(world) == []
    world.check()
