"""Browser-test harness: system Chromium driven by Playwright, a live server, a callback sink.

Playwright's own browser download is not used: every launch passes ``executable_path`` to the
system Chromium (Debian's ``chromium``; ``.ci/run`` installs it and sets
``TREASURY_TEST_CHROMIUM``). Everything is function-scoped, so each test gets its own event
loop, browser, server and database; setting all of that up takes about a second.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import pytest
from aiohttp import web
from playwright.async_api import Browser, BrowserContext, Page, ViewportSize, async_playwright

from treasury_aiohttp import create_app
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.testing.fakes.clock import FakeClock

CHROMIUM_ENV = "TREASURY_TEST_CHROMIUM"
REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO_ROOT / "build" / "screenshots"

# Playwright waits 30 s by default; a page that has not answered in 10 s is broken, so fail fast.
DEFAULT_TIMEOUT_MS = 10_000
DESKTOP_VIEWPORT: ViewportSize = {"width": 1280, "height": 900}
PHONE_VIEWPORT: ViewportSize = {"width": 390, "height": 844}


# -- the browser ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The Chromium binary: ``$TREASURY_TEST_CHROMIUM``, else ``chromium`` on the PATH."""
    configured = os.environ.get(CHROMIUM_ENV)
    if configured:
        # Set on purpose (CI sets it): a wrong path is an error, never a silent skip.
        if not os.access(configured, os.X_OK):
            pytest.fail(f"{CHROMIUM_ENV}={configured} is not an executable")
        return configured
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip(f"no Chromium: install Debian's chromium or set {CHROMIUM_ENV}")
    return path


@pytest.fixture
async def browser(chromium_path: str) -> AsyncIterator[Browser]:
    """Headless system Chromium. ``--no-sandbox`` because tests run as root (in CI, too)."""
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=chromium_path, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            await launched.close()


async def _context_page(context: BrowserContext) -> Page:
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    context.set_default_navigation_timeout(DEFAULT_TIMEOUT_MS)
    return await context.new_page()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A desktop page (1280x900, en-US) in a fresh context."""
    context = await browser.new_context(viewport=DESKTOP_VIEWPORT, locale="en-US")
    try:
        yield await _context_page(context)
    finally:
        await context.close()


@pytest.fixture
async def mobile_page(browser: Browser) -> AsyncIterator[Page]:
    """A phone-sized page (390x844, mobile, touch, en-US) in a fresh context."""
    context = await browser.new_context(
        viewport=PHONE_VIEWPORT,
        is_mobile=True,
        has_touch=True,
        locale="en-US",
    )
    try:
        yield await _context_page(context)
    finally:
        await context.close()


class Screenshot(Protocol):
    """``await screenshot(page, name)``: the path of the PNG written."""

    def __call__(self, page: Page, name: str, *, full_page: bool = True) -> Awaitable[Path]: ...


def _safe_name(name: str) -> str:
    """``name`` usable as one path component (parametrized ids carry brackets and slashes)."""
    return re.sub(r"[^\w.-]+", "_", name)


@pytest.fixture
def screenshot(request: pytest.FixtureRequest) -> Screenshot:
    """``await screenshot(page, name)`` saves a full-page PNG under
    ``build/screenshots/<test name>/<name>.png`` and returns its path.

    Full-page shots of very tall pages (tens of thousands of pixels, e.g. the OpenAPI JSON
    shown as text) take seconds to encode and can exceed the timeout; pass
    ``full_page=False`` for those.
    """
    test_dir = SCREENSHOTS / _safe_name(request.node.name)

    async def take(page: Page, name: str, *, full_page: bool = True) -> Path:
        path = test_dir / f"{_safe_name(name)}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(path), full_page=full_page)
        return path

    return take


# -- the live server --------------------------------------------------------------------------


@dataclass
class Tenant:
    """One company with its merchant account and keys (as in tests/e2e)."""

    company_id: int
    account_id: int
    secret_key: str
    publishable_key: str


@dataclass
class LiveServer:
    """The aiohttp app on a real port, over an SQLite file, with one company."""

    base_url: str
    treasury: Treasury
    clock: FakeClock
    tenant: Tenant
    session: aiohttp.ClientSession

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    async def api(
        self, method: str, path: str, json: Any = None, key: str | None = "secret"
    ) -> tuple[int, Any]:
        """Call the API as the tenant; ``(status, body)`` with a JSON body decoded.

        ``key`` is ``"secret"``, ``"publishable"``, ``None`` (no Authorization header) or any
        other string, sent as the bearer token itself.
        """
        token = {"secret": self.tenant.secret_key, "publishable": self.tenant.publishable_key}
        headers = {} if key is None else {"Authorization": f"Bearer {token.get(key, key)}"}
        async with self.session.request(
            method, self.url(path), json=json, headers=headers
        ) as response:
            text = await response.text()
            if response.content_type == "application/json" and text:
                return response.status, await response.json()
            return response.status, text


async def _start(app: web.Application) -> tuple[web.AppRunner, str]:
    """Serve ``app`` on 127.0.0.1 on a free port; the runner and the base URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    # Port 0 picks a free port; the bound address is read back from the server's sockets.
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}"


