"""The jobs that ask the card provider what a call whose answer was lost did, on every storage.

Each test starts from the state a lost answer leaves (tests/lost_answers.py: the record in
doubt, the provider's side as the call left it, the job due now), runs the job runner as the
worker does, and checks the records, the events and the ledger against what the flaky
provider holds.
"""

from __future__ import annotations

import logging

import pytest

from tests.lost_answers import AMOUNT, World, lost_attempt, lost_refund, make_world, opened
from treasury_core.payments.card_differences import CardDifferenceKind, CardDifferenceStatus
from treasury_core.payments.intents import CaptureMethod, IntentStatus
from treasury_core.payments.records import RefundStatus
from treasury_core.ports import Storage
from treasury_core.ports.card_provider import CardProviderEventKind, CardProviderStatus
from treasury_core.services.payments.provider_resolution import (
    ASKS,
    FIRST_RETRY,
    NOT_FOUND_ASKS,
    NOT_MADE,
)
from treasury_core.services.payments.vocabulary import (
    RESOLVE_CHARGE,
    RESOLVE_REFUND,
    call_owner,
    refund_key,
)
from treasury_core.testing import FlakyCardProvider
from treasury_core.testing.fakes.card_providers import Call

S = CardProviderStatus
K = CardProviderEventKind
MINUTE = FIRST_RETRY.total_seconds()


@pytest.fixture
async def world(storage: Storage) -> World:
    return await opened(make_world(storage))


class WithoutLookups(FlakyCardProvider):
    def lookups_supported(self) -> bool:
        return False


# --- refunds ----------------------------------------------------------------------------------


async def test_a_refund_made_at_the_provider_succeeds(world: World) -> None:
    intent = await world.paid()
    refund = await lost_refund(world, intent, 400)
    assert await world.run_jobs() == 1
    done = await world.refund(refund)
    [made] = world.provider.refunds.values()
    assert (done.status, done.provider_reference) == (RefundStatus.SUCCEEDED, made.reference)
    [update] = await world.refund_updates()
    assert (update["id"], update["status"]) == (refund.id, "succeeded")
    # The provider's refunds and ours agree: 400 back on the card, 600 still refundable.
    charge = world.provider.charges[made.charge]
    assert charge.amount_refunded == 400 == (await world.get(intent)).amount_refunded
    assert await world.pending_jobs() != []  # the payout, not another question
    assert await world.pending_jobs(RESOLVE_REFUND) == []
    world.check()


async def test_a_refund_that_never_reached_the_provider_fails_and_gives_back(
    world: World,
) -> None:
    intent = await world.paid()
    refund = await lost_refund(world, intent, 400, reached=False)
    assert (await world.get(intent)).amount_refundable == AMOUNT - 400
    await world.run_jobs()
    # Not found at once is not yet "never made": asked again after 1, 2 and 4 minutes.
    for minutes in (1, 2, 4):
        assert (await world.refund(refund)).status is RefundStatus.PENDING
        [retry] = await world.pending_jobs(RESOLVE_REFUND)
        assert retry.due_at == world.clock.now() + minutes * FIRST_RETRY
        await world.advance(minutes * MINUTE)
    assert world.provider.calls.count(Call.FIND_REFUND) == NOT_FOUND_ASKS
    failed = await world.refund(refund)
    assert (failed.status, failed.failure_reason) == (RefundStatus.FAILED, NOT_MADE)
    assert world.provider.refunds == {}
    assert (await world.get(intent)).amount_refundable == AMOUNT
    [update] = await world.refund_updates()
    assert (update["status"], update["failure_reason"]) == ("failed", NOT_MADE)
    world.check()


async def test_a_refund_made_late_by_the_provider_is_found_on_a_later_ask(world: World) -> None:
    """The first call was still running at the provider when the job first asked: found on
    the next ask, it succeeds rather than failing while the provider pays it."""
    intent = await world.paid()
    refund = await lost_refund(world, intent, 400, reached=False)
    await world.run_jobs()
    assert (await world.refund(refund)).status is RefundStatus.PENDING
    # The provider makes it now, under the refund's key, as the late first call would.
    await world.provider.refund(
        intent.provider_reference or "",
        400,
        key=refund_key(intent, refund.id),
        owner=call_owner(intent, refund.id),
    )
    await world.advance(MINUTE)
    assert (await world.refund(refund)).status is RefundStatus.SUCCEEDED
    assert await world.pending_jobs(RESOLVE_REFUND) == []
    world.check()


async def test_a_refund_pending_at_the_provider_waits_for_its_event(world: World) -> None:
    intent = await world.paid()
    world.provider.hold_refunds()
    refund = await lost_refund(world, intent, 1_000)
    await world.run_jobs()
    [made] = world.provider.refunds.values()
    waiting = await world.refund(refund)
    assert (waiting.status, waiting.provider_reference) == (RefundStatus.PENDING, made.reference)
    assert await world.refund_updates() == []  # nothing a receiver sees changed yet
    # The provider's event finds it by the reference the job kept.
    event = world.provider.settle_refund(made.reference)
    outcome = await world.treasury.provider_events.apply(event)
    assert outcome.result.value == "applied"
    assert (await world.refund(refund)).status is RefundStatus.SUCCEEDED
    world.check()


