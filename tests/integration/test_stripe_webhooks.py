"""Stripe webhooks through ``POST /hooks/stripe``: a treasury with the Stripe card provider (over
a real localstripe on loopback), served on loopback on an SQLite file, receives deliveries
signed in the test (tests/stripe_hooks.py) for what localstripe cannot send: disputes, a hold
released at Stripe. Each test checks the ledger's invariants when it is done.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import stripe
from aiohttp.test_utils import TestClient, TestServer

from tests import stripe_hooks as hooks
from treasury_aiohttp import create_app
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.ledger.postings import PendingStatus
from treasury_core.notifications.events import EventType
from treasury_core.payments.intents import (
    CancellationReason,
    CaptureMethod,
    IntentStatus,
    PaymentIntent,
)
from treasury_core.payments.ledger import settlement_account
from treasury_core.payments.records import (
    Chargeback,
    ChargebackStatus,
    ProviderEventReceipt,
    Refund,
    RefundStatus,
)
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.payments.states import IllegalTransition
from treasury_core.ports.card_provider import (
    CallOwner,
    CardData,
    CardProviderEvent,
    CardProviderEventKind,
    CardProviderResult,
    CardProviderStatus,
)
from treasury_core.services.payments.provider_events import PROVIDER_REFUND_REASON
from treasury_core.testing import FakeClock, check_invariants
from treasury_stripe.card_provider import StripeCardProvider

KEY = "sk_test_treasury"
CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")
PATH = "/hooks/stripe"

Client = TestClient[Any, Any]


@dataclass
class World:
    treasury: Treasury
    client: Client
    stripe: stripe.StripeClient
    company: int
    account: int

    async def paid(
        self, capture: CaptureMethod = CaptureMethod.AUTOMATIC, amount: int = 1_000
    ) -> PaymentIntent:
        request = CreateIntentRequest(
            account_id=self.account,
            billing_amount=amount,
            billing_currency="USD",
            payment_type="Card Payment",
            capture_method=capture,
        )
        intent = await self.treasury.payments.create(self.company, request)
        outcome = await self.treasury.payments.pay(intent.payment_intent_lookup_id, CARD)
        return outcome.intent

    async def get(self, intent: PaymentIntent) -> PaymentIntent:
        return await self.treasury.payments.get(self.company, intent.id)

    async def send(self, payload: dict[str, Any], secret: str = hooks.SECRET) -> Any:
        body, headers = hooks.delivery(payload, secret)
        response = await self.client.post(PATH, data=body, headers=headers)
        return response.status, await response.json()

    async def chargebacks(self) -> list[Chargeback]:
        return await self.treasury.storage.run(
            lambda uow: uow.records.list(Chargeback, self.company, 100, None), write=False
        )

    async def event_types(self) -> list[str]:
        events = await self.treasury.storage.run(
            lambda uow: uow.outbox.list(self.company), write=False
        )
        return [event.type.value for event in events]

    async def settled(self) -> int:
        """The company's USD settlement balance available to pay out."""
        account_id = settlement_account(self.company, "USD").id
        account = await self.treasury.storage.run(
            lambda uow: uow.ledger.get_account(account_id), write=False
        )
        assert account is not None
        return account.available_balance


def _config(tmp_path: Path, localstripe_url: str, secret: str | None) -> TreasuryConfig:
    return TreasuryConfig(
        database_url=f"sqlite:///{tmp_path / 'hooks.db'}",
        card_provider="stripe",
        stripe_api_key=KEY,  # type: ignore[arg-type]  # pydantic makes the SecretStr
        stripe_api_base=localstripe_url,
        stripe_webhook_secret=secret,  # type: ignore[arg-type]
    )


