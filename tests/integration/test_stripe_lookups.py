"""The Stripe card provider's keyed calls and lookups, against localstripe behind the test
bed's fault-injecting proxy (treasury_pytest.faults), which keeps Stripe's idempotency and
stands in for the search and ``created`` filter localstripe lacks (treasury_pytest.localstripe).

What each test asserts at Stripe is read back from localstripe directly, not through the
proxy nor the provider under test.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import stripe

from treasury_core.errors import CardError, ProviderError
from treasury_core.ports.card_provider import (
    CallOwner,
    CardData,
    CardProviderResult,
    CardProviderStatus,
    ProviderCharge,
    answers_lookups,
    takes_keyed_calls,
)
from treasury_core.testing import FakeClock
from treasury_pytest.faults import (
    Delivery,
    Fault,
    FaultProxy,
    ProxyAnswer,
    ProxyRequest,
    StandIn,
    Upstream,
)
from treasury_pytest.localstripe import LOCALSTRIPE_STAND_INS, localstripe_proxy
from treasury_stripe.card_provider import MAX_NETWORK_RETRIES, StripeCardProvider

#: localstripe takes any secret key of this shape.
KEY = "sk_test_lookups"
CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")
DECLINED = CardData(number="4000000000000341", expiry_month=12, expiry_year=2040, cvc="123")
THREE_D_SECURE = CardData(number="4000000000003220", expiry_month=12, expiry_year=2040, cvc="123")
#: A refund id of ours (the id port's shape).
OUR_REFUND = "re_01jq8m3v5x7z9b2d4f6h8k0n1p"
S = CardProviderStatus


def key() -> str:
    """A key as the services derive them: 40 hex digits."""
    return secrets.token_hex(20)


@pytest.fixture
def proxy(localstripe_url: str) -> Iterator[FaultProxy]:
    with localstripe_proxy(localstripe_url) as running:
        yield running


@pytest.fixture
def provider(proxy: FaultProxy) -> StripeCardProvider:
    """The provider through the proxy, without the SDK's retries: each call one request."""
    return StripeCardProvider(KEY, FakeClock(), api_base=proxy.url, max_network_retries=0)


@pytest.fixture
def at_stripe(localstripe_url: str) -> stripe.StripeClient:
    return stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})


def owner(refund_id: str | None = None) -> CallOwner:
    return CallOwner(secrets.randbelow(10**6) + 1, secrets.randbelow(10**9) + 1, refund_id)


def _metadata(obj: stripe.PaymentIntent | stripe.Refund) -> dict[str, Any]:
    return obj.metadata.to_dict() if obj.metadata is not None else {}


def test_keyed_calls_and_lookups_are_announced(provider: StripeCardProvider) -> None:
    assert takes_keyed_calls(provider)
    assert answers_lookups(provider)


# --- what keyed calls set at Stripe ---------------------------------------------------------


async def test_a_charge_names_its_owner_and_attempt_in_its_metadata(
    provider: StripeCardProvider, proxy: FaultProxy, at_stripe: stripe.StripeClient
) -> None:
    attempt, who = key(), owner()
    held = await provider.authorize(
        CARD, 1_000, "USD", capture=False, attempt_key=attempt, owner=who
    )
    metadata = _metadata(at_stripe.v1.payment_intents.retrieve(held.reference))
    assert metadata == {
        "treasury_company": str(who.company_id),
        "treasury_intent": str(who.payment_intent_id),
        "treasury_attempt": attempt,
    }
    (create,) = proxy.exchanges("POST", "/v1/payment_intents")
    assert create.key == f"treasury-authorize-{attempt}"


async def test_a_saved_card_charge_names_its_owner_and_attempt(
    provider: StripeCardProvider, at_stripe: stripe.StripeClient
) -> None:
    saved = await provider.save_card(CARD, customer_email="owner@example.com", key=key())
    attempt, who = key(), owner()
    sale = await provider.authorize_saved(
        saved, 700, "USD", capture=True, attempt_key=attempt, owner=who
    )
    metadata = _metadata(at_stripe.v1.payment_intents.retrieve(sale.reference))
    assert (metadata["treasury_attempt"], metadata["treasury_intent"]) == (
        attempt,
        str(who.payment_intent_id),
    )


async def test_a_charge_without_owner_or_key_has_no_metadata(
    provider: StripeCardProvider, at_stripe: stripe.StripeClient
) -> None:
    sale = await provider.authorize(CARD, 100, "USD", capture=True)
    assert dict(_metadata(at_stripe.v1.payment_intents.retrieve(sale.reference))) == {}


