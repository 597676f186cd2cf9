"""The dashboard in real headless Chromium: sign in, find a payment, capture and refund it, see
a wallet's balance and chart change, redeliver a failed webhook, advance the sandbox clock and
watch a hold expire; then every page at desktop and phone width (no sideways scrolling at
390 px), screenshotted; and the operator's bank reconciliation page with a break row.

With ``TREASURY_TEST_DOC_SCREENSHOTS=1`` the screenshots are also written to
docs/images/dashboard/ (the guide's and the README's pictures): run that on purpose, then
commit the PNGs.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from datetime import date, timedelta
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from tests.bankfiles import Entry
from tests.browser.conftest import (
    DESKTOP_VIEWPORT,
    PHONE_VIEWPORT,
    REPO_ROOT,
    LiveServer,
    Screenshot,
    serve_treasury,
)
from tests.e2e.dashboard_client import paid_intent
from tests.safeguarding import DEBTOR_IBAN, statement
from treasury_core.movements.requests import CreateDepositRequest, CreateVirtualAccountRequest
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest
from treasury_core.notifications.events import EventType
from treasury_core.payments import PaymentIntent
from treasury_core.testing.fakes.clock import FakeClock
from treasury_core.wallets import CreateWalletRequest

DOC_IMAGES = REPO_ROOT / "docs" / "images" / "dashboard"


async def paid(server: LiveServer, reference: str, *, manual: bool = True) -> PaymentIntent:
    tenant = server.tenant
    return await paid_intent(
        server.treasury,
        tenant.company_id,
        tenant.account_id,
        reference=reference,
        amount=2_500,
        manual=manual,
    )


async def sign_in(page: Page, server: LiveServer) -> None:
    await page.goto(server.url("/dashboard"))
    await expect(page).to_have_url(re.compile(r"/dashboard/login$"))
    await page.get_by_label("Secret key").fill(server.tenant.secret_key)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Home")).to_be_visible()


async def failed_once(server: LiveServer, event_id: str) -> None:
    """Wait (10 s at most) until the event's delivery has a failed attempt: this test sends
    due deliveries itself, but the server's worker loop may have claimed this one first."""
    t, company = server.treasury, server.tenant.company_id
    async with asyncio.timeout(10):
        while True:
            await t.notifications.dispatch()
            await t.notifications.deliver_due()
            deliveries = await t.notifications.deliveries_of(company, event_id)
            if deliveries and deliveries[0].attempts:
                return
            await asyncio.sleep(0.05)  # the worker's attempt is in flight: look again