@pytest.fixture
async def world(tmp_path: Path, localstripe_url: str) -> AsyncIterator[World]:
    clock = FakeClock()
    treasury = bootstrap(
        _config(tmp_path, localstripe_url, hooks.SECRET), clock=clock, wall_clock=clock
    )
    created = await treasury.companies.create_company("Acme")
    client = TestClient(TestServer(create_app(treasury), host="127.0.0.1"))
    await client.start_server()
    try:
        yield World(
            treasury,
            client,
            stripe.StripeClient(KEY, base_addresses={"api": localstripe_url}),
            created.company.id,
            created.merchant_account.id,
        )
        check_invariants(treasury.storage)
    finally:
        await client.close()
        treasury.close()


def _ref(intent: PaymentIntent) -> str:
    assert intent.provider_reference is not None
    return intent.provider_reference


async def test_a_dispute_holds_the_money_then_a_lost_one_takes_it(world: World) -> None:
    intent = await world.paid()
    settled = await world.settled()
    status, answer = await world.send(
        hooks.event("charge.dispute.created", hooks.dispute(_ref(intent), 1_000))
    )
    assert (status, answer) == (200, {"received": True, "result": "applied"})
    [chargeback] = await world.chargebacks()
    assert (chargeback.status, chargeback.amount, chargeback.provider_reference) == (
        ChargebackStatus.OPEN,
        1_000,
        "dp_test1",
    )
    assert (await world.get(intent)).amount_disputed == 1_000
    assert await world.settled() == settled - 1_000
    check_invariants(world.treasury.storage)

    closed = hooks.dispute(_ref(intent), 1_000, status="lost")
    status, answer = await world.send(hooks.event("charge.dispute.closed", closed))
    assert (status, answer["result"]) == (200, "applied")
    [chargeback] = await world.chargebacks()
    assert chargeback.status is ChargebackStatus.LOST
    assert await world.settled() == settled - 1_000
    assert (await world.get(intent)).amount_refundable == 0
    types = await world.event_types()
    assert types[-2:] == [EventType.CHARGEBACK_CREATED.value, EventType.CHARGEBACK_FAILED.value]


async def test_a_won_dispute_gives_the_money_back(world: World) -> None:
    intent = await world.paid()
    settled = await world.settled()
    await world.send(hooks.event("charge.dispute.created", hooks.dispute(_ref(intent), 1_000)))
    won = hooks.dispute(_ref(intent), 1_000, status="won")
    status, answer = await world.send(hooks.event("charge.dispute.closed", won))
    assert (status, answer["result"]) == (200, "applied")
    [chargeback] = await world.chargebacks()
    assert chargeback.status is ChargebackStatus.WON
    assert await world.settled() == settled
    assert (await world.get(intent)).amount_disputed == 0
    assert (await world.event_types())[-3:] == [
        EventType.CHARGEBACK_CREATED.value,
        EventType.CHARGEBACK_COMPLETED.value,
        EventType.CHARGEBACK_REVERSED.value,
    ]


async def test_a_partial_dispute_leaves_the_rest_refundable(world: World) -> None:
    intent = await world.paid()
    await world.send(hooks.event("charge.dispute.created", hooks.dispute(_ref(intent), 400)))
    assert (await world.get(intent)).amount_refundable == 600
    refund = await world.treasury.payments.refund(world.company, intent.id)
    assert refund.amount == 600
    [chargeback] = await world.chargebacks()
    assert chargeback.amount == 400


async def test_the_same_event_twice_changes_nothing(world: World) -> None:
    intent = await world.paid()
    payload = hooks.event("charge.dispute.created", hooks.dispute(_ref(intent), 1_000))
    await world.send(payload)
    before = (await world.event_types(), await world.settled(), await world.get(intent))
    # A redelivery is signed again (a new timestamp) but is the same event.
    status, answer = await world.send(payload)
    assert (status, answer["result"]) == (200, "duplicate")
    assert (await world.event_types(), await world.settled(), await world.get(intent)) == before
    assert len(await world.chargebacks()) == 1


