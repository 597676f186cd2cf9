"""What a refund does when the card provider refuses it, and when it does not answer."""

from __future__ import annotations

import asyncio

import pytest

from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import CardError, ProviderError, ValidationFailed
from treasury_core.notifications.events import EventType
from treasury_core.payments.records import RefundStatus
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports.card_provider import CardData, CardProviderResult
from treasury_core.testing import FakeClock, MemoryStorage, check_invariants
from treasury_sandbox.card_provider import SandboxCardProvider


class RefusesRefunds(SandboxCardProvider):
    async def refund(self, reference: str, amount: int) -> CardProviderResult:
        raise CardError("The issuer refused the refund", failure_reason="refund_declined")


class RefundTimesOut(SandboxCardProvider):
    async def refund(self, reference: str, amount: int) -> CardProviderResult:
        raise ProviderError("The card provider did not answer in time")


def _paid(provider_class: type[SandboxCardProvider]) -> tuple[Treasury, int, int]:
    clock = FakeClock()
    storage = MemoryStorage()
    treasury = bootstrap(
        TreasuryConfig(database_url="memory://"),
        storage=storage,
        clock=clock,
        wall_clock=clock,
        card_provider=provider_class(clock),
    )

    async def pay() -> tuple[int, int]:
        created = await treasury.companies.create_company("Acme")
        company = created.company.id
        intent = await treasury.payments.create(
            company,
            CreateIntentRequest(
                account_id=created.merchant_account.id,
                billing_amount=1_000,
                billing_currency="USD",
                payment_type="Card Payment",
            ),
        )
        card = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")
        await treasury.payments.pay(intent.payment_intent_lookup_id, card)
        return company, intent.id

    company, intent_id = asyncio.run(pay())
    return treasury, company, intent_id


def test_a_refused_refund_fails_and_gives_its_amount_back() -> None:
    treasury, company, intent_id = _paid(RefusesRefunds)
    payments = treasury.payments
    with pytest.raises(CardError):
        asyncio.run(payments.refund(company, intent_id, amount=400))
    assert asyncio.run(payments.get(company, intent_id)).amount_refunded == 0
    [refund] = asyncio.run(payments.refunds(company, intent_id))
    assert (refund.status, refund.failure_reason) == (RefundStatus.FAILED, "refund_declined")
    # Created pending, then the failure: receivers see it as treasury.refund.updated.
    created, updated = _refund_events(treasury, company)
    assert created["status"] == "pending"
    assert (updated["id"], updated["status"], updated["failure_reason"]) == (
        refund.id,
        "failed",
        "refund_declined",
    )
    # The reservation was voided: the whole amount can be refunded by a later attempt.
    assert asyncio.run(payments.get(company, intent_id)).amount_refundable == 1_000
    check_invariants(treasury.storage)


def _refund_events(treasury: Treasury, company: int) -> list[dict[str, object]]:
    events = treasury.storage.run_sync(lambda uow: uow.outbox.list(company), write=False)
    wanted = (EventType.REFUND_CREATED, EventType.REFUND_UPDATED)
    return [dict(e.data["object"]) for e in events if e.type in wanted]


def test_a_refund_the_provider_did_not_answer_stays_pending_and_counted() -> None:
    treasury, company, intent_id = _paid(RefundTimesOut)
    payments = treasury.payments
    with pytest.raises(ProviderError):
        asyncio.run(payments.refund(company, intent_id, amount=400))
    # The money may have left: the refund keeps its reservation and still counts, so the
    # merchant cannot refund the same 400 again while it is unresolved.
    assert asyncio.run(payments.get(company, intent_id)).amount_refunded == 400
    [refund] = asyncio.run(payments.refunds(company, intent_id))
    assert refund.status is RefundStatus.PENDING
    assert [e["status"] for e in _refund_events(treasury, company)] == ["pending"]  # no news
    with pytest.raises(ValidationFailed) as refused:
        asyncio.run(payments.refund(company, intent_id, amount=601))
    assert refused.value.param == "amount"
    check_invariants(treasury.storage)