async def test_captures_and_cancels_are_keyed_by_the_services_key(
    provider: StripeCardProvider, proxy: FaultProxy
) -> None:
    capture_key, void_key = key(), key()
    held = await provider.authorize(CARD, 500, "USD", capture=False)
    await provider.capture(held.reference, 500, key=capture_key)
    other = await provider.authorize(CARD, 500, "USD", capture=False)
    await provider.void(other.reference, key=void_key)
    unkeyed = await provider.authorize(CARD, 500, "USD", capture=False)
    await provider.capture(unkeyed.reference, 500)
    keys = [e.key for e in proxy.exchanges("POST", r"/v1/payment_intents/pi_\w+/(capture|cancel)")]
    assert keys[:2] == [f"treasury-capture-{capture_key}", f"treasury-cancel-{void_key}"]
    assert keys[2] is not None and keys[2].startswith("treasury-capture-")
    assert keys[2] != f"treasury-capture-{capture_key}"  # fresh without a key


async def test_a_keyed_refund_names_its_owner_and_key(
    provider: StripeCardProvider, proxy: FaultProxy, at_stripe: stripe.StripeClient
) -> None:
    sale = await provider.authorize(CARD, 1_000, "USD", capture=True)
    refund_key, who = key(), owner(OUR_REFUND)
    refund = await provider.refund(sale.reference, 300, key=refund_key, owner=who)
    metadata = _metadata(at_stripe.v1.refunds.retrieve(refund.reference))
    assert metadata == {
        "treasury_company": str(who.company_id),
        "treasury_intent": str(who.payment_intent_id),
        "treasury_refund": OUR_REFUND,
        "treasury_refund_key": refund_key,
    }
    assert proxy.exchanges("POST", "/v1/refunds")[0].key == f"treasury-refund-{refund_key}"


@pytest.mark.parametrize("bad", ["", "a b", "k'", "k\\", "x" * 201, "é"])
async def test_a_key_unfit_for_stripe_is_refused_before_any_call(
    provider: StripeCardProvider, proxy: FaultProxy, bad: str
) -> None:
    for call in (
        provider.capture("pi_123", 100, key=bad),
        provider.void("pi_123", key=bad),
        provider.refund("pi_123", 100, key=bad),
        provider.find_charge(bad),
        provider.find_refund("pi_123", bad),
    ):
        with pytest.raises(ValueError, match="letters, digits"):
            await call
    assert proxy.exchanges() == []


# --- repeated keys make nothing twice -------------------------------------------------------


async def test_a_refund_repeated_by_the_service_is_replayed_not_made_again(
    provider: StripeCardProvider, proxy: FaultProxy, at_stripe: stripe.StripeClient
) -> None:
    sale = await provider.authorize(CARD, 1_000, "USD", capture=True)
    refund_key, who = key(), owner(OUR_REFUND)
    first = await provider.refund(sale.reference, 400, key=refund_key, owner=who)
    again = await provider.refund(sale.reference, 400, key=refund_key, owner=who)
    assert (again.reference, again.status) == (first.reference, S.REFUNDED)
    assert [e.deliveries for e in proxy.exchanges("POST", "/v1/refunds")] == [
        (Delivery.FORWARDED,),
        (Delivery.REPLAYED,),
    ]
    refunds = at_stripe.v1.refunds.list(params={"payment_intent": sale.reference}).data
    assert [r.id for r in refunds] == [first.reference]


async def test_a_refund_the_network_delivers_twice_is_made_once(
    provider: StripeCardProvider, proxy: FaultProxy, at_stripe: stripe.StripeClient
) -> None:
    sale = await provider.authorize(CARD, 1_000, "USD", capture=True)
    proxy.inject(Fault.duplicate(), "POST", "/v1/refunds")
    refund = await provider.refund(sale.reference, 250, key=key(), owner=owner(OUR_REFUND))
    refunds = at_stripe.v1.refunds.list(params={"payment_intent": sale.reference}).data
    assert [(r.id, r.amount) for r in refunds] == [(refund.reference, 250)]


# --- lost answers, then the lookups ---------------------------------------------------------


