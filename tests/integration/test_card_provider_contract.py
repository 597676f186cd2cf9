"""One card provider contract, four providers: the sandbox, Stripe and two fakes.

The contract lives in :mod:`treasury_core.testing.contracts.card_provider`, shipped so that
third-party card providers run exactly what ours pass. The Stripe provider runs it against a
real localstripe on loopback (the ``localstripe_url`` fixture), whose test cards are its own:
4000000000000341 is declined at authorization there, 4000000000003220 asks for 3-D Secure.
It reaches localstripe through the test bed's proxy (``treasury_pytest.localstripe``), which
replays keyed requests as Stripe does and stands in for the search and ``created`` filter
its lookups use, so the contract's keyed-call and lookup tests run on it too.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest
import stripe

from treasury_core.ports.card_provider import CardData
from treasury_core.testing import FakeClock, FlakyCardProvider, SalesOnlyCardProvider
from treasury_core.testing.contracts.card_provider import CardProviderContract
from treasury_pytest.localstripe import localstripe_proxy
from treasury_sandbox.card_provider import SandboxCardProvider
from treasury_stripe.card_provider import StripeCardProvider

#: localstripe takes any secret key of this shape.
KEY = "sk_test_contract"


def card(number: str) -> CardData:
    return CardData(number=number, expiry_month=12, expiry_year=2040, cvc="123")


# The cards every provider here shares; a class overrides what its provider does otherwise.


@pytest.fixture
def good_card() -> CardData:
    return card("4242424242424242")


@pytest.fixture
def declined_card() -> CardData:
    return card("4000000000000002")


class TestSandboxCardProvider(CardProviderContract):
    """Holds, refunds, 3-D Secure and verification on; attempt keys off (nothing to check)."""

    @pytest.fixture
    def card_provider(self) -> SandboxCardProvider:
        return SandboxCardProvider(FakeClock())

    @pytest.fixture
    def three_d_secure_card(self) -> CardData:
        return card("4000000000003220")

    @pytest.fixture
    def hold_gone_card(self) -> CardData:
        return card("4000000000000259")


class TestStripeCardProvider(CardProviderContract):
    """Holds, refunds, 3-D Secure, keyed calls and lookups on Stripe's side; verification off
    (the contract checks the refusal)."""

    #: The proxy replays a repeated key's first answer, as Stripe does.
    replays_keyed_calls = True

    @pytest.fixture
    def card_provider(self, localstripe_url: str) -> Iterator[StripeCardProvider]:
        with localstripe_proxy(localstripe_url) as proxy:
            yield StripeCardProvider(KEY, FakeClock(), api_base=proxy.url)

    @pytest.fixture
    def declined_card(self) -> CardData:
        # localstripe approves 4000000000000002; this is the one card it declines.
        return card("4000000000000341")

    @pytest.fixture
    def three_d_secure_card(self) -> CardData:
        return card("4000000000003220")

    @pytest.fixture
    def pass_three_d_secure(self, localstripe_url: str) -> Callable[[str], None]:
        # The customer authenticating on Stripe's page: localstripe's endpoint for it.
        at_stripe = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})

        def authenticate(reference: str) -> None:
            secret = at_stripe.v1.payment_intents.retrieve(reference).client_secret
            at_stripe.raw_request(
                "post",
                f"/v1/payment_intents/{reference}/_authenticate",
                client_secret=secret,
                success="true",
            )

        return authenticate

    @pytest.fixture
    def lose_hold(self, localstripe_url: str) -> Callable[[str], None]:
        # What Stripe does itself when an authorization expires; localstripe cannot expire one.
        at_stripe = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})

        def cancel(reference: str) -> None:
            at_stripe.v1.payment_intents.cancel(reference)

        return cancel

    @pytest.fixture
    def offline_card_provider(self) -> StripeCardProvider:
        # A port that was just free: nothing listens there, so every connection is refused.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        return StripeCardProvider(
            KEY, FakeClock(), api_base=f"http://127.0.0.1:{port}", max_network_retries=0
        )


class TestSalesOnlyCardProvider(CardProviderContract):
    """Every capability flag off: each capability's test asserts the port's refusal."""

    @pytest.fixture
    def card_provider(self) -> SalesOnlyCardProvider:
        return SalesOnlyCardProvider(FakeClock())


class TestFlakyCardProvider(CardProviderContract):
    """Every capability on, no fault set: the fake the resolution tests rely on behaves as the
    port says."""

    #: The fake dates its charges by this business clock, not the wall clock.
    clock = FakeClock()
    replays_keyed_calls = True

    @pytest.fixture
    def card_provider(self) -> FlakyCardProvider:
        return FlakyCardProvider(self.clock)

    def recent_since(self) -> datetime:
        return self.clock.now() - timedelta(minutes=1)

    @pytest.fixture
    def three_d_secure_card(self) -> CardData:
        return card("4000000000003220")

    @pytest.fixture
    def lose_hold(self, card_provider: FlakyCardProvider) -> Callable[[str], None]:
        return card_provider.lose_hold
