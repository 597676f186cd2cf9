"""A fault-injecting HTTP proxy, for testing a provider adapter against its provider's fake.

:class:`FaultProxy` listens on loopback between an adapter and an upstream (localstripe, or a
test double of your own provider) and plays two parts there:

- **the network**, which fails per request as a plan says (:class:`Fault`,
  :class:`FaultRule`): the connection dropped before anything is forwarded; the request
  forwarded and the answer lost; a 5xx or 429 answered without forwarding; the answer held
  back past the client's timeout; the provider slow to act; the request delivered twice;
- **the provider's idempotency layer**, as Stripe keeps it (:class:`Dialect`): a request
  with an ``Idempotency-Key`` seen before, with the same method, path and body, gets the first
  answer again (status and body, header ``Idempotent-Replayed: true``) without reaching the
  upstream; the same key with another request is a 400 ``idempotency_error``; a key whose
  first request the upstream is still working on is a 409. Only what the upstream answered is
  kept under a key: an answer the network made up (a fault before forwarding) is not, so the
  retry after it reaches the upstream.

Everything is logged: :meth:`FaultProxy.exchanges` (each request the client sent: the fault,
what each delivery did, what the client got) and :meth:`FaultProxy.upstream_calls` (each
request that reached the upstream), so a test asserts what the provider was asked to do.

The proxy runs on an event loop of its own in a daemon thread, as
:class:`~treasury_pytest.TreasuryServer` does: sync tests, async tests and adapters that block
in worker threads (the Stripe SDK) use it alike. Stand-ins (:data:`StandIn`) answer some
requests in place of the upstream, to fill gaps of a fake: :mod:`treasury_pytest.localstripe`
has the two the Stripe adapter's lookups need.

aiohttp (the ``server`` extra) is imported only when a proxy starts: this module is imported
with the pytest plugin, which loads without the extras.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from treasury_pytest.server import _LoopThread

if TYPE_CHECKING:
    import aiohttp
    from aiohttp import web

__all__ = [
    "STRIPE_DIALECT",
    "Delivery",
    "Dialect",
    "Exchange",
    "Fault",
    "FaultKind",
    "FaultProxy",
    "FaultRule",
    "Plan",
    "ProxyAnswer",
    "ProxyRequest",
    "StandIn",
    "Upstream",
    "UpstreamCall",
    "stores_outcomes",
    "stripe_error_body",
]

#: How long starting or closing the proxy, or one upstream request, may take.
TIMEOUT_SECONDS = 60.0

#: Headers that belong to one connection, not to the request or answer passed on.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        # The upstream's bodies are decoded on arrival (aiohttp's auto_decompress) and passed
        # on, and stored, as plain bytes.
        "accept-encoding",
        "content-encoding",
    }
)


# --- what a request and an answer are -----------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class ProxyRequest:
    """One request the client sent to the proxy, as a plan and a stand-in see it."""

    #: Its number at the proxy, from 1, in order of arrival.
    seq: int
    method: str
    #: The path, percent-decoded, without the query (``/v1/refunds``).
    path: str
    #: The query string as sent, without ``?`` (``""`` when none).
    query: str
    #: The headers, names in lower case.
    headers: Mapping[str, str]
    body: bytes
    #: The idempotency key (the dialect's header) of a request of a keyed method, else ``None``.
    key: str | None
    #: The path and query exactly as sent (what is forwarded).
    target: str

    @property
    def params(self) -> list[tuple[str, str]]:
        """The query's parameters, decoded, in order (repeated names repeated)."""
        return urllib.parse.parse_qsl(self.query, keep_blank_values=True)


@dataclass(frozen=True, slots=True, eq=False)
class ProxyAnswer:
    """An HTTP answer: from the upstream, a stand-in, a replay or a fault."""

    status: int
    body: bytes
    #: Headers passed to the client (names as the upstream wrote them).
    headers: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


# --- faults and plans ---------------------------------------------------------------------------