async def test_operate_the_treasury_in_a_browser(page: Page, live_server: LiveServer) -> None:
    server, t = live_server, live_server.treasury
    company = server.tenant.company_id
    intent = await paid(server, "order-1001")
    hold = await paid(server, "order-1002")
    await sign_in(page, server)

    # Find the payment by its reference, capture it, refund part of it.
    await page.get_by_role("link", name="Payments").click()
    await page.get_by_label("Reference").fill("order-1001")
    await page.get_by_role("button", name="Filter").click()
    rows = page.locator("tbody tr")
    await expect(rows).to_have_count(1)
    await rows.get_by_role("link", name=str(intent.id)).click()
    await expect(page.locator("#intent-status")).to_have_text("AUTHORIZED")
    await page.get_by_role("button", name=re.compile(r"^Capture")).click()
    await expect(page.get_by_role("heading", name="Capture $25.00?")).to_be_visible()
    await page.get_by_role("button", name="Capture $25.00").click()
    await expect(page.locator("#intent-status")).to_have_text("PROCESSED")
    await page.get_by_label(re.compile(r"^Amount to refund")).fill("10.00")
    await page.get_by_label("Reason (optional)").fill("one item returned")
    await page.get_by_role("button", name="Refund…").click()
    await page.get_by_role("button", name="Refund $10.00").click()
    await expect(page.locator("#intent-refunded")).to_have_text("$10.00")
    await expect(page.locator(".timeline")).to_contain_text("Refund re_")
    assert (await t.payments.get(company, intent.id)).amount_refunded == 1_000

    # A deposit completed in the sandbox: the wallet's balance and its chart change.
    wallet = await t.wallets.create(company, CreateWalletRequest(name="Ops", currency_id="USD"))
    await t.deposits.create(
        company,
        CreateDepositRequest(wallet_id=wallet.id, from_amount=50_000, from_currency_id="USD"),
    )
    await page.goto(server.url(f"/dashboard/wallets/{wallet.id}"))
    await expect(page.locator("#wallet-balance")).to_have_text("$0.00")
    await expect(page.locator("svg line.line")).to_have_count(1)
    before = await page.locator("svg.chart").inner_html()
    await page.get_by_role("link", name="Sandbox").click()
    await page.get_by_role("button", name=re.compile(r"^Complete dep_")).click()
    await expect(page.get_by_text("None pending.").first).to_be_visible()
    await page.goto(server.url(f"/dashboard/wallets/{wallet.id}"))
    await expect(page.locator("#wallet-balance")).to_have_text("$500.00")
    assert await page.locator("svg.chart").inner_html() != before
    await page.goto(server.url("/dashboard"))
    await expect(page.get_by_role("cell", name="$500.00").first).to_be_visible()

    # A webhook that failed (nothing listens on its port), redelivered from its event page.
    await t.notifications.create_endpoint(
        company,
        CreateWebhookEndpointRequest(
            url="http://127.0.0.1:9/hook", events=[EventType.PAYMENT_INTENT_AUTHORIZED]
        ),
    )
    third = await paid(server, "order-1003")
    [event] = (
        await t.notifications.events(
            company, type_=EventType.PAYMENT_INTENT_AUTHORIZED.value, limit=1
        )
    ).items
    await failed_once(server, event.id)
    await page.goto(server.url("/dashboard/webhooks"))
    await expect(page.get_by_text("failing").first).to_be_visible()
    await page.goto(server.url(f"/dashboard/events/{event.id}"))
    deliveries = page.locator("section.delivery")
    await expect(deliveries).to_have_count(1)
    await page.get_by_role("button", name="Redeliver").click()
    await expect(deliveries).to_have_count(2)
    assert third.id

    # The sandbox clock: advance past the hold's expiry and the hold is released.
    assert hold.authorization_expires_at is not None
    seconds = int((hold.authorization_expires_at - t.clock.now()).total_seconds()) + 60
    await page.get_by_role("link", name="Sandbox").click()
    clock_before = await page.locator("#clock-now").get_attribute("datetime")
    await page.get_by_label("Advance by (seconds)").fill(str(seconds))
    await page.get_by_role("button", name="Advance").click()
    await expect(page.locator("#clock-now")).not_to_have_attribute("datetime", clock_before or "")
    await page.goto(server.url(f"/dashboard/payments/{hold.id}"))
    await expect(page.locator("#intent-status")).to_have_text("CANCELLED")
    await expect(page.locator(".timeline")).to_contain_text("Cancelled")

    # Sign out: the pages ask for the key again.
    await page.get_by_role("button", name="Sign out").click()
    await expect(page).to_have_url(re.compile(r"/dashboard/login$"))
    await page.goto(server.url("/dashboard/payments"))
    await expect(page).to_have_url(re.compile(r"/dashboard/login$"))


_PAGES = ("", "/payments", "/payments/{intent}", "/wallets", "/wallets/{wallet}", "/events",
          "/events/{event}", "/webhooks", "/sandbox")  # fmt: skip


async def test_every_page_at_desktop_and_phone_width(
    browser: Browser, live_server: LiveServer, screenshot: Screenshot
) -> None:
    server, t = live_server, live_server.treasury
    company = server.tenant.company_id
    for n in range(6):
        await paid(server, f"order-{2000 + n}", manual=n % 2 == 0)
        server.clock.advance(timedelta(minutes=50).total_seconds())
    intent = await paid(server, "order-2100")
    wallet = await t.wallets.create(company, CreateWalletRequest(name="Main", currency_id="USD"))
    for amount in (120_000, 45_000, 80_000):
        deposit = await t.deposits.create(
            company,
            CreateDepositRequest(wallet_id=wallet.id, from_amount=amount, from_currency_id="USD"),
        )
        await t.deposits.complete(company, deposit.id)
    account = CreateVirtualAccountRequest(wallet_id=wallet.id, source_currency="USD")
    await t.virtual_accounts.create(company, account)
    pending = CreateDepositRequest(wallet_id=wallet.id, from_amount=9_900, from_currency_id="USD")
    await t.deposits.create(company, pending)
    await t.notifications.create_endpoint(
        company, CreateWebhookEndpointRequest(url="http://127.0.0.1:9/hook", events=None)
    )
    await t.notifications.dispatch()
    await t.notifications.deliver_due()
    event = (await t.notifications.events(company, limit=1)).items[0]
    ids = {"intent": intent.id, "wallet": wallet.id, "event": event.id}
    write_docs = os.environ.get("TREASURY_TEST_DOC_SCREENSHOTS") == "1"
    for width, viewport in (("desktop", DESKTOP_VIEWPORT), ("phone", PHONE_VIEWPORT)):
        context = await browser.new_context(
            viewport=viewport, locale="en-US", is_mobile=width == "phone"
        )
        try:
            page = await context.new_page()
            await sign_in(page, server)
            for path in _PAGES:
                await page.goto(server.url("/dashboard" + path.format(**ids)))
                await expect(page.locator("h1")).to_be_visible()
                # Usable at 390 px: the page never scrolls sideways (wide tables scroll in
                # their own box).
                overflow = await page.evaluate(
                    "document.documentElement.scrollWidth - document.documentElement.clientWidth"
                )
                assert overflow <= 0, (width, path)
                name = path.strip("/").split("/")[0] or "home"
                name += "-detail" if "{" in path else ""
                shot = await screenshot(page, f"{name}-{width}", full_page=False)
                if write_docs:
                    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
                    shutil.copy(shot, DOC_IMAGES / Path(shot).name)
        finally:
            await context.close()


