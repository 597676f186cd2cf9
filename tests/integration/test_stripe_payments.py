"""The payments service with the Stripe card provider, against a real localstripe on loopback.

The treasury is wired by configuration (``card_provider="stripe"``, the key and localstripe's
base URL), as ``TREASURY_CARD_PROVIDER=stripe`` would, and every call goes over HTTP to
localstripe through the official SDK. What each test asserts at Stripe is read back from
localstripe with the SDK, separately from the provider under test.

localstripe's test cards differ from the sandbox's (docs/payments.md lists how): here
4000000000000341 is declined at authorization (4000000000003220, which asks for 3-D Secure,
in test_stripe_three_d_secure.py).
"""

from __future__ import annotations

import asyncio
import http.client
import http.server
import json
import logging
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import stripe

from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import (
    CardError,
    ErrorKind,
    InvalidRequestError,
    ProviderError,
    ValidationFailed,
)
from treasury_core.payments.intents import CancellationReason, CaptureMethod, IntentStatus
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports.card_provider import CardData, CardProviderStatus
from treasury_core.testing import FakeClock, MemoryStorage, check_invariants
from treasury_pytest.faults import (
    Fault,
    FaultProxy,
    FaultRule,
    ProxyAnswer,
    ProxyRequest,
    Upstream,
)
from treasury_pytest.localstripe import localstripe_proxy
from treasury_stripe.card_provider import MAX_NETWORK_RETRIES, StripeCardProvider

#: localstripe takes any secret key of this shape.
KEY = "sk_test_treasury"
CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")
DECLINED = CardData(number="4000000000000341", expiry_month=12, expiry_year=2040, cvc="123")


@dataclass
class World:
    treasury: Treasury
    stripe: stripe.StripeClient
    company: int
    account: int

    def run(self, coro: Any) -> Any:
        return asyncio.run(coro)

    def create(self, capture: CaptureMethod = CaptureMethod.AUTOMATIC, amount: int = 1_000) -> Any:
        request = CreateIntentRequest(
            account_id=self.account,
            billing_amount=amount,
            billing_currency="USD",
            payment_type="Card Payment",
            capture_method=capture,
        )
        return self.run(self.treasury.payments.create(self.company, request))

    def pay(self, intent: Any, card: CardData = CARD) -> Any:
        return self.run(self.treasury.payments.pay(intent.payment_intent_lookup_id, card)).intent

    def get(self, intent: Any) -> Any:
        return self.run(self.treasury.payments.get(self.company, intent.id))

    def at_stripe(self, intent: Any) -> stripe.PaymentIntent:
        """The PaymentIntent as localstripe holds it."""
        return self.stripe.v1.payment_intents.retrieve(intent.provider_reference)


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
    assert isinstance(treasury.payments.provider, StripeCardProvider)
    created = asyncio.run(treasury.companies.create_company("Acme"))
    reader = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})
    yield World(treasury, reader, created.company.id, created.merchant_account.id)
    check_invariants(treasury.storage)
    treasury.close()


@pytest.fixture
def provider(localstripe_url: str) -> StripeCardProvider:
    return StripeCardProvider(KEY, FakeClock(), api_base=localstripe_url)


def test_automatic_capture_charges_at_stripe(world: World) -> None:
    intent = world.pay(world.create())
    assert intent.status is IntentStatus.PROCESSED
    assert intent.provider_reference.startswith("pi_")
    remote = world.at_stripe(intent)
    assert (remote.status, remote.amount, remote.currency) == ("succeeded", 1_000, "usd")


def test_a_manual_hold_is_captured_at_stripe(world: World) -> None:
    intent = world.pay(world.create(CaptureMethod.MANUAL))
    assert intent.status is IntentStatus.AUTHORIZED
    assert world.at_stripe(intent).status == "requires_capture"
    captured = world.run(world.treasury.payments.capture(world.company, intent.id))
    assert captured.status is IntentStatus.PROCESSED
    assert world.at_stripe(intent).status == "succeeded"