class FaultKind(StrEnum):
    """What the network does to one request (see :class:`Fault`'s constructors)."""

    DROP = "drop"
    LOSE_ANSWER = "lose_answer"
    ANSWER = "answer"
    DELAY = "delay"
    SLOW = "slow"
    DUPLICATE = "duplicate"


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault; build it with a constructor (``Fault.lose_answer()``, ``Fault.answer(503)``)."""

    kind: FaultKind
    #: The status of :attr:`FaultKind.ANSWER`.
    status: int | None = None
    #: The seconds of :attr:`FaultKind.DELAY` and :attr:`FaultKind.SLOW`.
    seconds: float | None = None
    #: The body of :attr:`FaultKind.ANSWER` (``None``: the dialect's error body).
    body: bytes | None = None
    #: Extra headers of :attr:`FaultKind.ANSWER` (``Stripe-Should-Retry``, ``Retry-After``).
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def drop(cls) -> Fault:
        """Close the connection before anything is forwarded: the upstream never hears of the
        request, the client gets no answer (a connection error)."""
        return cls(FaultKind.DROP)

    @classmethod
    def lose_answer(cls) -> Fault:
        """Deliver the request (the upstream acts, or the key's stored answer is replayed),
        then close the connection before answering: the answer is lost on the way back."""
        return cls(FaultKind.LOSE_ANSWER)

    @classmethod
    def answer(
        cls, status: int, *, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> Fault:
        """Answer ``status`` without forwarding (a load balancer's 502, a rate limiter's 429);
        the body is ``body`` or the dialect's error body. Not kept under the request's key."""
        if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
            raise ValueError(f"an answer's status is an int from 200 to 599, not {status!r}")
        return cls(
            FaultKind.ANSWER, status=status, body=body, headers=tuple((headers or {}).items())
        )

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        """Answer a 5xx (500, 502, 503, …) without forwarding."""
        if isinstance(status, bool) or not isinstance(status, int) or not 500 <= status <= 599:
            raise ValueError(f"a server error's status is from 500 to 599, not {status!r}")
        return cls.answer(status)

    @classmethod
    def rate_limited(cls, *, headers: Mapping[str, str] | None = None) -> Fault:
        """Answer 429 without forwarding (``headers``: ``{"Stripe-Should-Retry": "true"}``
        makes the Stripe SDK retry it)."""
        return cls.answer(429, headers=headers)

    @classmethod
    def delay(cls, seconds: float) -> Fault:
        """Deliver the request, then hold its answer ``seconds`` (past the client's timeout):
        the upstream acted and the key's answer is kept, so a retry meanwhile is replayed."""
        return cls(FaultKind.DELAY, seconds=_seconds(seconds))

    @classmethod
    def slow(cls, seconds: float) -> Fault:
        """The provider takes ``seconds`` before it acts: the request's key is in flight all
        that time, so a retry with it meanwhile is answered 409 (as Stripe answers one)."""
        return cls(FaultKind.SLOW, seconds=_seconds(seconds))

    @classmethod
    def duplicate(cls) -> Fault:
        """Deliver the request twice, one after the other; the client gets the first answer.
        A keyed request's second delivery is replayed (the upstream acts once); an unkeyed
        one reaches the upstream twice."""
        return cls(FaultKind.DUPLICATE)


def _seconds(seconds: float) -> float:
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds <= 0
    ):
        raise ValueError(f"seconds is a positive finite number, not {seconds!r}")
    return float(seconds)


@dataclass(frozen=True, slots=True)
class FaultRule:
    """Inject ``fault`` into requests that match ``method`` and ``path``, from the ``first``
    matching one (counted from 1) for ``times`` of them (``None``: every one from ``first``).

    ``path`` is a regular expression the whole decoded path must match (``r"/v1/refunds"``,
    ``r"/v1/payment_intents/pi_\\w+/capture"``); ``None`` matches every path, as ``method``
    ``None`` every method. ``keyed`` ``True`` matches only requests with an idempotency key,
    ``False`` only those without. Each rule counts the requests it matches, whatever other
    rules do, and a client's retries are requests like any other: losing every answer of a call
    the Stripe SDK tries three times takes ``times=3``.
    """

    fault: Fault
    method: str | None = None
    path: str | None = None
    first: int = 1
    times: int | None = 1
    keyed: bool | None = None

    def __post_init__(self) -> None:
        if isinstance(self.first, bool) or not isinstance(self.first, int) or self.first < 1:
            raise ValueError(f"first counts matching requests from 1, not {self.first!r}")
        if self.times is not None and (
            isinstance(self.times, bool) or not isinstance(self.times, int) or self.times < 1
        ):
            raise ValueError(f"times is a positive int or None, not {self.times!r}")
        if self.path is not None:
            try:
                re.compile(self.path)
            except re.error as exc:
                raise ValueError(f"path {self.path!r} is not a regular expression: {exc}") from None

    def matches(self, request: ProxyRequest) -> bool:
        """Whether ``request`` is one this rule counts (its method, path and key)."""
        if self.method is not None and request.method.upper() != self.method.upper():
            return False
        if self.path is not None and re.fullmatch(self.path, request.path) is None:
            return False
        return self.keyed is None or self.keyed == (request.key is not None)


#: What :meth:`FaultProxy.set_plan` takes: rules (the first whose window holds the request
#: wins), or a function of each request answering its fault or ``None``. A function runs on
#: the proxy's event loop thread, once per request: keep it quick and never block in it.
Plan = Sequence[FaultRule] | Callable[[ProxyRequest], "Fault | None"]


class _Rules:
    """A sequence of rules with their counters."""

    def __init__(self, rules: Sequence[FaultRule]) -> None:
        for rule in rules:
            if not isinstance(rule, FaultRule):
                raise TypeError(f"a plan's rules are FaultRule, not {rule!r}")
        self._rules = tuple(rules)
        self._seen = [0] * len(self._rules)

    def __call__(self, request: ProxyRequest) -> Fault | None:
        chosen: Fault | None = None
        for i, rule in enumerate(self._rules):
            if not rule.matches(request):
                continue
            self._seen[i] += 1
            n = self._seen[i]
            in_window = n >= rule.first and (rule.times is None or n < rule.first + rule.times)
            if chosen is None and in_window:
                chosen = rule.fault
        return chosen


# --- the provider's idempotency layer -----------------------------------------------------------


def stripe_error_body(error_type: str, code: str | None, message: str) -> bytes:
    """Stripe's error JSON: ``{"error": {"type": …, "code": …, "message": …}}`` (no ``code``
    when ``None``). The SDK reads ``type`` ``idempotency_error`` on a 400 as
    ``stripe.IdempotencyError``."""
    error: dict[str, str] = {"type": error_type, "message": message}
    if code is not None:
        error["code"] = code
    return json.dumps({"error": error}).encode()


def stores_outcomes(status: int) -> bool:
    """Whether an upstream answer of ``status`` is kept under its key, as Stripe keeps only
    what its endpoint began to execute: successes, declines (402) and server errors (5xx);
    not a refusal before execution (other 4xx: validation, authentication, rate limits)."""
    return status < 400 or status == 402 or status >= 500


@dataclass(frozen=True, slots=True)
class Dialect:
    """How the provider names and answers idempotency, and the JSON of its errors.

    The defaults (:data:`STRIPE_DIALECT`) are Stripe's. ``error_body(type, code, message)``
    makes the body of every answer the proxy writes itself, with these ``type`` values:
    ``idempotency_error`` (a reused key, code ``None``; a key in flight, code
    ``idempotency_key_in_use``), ``api_error`` (an injected 5xx; the upstream unreachable),
    ``invalid_request_error`` with code ``rate_limit`` (an injected 429).
    """

    key_header: str = "Idempotency-Key"
    replayed_header: str = "Idempotent-Replayed"
    #: The methods whose key is honoured (Stripe: only POST; a key on a GET does nothing).
    keyed_methods: frozenset[str] = frozenset({"POST"})
    error_body: Callable[[str, str | None, str], bytes] = stripe_error_body
    #: Whether an upstream answer of a status is kept under its key (:func:`stores_outcomes`).
    stores: Callable[[int], bool] = stores_outcomes
    #: Status of a reused key with another request, and of a key in flight.
    mismatch_status: int = 400
    in_flight_status: int = 409


#: Stripe's idempotency: ``Idempotency-Key`` on POSTs, ``Idempotent-Replayed`` on replays.
STRIPE_DIALECT = Dialect()


class Delivery(StrEnum):
    """What one delivery of a request to the provider did."""

    #: It reached the upstream (or a stand-in), which answered.
    FORWARDED = "forwarded"
    #: Its key's stored answer was given again; the upstream was not asked.
    REPLAYED = "replayed"
    #: Its key was used before with another method, path or body: refused (400).
    MISMATCH = "mismatch"
    #: Its key's first request was still at the upstream: refused (409).
    IN_FLIGHT = "in_flight"
    #: The upstream could not be reached (connection refused, timeout): 502 from the proxy.
    UNREACHABLE = "unreachable"


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request the client sent, and what became of it."""

    seq: int
    method: str
    path: str
    query: str
    key: str | None
    #: The fault injected, or ``None``.
    fault: Fault | None
    #: What each delivery to the provider did: none for a fault before forwarding, two for
    #: :meth:`Fault.duplicate`.
    deliveries: tuple[Delivery, ...]
    #: The status the client was (or, with :meth:`Fault.delay`, will be) answered; ``None``
    #: when the connection was closed instead.
    status: int | None

    @property
    def answered(self) -> bool:
        """Whether the client got an answer (not a closed connection)."""
        return self.status is not None

    @property
    def forwarded(self) -> int:
        """How many of its deliveries reached the upstream (or a stand-in)."""
        return self.deliveries.count(Delivery.FORWARDED)


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    """One request that reached the upstream, and its status."""

    method: str
    path: str
    query: str
    key: str | None
    status: int
    #: ``client`` (a client's request), ``duplicate`` (its second delivery) or ``stand_in``
    #: (a request a stand-in made to answer one).
    by: str


@dataclass(frozen=True, slots=True)
class _Stored:
    fingerprint: tuple[str, str, bytes]
    answer: ProxyAnswer


class _Unreachable(Exception):
    """The upstream did not answer (its connection refused or timed out)."""


# --- stand-ins ----------------------------------------------------------------------------------


class Upstream(Protocol):
    """The upstream as a stand-in reaches it: each request is logged as a ``stand_in`` call."""

    async def send(
        self,
        method: str,
        target: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> ProxyAnswer:
        """Send ``method`` ``target`` (path and query) to the upstream and return its answer."""
        ...


#: Answers a request in place of the upstream (``None``: not this stand-in's; the next one,
#: then the upstream, is asked). It may call the upstream itself. Stand-ins sit behind the
#: faults and the idempotency layer: they are part of what the provider does.
StandIn = Callable[[ProxyRequest, Upstream], Awaitable["ProxyAnswer | None"]]


class _UpstreamClient:
    """The upstream, reached with one aiohttp session, every request logged."""

    def __init__(self, proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
        self._proxy = proxy
        self._session = session

    async def send(
        self,
        method: str,
        target: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> ProxyAnswer:
        """See :class:`Upstream`."""
        return await self.forward(method, target, headers or {}, body, key=None, by="stand_in")

    async def forward(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        key: str | None,
        by: str,
    ) -> ProxyAnswer:
        import aiohttp

        sent = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
        try:
            async with self._session.request(
                method,
                self._proxy.upstream + target,
                headers=sent,
                data=body or None,
                allow_redirects=False,
            ) as response:
                data = await response.read()
                kept = {k: v for k, v in response.headers.items() if k.lower() not in _HOP_BY_HOP}
                answer = ProxyAnswer(response.status, data, kept)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _Unreachable(str(exc)) from exc
        path, _, query = target.partition("?")
        self._proxy._record_call(
            UpstreamCall(method, urllib.parse.unquote(path), query, key, answer.status, by)
        )
        return answer


# --- the proxy ----------------------------------------------------------------------------------


class FaultProxy:
    """A proxy between a client (an adapter) and ``upstream`` that injects faults and replays
    idempotent answers (see the module). Start it with :meth:`start`; end it with
    :meth:`close` or a ``with`` block::

        with FaultProxy.start(localstripe_url) as proxy:
            provider = StripeCardProvider(KEY, clock, api_base=proxy.url)
            proxy.set_plan([FaultRule(Fault.lose_answer(), "POST", r"/v1/refunds", times=3)])
            ...
            assert len(proxy.upstream_calls("POST", r"/v1/refunds")) == 1

    Attributes:
        url: ``http://127.0.0.1:<port>``, no trailing slash: give it to the client.
        upstream: the upstream's base URL, no trailing slash.
        dialect: the provider's idempotency and error format.
    """

    url: str

    def __init__(
        self,
        upstream: str,
        *,
        plan: Plan | None = None,
        dialect: Dialect = STRIPE_DIALECT,
        stand_ins: Sequence[StandIn] = (),
    ) -> None:
        parts = urllib.parse.urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise ValueError(
                f"upstream is a base URL such as http://127.0.0.1:8420, not {upstream!r}"
            )
        self.upstream = f"{parts.scheme}://{parts.netloc}"
        self.dialect = dialect
        self._stand_ins = tuple(stand_ins)
        self._lock = threading.Condition()
        self._plan: Callable[[ProxyRequest], Fault | None] | None = None
        self._seq = 0
        self._busy = 0
        self._exchanges: list[Exchange] = []
        self._calls: list[UpstreamCall] = []
        self._stored: dict[tuple[str, str], _Stored] = {}
        self._in_flight: set[tuple[str, str]] = set()
        self._loop: _LoopThread | None = None
        self._runner: web.AppRunner | None = None
        self._client: _UpstreamClient | None = None
        self._closing: asyncio.Event | None = None
        self.set_plan(plan)

    @classmethod
    def start(
        cls,
        upstream: str,
        *,
        plan: Plan | None = None,
        dialect: Dialect = STRIPE_DIALECT,
        stand_ins: Sequence[StandIn] = (),
        host: str = "127.0.0.1",
    ) -> FaultProxy:
        """A proxy to ``upstream`` listening on ``host`` (a free port), with ``plan`` (none:
        every request passes), ``dialect`` (Stripe's) and ``stand_ins`` (none). Returns once it
        listens. Raises :class:`ImportError` without aiohttp (the ``server`` extra)."""
        import aiohttp  # noqa: F401  # fail here, in the test, when the extra is missing

        proxy = cls(upstream, plan=plan, dialect=dialect, stand_ins=stand_ins)
        proxy._loop = _LoopThread("treasury-fault-proxy")
        try:
            port = proxy._loop.run(proxy._listen(host), TIMEOUT_SECONDS)
        except BaseException:
            proxy.close()
            raise
        proxy.url = f"http://{host}:{port}"
        return proxy

    async def _listen(self, host: str) -> int:
        import aiohttp
        from aiohttp import web

        self._closing = asyncio.Event()
        session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS), auto_decompress=True
        )
        self._client = _UpstreamClient(self, session)
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._serve)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        self._runner = runner
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        port: int = runner.addresses[0][1]
        return port

    # --- the test's side ------------------------------------------------------------------------

    def set_plan(self, plan: Plan | None) -> None:
        """Inject faults by ``plan`` from the next request on (``None``: no faults). Rules
        count matching requests from zero again."""
        chosen: Callable[[ProxyRequest], Fault | None] | None
        if plan is None:
            chosen = None
        elif callable(plan):
            chosen = plan
        else:
            chosen = _Rules(plan)
        with self._lock:
            self._plan = chosen

    def inject(
        self,
        fault: Fault,
        method: str | None = None,
        path: str | None = None,
        *,
        first: int = 1,
        times: int | None = 1,
        keyed: bool | None = None,
    ) -> None:
        """Shorthand for ``set_plan([FaultRule(fault, method, path, first, times, keyed)])``."""
        self.set_plan([FaultRule(fault, method, path, first, times, keyed)])

    def exchanges(self, method: str | None = None, path: str | None = None) -> list[Exchange]:
        """The client's requests so far (each once its deliveries are over), in order; only
        those of ``method`` and whose path matches the regular expression ``path``, if given."""
        with self._lock:
            seen = list(self._exchanges)
        return [e for e in seen if _selected(e.method, e.path, method, path)]

    def upstream_calls(
        self, method: str | None = None, path: str | None = None
    ) -> list[UpstreamCall]:
        """The requests that reached the upstream so far, in order, selected as in
        :meth:`exchanges`: what the provider was asked to do."""
        with self._lock:
            seen = list(self._calls)
        return [c for c in seen if _selected(c.method, c.path, method, path)]

    def forget_keys(self) -> None:
        """Forget every stored answer, as Stripe does 24 hours after a key's first use: a
        request with a key seen before reaches the upstream again."""
        with self._lock:
            self._stored.clear()

    def wait_idle(self, timeout: float = TIMEOUT_SECONDS) -> None:
        """Return once no request is being delivered (held answers of :meth:`Fault.delay`
        do not count: their deliveries are over), so that a test that saw its client give up
        asserts on a finished log. Raises :class:`TimeoutError` after ``timeout`` seconds."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._busy == 0, timeout):
                raise TimeoutError(f"the proxy was still delivering after {timeout} s")

    def close(self) -> None:
        """Stop listening; held answers are cut short; the upstream session closes."""
        loop = self._loop
        if loop is None:
            return
        self._loop = None
        try:
            if not loop.loop.is_closed():
                loop.run(self._shutdown(), TIMEOUT_SECONDS)
        finally:
            loop.close()

    async def _shutdown(self) -> None:
        if self._closing is not None:
            self._closing.set()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        if self._client is not None:
            await self._client._session.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- the proxy's side (on its event loop) -----------------------------------------------------

    def _record_call(self, call: UpstreamCall) -> None:
        with self._lock:
            self._calls.append(call)

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        with self._lock:
            self._seq += 1
            self._busy += 1
            seq, plan = self._seq, self._plan
        try:
            method = request.method.upper()
            keyed = method in {m.upper() for m in self.dialect.keyed_methods}
            incoming = ProxyRequest(
                seq=seq,
                method=method,
                path=request.path,
                query=request.rel_url.raw_query_string,
                headers=headers,
                body=body,
                key=headers.get(self.dialect.key_header.lower()) if keyed else None,
                target=request.rel_url.raw_path_qs,
            )
            fault = plan(incoming) if plan is not None else None
            answer, deliveries = await self._exchange(incoming, fault)
            dropped = fault is not None and fault.kind in (FaultKind.DROP, FaultKind.LOSE_ANSWER)
            status = None if dropped or answer is None else answer.status
            with self._lock:
                self._exchanges.append(
                    Exchange(
                        seq,
                        method,
                        incoming.path,
                        incoming.query,
                        incoming.key,
                        fault,
                        deliveries,
                        status,
                    )
                )
        finally:
            with self._lock:
                self._busy -= 1
                self._lock.notify_all()
        if status is None or answer is None:
            # The connection closes with no answer: the client sees a connection error.
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=204)
        if fault is not None and fault.kind is FaultKind.DELAY and fault.seconds is not None:
            await self._hold(fault.seconds)
        return web.Response(status=answer.status, body=answer.body, headers=answer.headers)

    async def _hold(self, seconds: float) -> None:
        closing = self._closing
        if closing is None:
            return
        # Cut short by close(), so that a test's teardown never waits for a held answer.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(closing.wait(), seconds)

    async def _exchange(
        self, request: ProxyRequest, fault: Fault | None
    ) -> tuple[ProxyAnswer | None, tuple[Delivery, ...]]:
        kind = fault.kind if fault is not None else None
        if kind is FaultKind.DROP:
            return None, ()
        if fault is not None and kind is FaultKind.ANSWER and fault.status is not None:
            return self._made_up(fault), ()
        slow = fault.seconds if fault is not None and kind is FaultKind.SLOW else None
        delivery, answer = await self._deliver(request, "client", slow)
        deliveries: tuple[Delivery, ...] = (delivery,)
        if kind is FaultKind.DUPLICATE:
            again, _ = await self._deliver(request, "duplicate", None)
            deliveries += (again,)
        return answer, deliveries

    def _made_up(self, fault: Fault) -> ProxyAnswer:
        status = fault.status or 500
        body = fault.body
        if body is None:
            if status == 429:
                body = self.dialect.error_body(
                    "invalid_request_error", "rate_limit", "Too many requests (test bed)"
                )
            else:
                body = self.dialect.error_body(
                    "api_error", None, f"An error {status} injected by the test bed"
                )
        headers = {"Content-Type": "application/json", **dict(fault.headers)}
        return ProxyAnswer(status, body, headers)

    def _error(self, status: int, error_type: str, code: str | None, message: str) -> ProxyAnswer:
        body = self.dialect.error_body(error_type, code, message)
        return ProxyAnswer(status, body, {"Content-Type": "application/json"})

    async def _deliver(
        self, request: ProxyRequest, by: str, slow: float | None
    ) -> tuple[Delivery, ProxyAnswer]:
        """One delivery to the provider: its idempotency layer, then the upstream."""
        key = request.key
        if key is None:
            if slow is not None:
                await self._hold(slow)
            return await self._forward(request, by)
        # Keys are the account's, as Stripe's are: scoped by the credentials that sent them.
        scope = (request.headers.get("authorization", ""), key)
        fingerprint = (request.method, request.target, request.body)
        with self._lock:
            stored = self._stored.get(scope)
            in_flight = scope in self._in_flight
            if stored is None and not in_flight:
                self._in_flight.add(scope)
        if stored is not None:
            if stored.fingerprint != fingerprint:
                return Delivery.MISMATCH, self._error(
                    self.dialect.mismatch_status,
                    "idempotency_error",
                    None,
                    f"Keys for idempotent requests can only be used with the same parameters "
                    f"they were first used with; {key!r} was used with another request",
                )
            first = stored.answer
            replayed = {**first.headers, self.dialect.replayed_header: "true"}
            return Delivery.REPLAYED, ProxyAnswer(first.status, first.body, replayed)
        if in_flight:
            return Delivery.IN_FLIGHT, self._error(
                self.dialect.in_flight_status,
                "idempotency_error",
                "idempotency_key_in_use",
                f"Another request with the idempotency key {key!r} is still in progress; "
                "try again later",
            )
        try:
            if slow is not None:
                await self._hold(slow)
            delivery, answer = await self._forward(request, by)
            if delivery is Delivery.FORWARDED and self.dialect.stores(answer.status):
                with self._lock:
                    self._stored[scope] = _Stored(fingerprint, answer)
        finally:
            with self._lock:
                self._in_flight.discard(scope)
        return delivery, answer

    async def _forward(self, request: ProxyRequest, by: str) -> tuple[Delivery, ProxyAnswer]:
        client = self._client
        if client is None:
            raise RuntimeError("the proxy is not running")
        try:
            for stand_in in self._stand_ins:
                answer = await stand_in(request, client)
                if answer is not None:
                    return Delivery.FORWARDED, answer
            answer = await client.forward(
                request.method,
                request.target,
                request.headers,
                request.body,
                key=request.key,
                by=by,
            )
        except _Unreachable:
            return Delivery.UNREACHABLE, self._error(
                502, "api_error", None, "The test bed's proxy could not reach the upstream"
            )
        return Delivery.FORWARDED, answer


def _selected(method: str, path: str, wanted_method: str | None, wanted_path: str | None) -> bool:
    if wanted_method is not None and method.upper() != wanted_method.upper():
        return False
    return wanted_path is None or re.fullmatch(wanted_path, path) is not None
