"""What the hosted pages tell the customer besides the form, in real Chromium: the merchant
being paid, the test-mode badge with the sandbox's test cards (sandbox mode only), and the card
fields' labels and inputs lined up at phone width.

The shots ``pay-desktop`` and ``pay-phone`` (build/screenshots/) are the ones copied into
docs/images/hosted/ for docs/cards.md.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from playwright.async_api import Page, expect

from tests.browser.conftest import LiveServer, Screenshot, serve_treasury
from tests.browser.test_hosted_pages import VISA, create_intent, fill_card, status_of
from treasury_core.testing.fakes.clock import FakeClock
from treasury_vault.aesgcm import generate_key

CARD_ROW = ("expiry_month", "expiry_year", "cvc")


async def test_the_pay_page_names_the_merchant_and_lists_the_test_cards(
    live_server: LiveServer, page: Page, screenshot: Screenshot
) -> None:
    intent = await create_intent(live_server)
    await page.goto(live_server.url(f"/pay/{intent['payment_intent_lookup_id']}"))
    await expect(page.locator("#merchant")).to_have_text("Acme")
    await expect(page).to_have_title("Pay · Acme")
    await expect(page.locator("#test-mode")).to_be_visible()
    await expect(page.locator("#test-mode")).to_contain_text("Test mode")
    cards = page.locator("#test-cards")
    await expect(cards).to_be_visible()
    await expect(cards.locator("dt")).to_contain_text(
        ["4242 4242 4242 4242", "4000 0000 0000 3220", "4000 0000 0000 0002"]
    )
    await fill_card(page, VISA)
    await screenshot(page, "pay-desktop")
    # A listed card is usable as shown, spaces and all.
    await page.get_by_label("Card number").fill("4242 4242 4242 4242")
    await page.get_by_role("button", name="Pay €49.99").click()
    await expect(page.get_by_role("heading")).to_have_text("Payment complete")
    await expect(page.locator("#merchant")).to_have_text("Acme")
    assert await status_of(live_server, intent) == "PROCESSED"


async def test_the_challenge_and_card_form_name_the_merchant(
    live_server: LiveServer, page: Page
) -> None:
    intent = await create_intent(live_server)
    await page.goto(live_server.url(f"/pay/{intent['payment_intent_lookup_id']}"))
    await fill_card(page, "4000000000003220")
    await page.get_by_role("button", name="Pay €49.99").click()
    await expect(page.get_by_role("heading")).to_have_text("Confirm your payment")
    await expect(page.locator("#merchant")).to_have_text("Acme")
    await expect(page.locator("#test-mode")).to_be_visible()

    status, pmti = await live_server.api(
        "POST",
        "/api/v1/payment_method_token_intent",
        {
            "account_id": live_server.tenant.account_id,
            "payment_type": "Tokenization",
            "customer_email": "ada@example.com",
            "customer_phone_number": "+447700900123",
        },
    )
    assert status == 200, pmti
    await page.goto(pmti["latest_version"]["provider_tokenization_url"])
    await expect(page.get_by_role("heading")).to_have_text("Save your card")
    await expect(page.locator("#merchant")).to_have_text("Acme")
    await expect(page.locator("main")).to_contain_text("Acme saves your card for ada@example.com")
    await expect(page.locator("#test-cards")).to_be_visible()


async def test_outside_sandbox_mode_there_is_no_badge_and_no_test_card(
    tmp_path: Path, clock: FakeClock, page: Page
) -> None:
    async with serve_treasury(
        tmp_path,
        clock,
        sandbox=False,
        vault_key=generate_key(),
        form_key="a form key of at least sixteen characters",
    ) as server:
        intent = await create_intent(server)
        await page.goto(server.url(f"/pay/{intent['payment_intent_lookup_id']}"))
        await expect(page.locator("#merchant")).to_have_text("Acme")
        await expect(page.get_by_label("Card number")).to_be_visible()
        await expect(page.locator("#test-mode")).to_have_count(0)
        await expect(page.locator("#test-cards")).to_have_count(0)
        await expect(page.locator("main")).not_to_contain_text("4242")


async def test_at_phone_width_the_expiry_and_security_code_line_up(
    live_server: LiveServer, mobile_page: Page, screenshot: Screenshot
) -> None:
    intent = await create_intent(live_server)
    await mobile_page.goto(live_server.url(f"/pay/{intent['payment_intent_lookup_id']}"))
    assert await mobile_page.evaluate("window.innerWidth") == 390
    labels, inputs = [], []
    for field in CARD_ROW:
        label = await mobile_page.locator(f"label[for={field}]").bounding_box()
        box = await mobile_page.locator(f"#{field}").bounding_box()
        assert label is not None and box is not None
        labels.append(label)
        inputs.append(box)
    # The label boxes start at one height, and so do the inputs, which are of one height too.
    assert len({round(b["y"]) for b in labels}) == 1, labels
    assert len({round(b["y"]) for b in inputs}) == 1, inputs
    assert len({round(b["height"]) for b in inputs}) == 1, inputs
    # Side by side, left to right, none overlapping, each label over its own input.
    for left, right in itertools.pairwise(inputs):
        assert left["x"] + left["width"] <= right["x"], inputs
    for label, box in zip(labels, inputs, strict=True):
        assert label["y"] + label["height"] <= box["y"] + 0.5
        assert box["x"] - 0.5 <= label["x"] < box["x"] + box["width"]
    overflow = await mobile_page.evaluate("document.documentElement.scrollWidth - innerWidth")
    assert overflow <= 0
    await fill_card(mobile_page, VISA)
    await screenshot(mobile_page, "pay-phone")