@pytest.mark.parametrize(("capture", "status"), [(False, S.AUTHORIZED), (True, S.CAPTURED)])
async def test_a_charge_whose_answer_was_lost_is_found_by_its_attempt_key(
    localstripe_url: str, capture: bool, status: CardProviderStatus
) -> None:
    # The SDK's own retries with the same key are replayed, and their answers lost too.
    lost = Fault.lose_answer()
    with localstripe_proxy(localstripe_url) as proxy:
        proxy.inject(lost, "POST", "/v1/payment_intents", times=1 + MAX_NETWORK_RETRIES)
        provider = StripeCardProvider(KEY, FakeClock(), api_base=proxy.url)
        attempt, who = key(), owner()
        with pytest.raises(ProviderError):
            await provider.authorize(
                CARD, 900, "USD", capture=capture, attempt_key=attempt, owner=who
            )
        found = await provider.find_charge(attempt)
        assert found is not None
        assert (found.status, found.brand, found.last4) == (status, "visa", "4242")
        creates = proxy.upstream_calls("POST", "/v1/payment_intents")
        assert len(creates) == 1  # Stripe made it once; the retries were replayed
        # The service's retry of the attempt gets the same PaymentIntent.
        retried = await provider.authorize(
            CARD, 900, "USD", capture=capture, attempt_key=attempt, owner=who
        )
        assert retried.reference == found.reference
        assert len(proxy.upstream_calls("POST", "/v1/payment_intents")) == 1


async def test_find_charge_follows_the_charge_through_its_states(
    provider: StripeCardProvider,
) -> None:
    held_key, challenged_key = key(), key()
    held = await provider.authorize(CARD, 600, "USD", capture=False, attempt_key=held_key)
    found = await provider.find_charge(held_key)
    assert found == CardProviderResult(held.reference, S.AUTHORIZED, "visa", "4242")
    await provider.capture(held.reference, 600)
    captured = await provider.find_charge(held_key)
    assert captured is not None and captured.status is S.CAPTURED
    challenge = await provider.authorize(
        THREE_D_SECURE, 600, "USD", capture=True, attempt_key=challenged_key
    )
    waiting = await provider.find_charge(challenged_key)
    assert waiting is not None
    assert (waiting.reference, waiting.status) == (challenge.reference, S.REQUIRES_ACTION)
    await provider.void(challenge.reference)
    voided = await provider.find_charge(challenged_key)
    assert voided is not None and voided.status is S.VOIDED


async def test_a_declined_attempt_holds_nothing_and_is_not_found(
    provider: StripeCardProvider, proxy: FaultProxy
) -> None:
    attempt = key()
    with pytest.raises(CardError):
        await provider.authorize(DECLINED, 600, "USD", capture=True, attempt_key=attempt)
    # localstripe keeps the declined PaymentIntent (requires_payment_method) with its metadata.
    assert await provider.find_charge(attempt) is None
    assert await provider.find_charge(key()) is None


@pytest.mark.parametrize("amount", [400, 1_000])
async def test_a_refund_whose_answer_was_lost_is_found_and_made_once(
    provider: StripeCardProvider, proxy: FaultProxy, at_stripe: stripe.StripeClient, amount: int
) -> None:
    sale = await provider.authorize(CARD, 1_000, "USD", capture=True)
    proxy.inject(Fault.lose_answer(), "POST", "/v1/refunds")
    refund_key, who = key(), owner(OUR_REFUND)
    with pytest.raises(ProviderError):
        await provider.refund(sale.reference, amount, key=refund_key, owner=who)
    found = await provider.find_refund(sale.reference, refund_key)
    refunds = at_stripe.v1.refunds.list(params={"payment_intent": sale.reference}).data
    assert found is not None
    assert [(r.id, r.amount) for r in refunds] == [(found.reference, amount)]
    assert found.status is S.REFUNDED
    # Asked again (a client's retry): Stripe's answer under the key, or, when nothing is left
    # to refund, the Refund the key made; either way no second refund.
    again = await provider.refund(sale.reference, amount, key=refund_key, owner=who)
    assert (again.reference, again.status) == (found.reference, S.REFUNDED)
    assert len(at_stripe.v1.refunds.list(params={"payment_intent": sale.reference}).data) == 1
    assert len(proxy.upstream_calls("POST", "/v1/refunds")) == 1


async def test_a_full_refund_retried_without_its_key_is_still_refused(
    provider: StripeCardProvider,
) -> None:
    sale = await provider.authorize(CARD, 1_000, "USD", capture=True)
    await provider.refund(sale.reference, 1_000, key=key())
    with pytest.raises(CardError) as over:
        await provider.refund(sale.reference, 1_000, key=key())
    assert over.value.failure_reason == "amount_too_large"


