"""Card on file over HTTP with the Stripe card provider, against a real localstripe.

The server (conftest's ``client``, over this module's ``treasury``) is the one
``TREASURY_CARD_PROVIDER=stripe`` builds, on an SQLite file: the PMTI's confirm call and its
hosted form save the card at Stripe (a PaymentMethod on the Customer of the PMTI's e-mail), and
a payment intent created with the token charges that PaymentMethod. What happened at Stripe is
read back from localstripe with the SDK.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest
import stripe
from aiohttp.test_utils import TestClient, TestServer

from tests.e2e.conftest import Tenant, _tenant
from tests.e2e.test_cards_api import CARD, VISA, confirm, create_pmti
from tests.e2e.test_hosted_pages import HTML, form, page, token_of
from tests.integration.test_stripe_payments import KEY, StripeFront
from treasury_aiohttp import create_app
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.testing.fakes.clock import FakeClock
from treasury_stripe.card_provider import MAX_NETWORK_RETRIES

Client = TestClient[Any, Any]
INTENT = "/api/v1/payments/intent"


def stripe_treasury(database_url: str, api_base: str, clock: FakeClock) -> Treasury:
    config = TreasuryConfig(
        database_url=database_url,
        card_provider="stripe",
        stripe_api_key=KEY,  # type: ignore[arg-type]  # pydantic makes the SecretStr
        stripe_api_base=api_base,
    )
    return bootstrap(config, clock=clock, wall_clock=clock)


@pytest.fixture
def treasury(sqlite_url: str, localstripe_url: str, clock: FakeClock) -> Treasury:
    return stripe_treasury(sqlite_url, localstripe_url, clock)


@pytest.fixture
def at_stripe(localstripe_url: str) -> stripe.StripeClient:
    return stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})


def new_email() -> str:
    return f"ada-{uuid.uuid4().hex[:12]}@example.com"


async def post(client: Client, tenant: Tenant, path: str, body: dict[str, Any]) -> Any:
    response = await client.post(path, json=body, headers=tenant.auth)
    answer = await response.json()
    assert response.status == 200, answer
    return answer


def saved_method(at_stripe: stripe.StripeClient, email: str) -> stripe.PaymentMethod:
    """The one PaymentMethod on the one Customer of ``email`` at localstripe."""
    (customer,) = at_stripe.v1.customers.list(params={"email": email}).data
    (method,) = at_stripe.v1.payment_methods.list(
        params={"customer": customer.id, "type": "card"}
    ).data
    return method


async def test_a_card_confirmed_then_charged_lives_at_stripe(
    client: Client, tenant: Tenant, treasury: Treasury, at_stripe: stripe.StripeClient
) -> None:
    email = new_email()
    pmti = await create_pmti(client, tenant, customer_email=email)
    result = await confirm(client, pmti, CARD)
    assert result["status"] == "succeeded", result
    token = result["payment_method_token"]
    assert result["card"]["last4"] == "4242"
    method = saved_method(at_stripe, email)
    stored = await treasury.cards.get_token(tenant.company_id, token)
    assert (stored.provider_reference, stored.sealed_card) == (method.id, None)
    shown = await client.get(f"/api/v1/payment_method_tokens/{token}", headers=tenant.auth)
    assert VISA not in await shown.text()

    charge = {
        "account_id": tenant.account_id,
        "billing_amount": 2500,
        "billing_currency": "EUR",
        "payment_type": "Card Payment",
        "card_token": token,
    }
    paid = await post(client, tenant, INTENT, {**charge, "capture_method": "automatic"})
    assert paid["status"] == "PROCESSED"
    held = await post(client, tenant, INTENT, {**charge, "capture_method": "manual"})
    assert held["status"] == "AUTHORIZED"
    captured = await post(client, tenant, f"{INTENT}/capture", {"payment_intent_id": held["id"]})
    assert captured["status"] == "PROCESSED"
    refund = await post(
        client, tenant, f"{INTENT}/refund", {"payment_intent_id": paid["id"], "amount": 1000}
    )
    assert refund["status"] == "succeeded"
    for intent in (paid, held):
        reference = (
            await treasury.payments.get(tenant.company_id, intent["id"])
        ).provider_reference
        remote = at_stripe.v1.payment_intents.retrieve(reference)
        assert (remote.status, remote.payment_method, remote.customer) == (
            "succeeded",
            method.id,
            method.customer,
        )


async def test_the_hosted_form_saves_the_card_at_stripe(
    client: Client, tenant: Tenant, treasury: Treasury, at_stripe: stripe.StripeClient
) -> None:
    email = new_email()
    pmti = await create_pmti(client, tenant, customer_email=email)
    path = urlsplit(pmti["latest_version"]["provider_tokenization_url"]).path
    html = await page(client, path)
    response = await client.post(
        path, data=form(CARD, token_of(html)), headers=HTML, allow_redirects=False
    )
    assert response.status == 303
    assert "Visa •••• 4242 is saved" in await page(client, path)
    read = await treasury.cards.get_intent(tenant.company_id, pmti["id"])
    assert read.payment_method_token is not None
    stored = await treasury.cards.get_token(tenant.company_id, read.payment_method_token)
    assert stored.provider_reference == saved_method(at_stripe, email).id


async def test_a_card_stripe_declines_fails_the_pmti(client: Client, tenant: Tenant) -> None:
    pmti = await create_pmti(client, tenant, customer_email=new_email())
    result = await confirm(client, pmti, {**CARD, "card_number": "4000000000000002"})
    assert result["status"] == "failed"
    assert result["payment_method_token"] is None
    assert result["error"] == {"code": "card_declined", "message": "Your card was declined"}


async def test_the_form_after_a_lost_answer_asks_for_the_same_details(
    sqlite_url: str, localstripe_url: str, clock: FakeClock, at_stripe: stripe.StripeClient
) -> None:
    # Every answer to the attach is lost, the SDK's retries' too: Stripe holds the card, the
    # treasury never heard.
    with StripeFront(localstripe_url, lose_answers={"/attach": 1 + MAX_NETWORK_RETRIES}) as front:
        served = stripe_treasury(sqlite_url, front.url, clock)
        client: Client = TestClient(TestServer(create_app(served, close_treasury=True)))
        await client.start_server()
        try:
            tenant = await _tenant(served, "Acme")
            email = new_email()
            pmti = await create_pmti(client, tenant, customer_email=email)
            path = urlsplit(pmti["latest_version"]["provider_tokenization_url"]).path

            async def send(details: dict[str, Any]) -> Any:
                html = await page(client, path)
                return await client.post(
                    path, data=form(details, token_of(html)), headers=HTML, allow_redirects=False
                )

            lost = await send(CARD)
            assert lost.status == 502
            retyped = await send({**CARD, "cvc": "456"})
            assert retyped.status == 400
            assert "submit the same card details again" in await retyped.text()
            saved = await send(CARD)
            assert saved.status == 303
            assert "Visa •••• 4242 is saved" in await page(client, path)
            assert saved_method(at_stripe, email).card.last4 == "4242"
        finally:
            await client.close()