def test_a_cancelled_hold_is_cancelled_at_stripe(world: World) -> None:
    intent = world.pay(world.create(CaptureMethod.MANUAL))
    cancelled = world.run(world.treasury.payments.cancel(world.company, intent.id))
    assert cancelled.status is IntentStatus.CANCELLED
    assert cancelled.cancellation_reason is CancellationReason.VOIDED
    assert world.at_stripe(intent).status == "canceled"


def test_a_decline_leaves_the_intent_open_with_stripes_reason(world: World) -> None:
    intent = world.create()
    with pytest.raises(CardError) as declined:
        world.pay(intent, DECLINED)
    assert declined.value.kind is ErrorKind.DECLINED
    assert declined.value.failure_reason == "card_declined"
    assert world.get(intent).status is IntentStatus.INITIALIZED
    # The customer may try another card.
    assert world.pay(intent).status is IntentStatus.PROCESSED


def test_a_hold_gone_at_stripe_cancels_the_intent_as_expired(world: World) -> None:
    intent = world.pay(world.create(CaptureMethod.MANUAL))
    # What Stripe does itself when an authorization expires (after 7 days).
    world.stripe.v1.payment_intents.cancel(intent.provider_reference)
    with pytest.raises(CardError) as refused:
        world.run(world.treasury.payments.capture(world.company, intent.id))
    assert refused.value.kind is ErrorKind.DECLINED
    assert refused.value.failure_reason == "authorization_expired"
    after = world.get(intent)
    assert after.status is IntentStatus.CANCELLED
    assert after.cancellation_reason is CancellationReason.EXPIRED


def test_refunds_partial_then_the_rest(world: World) -> None:
    intent = world.pay(world.create())
    first = world.run(world.treasury.payments.refund(world.company, intent.id, amount=400))
    second = world.run(world.treasury.payments.refund(world.company, intent.id, amount=600))
    assert first.status.value == second.status.value == "succeeded"
    refunds = world.stripe.v1.refunds.list(params={"payment_intent": intent.provider_reference})
    assert sorted(r.amount for r in refunds.data) == [400, 600]
    # Nothing is left to refund: the service refuses before asking Stripe.
    with pytest.raises(InvalidRequestError):
        world.run(world.treasury.payments.refund(world.company, intent.id, amount=1))


async def test_capture_and_void_follow_stripes_state(provider: StripeCardProvider) -> None:
    held = await provider.authorize(CARD, 2_500, "EUR", capture=False)
    assert (held.status, held.brand, held.last4) == (CardProviderStatus.AUTHORIZED, "visa", "4242")
    with pytest.raises(CardError) as too_much:
        await provider.capture(held.reference, 2_501)
    assert too_much.value.failure_reason == "amount_too_large"
    with pytest.raises(CardError) as not_captured:
        await provider.refund(held.reference, 100)
    assert not_captured.value.failure_reason == "charge_not_captured"
    captured = await provider.capture(held.reference, 2_000)
    assert captured == type(captured)(held.reference, CardProviderStatus.CAPTURED)
    # The same capture again is the retry of one whose answer was lost: it is captured.
    again = await provider.capture(held.reference, 2_000)
    assert again.status is CardProviderStatus.CAPTURED
    with pytest.raises(CardError) as twice:
        await provider.capture(held.reference, 1_000)
    assert twice.value.failure_reason == "already_captured"
    with pytest.raises(CardError) as late:
        await provider.void(held.reference)
    assert late.value.failure_reason == "already_captured"
    # Stripe released the uncaptured 500: only the 2,000 that moved can be refunded.
    with pytest.raises(CardError) as over:
        await provider.refund(held.reference, 2_001)
    assert over.value.failure_reason == "amount_too_large"
    refund = await provider.refund(held.reference, 2_000)
    assert refund.status is CardProviderStatus.REFUNDED
    assert refund.reference.startswith("re_")


async def test_voiding_twice_is_harmless(provider: StripeCardProvider) -> None:
    held = await provider.authorize(CARD, 700, "USD", capture=False)
    for _ in range(2):
        voided = await provider.void(held.reference)
        assert voided.status is CardProviderStatus.VOIDED
    with pytest.raises(CardError) as gone:
        await provider.capture(held.reference, 700)
    assert gone.value.failure_reason == "authorization_expired"


