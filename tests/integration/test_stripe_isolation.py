"""The Stripe card provider when Stripe is slow, down or refusing: its own threads, its timeout,
its circuit breaker, and which failures say Stripe did nothing.

Over real HTTP on loopback: a small Stripe stand-in (:class:`FakeStripe`) that can hold every
answer until the test lets it go, answer with a given status, or drop the connection, and that
counts what reaches it; localstripe for a provider that works. Ordering is asserted with
events (the stand-in tells the test when requests arrive), never with timings; the waits carry
a generous timeout only so that a broken isolation fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from treasury_core import TreasuryConfig, bootstrap
from treasury_core.errors import ProviderDidNotAct, ProviderError
from treasury_core.ports.card_provider import CardData, CardProviderStatus
from treasury_core.testing import FakeClock, MemoryStorage
from treasury_stripe.card_provider import StripeCardProvider

KEY = "sk_test_treasury"
CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")
#: A PaymentIntent id the stand-in answers for (complete_action: one GET).
INTENT = "pi_isolation"
#: How long a wait may take before the test fails rather than hangs (not a performance bound).
GUARD_SECONDS = 30.0

#: Statuses of :attr:`FakeStripe.answers`: the connection is closed once the request is read.
RESET = 0


def _error(kind: str, code: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "message": "refused by the test"}
    if code is not None:
        error["code"] = code
    return {"error": error}


AUTHORIZED = (200, {"id": INTENT, "object": "payment_intent", "status": "requires_capture"})
SERVER_ERROR = (500, _error("api_error"))
RATE_LIMITED = (429, _error("invalid_request_error", "rate_limit"))
BAD_KEY = (401, _error("invalid_request_error", "api_key_expired"))
BAD_REQUEST = (400, _error("invalid_request_error", "parameter_unknown"))


class FakeStripe:
    """A Stripe stand-in on loopback.

    Each request is answered with the next of :attr:`answers`, then with :attr:`default`
    (``RESET`` drops the connection unanswered). While :attr:`hold` is set, every request waits
    for :attr:`gate` before it is answered. It counts requests and remembers the client ports
    they came from (one per connection: the SDK keeps one per thread, alive between calls).
    """

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict[str, Any]]] = []
        self.default: tuple[int, dict[str, Any]] = AUTHORIZED
        self.hold = False
        self.gate = threading.Event()
        self.requests = 0
        self.ports: set[int] = set()
        self._lock = threading.Lock()
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: one connection per client thread

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                status, body = fake._arrive(self.client_address[1])
                if fake.hold:
                    fake.gate.wait()
                if status == RESET:
                    self.close_connection = True
                    return
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 128  # many clients connect at once

            def handle_error(self, request: Any, client_address: Any) -> None:
                # A client that timed out has gone by the time its held answer is written.
                return None

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _arrive(self, port: int) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests += 1
            self.ports.add(port)
            answer = self.answers.pop(0) if self.answers else self.default
            for count, loop, future in self._waiters:
                if self.requests >= count:
                    loop.call_soon_threadsafe(_resolve, future)
            return answer

    async def arrived(self, count: int) -> None:
        """Returns once ``count`` requests have arrived in all (answered or not)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self.requests >= count:
                return
            self._waiters.append((count, loop, future))
        await asyncio.wait_for(future, GUARD_SECONDS)

    def __enter__(self) -> FakeStripe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@pytest.fixture
def fake() -> Iterator[FakeStripe]:
    with FakeStripe() as server:
        yield server


