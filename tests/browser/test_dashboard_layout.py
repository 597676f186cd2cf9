"""What a merchant reads on the dashboard, measured in Chromium at desktop and phone width:
wallets by name with their ids on one line, charts with labelled axes, counts with the right
plural, and tables wider than a phone that scroll in their box rather than being squeezed."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import Browser, Locator, Page, expect

from tests.browser.conftest import DESKTOP_VIEWPORT, PHONE_VIEWPORT, LiveServer, Screenshot
from tests.browser.test_dashboard import failed_once, paid, sign_in
from treasury_core.movements.requests import CreateDepositRequest
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest
from treasury_core.notifications.events import EventType
from treasury_core.wallets import CreateWalletRequest

# One line of text: the element's text makes one line box (a text broken over lines has a box
# per line), whatever the height of the row it sits in.
_ONE_LINE = """el => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return range.getClientRects().length === 1;
}"""
_NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"


async def _inside(inner: Locator, outer: Locator) -> None:
    """Each of ``inner``'s boxes lies inside ``outer``'s and is tall enough to read (no label
    clipped at the chart's edge or squashed by scaling)."""
    frame = await outer.bounding_box()
    assert frame is not None
    for box in [await inner.nth(i).bounding_box() for i in range(await inner.count())]:
        assert box is not None
        assert box["height"] >= 10, box
        assert (
            frame["x"] - 1 <= box["x"]
            and box["x"] + box["width"] <= frame["x"] + frame["width"] + 1
        )
        assert (
            frame["y"] - 1 <= box["y"]
            and box["y"] + box["height"] <= frame["y"] + frame["height"] + 1
        )


async def _texts(locator: Locator) -> list[str]:
    return [text.strip() for text in await locator.all_text_contents()]


async def _tables_scroll_in_their_box(page: Page) -> None:
    """Every table's box scrolls sideways, and its last column can be scrolled into view in
    full (nothing cut off for good)."""
    wraps = page.locator(".table-wrap")
    for i in range(await wraps.count()):
        wrap = wraps.nth(i)
        assert await wrap.evaluate("el => getComputedStyle(el).overflowX") == "auto"
        await wrap.evaluate("el => { el.scrollLeft = el.scrollWidth; }")
        last = wrap.locator("thead th").last
        box, frame = await last.bounding_box(), await wrap.bounding_box()
        assert box is not None and frame is not None
        assert box["x"] + box["width"] <= frame["x"] + frame["width"] + 1


@pytest.mark.parametrize("width", ["desktop", "phone"])
async def test_names_axes_plurals_and_tables(
    browser: Browser, live_server: LiveServer, screenshot: Screenshot, width: str
) -> None:
    server, t = live_server, live_server.treasury
    company = server.tenant.company_id
    await t.notifications.create_endpoint(
        company,
        CreateWebhookEndpointRequest(
            url="http://127.0.0.1:9/hook", events=[EventType.PAYMENT_INTENT_AUTHORIZED]
        ),
    )
    await paid(server, "order-1")  # one payment of $25.00 in the last 24 hours
    [event] = (await t.notifications.events(company, limit=1)).items
    await failed_once(server, event.id)
    wallet = await t.wallets.create(
        company, CreateWalletRequest(name="Operating account", currency_id="USD")
    )
    for amount in (120_000, 45_000):
        deposit = await t.deposits.create(
            company,
            CreateDepositRequest(wallet_id=wallet.id, from_amount=amount, from_currency_id="USD"),
        )
        await t.deposits.complete(company, deposit.id)
    phone = width == "phone"
    options: dict[str, Any] = {"viewport": PHONE_VIEWPORT if phone else DESKTOP_VIEWPORT}
    context = await browser.new_context(locale="en-US", is_mobile=phone, **options)
    context.set_default_timeout(10_000)
    try:
        page = await context.new_page()
        await sign_in(page, server)

        # Home: "1 payment", "1 delivery, 1 failure"; the wallet by name, its id on one line.
        await expect(page.locator("#payments-24h")).to_have_text("1 payment created.")
        await expect(page.locator(".failing")).to_contain_text("1 delivery, 1 failure in a row")
        balances = page.get_by_role("table").first
        await expect(balances.get_by_role("link", name="Operating account")).to_be_visible()
        wallet_id = balances.locator("code.id", has_text=wallet.id)
        assert await wallet_id.evaluate(_ONE_LINE)
        await expect(wallet_id).to_have_text(wallet.id)
        # The charts: values on the value axis, hours on the time axis, all legible.
        count_chart, volume_chart = (
            page.locator("svg.chart").nth(0),
            page.locator("svg.chart").nth(1),
        )
        assert await _texts(count_chart.locator("text.tick")) == ["0", "1"]
        marks = await _texts(count_chart.locator("text.mark"))
        assert len(marks) == 5 and all(m.endswith(":00") for m in marks), marks
        assert await _texts(volume_chart.locator("text.tick")) == [
            "$0.00", "$10.00", "$20.00", "$30.00"
        ]  # fmt: skip
        for chart in (count_chart, volume_chart):
            await _inside(chart.locator("text"), chart)
        await _tables_scroll_in_their_box(page)
        assert await page.evaluate(_NO_SIDEWAYS_SCROLL)
        await screenshot(page, f"home-{width}")

        await page.goto(server.url("/dashboard/wallets"))
        await expect(page.get_by_role("link", name="Operating account")).to_be_visible()
        assert await page.locator("td code.id", has_text=wallet.id).evaluate(_ONE_LINE)
        await _tables_scroll_in_their_box(page)
        if phone:
            # Seven columns do not fit 390 px: the table scrolls in its box.
            wrap = page.locator(".table-wrap").first
            assert await wrap.evaluate("el => el.scrollWidth > el.clientWidth")
        assert await page.evaluate(_NO_SIDEWAYS_SCROLL)

        await page.get_by_role("link", name="Operating account").click()
        await expect(page.get_by_role("heading", name="Wallet Operating account")).to_be_visible()
        assert await page.locator("#wallet-id").evaluate(_ONE_LINE)
        chart = page.locator("svg.chart")
        ticks = await _texts(chart.locator("text.tick"))
        assert ticks[0] == "$0.00" and ticks[-1] == "$2,000.00", ticks
        assert len(await _texts(chart.locator("text.mark"))) == 2
        await _inside(chart.locator("text"), chart)
        for cell in await page.locator("td.id").all():
            assert await cell.evaluate(_ONE_LINE)
        await _tables_scroll_in_their_box(page)
        assert await page.evaluate(_NO_SIDEWAYS_SCROLL)
        await screenshot(page, f"wallet-{width}")

        await page.goto(server.url("/dashboard/webhooks"))
        await expect(page.get_by_role("table")).to_contain_text("1 pending delivery failed")
        await _tables_scroll_in_their_box(page)
    finally:
        await context.close()