@pytest.mark.parametrize(
    ("card", "amount", "reason"),
    [
        (CardData("4242424242424241", 12, 2040, "123"), 100, "invalid_number"),
        (CardData("4242424242424242", 13, 2040, "123"), 100, "invalid_expiry_month"),
        (CardData("4242424242424242", 12, 2020, "123"), 100, "expired_card"),
        (CardData("4242424242424242", 12, 2040, "12a"), 100, "invalid_cvc"),
        (CARD, 0, "invalid_amount"),
        (CARD, -5, "invalid_amount"),
    ],
)
async def test_bad_cards_and_amounts_are_refused_before_stripe(
    provider: StripeCardProvider, card: CardData, amount: int, reason: str
) -> None:
    with pytest.raises(CardError) as refused:
        await provider.authorize(card, amount, "USD", capture=True)
    assert refused.value.failure_reason == reason
    assert "4242424242424" not in refused.value.message


@pytest.mark.parametrize("reference", ["pi_DoesNotExist", "../v1/charges", "", "ch_123"])
async def test_an_unknown_reference_is_a_card_error(
    provider: StripeCardProvider, reference: str
) -> None:
    with pytest.raises(CardError) as unknown:
        await provider.capture(reference, 100)
    assert unknown.value.failure_reason == "unknown_reference"
    with pytest.raises(CardError) as unknown:
        await provider.void(reference)
    assert unknown.value.failure_reason == "unknown_reference"


async def test_stripe_unreachable_is_a_provider_error() -> None:
    # A port that was just free: nothing listens there, so the connection is refused.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = StripeCardProvider(
        KEY, FakeClock(), api_base=f"http://127.0.0.1:{port}", max_network_retries=0
    )
    with pytest.raises(ProviderError) as failed:
        await down.authorize(CARD, 100, "USD", capture=True)
    assert not isinstance(failed.value.__cause__, stripe.StripeError)
    assert failed.value.message == "The card provider did not answer in time"


async def test_a_refused_api_key_is_a_provider_error(localstripe_url: str) -> None:
    wrong = StripeCardProvider("not-a-key", FakeClock(), api_base=localstripe_url)
    with pytest.raises(ProviderError) as failed:
        await wrong.authorize(CARD, 100, "USD", capture=True)
    assert "key" in failed.value.message


def _stripe_error(kind: str, code: str, decline_code: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "code": code, "message": "refused by the test"}
    if decline_code is not None:
        error["decline_code"] = decline_code
    return {"error": error}


@dataclass
class Seen:
    method: str
    path: str
    key: str | None
    answered: bool


