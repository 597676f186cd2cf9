"""3-D Secure with the Stripe card provider, against a real localstripe on loopback.

localstripe's card 4000000000003220 asks for 3-D Secure: its PaymentIntent stays
``requires_action`` until the customer authenticates, which these tests do as the customer at
"Stripe" would, through localstripe's ``POST /v1/payment_intents/{id}/_authenticate`` with the
PaymentIntent's client secret (read with the SDK). The treasury then learns Stripe's verdict
through :meth:`PaymentService.complete_challenge`.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import stripe

from tests.integration.test_stripe_payments import CARD, KEY
from tests.integration.test_stripe_payments import World as PaymentsWorld
from treasury_core import TreasuryConfig, bootstrap
from treasury_core.errors import CardError, ErrorKind, InvalidRequestError
from treasury_core.payments.intents import CaptureMethod, IntentStatus
from treasury_core.payments.ledger import settlement_account
from treasury_core.payments.records import Transaction, TransactionStatus
from treasury_core.ports.card_provider import CardData, CardProviderStatus
from treasury_core.services.payments import PaymentOutcome
from treasury_core.testing import FakeClock, MemoryStorage, check_invariants
from treasury_stripe.card_provider import StripeCardProvider

THREE_D_SECURE = CardData(number="4000000000003220", expiry_month=12, expiry_year=2040, cvc="123")


def authenticate_at_stripe(base_url: str, reference: str, *, success: bool) -> None:
    """The customer passes (or fails) 3-D Secure at "Stripe": localstripe's own endpoint."""
    reader = stripe.StripeClient(KEY, base_addresses={"api": base_url})
    secret = reader.v1.payment_intents.retrieve(reference).client_secret
    assert secret is not None
    body = urllib.parse.urlencode(
        {"client_secret": secret, "success": "true" if success else "false"}
    ).encode()
    request = urllib.request.Request(
        f"{base_url}/v1/payment_intents/{reference}/_authenticate",
        data=body,
        headers={"Authorization": f"Bearer {KEY}"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


@dataclass
class World(PaymentsWorld):
    base_url: str = ""

    def attempt(self, intent: Any, card: CardData = THREE_D_SECURE) -> PaymentOutcome:
        outcome: PaymentOutcome = self.run(
            self.treasury.payments.pay(intent.payment_intent_lookup_id, card)
        )
        return outcome

    def complete(self, intent: Any) -> PaymentOutcome:
        outcome: PaymentOutcome = self.run(
            self.treasury.payments.complete_challenge(intent.payment_intent_lookup_id)
        )
        return outcome

    def get(self, intent: Any) -> Any:
        return self.run(self.treasury.payments.get(self.company, intent.id))

    def transaction(self, txn_id: str) -> Transaction:
        found = self.run(
            self.treasury.storage.run(
                lambda uow: uow.records.get(Transaction, txn_id, self.company), write=False
            )
        )
        assert found is not None
        return found  # type: ignore[no-any-return]

    def status_at_stripe(self, reference: str) -> str:
        return str(self.stripe.v1.payment_intents.retrieve(reference).status)

    def settlement(self) -> Any:
        account_id = settlement_account(self.company, "USD").id
        return self.run(
            self.treasury.storage.run(lambda uow: uow.ledger.get_account(account_id), write=False)
        )


@pytest.fixture
def world(localstripe_url: str) -> Iterator[World]:
    clock = FakeClock()
    config = TreasuryConfig(
        database_url="memory://",
        card_provider="stripe",
        stripe_api_key=KEY,  # type: ignore[arg-type]  # pydantic makes the SecretStr
        stripe_api_base=localstripe_url,
    )
    treasury = bootstrap(config, storage=MemoryStorage(), clock=clock, wall_clock=clock)
    created = asyncio.run(treasury.companies.create_company("Acme"))
    reader = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})
    company, account = created.company.id, created.merchant_account.id
    yield World(treasury, reader, company, account, base_url=localstripe_url)
    check_invariants(treasury.storage)
    treasury.close()


def _challenged(world: World, capture: CaptureMethod) -> tuple[Any, str]:
    intent = world.create(capture)
    outcome = world.attempt(intent)
    assert outcome.transaction.status is TransactionStatus.REQUIRES_ACTION
    assert outcome.intent.status is IntentStatus.INITIALIZED
    reference = outcome.transaction.provider_reference
    assert reference is not None and reference.startswith("pi_")
    assert world.status_at_stripe(reference) == "requires_action"
    return intent, reference


def test_a_hold_authenticated_at_stripe_is_authorized(world: World) -> None:
    intent, reference = _challenged(world, CaptureMethod.MANUAL)
    assert world.settlement() is None or world.settlement().credits_pending == 0
    authenticate_at_stripe(world.base_url, reference, success=True)
    outcome = world.complete(intent)
    assert outcome.intent.status is IntentStatus.AUTHORIZED
    assert outcome.intent.provider_reference == reference
    assert outcome.transaction.status is TransactionStatus.COMPLETED
    assert outcome.intent.hold_pending_ids  # the ledger holds it too
    assert world.settlement().credits_pending == 1_000
    assert world.status_at_stripe(reference) == "requires_capture"
    # And it captures like any hold.
    captured = world.run(world.treasury.payments.capture(world.company, intent.id))
    assert captured.status is IntentStatus.PROCESSED
    assert world.status_at_stripe(reference) == "succeeded"
    assert world.settlement().balance == 1_000