async def test_a_dispute_announced_twice_opens_one_chargeback(world: World) -> None:
    # Stripe sends charge.dispute.created and then .funds_withdrawn: two events, one dispute.
    intent = await world.paid()
    await world.send(hooks.event("charge.dispute.created", hooks.dispute(_ref(intent), 1_000)))
    withdrawn = hooks.event("charge.dispute.funds_withdrawn", hooks.dispute(_ref(intent), 1_000))
    status, answer = await world.send(withdrawn)
    assert (status, answer["result"]) == (200, "nothing_to_do")
    assert len(await world.chargebacks()) == 1


async def test_a_dispute_closed_before_its_opening_arrived(world: World) -> None:
    intent = await world.paid()
    settled = await world.settled()
    lost = hooks.dispute(_ref(intent), 1_000, status="lost")
    status, answer = await world.send(hooks.event("charge.dispute.closed", lost))
    assert (status, answer["result"]) == (200, "applied")
    [chargeback] = await world.chargebacks()
    assert chargeback.status is ChargebackStatus.LOST
    assert await world.settled() == settled - 1_000
    late = hooks.event("charge.dispute.created", hooks.dispute(_ref(intent), 1_000))
    assert (await world.send(late))[1]["result"] == "nothing_to_do"
    assert len(await world.chargebacks()) == 1


async def test_a_bad_signature_is_refused_and_changes_nothing(world: World) -> None:
    intent = await world.paid()
    payload = hooks.event("charge.dispute.created", hooks.dispute(_ref(intent), 1_000))
    status, answer = await world.send(payload, secret="whsec_someone_else")
    assert status == 400
    assert answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["code"] == "webhook_signature_invalid"
    body, _ = hooks.delivery(payload)
    missing = await world.client.post(PATH, data=body)
    assert missing.status == 400
    assert (await missing.json())["error"]["code"] == "webhook_signature_invalid"
    assert await world.chargebacks() == []
    assert (await world.get(intent)).amount_disputed == 0
    # Not marked as seen either: the authentic delivery still applies.
    assert (await world.send(payload))[1]["result"] == "applied"


async def test_a_stale_delivery_is_refused(world: World) -> None:
    intent = await world.paid()
    payload = hooks.event("charge.dispute.created", hooks.dispute(_ref(intent), 1_000))
    body = json.dumps(payload).encode()
    old = hooks.signature(body, timestamp=int(payload["created"]) - 3600)
    response = await world.client.post(PATH, data=body, headers={"Stripe-Signature": old})
    assert response.status == 400
    assert await world.chargebacks() == []


async def test_an_event_for_a_charge_we_do_not_know_is_acknowledged(world: World) -> None:
    events = await world.event_types()
    unknown = hooks.event("charge.dispute.created", hooks.dispute("pi_notours", 1_000))
    status, answer = await world.send(unknown)
    assert (status, answer["result"]) == (200, "unknown_charge")
    other = hooks.event("customer.created", {"id": "cus_1", "object": "customer"})
    assert (await world.send(other))[1]["result"] == "not_mapped"
    assert await world.event_types() == events
    receipts = await world.treasury.storage.run(
        lambda uow: uow.records.list(ProviderEventReceipt, world.company, 10, None), write=False
    )
    assert receipts == []


async def test_a_hold_released_at_stripe_cancels_the_intent(world: World) -> None:
    intent = await world.paid(CaptureMethod.MANUAL)
    assert intent.status is IntentStatus.AUTHORIZED
    # Released at Stripe (its own expiry, or the dashboard), then announced.
    world.stripe.v1.payment_intents.cancel(_ref(intent))
    canceled = hooks.payment_intent(_ref(intent), "canceled", cancellation_reason="automatic")
    status, answer = await world.send(hooks.event("payment_intent.canceled", canceled))
    assert (status, answer["result"]) == (200, "applied")
    now = await world.get(intent)
    assert now.status is IntentStatus.CANCELLED
    assert now.cancellation_reason is CancellationReason.EXPIRED
    assert now.hold_pending_ids == ()
    assert (await world.event_types())[-1] == EventType.PAYMENT_INTENT_CANCELLED.value
    # The ledger's hold on the money is released (voided: Stripe let go before our deadline).
    [hold] = intent.hold_pending_ids
    pending = await world.treasury.storage.run(
        lambda uow: uow.ledger.get_pending(hold), write=False
    )
    assert pending is not None and pending.status is PendingStatus.VOIDED