class StripeFront:
    """A loopback proxy in front of localstripe that adds what Stripe does and localstripe not.

    Like Stripe, a POST whose idempotency key was seen before is answered with the first answer
    and not acted on again (localstripe ignores the keys). ``refuse`` holds answers to give
    instead of localstripe's, per path suffix, in order (a 402 at capture, a 429, …), kept under
    their keys too. With ``lose_first_answers`` the answer to the first POST of each key is lost
    on the way back (the connection closes): the failure after which a retry could charge twice.
    """

    def __init__(
        self,
        upstream: str,
        *,
        lose_first_answers: bool = False,
        lose_answers: dict[str, int] | None = None,
    ) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.lose_first_answers = lose_first_answers
        #: Per path suffix, how many answers to each key's POST are lost (the first one's and
        #: those to its replays), enough to outlast the SDK's own retries.
        self.lose_answers = dict(lose_answers or {})
        self._lost: dict[str, int] = {}
        self._bodies: dict[str, bytes | None] = {}
        self.refuse: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self.seen: list[Seen] = []
        self.forwarded: list[str] = []
        self._answers: dict[str, tuple[int, bytes]] = {}
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _body(self) -> bytes | None:
                if not hasattr(self, "_read"):
                    length = int(self.headers.get("Content-Length") or 0)
                    self._read = self.rfile.read(length) if length else None
                return self._read

            def _lose(self, key: str) -> bool:
                for suffix, times in front.lose_answers.items():
                    if self.path.endswith(suffix) and front._lost.get(key, 0) < times:
                        front._lost[key] = front._lost.get(key, 0) + 1
                        return True
                return False

            def _forward(self) -> tuple[int, bytes]:
                body = self._body()
                for suffix, answers in front.refuse.items():
                    if self.path.endswith(suffix) and answers:
                        status, error = answers.pop(0)
                        return status, json.dumps(error).encode()
                connection = http.client.HTTPConnection(
                    front.upstream.hostname, front.upstream.port, timeout=30
                )
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                connection.request(self.command, self.path, body=body, headers=headers)
                response = connection.getresponse()
                answer = (response.status, response.read())
                connection.close()
                front.forwarded.append(f"{self.command} {self.path}")
                return answer

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                front.seen.append(Seen("GET", self.path, None, True))
                self._answer(*self._forward())

            def do_POST(self) -> None:
                key = self.headers.get("Idempotency-Key")
                if key is not None and key in front._answers:
                    if front._bodies[key] != self._body():
                        # Stripe's answer to a reused key with other parameters.
                        mismatch = _stripe_error("idempotency_error", "idempotency_key_in_use")
                        self._answer(400, json.dumps(mismatch).encode())
                        return
                    if self._lose(key):
                        front.seen.append(Seen("POST", self.path, key, False))
                        self.close_connection = True
                        return
                    front.seen.append(Seen("POST", self.path, key, True))
                    self._answer(*front._answers[key])
                    return
                answer = self._forward()
                if key is not None:
                    front._answers[key] = answer
                    front._bodies[key] = self._body()
                if key is not None and (front.lose_first_answers or self._lose(key)):
                    front.seen.append(Seen("POST", self.path, key, False))
                    self.close_connection = True  # the answer is lost on the way back
                    return
                front.seen.append(Seen("POST", self.path, key, True))
                self._answer(*answer)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StripeFront:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


async def test_a_retry_after_a_lost_answer_charges_once(localstripe_url: str) -> None:
    with StripeFront(localstripe_url, lose_first_answers=True) as proxy:
        provider = StripeCardProvider(KEY, FakeClock(), api_base=proxy.url)
        held = await provider.authorize(CARD, 900, "USD", capture=False)
        await provider.capture(held.reference, 900)
        refund = await provider.refund(held.reference, 300)
    posts = [seen for seen in proxy.seen if seen.method == "POST"]
    # Every mutating call carried a key, lost its first answer, and was retried with that key.
    assert all(seen.key for seen in posts)
    by_key: dict[str | None, list[bool]] = {}
    for seen in posts:
        by_key.setdefault(seen.key, []).append(seen.answered)
    assert len(by_key) == 4  # payment method, payment intent, capture, refund
    assert all(answers == [False, True] for answers in by_key.values())
    # localstripe acted on each once: one intent, captured once, one refund.
    assert sum(line.startswith("POST") for line in proxy.forwarded) == 4
    reader = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})
    intent = reader.v1.payment_intents.retrieve(held.reference)
    assert intent.status == "succeeded"
    refunds = reader.v1.refunds.list(params={"payment_intent": held.reference}).data
    assert [(r.id, r.amount) for r in refunds] == [(refund.reference, 300)]


def test_a_402_at_capture_leaves_the_hold_to_be_captured_again(localstripe_url: str) -> None:
    with StripeFront(localstripe_url) as front:
        world = _treasury_behind(front)
        treasury = world.treasury
        intent = world.pay(world.create(CaptureMethod.MANUAL))
        front.refuse["/capture"] = [
            (402, _stripe_error("card_error", "card_declined", "insufficient_funds"))
        ]
        with pytest.raises(CardError) as refused:
            world.run(treasury.payments.capture(world.company, intent.id))
        assert refused.value.kind is ErrorKind.DECLINED
        assert refused.value.failure_reason == "insufficient_funds"
        assert world.get(intent).status is IntentStatus.AUTHORIZED
        assert world.at_stripe(intent).status == "requires_capture"
        # A later try is a new call with a new key: Stripe's stored 402 does not answer it.
        captured = world.run(treasury.payments.capture(world.company, intent.id))
        assert captured.status is IntentStatus.PROCESSED
        assert world.at_stripe(intent).status == "succeeded"
        check_invariants(treasury.storage)
        treasury.close()


