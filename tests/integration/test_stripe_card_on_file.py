"""Card on file with the Stripe card provider, against a real localstripe on loopback.

With this provider a PMTI's card is saved at Stripe, as a PaymentMethod attached to the Customer
of the PMTI's e-mail, and the ``pmt_`` token keeps only that PaymentMethod's id: the treasury
holds no card number. What each test asserts at Stripe is read back from localstripe with the
SDK. localstripe keeps one store for the whole test session, so each test uses e-mails of its
own.

localstripe's test cards: 4000000000000002 is declined when attached to a Customer (when it is
saved), 4000000000000341 is saved but declined when charged.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import stripe

from tests.integration.test_stripe_payments import KEY, StripeFront
from tests.integration.test_stripe_payments import World as PaymentsWorld
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.cards.tokens import (
    CardSubmission,
    CreateTokenIntentRequest,
    PaymentMethodToken,
    TokenIntent,
    TokenIntentStatus,
)
from treasury_core.errors import CardError, ErrorKind, InvalidRequestError, ProviderError
from treasury_core.payments.intents import (
    CaptureMethod,
    IntentFilter,
    IntentStatus,
    PaymentIntent,
)
from treasury_core.payments.records import Transaction, TransactionStatus
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports.card_provider import CardData, CardProviderStatus
from treasury_core.testing import FakeClock, MemoryStorage, check_invariants
from treasury_stripe.card_provider import MAX_NETWORK_RETRIES, StripeCardProvider

VISA = "4242424242424242"
#: Declined by localstripe when attached to a Customer, i.e. when saved.
DECLINED_AT_SAVE = "4000000000000002"
#: Saved by localstripe, then declined when charged.
DECLINED_AT_CHARGE = "4000000000000341"


def card(number: str = VISA) -> CardSubmission:
    return CardSubmission(
        cardholder_name="Ada Lovelace",
        card_number=number,
        expiry_month=12,
        expiry_year=2040,
        cvc="123",
    )


def new_email() -> str:
    return f"ada-{uuid.uuid4().hex[:12]}@example.com"


class World(PaymentsWorld):
    """The payments tests' world, with PMTIs and saved cards."""

    def submit(self, email: str, number: str = VISA) -> TokenIntent:
        pmti = self.pmti(email)
        return self.confirm(pmti, number)

    def pmti(self, email: str) -> Any:
        request = CreateTokenIntentRequest(
            account_id=self.account,
            payment_type="Tokenization",  # type: ignore[arg-type]  # pydantic makes the enum
            customer_email=email,
            customer_phone_number="+447700900123",
        )
        return self.run(self.treasury.cards.create_intent(self.company, request))

    def confirm(self, pmti: Any, number: str = VISA) -> TokenIntent:
        secret = pmti.confirm_path.rsplit("/", 1)[1]
        finished: TokenIntent = self.run(
            self.treasury.cards.submit(pmti.intent.id, secret, card(number))
        )
        return finished

    def token(self, finished: TokenIntent) -> PaymentMethodToken:
        assert finished.payment_method_token is not None
        found: PaymentMethodToken = self.run(
            self.treasury.cards.get_token(self.company, finished.payment_method_token)
        )
        return found

    def charge(self, token: str, capture: CaptureMethod = CaptureMethod.AUTOMATIC) -> Any:
        request = CreateIntentRequest(
            account_id=self.account,
            billing_amount=1_500,
            billing_currency="USD",
            payment_type="Card Payment",
            capture_method=capture,
            card_token=token,
        )
        return self.run(self.treasury.payments.create(self.company, request))

    def intents(self) -> list[PaymentIntent]:
        page = self.run(self.treasury.payments.list(self.company, IntentFilter()))
        found: list[PaymentIntent] = page.items
        return found


def _treasury(api_base: str, database_url: str = "memory://", provider: str = "stripe") -> Treasury:
    clock = FakeClock()
    config = TreasuryConfig(
        database_url=database_url,
        card_provider=provider,
        stripe_api_key=KEY,  # type: ignore[arg-type]  # pydantic makes the SecretStr
        stripe_api_base=api_base,
    )
    storage = MemoryStorage() if database_url == "memory://" else None
    return bootstrap(config, storage=storage, clock=clock, wall_clock=clock)


