"""Signing out in Chromium, at desktop and phone width: the session ends on the server, so a
copy of its cookie kept by another browser opens nothing; revoking the key ends a browser's
session at its next page."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, BrowserContext, ViewportSize, expect

from tests.browser.conftest import DESKTOP_VIEWPORT, PHONE_VIEWPORT, LiveServer
from tests.browser.test_dashboard import sign_in
from tests.e2e.dashboard_client import paid_intent
from treasury_core.companies import KeyKind
from treasury_core.payments import IntentStatus

WIDTHS = {"desktop": DESKTOP_VIEWPORT, "phone": PHONE_VIEWPORT}
LOGIN = re.compile(r"/dashboard/login$")


@pytest.fixture(params=["desktop", "phone"])
def viewport(request: pytest.FixtureRequest) -> ViewportSize:
    return WIDTHS[request.param]


async def _context(browser: Browser, viewport: ViewportSize) -> BrowserContext:
    context = await browser.new_context(
        viewport=viewport, locale="en-US", is_mobile=viewport is PHONE_VIEWPORT
    )
    context.set_default_timeout(10_000)
    return context


@pytest.fixture
async def contexts(
    browser: Browser, viewport: ViewportSize
) -> AsyncIterator[tuple[BrowserContext, BrowserContext]]:
    """Two browsers: the merchant's, and another that gets a copy of its cookies."""
    first, second = await _context(browser, viewport), await _context(browser, viewport)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def test_a_copied_cookie_opens_nothing_after_sign_out(
    contexts: tuple[BrowserContext, BrowserContext], live_server: LiveServer
) -> None:
    server = live_server
    tenant = server.tenant
    intent = await paid_intent(
        server.treasury, tenant.company_id, tenant.account_id, reference="kept-cookie"
    )
    merchant, thief = contexts
    page = await merchant.new_page()
    await sign_in(page, server)
    await thief.add_cookies(await merchant.cookies())
    copy = await thief.new_page()
    payment = server.url(f"/dashboard/payments/{intent.id}")
    await copy.goto(payment)
    await expect(copy.get_by_role("button", name=re.compile(r"^Capture"))).to_be_visible()

    await page.get_by_role("button", name="Sign out").click()
    await expect(page).to_have_url(LOGIN)
    # The copy still holds the cookie, and the server no longer knows its session: the capture
    # form it had open (its CSRF token included) posts to the sign-in page, and nothing moves.
    assert await thief.cookies()
    await copy.get_by_role("button", name=re.compile(r"^Capture")).click()
    await expect(copy).to_have_url(LOGIN)
    current = await server.treasury.payments.get(tenant.company_id, intent.id)
    assert current.status is IntentStatus.AUTHORIZED
    await copy.goto(payment)
    await expect(copy).to_have_url(LOGIN)


async def test_revoking_the_key_ends_the_browsers_session(
    contexts: tuple[BrowserContext, BrowserContext], live_server: LiveServer
) -> None:
    server = live_server
    page = await contexts[0].new_page()
    await sign_in(page, server)
    await page.goto(server.url("/dashboard/payments"))
    await expect(page.get_by_role("heading", name="Payments")).to_be_visible()
    companies = server.treasury.companies
    (secret,) = [
        key
        for key in await companies.api_keys(server.tenant.company_id)
        if key.kind is KeyKind.SECRET and key.revoked_at is None
    ]
    await companies.revoke_api_key(secret.id)
    await page.goto(server.url("/dashboard/payments"))
    await expect(page).to_have_url(LOGIN)