def test_a_charge_authenticated_at_stripe_is_captured(world: World) -> None:
    intent, reference = _challenged(world, CaptureMethod.AUTOMATIC)
    authenticate_at_stripe(world.base_url, reference, success=True)
    outcome = world.complete(intent)
    assert outcome.intent.status is IntentStatus.PROCESSED
    assert world.transaction(outcome.transaction.id).status is TransactionStatus.COMPLETED
    assert world.status_at_stripe(reference) == "succeeded"
    assert world.settlement().balance == 1_000


def test_authentication_failed_at_stripe_fails_the_attempt(world: World) -> None:
    intent, reference = _challenged(world, CaptureMethod.MANUAL)
    txn_id = world.get(intent).latest_transaction_id
    authenticate_at_stripe(world.base_url, reference, success=False)
    with pytest.raises(CardError) as failed:
        world.complete(intent)
    assert failed.value.kind is ErrorKind.DECLINED
    assert failed.value.failure_reason == "authentication_failed"
    txn = world.transaction(txn_id)
    assert (txn.status, txn.failure_reason) == (TransactionStatus.FAILED, "authentication_failed")
    assert txn.provider_reference is None
    assert world.get(intent).status is IntentStatus.INITIALIZED
    # Nothing is left open at Stripe, and the customer may pay again.
    assert world.status_at_stripe(reference) == "canceled"
    assert world.attempt(intent, CARD).intent.status is IntentStatus.AUTHORIZED


def test_completing_before_authenticating_keeps_the_challenge_waiting(world: World) -> None:
    intent, reference = _challenged(world, CaptureMethod.AUTOMATIC)
    with pytest.raises(InvalidRequestError) as early:
        world.complete(intent)
    assert early.value.kind is ErrorKind.INVALID_REQUEST
    assert early.value.code == "authentication_incomplete"
    waiting = world.run(world.treasury.payments.waiting_challenge(world.get(intent)))
    assert waiting is not None and waiting.provider_reference == reference
    assert world.status_at_stripe(reference) == "requires_action"
    # The customer finishes at Stripe afterwards: the same challenge completes.
    authenticate_at_stripe(world.base_url, reference, success=True)
    assert world.complete(intent).intent.status is IntentStatus.PROCESSED


def test_the_customer_giving_up_cancels_the_payment_intent_at_stripe(world: World) -> None:
    intent, reference = _challenged(world, CaptureMethod.MANUAL)
    with pytest.raises(CardError) as failed:
        world.run(
            world.treasury.payments.complete_challenge(
                intent.payment_intent_lookup_id, passed=False
            )
        )
    assert failed.value.failure_reason == "authentication_failed"
    assert world.status_at_stripe(reference) == "canceled"
    assert world.get(intent).status is IntentStatus.INITIALIZED


def test_a_new_attempt_abandons_the_waiting_one_at_stripe(world: World) -> None:
    intent, reference = _challenged(world, CaptureMethod.AUTOMATIC)
    txn_id = world.get(intent).latest_transaction_id
    paid = world.attempt(intent, CARD)
    assert paid.intent.status is IntentStatus.PROCESSED
    assert paid.intent.provider_reference != reference
    assert world.status_at_stripe(reference) == "canceled"
    assert world.transaction(txn_id).failure_reason == "superseded"


async def test_the_provider_maps_stripes_states(localstripe_url: str) -> None:
    provider = StripeCardProvider(KEY, FakeClock(), api_base=localstripe_url)
    assert provider.three_d_secure_supported()
    started = await provider.authorize(THREE_D_SECURE, 500, "EUR", capture=False)
    assert started.status is CardProviderStatus.REQUIRES_ACTION
    assert (started.brand, started.last4) == ("visa", "3220")
    # localstripe answers use_stripe_sdk (no return_url): no page to send the customer to.
    assert started.action_url is None
    waiting = await provider.complete_action(started.reference)
    assert waiting.status is CardProviderStatus.REQUIRES_ACTION
    authenticate_at_stripe(localstripe_url, started.reference, success=True)
    done = await provider.complete_action(started.reference)
    assert (done.reference, done.status) == (started.reference, CardProviderStatus.AUTHORIZED)
    await provider.void(started.reference)
    with pytest.raises(CardError) as cancelled:
        await provider.complete_action(started.reference)
    assert cancelled.value.failure_reason == "payment_canceled"


@pytest.mark.parametrize("public_url", [None, "https://pay.example"])
def test_the_stripe_provider_warns_when_no_return_url_can_be_made(
    public_url: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    config = TreasuryConfig(
        database_url="memory://",
        card_provider="stripe",
        stripe_api_key=KEY,  # type: ignore[arg-type]
        public_url=public_url,
    )
    with caplog.at_level(logging.WARNING, logger="treasury.stripe"):
        bootstrap(config, storage=MemoryStorage()).close()
    warned = [r.getMessage() for r in caplog.records if r.name == "treasury.stripe"]
    if public_url is None:
        assert len(warned) == 1 and "TREASURY_PUBLIC_URL is not set" in warned[0]
    else:
        assert warned == []