async def test_outcomes_the_api_already_recorded_change_nothing(world: World) -> None:
    intent = await world.paid()
    events = await world.event_types()
    succeeded = hooks.payment_intent(_ref(intent), "succeeded")
    status, answer = await world.send(hooks.event("payment_intent.succeeded", succeeded))
    assert (status, answer["result"]) == (200, "nothing_to_do")
    # A hold that is not authorized (it was captured) is not cancelled by a stray event.
    canceled = hooks.payment_intent(_ref(intent), "canceled")
    assert (await world.send(hooks.event("payment_intent.canceled", canceled)))[1]["result"] == (
        "nothing_to_do"
    )
    assert (await world.get(intent)).status is IntentStatus.PROCESSED
    assert await world.event_types() == events


async def test_a_dispute_on_a_hold_changes_nothing(world: World) -> None:
    intent = await world.paid(CaptureMethod.MANUAL)
    payload = hooks.event("charge.dispute.created", hooks.dispute(_ref(intent), 1_000))
    assert (await world.send(payload))[1]["result"] == "nothing_to_do"
    assert await world.chargebacks() == []


async def test_without_a_webhook_secret_the_route_is_not_served(
    tmp_path: Path, localstripe_url: str
) -> None:
    treasury = bootstrap(_config(tmp_path, localstripe_url, None))
    client = TestClient(TestServer(create_app(treasury, close_treasury=True), host="127.0.0.1"))
    await client.start_server()
    try:
        body, headers = hooks.delivery(hooks.event("charge.refunded", {}))
        response = await client.post(PATH, data=body, headers=headers)
        assert response.status == 404
        assert (await response.json())["error"]["type"] == "not_found"
        document = await (await client.get("/api/v1/openapi.json")).json()
        assert PATH not in document["paths"]
    finally:
        await client.close()


async def test_the_route_is_documented_when_served(world: World) -> None:
    document = await (await world.client.get("/api/v1/openapi.json")).json()
    operation = document["paths"][PATH]["post"]
    assert "security" not in operation  # no API key: the signature authenticates
    assert {"200", "400", "404", "413"} <= set(operation["responses"])


def _charge(intent: PaymentIntent, refunded: int) -> dict[str, Any]:
    """The Stripe Charge of ``intent`` as ``charge.refunded`` carries it."""
    return {
        "id": "ch_test1",
        "object": "charge",
        "payment_intent": _ref(intent),
        "amount": intent.billing_amount,
        "amount_refunded": refunded,
        "currency": "usd",
        "refunded": refunded == intent.billing_amount,
    }


async def _refunds(world: World, intent: PaymentIntent) -> list[Refund]:
    return await world.treasury.payments.refunds(world.company, intent.id)


async def test_a_refund_made_at_stripe_is_recorded_like_ours(world: World) -> None:
    intent = await world.paid()
    settled = await world.settled()
    # Refunded from Stripe's dashboard: treasury-core never asked for it.
    world.stripe.v1.refunds.create(params={"payment_intent": _ref(intent), "amount": 300})
    payload = hooks.event("charge.refunded", _charge(intent, 300))
    status, answer = await world.send(payload)
    assert (status, answer["result"]) == (200, "applied")
    [refund] = await _refunds(world, intent)
    assert (refund.amount, refund.status, refund.reason) == (
        300,
        RefundStatus.SUCCEEDED,
        PROVIDER_REFUND_REASON,
    )
    assert (await world.get(intent)).amount_refunded == 300
    assert await world.settled() == settled - 300
    # Made and settled in one go: created (pending), then updated (succeeded).
    assert (await world.event_types())[-2:] == [
        EventType.REFUND_CREATED.value,
        EventType.REFUND_UPDATED.value,
    ]
    # Delivered again, or announced again with the same total: nothing more is refunded.
    assert (await world.send(payload))[1]["result"] == "duplicate"
    again = hooks.event("charge.refunded", _charge(intent, 300))
    assert (await world.send(again))[1]["result"] == "nothing_to_do"
    assert len(await _refunds(world, intent)) == 1
    # The rest can still be refunded through the API, and no more.
    assert (await world.treasury.payments.refund(world.company, intent.id)).amount == 700


