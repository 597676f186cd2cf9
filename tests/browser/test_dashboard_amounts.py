"""Refund, capture and void in Chromium, in the browser's locale (Playwright's ``locale=`` sets
``Accept-Language``), at desktop and phone width: a typed amount is read as that locale writes
it, a malformed or ambiguous one is refused with the reason and changes nothing, and nothing
is done before the merchant has seen the exact amount and currency and confirmed it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, Page, ViewportSize, expect

from tests.browser.conftest import DESKTOP_VIEWPORT, PHONE_VIEWPORT, LiveServer
from tests.browser.test_dashboard import sign_in
from tests.e2e.dashboard_client import paid_intent
from treasury_core.payments import IntentStatus, PaymentIntent

WIDTHS = {"desktop": DESKTOP_VIEWPORT, "phone": PHONE_VIEWPORT}


@pytest.fixture(params=["desktop", "phone"])
def viewport(request: pytest.FixtureRequest) -> ViewportSize:
    return WIDTHS[request.param]


async def _page(browser: Browser, locale: str, viewport: ViewportSize) -> AsyncIterator[Page]:
    context = await browser.new_context(
        viewport=viewport, locale=locale, is_mobile=viewport is PHONE_VIEWPORT
    )
    context.set_default_timeout(10_000)
    try:
        yield await context.new_page()
    finally:
        await context.close()


@pytest.fixture
async def german(browser: Browser, viewport: ViewportSize) -> AsyncIterator[Page]:
    async for page in _page(browser, "de-DE", viewport):
        yield page


@pytest.fixture
async def american(browser: Browser, viewport: ViewportSize) -> AsyncIterator[Page]:
    async for page in _page(browser, "en-US", viewport):
        yield page


async def captured_euros(server: LiveServer, reference: str) -> PaymentIntent:
    """A captured payment of 20.00 EUR."""
    tenant = server.tenant
    return await paid_intent(
        server.treasury, tenant.company_id, tenant.account_id,
        reference=reference, amount=2_000, manual=False, currency="EUR",
    )  # fmt: skip


async def refunded(server: LiveServer, intent: PaymentIntent) -> int:
    return (await server.treasury.payments.get(server.tenant.company_id, intent.id)).amount_refunded


async def type_refund(page: Page, amount: str) -> None:
    await page.get_by_label(re.compile(r"^Amount to refund")).fill(amount)
    await page.get_by_role("button", name="Refund…").click()


async def refused(page: Page, server: LiveServer, intent: PaymentIntent, amount: str) -> str:
    """Type ``amount``: the form comes back saying why, keeps it, and nothing is refunded."""
    await type_refund(page, amount)
    alert = page.get_by_role("alert")
    await expect(alert).to_be_visible()
    await expect(page.get_by_label(re.compile(r"^Amount to refund"))).to_have_value(amount)
    await expect(page.get_by_label(re.compile(r"^Amount to refund"))).to_have_attribute(
        "aria-invalid", "true"
    )
    assert await refunded(server, intent) == 0
    return await alert.inner_text()


async def refuses(
    page: Page, server: LiveServer, intent: PaymentIntent, cases: dict[str, str]
) -> None:
    """Each typed amount of ``cases`` is refused with a reason holding its value."""
    for amount, why in cases.items():
        reason = await refused(page, server, intent, amount)
        assert why in reason, reason


async def confirms(page: Page, typed: str, shown: str, exact: str) -> None:
    """Type ``typed``: the confirmation asks about ``shown`` (the page's locale) and states
    ``exact`` (the ISO amount)."""
    await type_refund(page, typed)
    await expect(page.get_by_role("heading", name=f"Refund {shown}?")).to_be_visible()
    await expect(page.locator("#confirm-exact")).to_have_text(exact)


async def test_de_de_reads_12_50_as_twelve_euros_fifty(
    german: Page, live_server: LiveServer
) -> None:
    server = live_server
    intent = await captured_euros(server, "de-1")
    await sign_in(german, server)
    await german.goto(server.url(f"/dashboard/payments/{intent.id}"))
    # The page writes amounts as de-DE does, and says how to type one.
    await expect(german.locator("#intent-refunded")).to_have_text("0,00\u00a0€")
    await expect(german.get_by_label(re.compile(r"^Amount to refund"))).to_have_attribute(
        "placeholder", "20,00"
    )
    written = "as de-DE writes it, such as 1.234,50"
    await refuses(german, server, intent, {
        "1,0,0": written,
        ",,1": written,
        "12.50": "Did you mean 1.250 or 12,5?",
        "12,505": "more decimals than EUR has (2)",
        "20,01": "more than the 20,00\u00a0€ that remains refundable",
    })  # fmt: skip

    await confirms(german, "12,50", "12,50\u00a0€", "12.50 EUR")
    await expect(german.get_by_text("1250 minor units")).to_be_visible()
    assert await refunded(server, intent) == 0  # shown, not done
    await german.get_by_role("button", name="Refund 12,50\u00a0€").click()
    await expect(german.locator("#intent-refunded")).to_have_text("12,50\u00a0€")
    assert await refunded(server, intent) == 1_250


async def test_en_us_refuses_12_50_with_a_comma_and_reads_12_50(
    american: Page, live_server: LiveServer
) -> None:
    server = live_server
    intent = await captured_euros(server, "en-1")
    await sign_in(american, server)
    await american.goto(server.url(f"/dashboard/payments/{intent.id}"))
    await expect(american.locator("#intent-refunded")).to_have_text("€0.00")
    await refuses(american, server, intent, {
        "12,50": "Did you mean 1,250 or 12.5?",
        "1,0,0": "Did you mean 100?",
        ",,1": "Did you mean 1?",
        "1.000": "more decimals than EUR has (2)",
    })  # fmt: skip

    await confirms(american, "12.50", "€12.50", "12.50 EUR")
    # Cancelling the confirmation changes nothing.
    await american.get_by_role("link", name="Cancel: change nothing").click()
    await expect(american.locator("#intent-refunded")).to_have_text("€0.00")
    assert await refunded(server, intent) == 0
    await type_refund(american, "12.50")
    await american.get_by_role("button", name="Refund €12.50").click()
    await expect(american.locator("#intent-refunded")).to_have_text("€12.50")
    assert await refunded(server, intent) == 1_250
    # Empty: all that remains, and the confirmation says how much that is.
    await confirms(american, "", "€7.50", "7.50 EUR")
    await american.get_by_role("button", name="Refund €7.50").click()
    await expect(american.locator("#intent-refunded")).to_have_text("€20.00")
    assert await refunded(server, intent) == 2_000


async def test_capture_and_void_show_the_exact_amount_before_acting(
    german: Page, live_server: LiveServer
) -> None:
    server, company = live_server, live_server.tenant.company_id
    tenant = server.tenant
    held = []
    for n in range(2):
        intent = await paid_intent(
            server.treasury, company, tenant.account_id,
            reference=f"hold-{n}", amount=2_500, currency="EUR",
        )  # fmt: skip
        held.append(intent)
    await sign_in(german, server)

    async def status(intent: PaymentIntent) -> IntentStatus:
        return (await server.treasury.payments.get(company, intent.id)).status

    await german.goto(server.url(f"/dashboard/payments/{held[0].id}"))
    await german.get_by_role("button", name="Capture 25,00\u00a0€").click()
    await expect(german.get_by_role("heading", name="Capture 25,00\u00a0€?")).to_be_visible()
    await expect(german.locator("#confirm-exact")).to_have_text("25.00 EUR")
    assert await status(held[0]) is IntentStatus.AUTHORIZED
    await german.get_by_role("button", name="Capture 25,00\u00a0€").click()
    await expect(german.locator("#intent-status")).to_have_text("PROCESSED")

    await german.goto(server.url(f"/dashboard/payments/{held[1].id}"))
    await german.get_by_role("button", name="Void").click()
    await expect(
        german.get_by_role("heading", name="Void the hold of 25,00\u00a0€?")
    ).to_be_visible()
    await expect(german.locator("#confirm-exact")).to_have_text("25.00 EUR")
    assert await status(held[1]) is IntentStatus.AUTHORIZED
    await german.get_by_role("button", name="Void: release 25,00\u00a0€").click()
    await expect(german.locator("#intent-status")).to_have_text("CANCELLED")