async def test_find_refund_answers_none_for_another_key_or_charge(
    provider: StripeCardProvider,
) -> None:
    sale = await provider.authorize(CARD, 1_000, "USD", capture=True)
    other = await provider.authorize(CARD, 1_000, "USD", capture=True)
    refund_key = key()
    await provider.refund(sale.reference, 100, key=refund_key)
    await provider.refund(sale.reference, 100)  # made without a key
    assert await provider.find_refund(sale.reference, key()) is None
    assert await provider.find_refund(other.reference, refund_key) is None
    # No such PaymentIntent, at Stripe or at all: it has no refunds.
    assert await provider.find_refund("pi_NoSuchIntent", refund_key) is None
    assert await provider.find_refund("../v1/charges", refund_key) is None


async def test_find_charge_without_a_search_api_is_a_provider_error(localstripe_url: str) -> None:
    # localstripe on its own has no search: that is no answer about the charge.
    bare = StripeCardProvider(KEY, FakeClock(), api_base=localstripe_url, max_network_retries=0)
    with pytest.raises(ProviderError, match="cannot search"):
        await bare.find_charge(key())


# --- what Stripe answers that localstripe cannot: stand-ins of the test ---------------------


def _answering(answers: dict[str, dict[str, Any]]) -> StandIn:
    """A stand-in answering GETs of each path of ``answers`` with its JSON: Stripe's objects
    in states localstripe never gets them into."""

    async def stand_in(request: ProxyRequest, upstream: Upstream) -> ProxyAnswer | None:
        payload = answers.get(request.path) if request.method == "GET" else None
        if payload is None:
            return None
        return ProxyAnswer(200, json.dumps(payload).encode(), {"Content-Type": "application/json"})

    return stand_in


def _search_result(*intents: dict[str, Any]) -> dict[str, Any]:
    return {"object": "search_result", "has_more": False, "url": "/", "data": list(intents)}


def _intent(reference: str, status: str, created: int, attempt: str) -> dict[str, Any]:
    return {
        "id": reference,
        "object": "payment_intent",
        "status": status,
        "created": created,
        "metadata": {"treasury_attempt": attempt},
    }


@pytest.mark.parametrize(
    ("stripe_status", "status"),
    [
        ("succeeded", S.REFUNDED),
        ("pending", S.REFUND_PENDING),
        ("requires_action", S.REFUND_PENDING),
        ("failed", S.REFUND_FAILED),
        ("canceled", S.REFUND_FAILED),
    ],
)
async def test_find_refund_maps_stripes_refund_statuses(
    localstripe_url: str, stripe_status: str, status: CardProviderStatus
) -> None:
    refund_key = key()
    refund = {
        "id": "re_1",
        "object": "refund",
        "status": stripe_status,
        "metadata": {"treasury_refund_key": refund_key},
    }
    listed = {"object": "list", "url": "/v1/refunds", "has_more": False, "data": [refund]}
    with FaultProxy.start(
        localstripe_url, stand_ins=[_answering({"/v1/refunds": listed})]
    ) as proxy:
        provider = StripeCardProvider(KEY, FakeClock(), api_base=proxy.url)
        found = await provider.find_refund("pi_123", refund_key)
    assert found == CardProviderResult("re_1", status)


async def test_a_charge_stripe_is_still_processing_is_not_decided(localstripe_url: str) -> None:
    attempt = key()
    intent = _intent("pi_1", "processing", 1, attempt)
    stand_in = _answering(
        {"/v1/payment_intents/search": _search_result(intent), "/v1/payment_intents/pi_1": intent}
    )
    with FaultProxy.start(localstripe_url, stand_ins=[stand_in]) as proxy:
        provider = StripeCardProvider(KEY, FakeClock(), api_base=proxy.url)
        with pytest.raises(ProviderError, match="processing"):
            await provider.find_charge(attempt)