async def test_a_refund_the_provider_failed_is_failed_here(world: World) -> None:
    intent = await world.paid()
    world.provider.hold_refunds()
    refund = await lost_refund(world, intent, 300)
    [made] = world.provider.refunds.values()
    world.provider.settle_refund(made.reference, succeeded=False)  # its event is lost too
    await world.run_jobs()
    failed = await world.refund(refund)
    assert (failed.status, failed.failure_reason) == (RefundStatus.FAILED, "refund_failed")
    assert failed.provider_reference == made.reference
    assert (await world.get(intent)).amount_refundable == AMOUNT
    world.check()


async def test_a_failed_question_is_asked_again_with_doubling_delays(world: World) -> None:
    intent = await world.paid()
    refund = await lost_refund(world, intent, 400)
    world.provider.lose_answers(Call.FIND_REFUND, 2)
    await world.run_jobs()
    [retry] = await world.pending_jobs(RESOLVE_REFUND)
    assert retry.due_at == world.clock.now() + FIRST_RETRY
    assert (await world.refund(refund)).status is RefundStatus.PENDING
    await world.advance(MINUTE)
    [retry] = await world.pending_jobs(RESOLVE_REFUND)
    assert retry.due_at == world.clock.now() + 2 * FIRST_RETRY
    await world.advance(MINUTE)  # not due yet: nothing asked
    assert world.provider.calls.count(Call.FIND_REFUND) == 2
    await world.advance(MINUTE)
    assert world.provider.calls.count(Call.FIND_REFUND) == 3
    assert (await world.refund(refund)).status is RefundStatus.SUCCEEDED
    assert await world.pending_jobs(RESOLVE_REFUND) == []
    assert await world.differences() == []
    world.check()


async def test_a_question_never_answered_is_reported_in_doubt(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    intent = await world.paid()
    refund = await lost_refund(world, intent, 400)
    world.provider.lose_answers(Call.FIND_REFUND, ASKS)
    with caplog.at_level(logging.WARNING, logger="treasury.payments"):
        await world.run_jobs()
        for _ in range(ASKS):
            await world.advance(3600)
    assert world.provider.calls.count(Call.FIND_REFUND) == ASKS
    assert await world.pending_jobs(RESOLVE_REFUND) == []  # no loop for ever
    assert f"try {ASKS} of {ASKS}" in caplog.text
    assert any(r.levelno == logging.ERROR and "in doubt" in r.message for r in caplog.records)
    # Left as it is, its reservation held, and shown to the operator.
    assert (await world.refund(refund)).status is RefundStatus.PENDING
    [doubt] = await world.differences()
    assert (doubt.kind, doubt.status, doubt.refund_id) == (
        CardDifferenceKind.REFUND_IN_DOUBT,
        CardDifferenceStatus.OPEN,
        refund.id,
    )
    [announced] = await world.difference_events()
    assert announced["id"] == doubt.id
    # No company sees it.
    assert all(
        e.type.value != "treasury.card.reconciliation.difference" for e in await world.events()
    )
    # Reconciliation asks once more, and the refund and the difference are settled.
    report = await world.treasury.card_reconciliation.run()
    assert report.resolved == 1
    assert (await world.refund(refund)).status is RefundStatus.SUCCEEDED
    [resolved] = await world.differences()
    assert resolved.status is CardDifferenceStatus.RESOLVED
    world.check()


async def test_a_provider_without_lookups_leaves_the_refund_to_its_events(
    storage: Storage,
) -> None:
    world = await opened(make_world(storage, WithoutLookups))
    intent = await world.paid_by_card()
    refund = await lost_refund(world, intent, 400)
    await world.run_jobs()
    assert Call.FIND_REFUND not in world.provider.calls
    assert await world.pending_jobs(RESOLVE_REFUND) == []
    assert (await world.refund(refund)).status is RefundStatus.PENDING
    [doubt] = await world.differences()
    assert doubt.kind is CardDifferenceKind.REFUND_IN_DOUBT
    # Its event, naming the refund by owner, settles it and the doubt.
    [made] = world.provider.refunds.values()
    event = world.provider.event(K.REFUND_SUCCEEDED, made.charge, refund=made.reference)
    assert (await world.treasury.provider_events.apply(event)).result.value == "applied"
    settled = await world.refund(refund)
    assert (settled.status, settled.provider_reference) == (RefundStatus.SUCCEEDED, made.reference)
    [resolved] = await world.differences()
    assert resolved.status is CardDifferenceStatus.RESOLVED
    world.check()


async def test_a_refund_settled_before_its_job_is_not_asked_about(world: World) -> None:
    intent = await world.paid()
    refund = await lost_refund(world, intent, 400)
    [made] = world.provider.refunds.values()
    event = world.provider.event(K.REFUND_SUCCEEDED, made.charge, refund=made.reference)
    await world.treasury.provider_events.apply(event)
    await world.run_jobs()
    assert Call.FIND_REFUND not in world.provider.calls
    assert (await world.refund(refund)).status is RefundStatus.SUCCEEDED
    assert len(await world.refund_updates()) == 1
    world.check()


# --- charges ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capture", "status", "provider_status"),
    [
        (CaptureMethod.MANUAL, IntentStatus.AUTHORIZED, S.AUTHORIZED),
        (CaptureMethod.AUTOMATIC, IntentStatus.PROCESSED, S.CAPTURED),
    ],
)
async def test_a_charge_made_at_the_provider_is_recorded(
    world: World, capture: CaptureMethod, status: IntentStatus, provider_status: CardProviderStatus
) -> None:
    intent = await world.intent(capture)
    key = await lost_attempt(world, intent)
    await world.run_jobs()
    charge = world.provider.charge_for(key)
    now = await world.get(intent)
    assert (now.status, now.provider_reference) == (status, charge.reference)
    assert charge.status is provider_status
    assert len(world.provider.charges) == 1
    assert await world.pending_jobs(RESOLVE_CHARGE) == []
    if capture is CaptureMethod.MANUAL:
        # Recorded as a hold like any other: capturing it captures the provider's charge.
        await world.treasury.payments.capture(world.company, intent.id)
        assert charge.status is S.CAPTURED
        assert charge.amount_captured == AMOUNT
    world.check()


