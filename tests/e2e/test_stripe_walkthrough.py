"""The README's card walk-through, taken over HTTP by ``treasury serve`` with the Stripe provider.

A real ``treasury serve`` process runs with ``TREASURY_CARD_PROVIDER=stripe``, its API base a
real localstripe on loopback, and is driven as the README's curl commands drive it: automatic
capture, manual capture then capture, manual then cancel, a refund, and a saved card. After each
step the PaymentIntent is read back from localstripe with the Stripe SDK, separately from the
server: the money moved (or did not) at Stripe, not only in our records.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
import stripe

from tests.e2e.test_cli import Server, call, clean_env, run_cli

#: Any key of this shape passes at localstripe.
KEY = "sk_test_x"
CARD = {"card_number": "4242424242424242", "expiry_month": 12, "expiry_year": 2034, "cvc": "123"}
#: The card localstripe declines at authorization.
DECLINED = {**CARD, "card_number": "4000000000000341"}


@dataclass
class Walk:
    """The server, the company's key and account, and a reader of localstripe's state."""

    server: Server
    key: str
    account: int
    reader: stripe.StripeClient
    seen: set[str] = field(default_factory=set)

    def call(self, method: str, path: str, body: Any = None, *, key: bool = True) -> Any:
        status, answer = call(self.server.port, method, path, self.key if key else None, body)
        assert status == 200, answer
        return answer

    def intent(self, amount: int, **fields: Any) -> Any:
        """``POST /api/v1/payments/intent`` for ``amount`` EUR cents, as the README does."""
        return self.call(
            "POST",
            "/api/v1/payments/intent",
            {
                "account_id": self.account,
                "billing_amount": amount,
                "billing_currency": "EUR",
                "payment_type": "Card Payment",
                **fields,
            },
        )

    def pay(self, intent: Any, card: dict[str, Any] = CARD) -> Any:
        """The customer pays on the hosted page's endpoint (no API key); the intent after."""
        self.call("POST", f"/pay/{intent['payment_intent_lookup_id']}", card, key=False)
        return self.lookup(intent)

    def lookup(self, intent: Any) -> Any:
        lookup_id = intent["payment_intent_lookup_id"]
        return self.call("GET", f"/api/v1/payments/intent?payment_intent_lookup_id={lookup_id}")

    def made_at_stripe(self) -> list[stripe.PaymentIntent]:
        """The PaymentIntents localstripe made since the last look, oldest first."""
        every = self.reader.v1.payment_intents.list(params={"limit": 100}).auto_paging_iter()
        new = [pi for pi in every if pi.id not in self.seen]
        self.seen.update(pi.id for pi in new)
        return new

    def new_at_stripe(self) -> stripe.PaymentIntent:
        """The one PaymentIntent localstripe made since the last look."""
        new = self.made_at_stripe()
        assert len(new) == 1, [pi.id for pi in new]
        return new[0]

    def at_stripe(self, remote: stripe.PaymentIntent) -> stripe.PaymentIntent:
        return self.reader.v1.payment_intents.retrieve(remote.id)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, localstripe_url: str) -> Iterator[Walk]:
    """One server and company for the module's steps, as one reader of the README has."""
    workdir = tmp_path_factory.mktemp("walkthrough")
    created = run_cli("companies", "create", "Acme Ltd", cwd=workdir)
    assert created.returncode == 0, created.stderr
    company = json.loads(created.stdout)
    env = clean_env(
        TREASURY_CARD_PROVIDER="stripe",
        TREASURY_STRIPE_API_BASE=localstripe_url,
        TREASURY_STRIPE_API_KEY=KEY,
    )
    server = Server(workdir, env=env)
    reader = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})
    try:
        yield Walk(server, company["secret_key"], company["account_id"], reader)
    finally:
        output = server.stop()
        assert "4242424242424242" not in output  # the access log and every other line


