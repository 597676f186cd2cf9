"""The flaky card provider of the testing kit: keys, lost answers, refused calls, lookups, events.

Its plain behaviour (holds, refunds, 3-D Secure) is the card provider contract's, run in
tests/integration/test_card_provider_contract.py; here is what the contract does not check and
the resolution tests rely on.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from treasury_core.errors import CardError, ProviderDidNotAct, ProviderError
from treasury_core.ports.card_provider import (
    BadProviderEvent,
    CallOwner,
    CardData,
    CardProviderEventKind,
    CardProviderStatus,
    answers_lookups,
    takes_keyed_calls,
)
from treasury_core.testing import FakeClock, FlakyCardProvider
from treasury_core.testing.fakes.card_providers import (
    FLAKY_DECLINED_CARD,
    FLAKY_THREE_D_SECURE_CARD,
    Call,
)

S = CardProviderStatus
K = CardProviderEventKind
CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")
OWNER = CallOwner(7, 42)


def card(number: str) -> CardData:
    return CardData(number=number, expiry_month=12, expiry_year=2040, cvc="123")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def provider(clock: FakeClock) -> FlakyCardProvider:
    return FlakyCardProvider(clock)


def test_it_announces_keyed_calls_and_lookups(provider: FlakyCardProvider) -> None:
    assert takes_keyed_calls(provider)
    assert answers_lookups(provider)


def test_a_repeated_key_answers_the_first_outcome_without_acting_again(
    provider: FlakyCardProvider,
) -> None:
    first = asyncio.run(provider.authorize(CARD, 500, "USD", capture=True, attempt_key="k1"))
    again = asyncio.run(provider.authorize(CARD, 500, "USD", capture=True, attempt_key="k1"))
    assert again == first
    assert list(provider.charges) == [first.reference]
    # A decline is an outcome too: the same key declines again, and nothing is made.
    with pytest.raises(CardError):
        asyncio.run(
            provider.authorize(card(FLAKY_DECLINED_CARD), 500, "USD", capture=True, attempt_key="d")
        )
    with pytest.raises(CardError) as again_declined:
        asyncio.run(provider.authorize(CARD, 500, "USD", capture=True, attempt_key="d"))
    assert again_declined.value.failure_reason == "card_declined"
    assert len(provider.charges) == 1


def test_a_lost_answer_acted_and_the_retry_with_its_key_gets_it(
    provider: FlakyCardProvider,
) -> None:
    provider.lose_answers(Call.AUTHORIZE)
    with pytest.raises(ProviderError) as lost:
        asyncio.run(
            provider.authorize(CARD, 500, "USD", capture=False, attempt_key="k", owner=OWNER)
        )
    assert not isinstance(lost.value, ProviderDidNotAct)
    [charge] = provider.charges.values()
    assert (charge.status, charge.owner, charge.attempt_key) == (S.AUTHORIZED, OWNER, "k")
    retried = asyncio.run(provider.authorize(CARD, 500, "USD", capture=False, attempt_key="k"))
    assert retried.reference == charge.reference
    assert len(provider.charges) == 1


def test_a_refused_call_does_nothing(provider: FlakyCardProvider) -> None:
    sale = asyncio.run(provider.authorize(CARD, 500, "USD", capture=True))
    provider.refuse_calls(Call.REFUND, 2)
    for _ in range(2):
        with pytest.raises(ProviderDidNotAct):
            asyncio.run(provider.refund(sale.reference, 100, key="r"))
    assert provider.refunds == {}
    assert provider.charges[sale.reference].amount_refunded == 0
    # The faults are used up: the third call refunds.
    done = asyncio.run(provider.refund(sale.reference, 100, key="r"))
    assert done.status is S.REFUNDED
    assert provider.calls.count(Call.REFUND) == 3


def test_lookups_find_what_keyed_calls_made(provider: FlakyCardProvider) -> None:
    sale = asyncio.run(provider.authorize(CARD, 500, "USD", capture=True, attempt_key="a"))
    assert asyncio.run(provider.find_charge("a")) == sale
    assert asyncio.run(provider.find_charge("other")) is None
    provider.lose_answers(Call.REFUND)
    with pytest.raises(ProviderError):
        asyncio.run(provider.refund(sale.reference, 200, key="r", owner=CallOwner(7, 42, "re_1")))
    found = asyncio.run(provider.find_refund(sale.reference, "r"))
    assert found is not None and found.status is S.REFUNDED
    assert asyncio.run(provider.find_refund(sale.reference, "never")) is None
    provider.lose_answers(Call.FIND_REFUND)
    with pytest.raises(ProviderError):
        asyncio.run(provider.find_refund(sale.reference, "r"))


def test_recent_charges_since_a_time(provider: FlakyCardProvider, clock: FakeClock) -> None:
    old = asyncio.run(provider.authorize(CARD, 100, "USD", capture=True))
    clock.advance(3600)
    since = clock.now()
    new = asyncio.run(provider.authorize(CARD, 200, "EUR", capture=False, owner=OWNER))
    [listed] = asyncio.run(provider.recent_charges(since))
    assert (listed.reference, listed.owner, listed.amount, listed.currency) == (
        new.reference,
        OWNER,
        200,
        "EUR",
    )
    assert (listed.status, listed.amount_captured) == (S.AUTHORIZED, 0)
    everything = asyncio.run(provider.recent_charges(since - timedelta(days=1)))
    assert [c.reference for c in everything] == [old.reference, new.reference]


def test_a_pending_refund_settles_by_its_event(provider: FlakyCardProvider) -> None:
    sale = asyncio.run(provider.authorize(CARD, 500, "USD", capture=True, owner=OWNER))
    provider.hold_refunds()
    owner = CallOwner(7, 42, "re_1")
    pending = asyncio.run(provider.refund(sale.reference, 300, key="r", owner=owner))
    assert pending.status is S.REFUND_PENDING
    event = provider.settle_refund(pending.reference, succeeded=False, failure_reason="lost_card")
    assert (event.kind, event.refund, event.owner, event.failure_reason) == (
        K.REFUND_FAILED,
        pending.reference,
        owner,
        "lost_card",
    )
    assert provider.refunds[pending.reference].status is S.REFUND_FAILED
    assert provider.charges[sale.reference].amount_refunded == 0


def test_a_declined_refund_moves_nothing(provider: FlakyCardProvider) -> None:
    sale = asyncio.run(provider.authorize(CARD, 500, "USD", capture=True))
    provider.decline_refunds(failure_reason="refund_declined")
    with pytest.raises(CardError) as refused:
        asyncio.run(provider.refund(sale.reference, 500))
    assert refused.value.failure_reason == "refund_declined"
    assert provider.refunds == {}


def test_a_challenge_passed_at_the_provider_is_told_by_an_event(
    provider: FlakyCardProvider,
) -> None:
    challenged = asyncio.run(
        provider.authorize(card(FLAKY_THREE_D_SECURE_CARD), 500, "USD", capture=False, owner=OWNER)
    )
    assert challenged.requires_action
    event = provider.finish_challenge(challenged.reference)
    assert (event.kind, event.reference, event.owner, event.amount) == (
        K.AUTHORIZED,
        challenged.reference,
        OWNER,
        500,
    )
    assert provider.charges[challenged.reference].status is S.AUTHORIZED


def test_deliveries_are_signed_and_others_refused(provider: FlakyCardProvider) -> None:
    sale = asyncio.run(provider.authorize(CARD, 500, "USD", capture=True, owner=OWNER))
    event = provider.event(K.CAPTURED, sale.reference)
    body, headers = provider.delivery(event)
    assert provider.parse_event(body, headers) == event
    with pytest.raises(BadProviderEvent):
        provider.parse_event(body.replace(b"500", b"900"), headers)
    other = FlakyCardProvider(FakeClock())
    with pytest.raises(BadProviderEvent):
        other.parse_event(body, headers)