def _world(api_base: str, reader_base: str) -> World:
    treasury = _treasury(api_base)
    created = asyncio.run(treasury.companies.create_company("Acme"))
    reader = stripe.StripeClient(KEY, base_addresses={"api": reader_base})
    return World(treasury, reader, created.company.id, created.merchant_account.id)


@pytest.fixture
def world(localstripe_url: str) -> Iterator[World]:
    built = _world(localstripe_url, localstripe_url)
    yield built
    check_invariants(built.treasury.storage)
    built.treasury.close()


def test_a_confirmed_card_is_a_payment_method_on_the_emails_customer(world: World) -> None:
    email = new_email()
    finished = world.submit(email)
    assert finished.status is TokenIntentStatus.SUCCEEDED
    assert finished.card is not None
    assert (finished.card.brand, finished.card.last4) == ("visa", "4242")
    token = world.token(finished)
    assert token.provider_reference is not None
    assert token.provider_reference.startswith("pm_")
    # No card number in the treasury, not even sealed.
    assert token.sealed_card is None
    assert VISA not in token.model_dump_json()
    customers = world.stripe.v1.customers.list(params={"email": email}).data
    assert len(customers) == 1
    method = world.stripe.v1.payment_methods.retrieve(token.provider_reference)
    assert method.customer == customers[0].id
    assert method.card is not None
    assert (method.card.last4, method.card.exp_month, method.card.exp_year) == ("4242", 12, 2040)


def test_a_second_card_of_the_same_email_joins_its_customer(world: World) -> None:
    email = new_email()
    first = world.token(world.submit(email))
    second = world.token(world.submit(email, "5555555555554444"))
    customers = world.stripe.v1.customers.list(params={"email": email}).data
    assert len(customers) == 1
    methods = world.stripe.v1.payment_methods.list(
        params={"customer": customers[0].id, "type": "card"}
    ).data
    assert {m.id for m in methods} == {first.provider_reference, second.provider_reference}
    assert second.card.brand == "mastercard"
    # Another e-mail is another Customer.
    other = world.token(world.submit(new_email()))
    other_customer = world.stripe.v1.payment_methods.retrieve(other.provider_reference).customer
    assert other_customer != customers[0].id


def test_a_card_stripe_declines_when_saved_fails_the_pmti(world: World) -> None:
    email = new_email()
    pmti = world.pmti(email)
    finished = world.confirm(pmti, DECLINED_AT_SAVE)
    assert finished.status is TokenIntentStatus.FAILED
    assert finished.payment_method_token is None
    assert finished.error is not None
    assert (finished.error.code, finished.error.message) == (
        "card_declined",
        "Your card was declined",
    )
    # One card per PMTI: the failed one takes no other.
    with pytest.raises(InvalidRequestError):
        world.confirm(pmti)


def test_a_saved_card_is_charged_off_session_at_stripe(world: World) -> None:
    token = world.token(world.submit(new_email()))
    assert token.provider_reference is not None
    intent = world.charge(token.id)
    assert intent.status is IntentStatus.PROCESSED
    remote = world.stripe.v1.payment_intents.retrieve(intent.provider_reference)
    assert (remote.status, remote.amount, remote.payment_method) == (
        "succeeded",
        1_500,
        token.provider_reference,
    )
    method = world.stripe.v1.payment_methods.retrieve(token.provider_reference)
    assert remote.customer == method.customer
    refund = world.run(world.treasury.payments.refund(world.company, intent.id, amount=500))
    assert refund.status.value == "succeeded"
    refunds = world.stripe.v1.refunds.list(params={"payment_intent": intent.provider_reference})
    assert [r.amount for r in refunds.data] == [500]


def test_a_saved_card_held_then_captured_at_stripe(world: World) -> None:
    token = world.token(world.submit(new_email()))
    intent = world.charge(token.id, CaptureMethod.MANUAL)
    assert intent.status is IntentStatus.AUTHORIZED
    remote = world.stripe.v1.payment_intents.retrieve(intent.provider_reference)
    assert (remote.status, remote.payment_method) == ("requires_capture", token.provider_reference)
    captured = world.run(world.treasury.payments.capture(world.company, intent.id))
    assert captured.status is IntentStatus.PROCESSED
    remote = world.stripe.v1.payment_intents.retrieve(intent.provider_reference)
    assert remote.status == "succeeded"