@asynccontextmanager
async def serve_treasury(
    directory: Path, clock: FakeClock, **config: Any
) -> AsyncIterator[LiveServer]:
    """A sandbox Treasury on an SQLite file in ``directory``, served over real HTTP, with the
    company "Acme"; ``config`` overrides :class:`TreasuryConfig` fields."""
    treasury = bootstrap(
        # Same fees as tests/e2e: 25 minor units plus 1 % per withdrawal.
        TreasuryConfig(
            database_url=f"sqlite:///{directory / 'browser.db'}",
            pool_size=4,
            withdrawal_fees={"*": (25, 100)},
            # The server's worker loop delivers callbacks; look often so tests wait little.
            job_poll_seconds=0.05,
            **config,
        ),
        clock=clock,
        # The wall clock stays real, as under `treasury serve`: advancing the sandbox clock from
        # the dashboard must not end the browser's session by its idle timeout.
    )
    created = await treasury.companies.create_company("Acme")
    tenant = Tenant(
        created.company.id, created.merchant_account.id, created.secret_key, created.publishable_key
    )
    # The runner's cleanup closes the treasury (close_treasury=True).
    runner, base_url = await _start(create_app(treasury, close_treasury=True, run_jobs=True))
    try:
        async with aiohttp.ClientSession() as session:
            yield LiveServer(base_url, treasury, clock, tenant, session)
    finally:
        await runner.cleanup()


@pytest.fixture
async def live_server(tmp_path: Path, clock: FakeClock) -> AsyncIterator[LiveServer]:
    """The default sandbox configuration, served (see :func:`serve_treasury`)."""
    async with serve_treasury(tmp_path, clock) as server:
        yield server


# -- the callback receiver --------------------------------------------------------------------


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: str
    json: Any  # the decoded body, or None when it is not JSON


@dataclass
class CallbackReceiver:
    """An HTTP sink that records every request and answers 200."""

    url: str
    received: list[ReceivedRequest] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def record(self, request: ReceivedRequest) -> None:
        async with self._changed:
            self.received.append(request)
            self._changed.notify_all()

    async def wait_for(
        self,
        predicate: Callable[[ReceivedRequest], bool],
        timeout: float = 10,  # noqa: ASYNC109 - a bounded wait is this helper's whole point
    ) -> ReceivedRequest:
        """The first recorded request matching ``predicate``, waiting up to ``timeout`` s."""

        def match() -> ReceivedRequest | None:
            return next((r for r in self.received if predicate(r)), None)

        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(lambda: match() is not None)
        except TimeoutError:
            seen = [(r.method, r.path) for r in self.received]
            raise AssertionError(f"no matching callback within {timeout} s; got {seen}") from None
        found = match()
        assert found is not None
        return found


@pytest.fixture
async def callback_receiver() -> AsyncIterator[CallbackReceiver]:
    """A real HTTP server on 127.0.0.1 recording every request it gets."""
    receiver: CallbackReceiver | None = None

    async def handle(request: web.Request) -> web.Response:
        body = await request.text()
        try:
            decoded = json.loads(body) if body else None
        except ValueError:
            decoded = None
        assert receiver is not None
        await receiver.record(
            ReceivedRequest(request.method, request.path, dict(request.headers), body, decoded)
        )
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner, base_url = await _start(app)
    receiver = CallbackReceiver(base_url)
    try:
        yield receiver
    finally:
        await runner.cleanup()
