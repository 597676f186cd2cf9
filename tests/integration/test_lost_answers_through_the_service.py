"""Lost and refused provider answers through the payments service itself, on every storage:
what the service leaves, what the resolution jobs make of it, and the test bed's invariant
(:func:`~treasury_core.testing.provider_agreement.provider_disagreements`) before and after."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.lost_answers import AMOUNT, CARD, World, make_world, opened
from treasury_core import TreasuryConfig, bootstrap
from treasury_core.companies import KeyKind
from treasury_core.errors import ProviderDidNotAct, ProviderError
from treasury_core.idempotency import Claim, StoredResult
from treasury_core.payments.intents import CaptureMethod, IntentStatus
from treasury_core.payments.records import Refund, RefundStatus
from treasury_core.ports import Storage
from treasury_core.ports.card_provider import CallOwner, CardProviderResult
from treasury_core.services.payments.vocabulary import RESOLVE_CHARGE, RESOLVE_REFUND
from treasury_core.testing import FlakyCardProvider
from treasury_core.testing.fakes.card_providers import Call
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


class TimesOutFirst(FlakyCardProvider):
    """The first refund times out on our side before the provider acted (its request may be
    running there still); later calls behave."""

    timed_out = False

    async def refund(
        self,
        reference: str,
        amount: int,
        *,
        key: str | None = None,
        owner: CallOwner | None = None,
    ) -> CardProviderResult:
        if not self.timed_out:
            self.timed_out = True
            raise ProviderError("The card provider did not answer in time")
        return await super().refund(reference, amount, key=key, owner=owner)


async def test_a_same_key_retry_never_crosses_the_resolution_job(storage: Storage) -> None:
    """A client's retry (one process) and the resolution job (a worker, another process) about
    one refund in doubt: both only ask, so neither can make the provider pay a refund the other
    has just failed. After the asking window the refund is failed as never made, and the retry
    with the same key then makes a new refund, once."""
    world = await opened(make_world(storage, TimesOutFirst))
    worker = bootstrap(
        TreasuryConfig(database_url="memory://"),
        storage=storage,
        clock=world.clock,
        wall_clock=world.clock,
        card_provider=world.provider,
    )
    web = world.treasury
    intent = await world.paid_by_card()

    async def attempt() -> Refund:
        claim = await web.idempotency.claim(world.company, "k1", "f" * 64, kind=KeyKind.SECRET)
        assert isinstance(claim, Claim)
        try:
            return await web.payments.refund(
                world.company,
                intent.id,
                amount=AMOUNT // 2,
                idempotency=claim.ticket(lambda refund: StoredResult(200, refund.id.encode())),
            )
        except ProviderError:
            await web.idempotency.release(claim)
            raise

    with pytest.raises(ProviderError):
        await attempt()
    await worker.jobs.run_all_due()  # first ask: nothing found yet
    with pytest.raises(ProviderError) as asked:
        await attempt()  # the retry asks too, and acts on nothing
    assert asked.value.resource is not None
    assert asked.value.resource["status"] == "pending"
    # Neither the job nor the retry asked the provider to refund: only to say what it did.
    assert world.provider.calls.count(Call.REFUND) == 0
    assert world.provider.calls.count(Call.FIND_REFUND) == 2
    for minutes in (1, 2, 4):
        world.clock.advance(minutes * 60)
        await worker.jobs.run_all_due()
    [failed] = await web.payments.refunds(world.company, intent.id)
    assert failed.status is RefundStatus.FAILED
    made = await attempt()
    assert made.id != failed.id
    assert made.status is RefundStatus.SUCCEEDED
    assert world.provider.calls.count(Call.REFUND) == 1
    assert sum(r.amount for r in world.provider.refunds.values()) == AMOUNT // 2
    assert await disagreements(world) == []
    world.check()