@pytest.mark.parametrize(
    ("status", "error", "says"),
    [
        (429, _stripe_error("invalid_request_error", "rate_limit"), "limiting requests"),
        (401, _stripe_error("invalid_request_error", "api_key_expired"), "API key"),
        (403, _stripe_error("invalid_request_error", "secret_key_required"), "API key"),
        (400, _stripe_error("invalid_request_error", "parameter_unknown"), "parameter_unknown"),
    ],
)
async def test_stripe_refusals_become_provider_errors(
    localstripe_url: str, status: int, error: dict[str, Any], says: str
) -> None:
    with StripeFront(localstripe_url) as front:
        front.refuse["/v1/payment_intents"] = [(status, error)] * 3
        provider = StripeCardProvider(KEY, FakeClock(), api_base=front.url)
        with pytest.raises(ProviderError) as failed:
            await provider.authorize(CARD, 100, "USD", capture=True)
    assert says in failed.value.message
    assert "refused by the test" not in failed.value.message  # Stripe's message is not passed on
    assert failed.value.__cause__ is None


def _treasury_behind(front: StripeFront) -> World:
    return _treasury_through(front.url, front.upstream.geturl())


def _treasury_through(api_base: str, upstream: str) -> World:
    """A treasury whose Stripe calls go to ``api_base`` (a proxy), read back at ``upstream``."""
    clock = FakeClock()
    config = TreasuryConfig(
        database_url="memory://",
        card_provider="stripe",
        stripe_api_key=KEY,  # type: ignore[arg-type]
        stripe_api_base=api_base,
    )
    treasury = bootstrap(config, storage=MemoryStorage(), clock=clock, wall_clock=clock)
    created = asyncio.run(treasury.companies.create_company("Acme"))
    reader = stripe.StripeClient(KEY, base_addresses={"api": upstream})
    return World(treasury, reader, created.company.id, created.merchant_account.id)


def test_a_payment_retried_after_a_lost_answer_charges_once(localstripe_url: str) -> None:
    # Every answer to the PaymentIntent create is lost, the SDK's retries' too: Stripe charged,
    # the treasury never heard.
    lost = {"/v1/payment_intents": 1 + MAX_NETWORK_RETRIES}
    with StripeFront(localstripe_url, lose_answers=lost) as front:
        world = _treasury_behind(front)
        intent = world.create()
        with pytest.raises(ProviderError):
            world.pay(intent)
        assert world.get(intent).status is IntentStatus.INITIALIZED
        # The customer pays again: Stripe answers with the first PaymentIntent.
        paid = world.pay(intent)
        assert paid.status is IntentStatus.PROCESSED
        creates = [line for line in front.forwarded if line == "POST /v1/payment_intents"]
        assert len(creates) == 1
        assert world.at_stripe(paid).status == "succeeded"
        check_invariants(world.treasury.storage)
        world.treasury.close()


OTHER_CARD = CardData(number="5555555555554444", expiry_month=12, expiry_year=2040, cvc="123")


def test_a_retry_with_another_card_gets_the_charge_the_first_made(localstripe_url: str) -> None:
    # Every answer to the first card's PaymentIntent create is lost: Stripe charged it. The
    # retry with another card is refused by Stripe under the same key, and the service asks
    # Stripe what the first attempt made (find_charge) and records that charge.
    with localstripe_proxy(localstripe_url) as proxy:
        proxy.inject(
            Fault.lose_answer(), "POST", "/v1/payment_intents", times=1 + MAX_NETWORK_RETRIES
        )
        world = _treasury_through(proxy.url, localstripe_url)
        intent = world.create()
        with pytest.raises(ProviderError):
            world.pay(intent)
        paid = world.pay(intent, OTHER_CARD)
        assert paid.status is IntentStatus.PROCESSED
        (create,) = proxy.upstream_calls("POST", "/v1/payment_intents")
        assert create.status == 200
        charged = world.at_stripe(paid)
        assert (charged.status, charged.amount) == ("succeeded", 1_000)
        check_invariants(world.treasury.storage)
        world.treasury.close()