async def test_stripe_settles_a_refund_whose_answer_was_lost(world: World) -> None:
    intent = await world.paid()
    settled = await world.settled()
    treasury, clock = world.treasury, world.treasury.clock

    def reserve(uow: Any) -> Refund:
        # What a refund through the API leaves when Stripe's answer never came back.
        locked = uow.intents.get(intent.id, world.company, for_update=True)
        return treasury.payments.reserve_refund(
            uow, locked, 400, None, refund_id="re_lost", journal_id="jr_lost", now=clock.now()
        )

    await treasury.storage.run(reserve)
    assert (await world.get(intent)).amount_refundable == 600
    # Stripe did refund it, and a refund of 100 was made at its dashboard besides.
    status, answer = await world.send(hooks.event("charge.refunded", _charge(intent, 500)))
    assert (status, answer["result"]) == (200, "applied")
    refunds = await _refunds(world, intent)
    assert sorted((r.amount, r.status, r.id == "re_lost") for r in refunds) == [
        (100, RefundStatus.SUCCEEDED, False),
        (400, RefundStatus.SUCCEEDED, True),
    ]
    assert await world.settled() == settled - 500


async def test_a_total_short_of_our_pending_refund_leaves_it_pending(world: World) -> None:
    intent = await world.paid()
    treasury, clock = world.treasury, world.treasury.clock

    def reserve(uow: Any) -> Refund:
        locked = uow.intents.get(intent.id, world.company, for_update=True)
        return treasury.payments.reserve_refund(
            uow, locked, 400, None, refund_id="re_lost", journal_id="jr_lost", now=clock.now()
        )

    await treasury.storage.run(reserve)
    # Whether Stripe has our 400 is unknown from a total of 200: nothing is guessed.
    status, answer = await world.send(hooks.event("charge.refunded", _charge(intent, 200)))
    assert (status, answer["result"]) == (200, "nothing_to_do")
    [refund] = await _refunds(world, intent)
    assert refund.status is RefundStatus.PENDING
    # Its reservation is settled by hand or by a later event; here, the later event.
    assert (await world.send(hooks.event("charge.refunded", _charge(intent, 400))))[1][
        "result"
    ] == "applied"


async def test_our_own_refund_announced_by_stripe_changes_nothing(world: World) -> None:
    intent = await world.paid()
    refund = await world.treasury.payments.refund(world.company, intent.id, amount=250)
    assert refund.status is RefundStatus.SUCCEEDED
    events = await world.event_types()
    status, answer = await world.send(hooks.event("charge.refunded", _charge(intent, 250)))
    assert (status, answer["result"]) == (200, "nothing_to_do")
    assert await world.event_types() == events


async def test_a_capture_made_at_stripe_is_recorded(world: World) -> None:
    intent = await world.paid(CaptureMethod.MANUAL)
    settled = await world.settled()
    # Captured at Stripe (its dashboard, or a capture here whose answer was lost).
    world.stripe.v1.payment_intents.capture(_ref(intent))
    succeeded = hooks.payment_intent(
        _ref(intent), "succeeded", amount_received=1_000, currency="usd"
    )
    status, answer = await world.send(hooks.event("payment_intent.succeeded", succeeded))
    assert (status, answer["result"]) == (200, "applied")
    now = await world.get(intent)
    assert now.status is IntentStatus.PROCESSED
    assert now.captured_at is not None
    assert await world.settled() == settled + 1_000
    assert (await world.event_types())[-3:] == [
        EventType.TRANSACTION_CREATED.value,
        EventType.TRANSACTION_COMPLETED.value,
        EventType.PAYMENT_INTENT_SUCCEEDED.value,
    ]
    # A capture through the API now is refused as it would be after any capture.
    with pytest.raises(IllegalTransition):
        await world.treasury.payments.capture(world.company, intent.id)