def test_a_saved_card_declined_when_charged(world: World) -> None:
    finished = world.submit(new_email(), DECLINED_AT_CHARGE)
    assert finished.status is TokenIntentStatus.SUCCEEDED
    assert finished.payment_method_token is not None
    with pytest.raises(CardError) as declined:
        world.charge(finished.payment_method_token)
    assert declined.value.kind is ErrorKind.DECLINED
    assert declined.value.failure_reason == "card_declined"
    (intent,) = world.intents()
    assert intent.status is IntentStatus.INITIALIZED
    # The decline is recorded with the saved card's last four digits, from the token.
    failed = world.run(
        world.treasury.storage.run(
            lambda uow: uow.records.get(Transaction, intent.latest_transaction_id, world.company),
            write=False,
        )
    )
    assert (failed.status, failed.card_last4) == (TransactionStatus.FAILED, "0341")


def test_a_saved_card_gone_at_stripe_is_a_clear_decline(localstripe_url: str) -> None:
    with StripeFront(localstripe_url) as front:
        world = _world(front.url, localstripe_url)
        token = world.token(world.submit(new_email()))
        assert token.provider_reference is not None
        # What removing the card from the Customer at Stripe does.
        world.stripe.v1.payment_methods.detach(token.provider_reference)
        with pytest.raises(CardError) as declined:
            world.charge(token.id)
        assert declined.value.kind is ErrorKind.DECLINED
        assert declined.value.failure_reason == "saved_card_unavailable"
        assert "save the card again" in declined.value.message
        (intent,) = world.intents()
        assert intent.status is IntentStatus.INITIALIZED
        assert "POST /v1/payment_intents" not in front.forwarded
        check_invariants(world.treasury.storage)
        world.treasury.close()


def test_a_confirm_retried_after_a_lost_answer_saves_one_card(localstripe_url: str) -> None:
    # Every answer to the attach is lost, the SDK's retries' too: Stripe attached the card,
    # the treasury never heard, and the PMTI stays open.
    lost = {"/attach": 1 + MAX_NETWORK_RETRIES}
    with StripeFront(localstripe_url, lose_answers=lost) as front:
        world = _world(front.url, localstripe_url)
        email = new_email()
        pmti = world.pmti(email)
        with pytest.raises(ProviderError):
            world.confirm(pmti)
        finished = world.confirm(pmti)
        assert finished.status is TokenIntentStatus.SUCCEEDED
        token = world.token(finished)
        creates = [line for line in front.forwarded if line == "POST /v1/payment_methods"]
        assert len(creates) == 1
        customer_creates = [line for line in front.forwarded if line == "POST /v1/customers"]
        assert len(customer_creates) == 1
        (customer,) = world.stripe.v1.customers.list(params={"email": email}).data
        methods = world.stripe.v1.payment_methods.list(
            params={"customer": customer.id, "type": "card"}
        ).data
        assert [m.id for m in methods] == [token.provider_reference]
        check_invariants(world.treasury.storage)
        world.treasury.close()


def _two_treasuries(
    localstripe_url: str, sqlite_url: str, first: str, api_base: str | None = None
) -> tuple[World, World]:
    """A treasury with the ``first`` card provider and one with the other, on one SQLite file:
    the same company, tokens and intents, as after a change of ``TREASURY_CARD_PROVIDER``.
    The stripe one talks to ``api_base`` (localstripe unless given)."""
    reader = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})
    base = api_base or localstripe_url
    saving = _treasury(base, sqlite_url, first)
    created = asyncio.run(saving.companies.create_company("Acme"))
    ids = (created.company.id, created.merchant_account.id)
    other = "sandbox" if first == "stripe" else "stripe"
    return World(saving, reader, *ids), World(_treasury(base, sqlite_url, other), reader, *ids)