async def test_the_operator_sees_a_break_row_at_both_widths(
    browser: Browser, tmp_path: Path, clock: FakeClock, screenshot: Screenshot
) -> None:
    pytest.importorskip("sepaxml", reason="the bank-files extra is not installed")
    # The files rail with one bank account; March imported without February opens and closes
    # 10.00 above the ledger.
    async with serve_treasury(
        tmp_path, clock, bank_rail="files", bank_debtor_name="Acme Treasury BV",
        bank_debtor_iban=DEBTOR_IBAN,
    ) as server:  # fmt: skip
        t = server.treasury
        _, operator_key = await t.companies.create_operator_key("ops")
        months = (("JAN", 1, "100.00", "10.00", "110.00"), ("MAR", 3, "120.00", "5.00", "125.00"))
        for name, month, opening, amount, closing in months:
            entry = Entry(f"{name}-1", credit=True, amount=amount, booked=date(2026, month, 10))
            await t.bank.import_statement(
                statement(
                    name, [entry], start=date(2026, month, 1), end=date(2026, month, 28),
                    opening=opening, closing=closing,
                )
            )  # fmt: skip
        [opening_break, closing_break] = sorted(
            await t.safeguarding.breaks(), key=lambda b: b.kind.value, reverse=True
        )
        write_docs = os.environ.get("TREASURY_TEST_DOC_SCREENSHOTS") == "1"
        for width, viewport in (("desktop", DESKTOP_VIEWPORT), ("phone", PHONE_VIEWPORT)):
            context = await browser.new_context(
                viewport=viewport, locale="en-US", is_mobile=width == "phone"
            )
            try:
                page = await context.new_page()
                await page.goto(server.url("/dashboard/login"))
                await page.get_by_label("Secret key").fill(operator_key)
                await page.get_by_role("button", name="Sign in").click()
                await expect(
                    page.get_by_role("heading", name="Bank reconciliation")
                ).to_be_visible()
                await expect(page.get_by_role("navigation").get_by_role("link")).to_have_text(
                    ["Bank reconciliation"]
                )
                row = page.get_by_role("table", name="Open breaks").get_by_role(
                    "row", name=re.compile(closing_break.id)
                )
                await expect(row.get_by_role("cell")).to_have_text(
                    [closing_break.id, DEBTOR_IBAN, "EUR", "MAR", "closing", "2026-03-28",
                     "€125.00", "€115.00", "+€10.00"]
                )  # fmt: skip
                await expect(
                    page.get_by_role("table", name="Open breaks").get_by_role(
                        "row", name=re.compile(opening_break.id)
                    )
                ).to_be_visible()
                await expect(
                    page.get_by_role("table", name="Unmatched statement lines").locator("tbody tr")
                ).to_have_count(2)
                overflow = await page.evaluate(
                    "document.documentElement.scrollWidth - document.documentElement.clientWidth"
                )
                assert overflow <= 0, width
                shot = await screenshot(page, f"bank-{width}", full_page=False)
                if write_docs:
                    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
                    shutil.copy(shot, DOC_IMAGES / Path(shot).name)
            finally:
                await context.close()
