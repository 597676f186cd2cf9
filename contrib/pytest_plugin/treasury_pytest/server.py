"""A real treasury server for tests, on loopback, on an event loop of its own.

The server runs the library's own app (:func:`treasury_aiohttp.create_app`, with the background
worker that ``treasury serve`` runs) on a fresh event loop in a background thread. So it is the
same from a sync test, a pytest-asyncio, anyio or pytest-aiohttp test: nothing it does waits for
the test's loop, and the test may block (``requests``, ``urllib``) without stalling it.

Service calls on the served treasury go through :meth:`TreasuryServer.call` or
:meth:`TreasuryServer.call_async`, which run them on the server's loop. Awaited straight from the
test's own loop they would be unsafe: the treasury's asyncio locks (per payment intent, and the
one that runs passes over deliveries one at a time, per loop) belong to the loop they were first
used on, so the call either fails ("bound to a different event loop") or is not serialized with
the server and its worker at all.

aiohttp is imported only when a server starts: this module is imported by the pytest plugin,
which must load where treasury-core is installed without the ``server`` extra.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Coroutine, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from aiohttp import web

    from treasury_core import Treasury
    from treasury_core.services.notifications.endpoints import CreatedEndpoint
    from treasury_core.testing import FakeClock
    from treasury_pytest.receiver import WebhookReceiver

__all__ = ["TreasuryServer"]

T = TypeVar("T")

#: How long a blocking call on the server's loop may take before the test is told so.
CALL_TIMEOUT_SECONDS = 60.0


class _LoopThread:
    """An asyncio event loop running forever in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coro`` on the loop and wait for its result from another thread."""
        if threading.current_thread() is self._thread:
            coro.close()
            # Waiting here for work queued behind ourselves would never end.
            raise RuntimeError(
                "a blocking call from the server's own event loop; await the *_async variant"
            )
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise TimeoutError(f"the server did not finish the call within {timeout} s") from None

    async def run_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop; await its result from another loop."""
        if asyncio.get_running_loop() is self.loop:
            return await coro  # already on the server's loop
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self) -> None:
        """Stop the loop, wait for the thread, close the loop."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


class TreasuryServer:
    """A running treasury server with one company; built by :meth:`start`, ended by
    :meth:`close` (the ``treasury_server`` fixture does both).

    Attributes:
        base_url: ``http://127.0.0.1:<port>``, no trailing slash.
        treasury: the :class:`~treasury_core.Treasury` the server serves (same storage); run
            its service calls with :meth:`call` or :meth:`call_async`, on the server's loop.
        clock: its business clock; the sandbox ``clock/advance`` endpoint moves it too.
        company_id, account_id: the company and its default merchant account.
        secret_key, publishable_key: the company's API keys (``sk_…``, ``pk_…``).
    """

    base_url: str
    company_id: int
    account_id: int
    secret_key: str
    publishable_key: str

    def __init__(self, treasury: Treasury, clock: FakeClock) -> None:
        self.treasury = treasury
        self.clock = clock
        self._loop = _LoopThread("treasury-test-server")
        self._runner: web.AppRunner | None = None
        self._first_pass_done: asyncio.Event | None = None

    @classmethod
    def start(
        cls,
        treasury: Treasury,
        clock: FakeClock,
        *,
        company_name: str = "Test company",
        host: str = "127.0.0.1",
    ) -> TreasuryServer:
        """Serve ``treasury`` on ``host`` (a free port) with the background worker running,
        and create a company with its keys. Raises :class:`ImportError` without aiohttp.

        Returns once the worker's first pass over due work is over: from then on it looks
        again every ``job_poll_seconds``, and at once after each API request that may have
        written (its events go out without waiting for the interval; due jobs and retries
        wait for it, or for :meth:`run_due` or :meth:`advance`).

        The treasury is not closed by :meth:`close`: whoever built it closes it.
        """
        from treasury_aiohttp import create_app
        from treasury_aiohttp.server import AppRunner

        server = cls(treasury, clock)
        try:
            # The worker of `treasury serve`: due deliveries go out on their own, within
            # job_poll_seconds; the event tells when its first pass is over.
            first_pass = server._first_pass_done = asyncio.Event()
            app = create_app(treasury, run_jobs=True, after_jobs_pass=first_pass.set)
            # treasury serve's runner: malformed requests get the same JSON answer as there.
            runner = AppRunner(app, shutdown_timeout=5.0)
            server._runner = runner
            port = server.call(server._listen(runner, host))
            server.base_url = f"http://{host}:{port}"
            created = server.call(treasury.companies.create_company(company_name))
            server.call(server._first_pass())
        except BaseException:
            server.close()
            raise
        server.company_id = created.company.id
        server.account_id = created.merchant_account.id
        server.secret_key = created.secret_key
        server.publishable_key = created.publishable_key
        return server

    async def _first_pass(self) -> None:
        """Return once the worker's first pass is over (it then waits ``job_poll_seconds``)."""
        if self._first_pass_done is None:
            raise RuntimeError("the app is not running")
        await self._first_pass_done.wait()

    @staticmethod
    async def _listen(runner: web.AppRunner, host: str) -> int:
        from aiohttp import web

        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        port: int = runner.addresses[0][1]
        return port

    # --- conveniences -------------------------------------------------------------------------

    def url(self, path: str) -> str:
        """``base_url`` + ``path`` (``/api/v1/wallets`` → ``http://127.0.0.1:…/api/v1/wallets``)."""
        return self.base_url + path

    @property
    def auth_headers(self) -> dict[str, str]:
        """``Authorization: Bearer <secret key>``."""
        return {"Authorization": f"Bearer {self.secret_key}"}

    @property
    def publishable_headers(self) -> dict[str, str]:
        """``Authorization: Bearer <publishable key>``."""
        return {"Authorization": f"Bearer {self.publishable_key}"}

    @property
    def callback_secret(self) -> str:
        """The secret the company's legacy and tokenization callbacks are signed with."""
        return self.treasury.notifications.callback_secret(self.company_id)

    # --- running things on the server's loop ---------------------------------------------------

    def call(self, awaitable: Awaitable[T], *, timeout: float = CALL_TIMEOUT_SECONDS) -> T:
        """Run ``awaitable`` (a treasury service call, say) on the server's event loop and
        return its result: how a sync test uses the async API.

        Every service call on :attr:`treasury` goes through here or :meth:`call_async`: the
        treasury's asyncio locks belong to the server's loop (see the module), so awaiting a
        service straight from the test's loop is unsafe.

        Blocks the calling thread; from an async test await :meth:`call_async`, so that a
        receiver on the test's own loop can still answer.
        """
        return self._loop.run(_await(awaitable), timeout)

    async def call_async(self, awaitable: Awaitable[T]) -> T:
        """As :meth:`call`, awaited: the test's loop keeps running meanwhile."""
        return await self._loop.run_async(_await(awaitable))

    async def _due(self) -> None:
        await self.treasury.jobs.run_all_due()
        await self.treasury.notifications.run_due()

    def run_due(self) -> None:
        """Run every job due by the business clock and send every due delivery, now.

        When it returns, every delivery of an event committed before the call has been
        attempted and the outcome recorded (passes over deliveries run one at a time, so one
        the background worker had started is finished first). The worker does the same every
        ``job_poll_seconds``; this is for a test that wants it done before its next line.
        """
        self.call(self._due())

    async def run_due_async(self) -> None:
        """As :meth:`run_due`, awaited."""
        await self.call_async(self._due())

    def advance(self, seconds: int) -> datetime:
        """Move business time forward and run whatever falls due (settlements, expiries,
        webhook retries), as ``POST /api/v1/sandbox/clock/advance`` does; the new time.

        A delivery attempt in progress is recorded before time moves, so its retry is
        scheduled from the old time and an advance past the retry delay sends it."""
        return self.call(self.treasury.sandbox.advance(seconds))

    async def advance_async(self, seconds: int) -> datetime:
        """As :meth:`advance`, awaited."""
        return await self.call_async(self.treasury.sandbox.advance(seconds))

    async def _subscribe(
        self, receiver: WebhookReceiver, events: Sequence[str] | None
    ) -> CreatedEndpoint:
        from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest

        request = CreateWebhookEndpointRequest.model_validate(
            {"url": receiver.url, "events": None if events is None else list(events)}
        )
        created = await self.treasury.notifications.create_endpoint(self.company_id, request)
        receiver.trust(created.secret)
        return created

    def subscribe(
        self, receiver: WebhookReceiver, events: Sequence[str] | None = None
    ) -> CreatedEndpoint:
        """Create a webhook endpoint of the company pointing at ``receiver`` (for ``events``,
        or every type) and make the receiver trust its secret; the created endpoint."""
        return self.call(self._subscribe(receiver, events))

    async def subscribe_async(
        self, receiver: WebhookReceiver, events: Sequence[str] | None = None
    ) -> CreatedEndpoint:
        """As :meth:`subscribe`, awaited."""
        return await self.call_async(self._subscribe(receiver, events))

    def close(self) -> None:
        """Stop serving (the background worker finishes its batch) and stop the loop."""
        runner, self._runner = self._runner, None
        try:
            if runner is not None:
                self.call(runner.cleanup())
        finally:
            self._loop.close()