def test_a_stripe_token_is_stored_in_sql_and_refused_by_a_vault_provider(
    localstripe_url: str, sqlite_url: str
) -> None:
    at_stripe, sandbox = _two_treasuries(localstripe_url, sqlite_url, "stripe")
    try:
        finished = at_stripe.submit(new_email())
        token = sandbox.token(finished)  # read back from the SQLite file
        assert token.provider_reference is not None
        assert token.provider_reference.startswith("pm_")
        assert token.sealed_card is None
        with pytest.raises(InvalidRequestError) as refused:
            sandbox.charge(token.id)
        assert refused.value.kind is ErrorKind.INVALID_REQUEST
        assert (refused.value.code, refused.value.param) == (
            "provider_capability_unsupported",
            "card_token",
        )
        assert sandbox.intents() == []
        # The provider that saved it still charges it.
        assert at_stripe.charge(token.id).status is IntentStatus.PROCESSED
    finally:
        at_stripe.treasury.close()
        sandbox.treasury.close()


def test_a_vaulted_token_is_refused_by_the_stripe_provider(
    localstripe_url: str, sqlite_url: str
) -> None:
    with StripeFront(localstripe_url) as front:
        sandbox, at_stripe = _two_treasuries(localstripe_url, sqlite_url, "sandbox", front.url)
        try:
            token = sandbox.token(sandbox.submit(new_email()))
            assert token.sealed_card is not None
            assert token.provider_reference is None
            with pytest.raises(InvalidRequestError) as refused:
                at_stripe.charge(token.id)
            assert refused.value.kind is ErrorKind.INVALID_REQUEST
            assert refused.value.code == "provider_capability_unsupported"
            assert "saved again" in refused.value.message
            assert at_stripe.intents() == []
            # Stripe was not even asked.
            assert front.seen == []
        finally:
            sandbox.treasury.close()
            at_stripe.treasury.close()


async def test_saving_and_charging_log_no_card_number_or_cvc(
    localstripe_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = StripeCardProvider(KEY, FakeClock(), api_base=localstripe_url)
    data = CardData(number=VISA, expiry_month=12, expiry_year=2040, cvc="987")
    saved = await provider.save_card(data, customer_email=new_email(), key=uuid.uuid4().hex)
    charged = await provider.authorize_saved(saved, 1_000, "USD", capture=True)
    assert charged.status is CardProviderStatus.CAPTURED
    assert [r for r in caplog.records if r.name == "stripe"]  # the SDK logged, at INFO
    for record in caplog.records:
        text = record.getMessage()
        assert VISA not in text
        assert "cvc" not in text.lower()


async def test_a_card_without_an_email_gets_a_customer_of_its_own(localstripe_url: str) -> None:
    provider = StripeCardProvider(KEY, FakeClock(), api_base=localstripe_url)
    data = CardData(number=VISA, expiry_month=12, expiry_year=2040, cvc="123")
    first = await provider.save_card(data, customer_email=None, key=uuid.uuid4().hex)
    second = await provider.save_card(data, customer_email=None, key=uuid.uuid4().hex)
    reader = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})
    owners = [reader.v1.payment_methods.retrieve(s.reference).customer for s in (first, second)]
    assert owners[0] != owners[1]
    for owner in owners:
        assert isinstance(owner, str)
        assert reader.v1.customers.retrieve(owner).email is None


def test_a_retry_with_other_details_of_the_same_card_is_in_doubt(localstripe_url: str) -> None:
    lost = {"/attach": 1 + MAX_NETWORK_RETRIES}
    with StripeFront(localstripe_url, lose_answers=lost) as front:
        world = _world(front.url, localstripe_url)
        pmti = world.pmti(new_email())
        secret = pmti.confirm_path.rsplit("/", 1)[1]
        with pytest.raises(ProviderError):
            world.confirm(pmti)
        retyped = card().model_copy(update={"cvc": "456"})
        with pytest.raises(InvalidRequestError) as in_doubt:
            world.run(world.treasury.cards.submit(pmti.intent.id, secret, retyped))
        assert in_doubt.value.kind is ErrorKind.INVALID_REQUEST
        assert in_doubt.value.code == "payment_attempt_in_doubt"
        assert "submit the same card details again" in in_doubt.value.message
        # The PMTI is still open: the same details save the card Stripe already holds.
        assert world.confirm(pmti).status is TokenIntentStatus.SUCCEEDED
        creates = [line for line in front.forwarded if line == "POST /v1/payment_methods"]
        assert len(creates) == 1
        world.treasury.close()
