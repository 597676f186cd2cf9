"""The background drains stop between batches when asked, so a shutdown never waits for a
whole backlog (a server with tens of thousands of undispatched events must still stop)."""

from __future__ import annotations

from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports.card_provider import CardData
from treasury_core.testing import FakeClock, MemoryStorage

CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")


def _treasury(clock: FakeClock) -> Treasury:
    return bootstrap(
        TreasuryConfig(database_url="memory://"),
        storage=MemoryStorage(),
        clock=clock,
        wall_clock=clock,
    )


async def _captured_intents(treasury: Treasury, count: int) -> int:
    """``count`` intents charged at once, each leaving a payout job behind; the company."""
    created = await treasury.companies.create_company("Acme")
    await treasury.notifications.create_endpoint(
        created.company.id, CreateWebhookEndpointRequest(url="https://merchant.example/hooks")
    )
    for n in range(count):
        intent = await treasury.payments.create(
            created.company.id,
            CreateIntentRequest(
                account_id=created.merchant_account.id,
                billing_amount=1_000 + n,
                billing_currency="USD",
                payment_type="Card Payment",
            ),
        )
        await treasury.payments.pay(intent.payment_intent_lookup_id, CARD)
    return created.company.id


async def test_run_all_due_ends_after_the_batch_in_progress_once_stopping() -> None:
    clock = FakeClock()
    treasury = _treasury(clock)
    await _captured_intents(treasury, 3)
    clock.advance(30 * 24 * 3600)
    assert await treasury.jobs.run_all_due(batch=1, stopping=lambda: True) == 1
    # The rest is still due, and runs on the next pass.
    assert await treasury.jobs.run_all_due(batch=1) >= 2
    assert await treasury.jobs.run_all_due(batch=1) == 0


async def test_notifications_run_due_ends_after_the_batch_in_progress_once_stopping() -> None:
    clock = FakeClock()
    treasury = _treasury(clock)
    await _captured_intents(treasury, 3)
    waiting = await treasury.storage.run(lambda uow: uow.outbox.undispatched(1_000), write=False)
    assert len(waiting) > 2

    await treasury.notifications.run_due(batch=2, stopping=lambda: True)
    left = await treasury.storage.run(lambda uow: uow.outbox.undispatched(1_000), write=False)
    assert len(left) == len(waiting) - 2
    # The two oldest were fanned out, and nothing was sent: deliveries do not start once
    # stopping.
    for event in waiting[:2]:
        deliveries = await treasury.storage.run(
            lambda uow, e=event.id: uow.deliveries.for_event(e), write=False
        )
        assert [d.attempts for d in deliveries] == [()]

    await treasury.notifications.run_due(batch=2)  # no sender: deliveries fail and wait
    left = await treasury.storage.run(lambda uow: uow.outbox.undispatched(1_000), write=False)
    assert left == []