async def test_nothing_found_is_asked_again_before_it_is_taken_as_not_made(
    world: World,
) -> None:
    intent = await world.intent()
    await lost_attempt(world, intent, reached=False)
    await world.run_jobs()
    for minutes in (1, 2, 4):
        [retry] = await world.pending_jobs(RESOLVE_CHARGE)
        assert retry.due_at == world.clock.now() + minutes * FIRST_RETRY
        await world.advance(minutes * MINUTE)
    assert world.provider.calls.count(Call.FIND_CHARGE) == NOT_FOUND_ASKS
    assert await world.pending_jobs(RESOLVE_CHARGE) == []
    assert (await world.get(intent)).status is IntentStatus.INITIALIZED
    assert await world.differences() == []
    world.check()


async def test_a_charge_found_on_a_later_ask_is_recorded(world: World) -> None:
    # The provider's search lags behind its charges: the first ask finds nothing.
    intent = await world.intent()
    key = await lost_attempt(world, intent, reached=False)
    await world.run_jobs()
    await lost_attempt(world, intent, schedule=False)  # now the search shows it
    await world.advance(MINUTE)
    assert world.provider.calls.count(Call.FIND_CHARGE) == 2
    now = await world.get(intent)
    assert now.provider_reference == world.provider.charge_for(key).reference
    assert now.status is IntentStatus.PROCESSED
    assert len(world.provider.charges) == 1
    world.check()


@pytest.mark.parametrize("capture", [CaptureMethod.MANUAL, CaptureMethod.AUTOMATIC])
async def test_an_orphan_charge_is_undone_at_the_provider(
    world: World, capture: CaptureMethod
) -> None:
    intent = await world.intent(capture)
    # An earlier attempt's charge, its answer lost; then the intent was paid by another.
    await lost_attempt(world, intent, key="an-earlier-attempt")
    paid = await world.paid_by_card(intent)
    await world.run_jobs()
    orphan = world.provider.charge_for("an-earlier-attempt")
    assert orphan.status is (S.CAPTURED if capture is CaptureMethod.AUTOMATIC else S.VOIDED)
    assert not orphan.holds_money
    holding = [c.reference for c in world.provider.charges.values() if c.holds_money]
    assert holding == [paid.provider_reference]
    assert (await world.get(intent)).provider_reference == paid.provider_reference
    assert await world.pending_jobs(RESOLVE_CHARGE) == []
    world.check()


async def test_a_charge_never_asked_about_successfully_is_reported(world: World) -> None:
    intent = await world.intent()
    await lost_attempt(world, intent)
    world.provider.lose_answers(Call.FIND_CHARGE, ASKS)
    await world.run_jobs()
    for _ in range(ASKS):
        await world.advance(3600)
    assert await world.pending_jobs(RESOLVE_CHARGE) == []
    [doubt] = await world.differences()
    assert (doubt.kind, doubt.payment_intent_id) == (CardDifferenceKind.CHARGE_IN_DOUBT, intent.id)
    # Reconciliation finds the charge among the provider's recent ones and adopts it.
    report = await world.treasury.card_reconciliation.run()
    assert report.adopted == 1
    assert (await world.get(intent)).status is IntentStatus.PROCESSED
    kinds = {d.kind: d.status for d in await world.differences()}
    assert kinds == {
        CardDifferenceKind.CHARGE_IN_DOUBT: CardDifferenceStatus.RESOLVED,
        CardDifferenceKind.CHARGE_ADOPTED: CardDifferenceStatus.RESOLVED,
    }
    world.check()