async def test_a_partial_capture_at_stripe_is_not_recorded(world: World) -> None:
    intent = await world.paid(CaptureMethod.MANUAL)
    partial = hooks.payment_intent(_ref(intent), "succeeded", amount_received=600, currency="usd")
    status, answer = await world.send(hooks.event("payment_intent.succeeded", partial))
    assert (status, answer["result"]) == (200, "nothing_to_do")
    assert (await world.get(intent)).status is IntentStatus.AUTHORIZED


class _CaptureThenEvent(StripeCardProvider):
    """The real Stripe provider; after a real capture, and before the caller records it, the
    capture's event is applied by another treasury on the same database (another process)."""

    other: Treasury

    async def capture(
        self, reference: str, amount: int, *, key: str | None = None
    ) -> CardProviderResult:
        result = await super().capture(reference, amount, key=key)
        event = CardProviderEvent(
            id="evt_capture_race",
            type="payment_intent.succeeded",
            kind=CardProviderEventKind.CAPTURED,
            reference=reference,
        )
        assert (await self.other.provider_events.apply(event)).result.value == "applied"
        return result


async def test_a_capture_recorded_first_by_its_event_is_not_undone(
    world: World, tmp_path: Path, localstripe_url: str
) -> None:
    provider = _CaptureThenEvent(KEY, world.treasury.clock, api_base=localstripe_url)
    provider.other = world.treasury
    clock = world.treasury.clock
    process = bootstrap(
        _config(tmp_path, localstripe_url, hooks.SECRET),
        card_provider=provider,
        clock=clock,
        wall_clock=clock,
    )
    try:
        intent = await world.paid(CaptureMethod.MANUAL)
        settled = await world.settled()
        captured = await process.payments.capture(world.company, intent.id)
        # The event's record stands, and the money Stripe captured is not given back.
        assert captured.status is IntentStatus.PROCESSED
        assert await world.settled() == settled + 1_000
        charge = world.stripe.v1.payment_intents.retrieve(_ref(intent)).latest_charge
        charge_id = charge if isinstance(charge, str) else charge.id
        assert world.stripe.v1.charges.retrieve(charge_id).amount_refunded == 0
    finally:
        process.close()


# --- one refund's outcome, reported later -----------------------------------------------------


def _stripe_refund(refund: Refund, intent: PaymentIntent, status: str, **fields: Any) -> Any:
    """Stripe's Refund object for our ``refund``, as charge.refund.updated carries it."""
    assert refund.provider_reference is not None
    return {
        "id": refund.provider_reference,
        "object": "refund",
        "payment_intent": _ref(intent),
        "amount": refund.amount,
        "currency": "usd",
        "status": status,
        **fields,
    }


async def _stored(world: World, refund: Refund) -> Refund:
    stored = await world.treasury.storage.run(
        lambda uow: uow.records.get(Refund, refund.id, world.company), write=False
    )
    assert stored is not None
    return stored


async def test_a_refund_that_fails_after_it_succeeded_is_reversed(world: World) -> None:
    intent = await world.paid()
    settled = await world.settled()
    refund = await world.treasury.payments.refund(world.company, intent.id, amount=400)
    assert refund.status is RefundStatus.SUCCEEDED
    stored = await _stored(world, refund)
    assert stored.provider_reference is not None  # Stripe's re_… id, by which its events find it
    assert await world.settled() == settled - 400
    # Days later the issuer could not take the money back: Stripe returns it to the balance.
    failed = _stripe_refund(stored, intent, "failed", failure_reason="expired_or_canceled_card")
    payload = hooks.event("charge.refund.updated", failed)
    status, answer = await world.send(payload)
    assert (status, answer["result"]) == (200, "applied")
    now = await _stored(world, refund)
    assert (now.status, now.failure_reason) == (RefundStatus.FAILED, "expired_or_canceled_card")
    assert await world.settled() == settled  # the money is back in settlement
    after = await world.get(intent)
    assert (after.amount_refunded, after.amount_refundable) == (0, 1_000)
    assert (await world.event_types())[-1] == EventType.REFUND_UPDATED.value
    # Redelivered, or told again by another event type: nothing more happens.
    assert (await world.send(payload))[1]["result"] == "duplicate"
    again = hooks.event("refund.failed", failed)
    assert (await world.send(again))[1]["result"] == "nothing_to_do"
    assert await world.settled() == settled