@pytest.fixture
def walk(served: Walk) -> Walk:
    """The server, having forgotten the PaymentIntents made before this test (localstripe lives
    for the whole session)."""
    served.made_at_stripe()
    return served


def test_automatic_capture_charges_at_stripe(walk: Walk) -> None:
    intent = walk.intent(1_510)
    paid = walk.pay(intent)
    assert paid["status"] == "PROCESSED"
    remote = walk.new_at_stripe()
    assert (remote.status, remote.amount, remote.currency) == ("succeeded", 1_510, "eur")
    assert remote.capture_method == "automatic"


def test_manual_capture_then_capture_then_refund(walk: Walk) -> None:
    intent = walk.intent(2_500, merchant_reference="order-1", capture_method="manual")
    assert walk.pay(intent)["status"] == "AUTHORIZED"
    remote = walk.new_at_stripe()
    assert (remote.status, remote.amount, remote.capture_method) == (
        "requires_capture",
        2_500,
        "manual",
    )
    processed = "/api/v1/payments/intents/count?status=PROCESSED"
    before = walk.call("GET", processed)["count"]
    captured = walk.call(
        "POST", "/api/v1/payments/intent/capture", {"payment_intent_id": intent["id"]}
    )
    assert captured["status"] == "PROCESSED"
    assert walk.at_stripe(remote).status == "succeeded"
    assert walk.call("GET", processed)["count"] == before + 1

    walk.call(
        "POST", "/api/v1/payments/intent/refund", {"payment_intent_id": intent["id"], "amount": 500}
    )
    assert walk.lookup(intent)["amount_refunded"] == 500
    refunds = walk.reader.v1.refunds.list(params={"payment_intent": remote.id})
    assert [r.amount for r in refunds.data] == [500]


def test_manual_capture_then_cancel_releases_the_hold_at_stripe(walk: Walk) -> None:
    intent = walk.intent(1_320, capture_method="manual")
    assert walk.pay(intent)["status"] == "AUTHORIZED"
    remote = walk.new_at_stripe()
    assert remote.status == "requires_capture"
    cancelled = walk.call(
        "POST", "/api/v1/payments/intent/cancel-authorization", {"payment_intent_id": intent["id"]}
    )
    assert cancelled["status"] == "CANCELLED"
    assert walk.at_stripe(remote).status == "canceled"


def test_a_declined_card_leaves_the_intent_payable(walk: Walk) -> None:
    intent = walk.intent(1_430)
    lookup_id = intent["payment_intent_lookup_id"]
    status, declined = call(walk.server.port, "POST", f"/pay/{lookup_id}", None, DECLINED)
    assert status == 402
    assert declined["error"]["code"] == "card_declined"
    assert walk.lookup(intent)["status"] == "INITIALIZED"
    assert all(pi.status != "succeeded" for pi in walk.made_at_stripe())
    assert walk.pay(intent)["status"] == "PROCESSED"
    assert walk.new_at_stripe().status == "succeeded"


def test_a_saved_card_pays_without_the_customer(walk: Walk) -> None:
    pmti = walk.call(
        "POST",
        "/api/v1/payment_method_token_intent",
        {
            "account_id": walk.account,
            "payment_type": "Tokenization",
            "customer_email": "ada@example.com",
            "customer_phone_number": "+447700900123",
        },
    )
    confirm = urlsplit(pmti["latest_version"]["confirm_endpoint_url"]).path
    saved = walk.call("POST", confirm, {"cardholder_name": "Ada Lovelace", **CARD}, key=False)
    token = saved["payment_method_token"]
    walk.made_at_stripe()  # the saving made no PaymentIntent; the charge below is the new one
    intent = walk.intent(1_200, card_token=token)
    assert walk.lookup(intent)["status"] == "PROCESSED"
    # Stripe charged the PaymentMethod the confirm saved, off session, without a CVC.
    remote = walk.new_at_stripe()
    assert (remote.status, remote.amount, remote.currency) == ("succeeded", 1_200, "eur")
    assert remote.payment_method is not None and remote.customer is not None
