"""A webhook receiver for tests: a real HTTP server on loopback that checks signatures.

It runs on the standard library's threading HTTP server, so it needs no extra package and no
event loop: sync tests, pytest-asyncio, anyio and pytest-aiohttp tests can all use it. Every
POST is checked against the trusted secrets the Standard Webhooks way (``webhook-id``,
``webhook-timestamp`` within five minutes of now, ``webhook-signature``); verified requests
are recorded in :attr:`WebhookReceiver.deliveries`, the rest in :attr:`WebhookReceiver.rejected`
and answered 400. Tests wait for a delivery with :meth:`WebhookReceiver.wait_for` (blocking)
or :meth:`WebhookReceiver.wait_for_async` (awaitable), never with sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["ReceivedWebhook", "RejectedRequest", "WebhookReceiver"]

log = logging.getLogger("treasury_pytest.receiver")

#: Larger bodies are refused unread: no event comes near it, and a test must not hang on one.
MAX_BODY_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ReceivedWebhook:
    """A request whose signature verified under one of the trusted secrets."""

    #: The ``webhook-id`` header: the event id, the same on every attempt of one event.
    id: str
    #: The payload's ``type`` (``treasury.deposit.completed``, …); ``None`` for bodies without
    #: one (legacy payment callbacks).
    type: str | None
    #: The parsed JSON body.
    payload: Any
    #: The request path (``/webhooks`` unless the endpoint URL said otherwise).
    path: str
    #: The request headers, names in lower case.
    headers: Mapping[str, str]
    #: The raw body, exactly as signed.
    body: bytes
    #: What the receiver answered (200, or the status set by :meth:`WebhookReceiver.fail_next`).
    status: int

    @property
    def object(self) -> Any:
        """``payload["data"]["object"]``: the resource the event is about (``None`` if absent)."""
        if not isinstance(self.payload, dict):
            return None
        data = self.payload.get("data")
        return data.get("object") if isinstance(data, dict) else None


@dataclass(frozen=True)
class RejectedRequest:
    """A request the receiver refused (answered 400, 411 or 413), and why."""

    path: str
    headers: Mapping[str, str]
    body: bytes
    reason: str


@dataclass
class _State:
    """What the HTTP threads and the test share, under ``lock``."""

    lock: threading.Condition = field(default_factory=threading.Condition)
    secrets: list[str] = field(default_factory=list)
    deliveries: list[ReceivedWebhook] = field(default_factory=list)
    rejected: list[RejectedRequest] = field(default_factory=list)
    failures: list[int] = field(default_factory=list)
    # Async waiters: each is woken (on its own loop) whenever anything is recorded.
    async_waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=set)
    # wait_for / wait_for_async calls that found nothing and are waiting for a record; ``lock``
    # is notified when one starts. A blocking one counts while it is inside ``lock.wait``: a
    # thread holding ``lock`` that sees it counted knows a record now wakes it.
    waiting: int = 0


def _verify(secrets: list[str], body: bytes, headers: Mapping[str, str]) -> tuple[Any, str]:
    """The parsed payload if some secret verifies the request, and ``""``; else ``None`` and
    why not."""
    from standardwebhooks import Webhook, WebhookVerificationError

    if not secrets:
        return None, "no trusted secret yet: call receiver.trust(secret) first"
    reason = ""
    for secret in secrets:
        try:
            return Webhook(secret).verify(body, dict(headers)), ""
        except WebhookVerificationError as exc:
            reason = str(exc) or type(exc).__name__
        except ValueError as exc:
            # A malformed signature header (no comma, bad base64) or a body that is not JSON:
            # the library raises these as they come, and they are refusals all the same.
            reason = f"malformed request ({exc})"
    return None, reason


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    #: Seconds a connection may sit silent: a client that never sends its request must not
    #: hold up close(), which waits for the handlers.
    timeout = 10

    def do_POST(self) -> None:
        """Check, record and answer one request."""
        state = self.server.state
        headers = {name.lower(): value for name, value in self.headers.items()}
        length_header = self.headers.get("Content-Length")
        if length_header is None or not length_header.isdigit():
            self._refuse(state, headers, b"", 411, "no Content-Length")
            return
        length = int(length_header)
        if length > MAX_BODY_BYTES:
            self._refuse(state, headers, b"", 413, f"body of {length} bytes is too large")
            return
        body = self.rfile.read(length)
        with state.lock:
            secrets = list(state.secrets)
        payload, reason = _verify(secrets, body, headers)
        if reason:
            self._refuse(state, headers, body, 400, reason)
            return
        with state.lock:
            status = state.failures.pop(0) if state.failures else 200
        kind = payload.get("type") if isinstance(payload, dict) else None
        received = ReceivedWebhook(
            id=headers["webhook-id"],
            type=kind if isinstance(kind, str) else None,
            payload=payload,
            path=self.path,
            headers=headers,
            body=body,
            status=status,
        )
        # Recorded before answering: once the sender has its answer, the test sees the record.
        _record(state, lambda: state.deliveries.append(received))
        self._answer(status)

    def _refuse(
        self, state: _State, headers: dict[str, str], body: bytes, status: int, reason: str
    ) -> None:
        rejected = RejectedRequest(self.path, headers, body, reason)
        _record(state, lambda: state.rejected.append(rejected))
        self._answer(status)

    def _answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        """To logging (captured by pytest), not to stderr."""
        log.debug("%s - " + format, self.address_string(), *args)


def _record(state: _State, change: Callable[[], None]) -> None:
    with state.lock:
        change()
        state.lock.notify_all()
        waiters = list(state.async_waiters)
    for loop, event in waiters:
        # A closed loop's waiter is gone with it.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(event.set)


class _Server(ThreadingHTTPServer):
    # Handler threads are joined on close, so an answer being written is not cut off.
    daemon_threads = False

    def __init__(self, host: str, state: _State) -> None:
        self.state = state
        super().__init__((host, 0), _Handler)


class WebhookReceiver:
    """A webhook receiver on ``http://127.0.0.1:<free port>``; see the module.

    Point a webhook endpoint at :attr:`url`, :meth:`trust` the secret its creation returned,
    then :meth:`wait_for` the event. Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, *, host: str = "127.0.0.1", path: str = "/webhooks") -> None:
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        self._state = _State()
        self._server = _Server(host, self._state)
        self._path = path
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # how soon close() is noticed
            name="treasury-webhook-receiver",
            daemon=True,
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The URL to give a webhook endpoint (any path on this port is received too)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self._path}"

    def trust(self, secret: str) -> None:
        """Accept requests signed with ``secret`` (``whsec_…``), from now on.

        An endpoint's secret is shown once, when it is created; the company's callback secret
        signs legacy and tokenization callbacks.
        """
        with self._state.lock:
            if secret not in self._state.secrets:
                self._state.secrets.append(secret)

    def fail_next(self, count: int = 1, status: int = 500) -> None:
        """Answer the next ``count`` verified deliveries with ``status`` (they are still
        recorded), so that a test can watch the sender retry."""
        if count < 0:
            raise ValueError("count must not be negative")
        with self._state.lock:
            self._state.failures.extend([status] * count)

    @property
    def deliveries(self) -> list[ReceivedWebhook]:
        """Every verified request so far, oldest first (retries included)."""
        with self._state.lock:
            return list(self._state.deliveries)

    @property
    def rejected(self) -> list[RejectedRequest]:
        """Every refused request so far, oldest first."""
        with self._state.lock:
            return list(self._state.rejected)

    def _found(
        self,
        event_type: str | None,
        match: Callable[[ReceivedWebhook], bool] | None,
        count: int,
    ) -> ReceivedWebhook | None:
        # Called with the lock held.
        seen = 0
        for delivery in self._state.deliveries:
            if event_type is not None and delivery.type != event_type:
                continue
            if match is not None and not match(delivery):
                continue
            seen += 1
            if seen == count:
                return delivery
        return None

    def _timed_out(self, event_type: str | None, count: int, timeout: float) -> TimeoutError:
        wanted = f"{count} deliver{'y' if count == 1 else 'ies'}"
        if event_type is not None:
            wanted += f" of {event_type}"
        with self._state.lock:
            got = [d.type or d.id for d in self._state.deliveries]
            refused = [r.reason for r in self._state.rejected]
        return TimeoutError(
            f"no {wanted} within {timeout} s; received {got or 'nothing'}"
            + (f"; rejected {refused}" if refused else "")
        )

    def wait_for(
        self,
        event_type: str | None = None,
        *,
        match: Callable[[ReceivedWebhook], bool] | None = None,
        count: int = 1,
        timeout: float = 10.0,
    ) -> ReceivedWebhook:
        """The ``count``-th verified delivery (so far or yet to come) of ``event_type`` (any
        type if ``None``) for which ``match`` holds; :class:`TimeoutError` after ``timeout``
        seconds, saying what did arrive.

        Blocks the calling thread: in an async test whose event loop must keep running
        (a server on that loop), await :meth:`wait_for_async` instead.
        """
        if count < 1:
            raise ValueError("count must be at least 1")
        deadline = time.monotonic() + timeout
        state = self._state
        with state.lock:
            found = self._found(event_type, match, count)
            if found is None and timeout > 0:
                # Counted from here to the end of the wait; the lock is released only inside
                # lock.wait, so whoever sees the count under the lock sees us waiting.
                state.waiting += 1
                state.lock.notify_all()  # once per call: waiters never wake each other in turn
                try:
                    while found is None:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        state.lock.wait(remaining)
                        found = self._found(event_type, match, count)
                finally:
                    state.waiting -= 1
        if found is None:
            raise self._timed_out(event_type, count, timeout)
        return found

    async def wait_for_async(
        self,
        event_type: str | None = None,
        *,
        match: Callable[[ReceivedWebhook], bool] | None = None,
        count: int = 1,
        # A default deadline, as wait_for has: a test whose event never comes must fail, not
        # hang, even when its author forgot to wrap the call in asyncio.timeout.
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> ReceivedWebhook:
        """As :meth:`wait_for`, without blocking the running event loop (any asyncio loop:
        pytest-asyncio, anyio's asyncio backend, pytest-aiohttp)."""
        if count < 1:
            raise ValueError("count must be at least 1")
        loop = asyncio.get_running_loop()
        arrived = asyncio.Event()
        waiter = (loop, arrived)
        state = self._state
        with state.lock:
            state.async_waiters.add(waiter)
        counted = False
        try:
            async with asyncio.timeout(timeout):
                while True:
                    # Cleared before looking: a record made after the look sets it again, so
                    # no wake-up is lost between the look and the wait.
                    arrived.clear()
                    with state.lock:
                        found = self._found(event_type, match, count)
                        if found is None and not counted:
                            # Registered, and nothing yet: any record from now on wakes us.
                            counted = True
                            state.waiting += 1
                            state.lock.notify_all()
                    if found is not None:
                        return found
                    await arrived.wait()
        except TimeoutError:
            raise self._timed_out(event_type, count, timeout) from None
        finally:
            with state.lock:
                state.async_waiters.discard(waiter)
                if counted:
                    state.waiting -= 1

    def close(self) -> None:
        """Stop listening; waits for requests being answered."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()

    def __enter__(self) -> WebhookReceiver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
