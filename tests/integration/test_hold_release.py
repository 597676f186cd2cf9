"""An authorization expiring here is voided at the card provider too, after the expiry committed.

The expiry job cancels the intent and expires the ledger hold in its transaction, and schedules
a ``release_hold`` job there; the job runner awaits that one outside any transaction, voids
at the provider, and retries a failure with doubling delays without touching the expiry.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest
import stripe

from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import CardError, ProviderError
from treasury_core.jobs import Job
from treasury_core.payments.intents import CancellationReason, CaptureMethod, IntentStatus
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports.card_provider import CardData, CardProviderResult
from treasury_core.services.payments import RELEASE_HOLD
from treasury_core.services.payments.jobs import RELEASE_FIRST_RETRY
from treasury_core.testing import FakeClock, MemoryStorage, check_invariants
from treasury_sandbox.card_provider import SandboxCardProvider

KEY = "sk_test_treasury"
CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")
PAST_EXPIRY = 7 * 24 * 3600 + 1


class RecordsVoids(SandboxCardProvider):
    """The sandbox provider, noting each void; the first ``failures`` fail as ``error``."""

    def __init__(self, clock: FakeClock, failures: int = 0, error: Exception | None = None):
        super().__init__(clock)
        self.voids: list[str] = []
        self.failures = failures
        self.error = error or ProviderError("The card provider did not answer in time")

    async def void(self, reference: str) -> CardProviderResult:
        self.voids.append(reference)
        if len(self.voids) <= self.failures:
            raise self.error
        return await super().void(reference)


def _hold(treasury: Treasury) -> Any:
    async def authorize() -> Any:
        created = await treasury.companies.create_company("Acme")
        request = CreateIntentRequest(
            account_id=created.merchant_account.id,
            billing_amount=1_000,
            billing_currency="USD",
            payment_type="Card Payment",
            capture_method=CaptureMethod.MANUAL,
        )
        intent = await treasury.payments.create(created.company.id, request)
        outcome = await treasury.payments.pay(intent.payment_intent_lookup_id, CARD)
        assert outcome.intent.status is IntentStatus.AUTHORIZED
        return outcome.intent

    return asyncio.run(authorize())


def _pending_jobs(treasury: Treasury) -> list[Job]:
    later = treasury.clock.now() + timedelta(days=365)
    jobs: list[Job] = asyncio.run(
        treasury.storage.run(lambda uow: uow.jobs.due(later, 100), write=False)
    )
    return jobs


def _expire(treasury: Treasury, clock: FakeClock, intent: Any) -> Any:
    clock.advance(PAST_EXPIRY)
    asyncio.run(treasury.jobs.run_all_due())
    expired = asyncio.run(treasury.payments.get(intent.company_id, intent.id))
    assert expired.status is IntentStatus.CANCELLED
    assert expired.cancellation_reason is CancellationReason.EXPIRED
    return expired


def _sandbox(provider: SandboxCardProvider, clock: FakeClock) -> Treasury:
    config = TreasuryConfig(database_url="memory://")
    return bootstrap(
        config, storage=MemoryStorage(), clock=clock, wall_clock=clock, card_provider=provider
    )


def test_an_expired_hold_is_cancelled_at_stripe(localstripe_url: str, sqlite_url: str) -> None:
    clock = FakeClock()
    config = TreasuryConfig(
        database_url=sqlite_url,
        card_provider="stripe",
        stripe_api_key=KEY,  # type: ignore[arg-type]  # pydantic makes the SecretStr
        stripe_api_base=localstripe_url,
    )
    treasury = bootstrap(config, clock=clock, wall_clock=clock)
    try:
        intent = _hold(treasury)
        reader = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})
        assert reader.v1.payment_intents.retrieve(intent.provider_reference).status == (
            "requires_capture"
        )
        _expire(treasury, clock, intent)
        remote = reader.v1.payment_intents.retrieve(intent.provider_reference)
        assert remote.status == "canceled"
        assert _pending_jobs(treasury) == []
        check_invariants(treasury.storage)
    finally:
        treasury.close()


def test_an_expired_sandbox_hold_is_voided_once_the_expiry_ran() -> None:
    clock = FakeClock()
    provider = RecordsVoids(clock)
    treasury = _sandbox(provider, clock)
    intent = _hold(treasury)
    clock.advance(PAST_EXPIRY - 2)
    asyncio.run(treasury.jobs.run_all_due())
    assert provider.voids == []  # not yet expired: nothing released
    _expire(treasury, clock, intent)
    assert provider.voids == [intent.provider_reference]
    assert _pending_jobs(treasury) == []
    # Running the jobs again voids nothing more.
    asyncio.run(treasury.jobs.run_all_due())
    assert provider.voids == [intent.provider_reference]
    check_invariants(treasury.storage)


def test_a_failed_release_is_retried_later_and_the_expiry_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    provider = RecordsVoids(clock, failures=2)
    treasury = _sandbox(provider, clock)
    intent = _hold(treasury)
    with caplog.at_level(logging.WARNING, logger="treasury.payments"):
        _expire(treasury, clock, intent)
    # The void failed; the expiry committed anyway, and the release waits a minute.
    assert provider.voids == [intent.provider_reference]
    assert "(try 1 of 10: The card provider did not answer in time); will retry" in caplog.text
    [retry] = _pending_jobs(treasury)
    assert retry.kind == RELEASE_HOLD
    assert retry.due_at == clock.now() + RELEASE_FIRST_RETRY
    # Not before it is due; then it fails again and waits twice as long.
    asyncio.run(treasury.jobs.run_all_due())
    assert len(provider.voids) == 1
    clock.advance(RELEASE_FIRST_RETRY.total_seconds())
    asyncio.run(treasury.jobs.run_all_due())
    assert len(provider.voids) == 2
    [retry] = _pending_jobs(treasury)
    assert retry.due_at == clock.now() + 2 * RELEASE_FIRST_RETRY
    clock.advance(2 * RELEASE_FIRST_RETRY.total_seconds())
    asyncio.run(treasury.jobs.run_all_due())
    assert provider.voids == [intent.provider_reference] * 3
    assert _pending_jobs(treasury) == []
    assert asyncio.run(treasury.payments.get(intent.company_id, intent.id)).status is (
        IntentStatus.CANCELLED
    )
    check_invariants(treasury.storage)


def test_a_release_the_provider_refuses_is_logged_not_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    refused = CardError("The charge has already been captured", failure_reason="already_captured")
    provider = RecordsVoids(clock, failures=1, error=refused)
    treasury = _sandbox(provider, clock)
    intent = _hold(treasury)
    with caplog.at_level(logging.ERROR, logger="treasury.payments"):
        _expire(treasury, clock, intent)
    assert provider.voids == [intent.provider_reference]
    assert "already_captured" in caplog.text
    assert _pending_jobs(treasury) == []


class VoidsTogether(SandboxCardProvider):
    """A provider whose voids each wait for the other: they succeed only when run at once."""

    def __init__(self, clock: FakeClock, parties: int) -> None:
        super().__init__(clock)
        self.barrier = asyncio.Barrier(parties)

    async def void(self, reference: str) -> CardProviderResult:
        await asyncio.wait_for(self.barrier.wait(), timeout=5)
        return await super().void(reference)


def test_releases_do_not_wait_for_each_other() -> None:
    clock = FakeClock()
    treasury = _sandbox(VoidsTogether(clock, parties=2), clock)
    first, second = _hold(treasury), _hold(treasury)
    _expire(treasury, clock, first)
    assert asyncio.run(treasury.payments.get(second.company_id, second.id)).status is (
        IntentStatus.CANCELLED
    )
    # Both voids ran in the one pass, side by side: none failed and waits for a retry.
    assert _pending_jobs(treasury) == []