class Monotonic:
    """A hand-moved monotonic time source for the circuit breaker."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _provider(api_base: str, **options: Any) -> StripeCardProvider:
    options.setdefault("max_network_retries", 0)
    return StripeCardProvider(KEY, FakeClock(), api_base=api_base, **options)


def _free_port() -> int:
    # A port that was just free: nothing listens there, so a connection is refused.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def _guarded(awaitable: Any) -> Any:
    return await asyncio.wait_for(awaitable, GUARD_SECONDS)


# --- isolation --------------------------------------------------------------------------------


async def test_slow_stripe_calls_stall_neither_the_loop_nor_another_provider(
    fake: FakeStripe, localstripe_url: str
) -> None:
    slow = _provider(fake.url, max_threads=16)
    fast = _provider(localstripe_url)
    fake.hold = True
    stuck = [asyncio.create_task(slow.complete_action(INTENT)) for _ in range(16)]
    # All sixteen are at the server at once, each on a thread of the slow provider: more than
    # asyncio's default executor holds on a small machine.
    await fake.arrived(16)
    # The default executor is free for everyone else...
    assert await _guarded(asyncio.to_thread(lambda: "free")) == "free"
    # ...and so is another provider: a create-and-capture at localstripe goes through.
    charged = await _guarded(fast.authorize(CARD, 1_000, "USD", capture=True))
    assert charged.status is CardProviderStatus.CAPTURED
    assert not any(task.done() for task in stuck)
    fake.gate.set()
    results = await _guarded(asyncio.gather(*stuck))
    assert {result.status for result in results} == {CardProviderStatus.AUTHORIZED}
    slow.close()
    fast.close()


def test_the_configured_threads_bound_the_calls_in_flight(fake: FakeStripe) -> None:
    config = _config(fake.url, stripe_max_threads=2)
    treasury = bootstrap(config, storage=MemoryStorage(), clock=FakeClock())
    provider = treasury.payments.provider

    async def six_calls() -> list[Any]:
        fake.hold = True
        calls = [asyncio.create_task(provider.complete_action(INTENT)) for _ in range(6)]
        await fake.arrived(2)
        assert not any(call.done() for call in calls)
        fake.gate.set()
        return list(await _guarded(asyncio.gather(*calls)))

    results = asyncio.run(six_calls())
    assert len(results) == 6
    assert fake.requests == 6
    # Each thread keeps one connection: six calls made at once came over two.
    assert len(fake.ports) == 2
    treasury.close()


def _config(api_base: str, **settings: Any) -> TreasuryConfig:
    return TreasuryConfig(
        database_url="memory://",
        card_provider="stripe",
        stripe_api_key=KEY,  # pydantic makes the SecretStr
        stripe_api_base=api_base,
        **settings,
    )


# --- the timeout ------------------------------------------------------------------------------


def test_the_configured_timeout_ends_a_call_stripe_never_answers(fake: FakeStripe) -> None:
    fake.hold = True  # never let go until the test ends
    treasury = bootstrap(
        _config(fake.url, stripe_timeout_seconds=0.5), storage=MemoryStorage(), clock=FakeClock()
    )
    with pytest.raises(ProviderError) as failed:
        asyncio.run(_guarded(treasury.payments.provider.complete_action(INTENT)))
    # The request was sent: Stripe may have acted, so this is not ProviderDidNotAct.
    assert type(failed.value) is ProviderError
    assert failed.value.message == "The card provider did not answer in time"
    # Each attempt timed out in turn: the first and the SDK's two retries.
    assert fake.requests == 3
    treasury.close()


# --- the circuit breaker ----------------------------------------------------------------------


async def test_the_breaker_opens_fails_fast_half_opens_and_closes(fake: FakeStripe) -> None:
    time = Monotonic()
    provider = _provider(
        fake.url,
        max_network_retries=1,
        breaker_failures=3,
        breaker_cooldown_seconds=30,
        monotonic=time,
    )
    fake.default = SERVER_ERROR
    for _ in range(3):
        with pytest.raises(ProviderError) as failed:
            await provider.complete_action(INTENT)
        assert type(failed.value) is ProviderError  # a 5xx: Stripe may have acted
    # Three calls, each retried once by the SDK: one failure per call.
    assert fake.requests == 6
    with pytest.raises(ProviderDidNotAct) as refused:
        await provider.complete_action(INTENT)
    assert refused.value.message == "The card provider is not answering; try again shortly"
    time.now += 29
    with pytest.raises(ProviderDidNotAct):
        await provider.complete_action(INTENT)
    assert fake.requests == 6  # nothing reached Stripe while the breaker was open
    time.now += 1
    fake.default = AUTHORIZED
    fake.hold = True
    trial = asyncio.create_task(provider.complete_action(INTENT))
    await fake.arrived(7)
    # Half-open: the trial alone goes through; the others still fail at once.
    with pytest.raises(ProviderDidNotAct):
        await provider.complete_action(INTENT)
    fake.gate.set()
    assert (await _guarded(trial)).status is CardProviderStatus.AUTHORIZED
    # Closed again: calls reach Stripe.
    assert (await provider.complete_action(INTENT)).status is CardProviderStatus.AUTHORIZED
    assert fake.requests == 8
    provider.close()


async def test_a_failed_trial_opens_the_breaker_again(fake: FakeStripe) -> None:
    time = Monotonic()
    provider = _provider(fake.url, breaker_failures=2, breaker_cooldown_seconds=10, monotonic=time)
    fake.default = (RESET, {})
    for _ in range(2):
        with pytest.raises(ProviderError):
            await provider.complete_action(INTENT)
    assert fake.requests == 2
    time.now += 10
    with pytest.raises(ProviderError) as failed:
        await provider.complete_action(INTENT)  # the trial, which fails
    assert type(failed.value) is ProviderError
    assert fake.requests == 3
    with pytest.raises(ProviderDidNotAct):
        await provider.complete_action(INTENT)
    assert fake.requests == 3
    time.now += 10
    fake.default = AUTHORIZED
    assert (await provider.complete_action(INTENT)).status is CardProviderStatus.AUTHORIZED
    provider.close()


async def test_refused_connections_open_the_breaker() -> None:
    time = Monotonic()
    provider = _provider(
        f"http://127.0.0.1:{_free_port()}",
        breaker_failures=2,
        breaker_cooldown_seconds=10,
        monotonic=time,
    )
    for _ in range(2):
        with pytest.raises(ProviderDidNotAct) as refused:
            await provider.complete_action(INTENT)
        assert refused.value.message == "The card provider did not answer in time"
    with pytest.raises(ProviderDidNotAct) as fast:
        await provider.complete_action(INTENT)
    assert fast.value.message == "The card provider is not answering; try again shortly"
    provider.close()


@pytest.mark.parametrize("answer", [BAD_REQUEST, RATE_LIMITED, BAD_KEY])
async def test_refusals_from_a_working_stripe_do_not_open_the_breaker(
    fake: FakeStripe, answer: tuple[int, dict[str, Any]]
) -> None:
    provider = _provider(fake.url, breaker_failures=2)
    fake.default = answer
    for _ in range(4):
        with pytest.raises(ProviderError):
            await provider.complete_action(INTENT)
    assert fake.requests == 4  # every call reached Stripe
    provider.close()


async def test_a_success_resets_the_count_of_failures(fake: FakeStripe) -> None:
    provider = _provider(fake.url, breaker_failures=2)
    fake.answers = [SERVER_ERROR, AUTHORIZED, SERVER_ERROR, AUTHORIZED]
    for _ in range(2):
        with pytest.raises(ProviderError):
            await provider.complete_action(INTENT)
        assert (await provider.complete_action(INTENT)).status is CardProviderStatus.AUTHORIZED
    assert fake.requests == 4
    provider.close()


# --- failures that did nothing ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (RATE_LIMITED, "The card provider is limiting requests; try again shortly"),
        (BAD_KEY, "The card provider refused this treasury's API key"),
        (
            (403, _error("invalid_request_error", "secret_key_required")),
            "The card provider refused this treasury's API key",
        ),
    ],
)
async def test_answers_stripe_gives_unprocessed_requests_are_did_not_act(
    fake: FakeStripe, answer: tuple[int, dict[str, Any]], message: str
) -> None:
    provider = _provider(fake.url, max_network_retries=2)
    fake.default = answer
    with pytest.raises(ProviderDidNotAct) as refused:
        await provider.authorize(CARD, 100, "USD", capture=True)
    assert refused.value.message == message
    assert refused.value.__cause__ is None
    assert fake.requests == 1  # the PaymentMethod create, refused: no PaymentIntent asked for
    provider.close()


async def test_a_refused_connection_is_did_not_act_after_every_retry() -> None:
    provider = _provider(f"http://127.0.0.1:{_free_port()}", max_network_retries=1)
    with pytest.raises(ProviderDidNotAct) as refused:
        await provider.authorize(CARD, 100, "USD", capture=True)
    assert refused.value.message == "The card provider did not answer in time"
    provider.close()


@pytest.mark.parametrize(
    "answers",
    [
        [(RESET, {})],  # the request was read, then the connection dropped: no answer
        [SERVER_ERROR, RATE_LIMITED],  # the first attempt may have acted before the 429
        [(RESET, {}), BAD_KEY],
    ],
)
async def test_a_call_stripe_may_have_acted_on_is_a_plain_provider_error(
    fake: FakeStripe, answers: list[tuple[int, dict[str, Any]]]
) -> None:
    provider = _provider(fake.url, max_network_retries=len(answers) - 1)
    fake.answers = list(answers)
    with pytest.raises(ProviderError) as failed:
        await provider.complete_action(INTENT)
    assert type(failed.value) is ProviderError
    assert fake.requests == len(answers)
    provider.close()


async def test_a_capture_rate_limited_at_stripe_is_did_not_act(fake: FakeStripe) -> None:
    provider = _provider(fake.url)
    # The read of the hold, then the capture itself refused with a 429.
    fake.answers = [
        (
            200,
            {
                "id": INTENT,
                "object": "payment_intent",
                "status": "requires_capture",
                "amount": 1_000,
                "amount_capturable": 1_000,
                "currency": "usd",
            },
        ),
        RATE_LIMITED,
    ]
    with pytest.raises(ProviderDidNotAct) as refused:
        await provider.capture(INTENT, 1_000)
    assert refused.value.message == "The card provider is limiting requests; try again shortly"
    assert fake.requests == 2
    provider.close()


# --- closing ----------------------------------------------------------------------------------


def test_closing_the_treasury_closes_the_provider(fake: FakeStripe) -> None:
    treasury = bootstrap(_config(fake.url), storage=MemoryStorage(), clock=FakeClock())
    provider = treasury.payments.provider
    assert asyncio.run(provider.complete_action(INTENT)).status is CardProviderStatus.AUTHORIZED
    treasury.close()
    with pytest.raises(ProviderDidNotAct) as closed:
        asyncio.run(provider.complete_action(INTENT))
    assert closed.value.message == "The card provider has been closed"
    assert fake.requests == 1
    treasury.close()  # harmless to repeat


async def test_calls_waiting_for_a_thread_when_closed_never_reach_stripe(
    fake: FakeStripe,
) -> None:
    provider = _provider(fake.url, max_threads=1)
    fake.hold = True
    running = asyncio.create_task(provider.complete_action(INTENT))
    await fake.arrived(1)
    waiting = asyncio.create_task(provider.complete_action(INTENT))
    # One turn of the loop: the task runs up to its await, the call handed to the pool (a
    # yield, not a wait for something to happen).
    await asyncio.sleep(0)
    provider.close()
    fake.gate.set()
    # The call under way finishes; the one still waiting for a thread fails untried.
    assert (await _guarded(running)).status is CardProviderStatus.AUTHORIZED
    with pytest.raises(ProviderDidNotAct):
        await _guarded(waiting)
    assert fake.requests == 1