def test_a_retry_with_another_card_stripe_cannot_find_yet_is_refused(localstripe_url: str) -> None:
    # As above, but Stripe's search has not indexed the first charge yet (it lags writes): the
    # service cannot tell what the first attempt did, so it charges nothing and says so.
    async def lagging_search(request: ProxyRequest, upstream: Upstream) -> ProxyAnswer | None:
        if request.path != "/v1/payment_intents/search":
            return None
        nothing = {"object": "search_result", "data": [], "has_more": False, "url": "/"}
        return ProxyAnswer(200, json.dumps(nothing).encode(), {"Content-Type": "application/json"})

    lost = FaultRule(
        Fault.lose_answer(), "POST", "/v1/payment_intents", times=1 + MAX_NETWORK_RETRIES
    )
    with FaultProxy.start(localstripe_url, plan=[lost], stand_ins=[lagging_search]) as proxy:
        world = _treasury_through(proxy.url, localstripe_url)
        intent = world.create()
        with pytest.raises(ProviderError):
            world.pay(intent)
        with pytest.raises(InvalidRequestError) as refused:
            world.pay(intent, OTHER_CARD)
        assert refused.value.kind is ErrorKind.INVALID_REQUEST
        assert refused.value.code == "payment_attempt_in_doubt"
        assert world.get(intent).status is IntentStatus.INITIALIZED
        assert len(proxy.upstream_calls("POST", "/v1/payment_intents")) == 1
        world.treasury.close()


def test_a_decline_gives_the_next_attempt_a_new_key(localstripe_url: str) -> None:
    with StripeFront(localstripe_url) as front:
        world = _treasury_behind(front)
        intent = world.create()
        with pytest.raises(CardError):
            world.pay(intent, DECLINED)
        assert world.pay(intent).status is IntentStatus.PROCESSED
        keys = {s.key for s in front.seen if s.path == "/v1/payment_intents"}
        assert len(keys) == 2
        world.treasury.close()


def test_a_capture_retried_after_a_lost_answer_is_captured(localstripe_url: str) -> None:
    # Stripe captures, but every answer (the SDK's retries' too) is lost on the way back.
    with StripeFront(localstripe_url, lose_answers={"/capture": 1 + MAX_NETWORK_RETRIES}) as front:
        world = _treasury_behind(front)
        intent = world.pay(world.create(CaptureMethod.MANUAL, amount=1_200))
        with pytest.raises(ProviderError):
            world.run(world.treasury.payments.capture(world.company, intent.id))
        assert world.get(intent).status is IntentStatus.AUTHORIZED
        assert world.at_stripe(intent).status == "succeeded"
        captured = world.run(world.treasury.payments.capture(world.company, intent.id))
        assert captured.status is IntentStatus.PROCESSED
        # Captured once at Stripe: the retry only read the PaymentIntent.
        captures = [line for line in front.forwarded if line.endswith("/capture")]
        assert len(captures) == 1
        check_invariants(world.treasury.storage)
        world.treasury.close()


async def test_isk_is_sent_in_stripes_two_decimal_units(
    provider: StripeCardProvider, localstripe_url: str
) -> None:
    # 5 krónur: 5 minor units in ISO 4217 (zero-decimal), 500 in Stripe's API.
    held = await provider.authorize(CARD, 5, "ISK", capture=False)
    reader = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})
    assert reader.v1.payment_intents.retrieve(held.reference).amount == 500
    await provider.capture(held.reference, 5)
    refund = await provider.refund(held.reference, 2)
    assert reader.v1.refunds.retrieve(refund.reference).amount == 200
    with pytest.raises(CardError) as over:
        await provider.refund(held.reference, 4)
    assert over.value.failure_reason == "amount_too_large"


async def test_mga_is_sent_in_whole_ariary(
    provider: StripeCardProvider, localstripe_url: str
) -> None:
    with pytest.raises(ValidationFailed) as fractional:
        await provider.authorize(CARD, 150, "MGA", capture=True)
    assert fractional.value.kind is ErrorKind.INVALID_REQUEST
    charged = await provider.authorize(CARD, 300, "MGA", capture=True)
    reader = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})
    assert reader.v1.payment_intents.retrieve(charged.reference).amount == 3