async def test_a_refund_event_about_another_intents_refund_changes_nothing(world: World) -> None:
    first, second = await world.paid(), await world.paid()
    refund = await world.treasury.payments.refund(world.company, first.id, amount=100)
    stored = await _stored(world, refund)
    # The refund's id, but the charge of another intent: not this refund's event.
    wrong = _stripe_refund(stored, second, "failed")
    status, answer = await world.send(hooks.event("charge.refund.updated", wrong))
    assert (status, answer["result"]) == (200, "nothing_to_do")
    assert (await _stored(world, refund)).status is RefundStatus.SUCCEEDED


class _PendingRefunds(StripeCardProvider):
    """The real Stripe provider, whose refunds Stripe answers ``pending`` (as it does for a
    card whose issuer takes days): localstripe finishes every refund at once."""

    async def refund(
        self,
        reference: str,
        amount: int,
        *,
        key: str | None = None,
        owner: CallOwner | None = None,
    ) -> CardProviderResult:
        done = await super().refund(reference, amount, key=key, owner=owner)
        return CardProviderResult(
            reference=done.reference, status=CardProviderStatus.REFUND_PENDING
        )


async def test_a_refund_stripe_answers_pending_waits_for_its_own_event(
    world: World, tmp_path: Path, localstripe_url: str
) -> None:
    clock = world.treasury.clock
    process = bootstrap(
        _config(tmp_path, localstripe_url, hooks.SECRET),
        card_provider=_PendingRefunds(KEY, clock, api_base=localstripe_url),
        clock=clock,
        wall_clock=clock,
    )
    try:
        intent = await world.paid()
        settled = await world.settled()
        kept = await process.payments.refund(world.company, intent.id, amount=300)
        lost = await process.payments.refund(world.company, intent.id, amount=200)
        assert kept.status is lost.status is RefundStatus.PENDING
        # Reserved, so nothing else can refund it meanwhile: settlement shows it on its way out.
        assert (await world.get(intent)).amount_refundable == 500
        # Stripe's total counts pending refunds; it settles neither of them.
        status, answer = await world.send(hooks.event("charge.refunded", _charge(intent, 500)))
        assert (status, answer["result"]) == (200, "nothing_to_do")
        assert {r.status for r in await _refunds(world, intent)} == {RefundStatus.PENDING}
        # Each one's own event does: one reaches the card, the other fails.
        ok = _stripe_refund(await _stored(world, kept), intent, "succeeded")
        assert (await world.send(hooks.event("charge.refund.updated", ok)))[1]["result"] == (
            "applied"
        )
        no = _stripe_refund(await _stored(world, lost), intent, "canceled")
        assert (await world.send(hooks.event("refund.updated", no)))[1]["result"] == "applied"
        done, failed = await _stored(world, kept), await _stored(world, lost)
        assert done.status is RefundStatus.SUCCEEDED
        assert (failed.status, failed.failure_reason) == (RefundStatus.FAILED, "refund_failed")
        assert await world.settled() == settled - 300
        assert (await world.get(intent)).amount_refundable == 700
        assert (await world.event_types())[-2:] == [EventType.REFUND_UPDATED.value] * 2
        # Still pending at Stripe says nothing new.
        pending = _stripe_refund(done, intent, "pending")
        assert (await world.send(hooks.event("refund.updated", pending)))[1]["result"] == (
            "not_mapped"
        )
    finally:
        process.close()
