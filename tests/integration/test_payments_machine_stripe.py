"""The payments state machine with the Stripe card provider, against a real localstripe.

The same machine and reference model as ``test_payments_machine.py`` (part 3.1's state table,
refunds, holds, expiry, payouts, the ledger invariants after every step), wired with
``card_provider="stripe"`` so that every authorization, capture, void and refund goes over HTTP
to localstripe through the official SDK. Only the cards differ: localstripe's test cards, not the
sandbox's table. What localstripe cannot simulate (refused captures, vanishing holds, disputes
known in advance) is covered by the sandbox run and by ``test_stripe_payments.py``.

Currencies are those Stripe counts as ISO 4217 does (no KWD, whose amounts Stripe takes only in
tens: ``test_stripe_payments.py`` holds that rule). The runs are short: each step is a few HTTP
calls.
"""

from __future__ import annotations

from typing import ClassVar

import stripe
from hypothesis.stateful import run_state_machine_as_test

from tests.conftest import machine_settings
from treasury_core.config import TreasuryConfig
from treasury_core.payments.records import Transaction
from treasury_core.testing.machines.payments import ModelCard, ModelIntent, PaymentsMachine

KEY = "sk_test_treasury_machine"

#: localstripe's cards as the Stripe provider sees them: approved unless it declines the charge.
#: (localstripe takes 16-digit numbers only, so no American Express card.)
STRIPE_CARDS: tuple[ModelCard, ...] = (
    ModelCard("4242424242424242"),
    ModelCard("5555555555554444"),
    ModelCard("4000000000000341", declined="card_declined"),
    ModelCard("4000000000003220", three_d_secure=True),
)

STRIPE_SETTINGS = machine_settings(examples=40, steps=30)


class StripePaymentsMachine(PaymentsMachine):
    """The payments machine over the Stripe provider; :attr:`api_base` is set per test."""

    api_base: ClassVar[str] = ""
    currency_pool: ClassVar[tuple[str, ...]] = ("EUR", "JPY", "USD")
    cards: ClassVar[tuple[ModelCard, ...]] = STRIPE_CARDS

    def make_config(self) -> TreasuryConfig:
        """Sandbox mode (for the clock advances), with Stripe as the card provider."""
        return TreasuryConfig(
            database_url="memory://",
            sandbox=True,
            card_provider="stripe",
            stripe_api_key=KEY,  # type: ignore[arg-type]  # pydantic makes the SecretStr
            stripe_api_base=self.api_base,
        )

    def authenticate(self, intent: ModelIntent, passed: bool) -> None:
        """The customer answers Stripe's 3-D Secure at localstripe, as a browser would."""
        stored = self.storage.run_sync(lambda uow: uow.intents.get(intent.id, None), write=False)
        assert stored is not None and stored.latest_transaction_id is not None
        reference = self._challenge_reference(stored.latest_transaction_id)
        client = stripe.StripeClient(KEY, base_addresses={"api": self.api_base})
        remote = client.v1.payment_intents.retrieve(reference)
        client.raw_request(
            "post",
            f"/v1/payment_intents/{reference}/_authenticate",
            client_secret=remote.client_secret,
            success="true" if passed else "false",
        )

    def _challenge_reference(self, transaction_id: str) -> str:
        company = self.company_id
        txn = self.storage.run_sync(
            lambda uow: uow.records.get(Transaction, transaction_id, company), write=False
        )
        assert txn is not None and txn.provider_reference is not None
        return txn.provider_reference


def _payment_intents_at(api_base: str) -> int:
    client = stripe.StripeClient(KEY, base_addresses={"api": api_base})
    return sum(1 for _ in client.v1.payment_intents.list({"limit": 100}).auto_paging_iter())


def test_the_payments_machine_holds_with_stripe(localstripe_url: str) -> None:
    before = _payment_intents_at(localstripe_url)
    machine = type("StripeRun", (StripePaymentsMachine,), {"api_base": localstripe_url})
    run_state_machine_as_test(machine, settings=STRIPE_SETTINGS)
    # The runs paid through Stripe, not some other provider.
    assert _payment_intents_at(localstripe_url) > before