async def test_the_newest_of_two_charges_of_one_key_is_answered(
    localstripe_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    attempt = key()
    old, new = (
        _intent("pi_old", "requires_capture", 1, attempt),
        _intent("pi_new", "requires_capture", 2, attempt),
    )
    # Found by the search but no longer ours when read: its metadata changed since.
    changed = {**_intent("pi_x", "requires_capture", 3, attempt), "metadata": {}}
    stand_in = _answering(
        {
            "/v1/payment_intents/search": _search_result(old, new, changed),
            "/v1/payment_intents/pi_old": old,
            "/v1/payment_intents/pi_new": new,
            "/v1/payment_intents/pi_x": changed,
        }
    )
    with FaultProxy.start(localstripe_url, stand_ins=[stand_in]) as proxy:
        provider = StripeCardProvider(KEY, FakeClock(), api_base=proxy.url)
        answer = await provider.find_charge(attempt)
    assert answer is not None and answer.reference == "pi_new"
    assert "pi_old" in caplog.text


# --- reconciliation -------------------------------------------------------------------------


async def test_recent_charges_lists_what_was_made_with_owners(
    provider: StripeCardProvider, at_stripe: stripe.StripeClient
) -> None:
    since = datetime.now(UTC) - timedelta(seconds=2)
    sold, sold_by = key(), owner()
    sale = await provider.authorize(
        CARD, 1_000, "USD", capture=True, attempt_key=sold, owner=sold_by
    )
    await provider.refund(sale.reference, 300, key=key())
    hold_key, held_by = key(), owner()
    hold = await provider.authorize(
        CARD, 500, "EUR", capture=False, attempt_key=hold_key, owner=held_by
    )
    voided = await provider.authorize(CARD, 200, "USD", capture=False, attempt_key=key())
    await provider.void(voided.reference)
    krona = await provider.authorize(CARD, 5, "ISK", capture=True)
    with pytest.raises(CardError):
        await provider.authorize(DECLINED, 100, "USD", capture=True, attempt_key=key())
    dashboard = at_stripe.v1.payment_intents.create(
        params={"amount": 100, "currency": "usd", "payment_method_types": ["card"]}
    )  # made without us, never confirmed: holds nothing

    charges = await provider.recent_charges(since)
    by_reference = {c.reference: c for c in charges}
    assert by_reference[sale.reference] == ProviderCharge(
        reference=sale.reference,
        owner=sold_by,
        attempt_key=sold,
        status=S.CAPTURED,
        amount=1_000,
        currency="USD",
        amount_captured=1_000,
        amount_refunded=300,
        created_at=by_reference[sale.reference].created_at,
    )
    held = by_reference[hold.reference]
    assert (held.owner, held.attempt_key, held.status) == (held_by, hold_key, S.AUTHORIZED)
    assert (held.amount, held.currency, held.amount_captured, held.amount_refunded) == (
        500,
        "EUR",
        0,
        0,
    )
    assert by_reference[voided.reference].status is S.VOIDED
    assert by_reference[voided.reference].owner is None
    isk = by_reference[krona.reference]
    assert (isk.amount, isk.amount_captured, isk.owner, isk.attempt_key) == (5, 5, None, None)
    assert dashboard.id not in by_reference
    assert {c.status for c in charges} <= {S.REQUIRES_ACTION, S.AUTHORIZED, S.CAPTURED, S.VOIDED}
    assert all(c.created_at >= since - timedelta(seconds=1) for c in charges)
    assert [c.created_at for c in charges] == sorted((c.created_at for c in charges), reverse=True)


async def test_recent_charges_leaves_out_what_is_older(provider: StripeCardProvider) -> None:
    sale = await provider.authorize(CARD, 100, "USD", capture=True)
    later = datetime.now(UTC) + timedelta(hours=1)
    assert sale.reference not in {c.reference for c in await provider.recent_charges(later)}


async def test_recent_charges_needs_an_aware_time(provider: StripeCardProvider) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        await provider.recent_charges(datetime(2026, 1, 1))


async def test_find_charge_answers_the_state_now_not_the_searchs_copy(
    localstripe_url: str,
) -> None:
    attempt = key()
    with localstripe_proxy(localstripe_url) as proxy:
        provider = StripeCardProvider(KEY, FakeClock(), api_base=proxy.url)
        held = await provider.authorize(CARD, 800, "USD", capture=False, attempt_key=attempt)
        await provider.capture(held.reference, 800)
    # Stripe's search index lags: it still has the hold as it was.
    stale = _search_result(_intent(held.reference, "requires_capture", 1, attempt))
    stand_ins = [_answering({"/v1/payment_intents/search": stale}), *LOCALSTRIPE_STAND_INS]
    with FaultProxy.start(localstripe_url, stand_ins=stand_ins) as proxy:
        provider = StripeCardProvider(KEY, FakeClock(), api_base=proxy.url)
        found = await provider.find_charge(attempt)
    assert found == CardProviderResult(held.reference, S.CAPTURED, "visa", "4242")