def test_a_three_decimal_amount_stripe_cannot_take_is_a_400_before_stripe(
    localstripe_url: str,
) -> None:
    with StripeFront(localstripe_url) as front:
        world = _treasury_behind(front)
        request = CreateIntentRequest(
            account_id=world.account,
            billing_amount=1_005,
            billing_currency="KWD",
            payment_type="Card Payment",
            capture_method=CaptureMethod.AUTOMATIC,
        )
        intent = world.run(world.treasury.payments.create(world.company, request))
        with pytest.raises(ValidationFailed) as refused:
            world.pay(intent)
        assert refused.value.kind is ErrorKind.INVALID_REQUEST
        assert "last digit must be 0" in refused.value.message
        assert front.seen == []  # Stripe was never asked
        assert world.get(intent).status is IntentStatus.INITIALIZED
        assert world.get(intent).latest_transaction_id is None
        world.treasury.close()


async def test_a_three_decimal_refund_stripe_cannot_take_fails_cleanly(
    provider: StripeCardProvider,
) -> None:
    charged = await provider.authorize(CARD, 1_000, "KWD", capture=True)
    with pytest.raises(CardError) as refused:
        await provider.refund(charged.reference, 5)
    assert refused.value.failure_reason == "amount_not_supported"


async def test_no_card_number_or_cvc_reaches_the_logs(
    provider: StripeCardProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    card = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="987")
    await provider.authorize(card, 1_000, "USD", capture=True)
    stripe_records = [r for r in caplog.records if r.name == "stripe"]
    assert stripe_records  # the SDK logged, at INFO: method, path and status only
    for record in caplog.records:
        text = record.getMessage()
        assert "4242424242424242" not in text
        assert "cvc" not in text.lower()


async def test_a_charge_left_in_another_state_is_cancelled_at_stripe(localstripe_url: str) -> None:
    reader = stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})
    real = reader.v1.payment_intents.create(
        params={"amount": 100, "currency": "usd", "payment_method_types": ["card"]}
    )
    left = {"id": real.id, "object": "payment_intent", "status": "requires_payment_method"}
    with StripeFront(localstripe_url) as front:
        front.refuse["/v1/payment_intents"] = [(200, {**left, "amount": 100, "currency": "usd"})]
        provider = StripeCardProvider(KEY, FakeClock(), api_base=front.url)
        with pytest.raises(ProviderError) as failed:
            await provider.authorize(CARD, 100, "USD", capture=True)
    assert "requires_payment_method" in failed.value.message
    assert reader.v1.payment_intents.retrieve(real.id).status == "canceled"


@pytest.mark.parametrize("code", ["amount_too_small", "amount_too_large"])
def test_an_amount_stripe_refuses_is_a_400_that_changes_nothing(
    localstripe_url: str, code: str
) -> None:
    with StripeFront(localstripe_url) as front:
        world = _treasury_behind(front)
        intent = world.create()
        front.refuse["/v1/payment_intents"] = [(400, _stripe_error("invalid_request_error", code))]
        with pytest.raises(ValidationFailed) as refused:
            world.pay(intent)
        assert refused.value.kind is ErrorKind.INVALID_REQUEST
        assert refused.value.code == code
        assert "refused by the test" not in refused.value.message
        after = world.get(intent)
        assert (after.status, after.latest_transaction_id) == (IntentStatus.INITIALIZED, None)
        world.treasury.close()


def test_a_refund_stripe_finds_too_small_fails_and_is_given_back(
    localstripe_url: str,
) -> None:
    with StripeFront(localstripe_url) as front:
        world = _treasury_behind(front)
        intent = world.pay(world.create())
        front.refuse["/v1/refunds"] = [
            (400, _stripe_error("invalid_request_error", "amount_too_small"))
        ]
        with pytest.raises(CardError) as refused:
            world.run(world.treasury.payments.refund(world.company, intent.id, amount=1))
        assert refused.value.failure_reason == "amount_too_small"
        assert world.get(intent).amount_refunded == 0
        check_invariants(world.treasury.storage)
        world.treasury.close()
