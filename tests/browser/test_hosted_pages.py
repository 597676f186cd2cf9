"""The hosted pages in real headless Chromium: tokenize a card and see the token reach the
callback, pay intents, see a decline and pay again, pass 3-D Secure, embed the tokenization
form in an iframe, and use the pages on a phone. Screenshots land in build/screenshots/."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from playwright.async_api import Page, expect

from tests.browser.conftest import (
    CallbackReceiver,
    LiveServer,
    Screenshot,
    _start,
    serve_treasury,
)
from treasury_core.testing.fakes.clock import FakeClock

VISA = "4242424242424242"


async def create_intent(server: LiveServer, **extra: Any) -> dict[str, Any]:
    status, body = await server.api(
        "POST",
        "/api/v1/payments/intent",
        {
            "account_id": server.tenant.account_id,
            "billing_amount": 4999,
            "billing_currency": "EUR",
            "payment_type": "Card Payment",
            "merchant_reference": "order-7",
            **extra,
        },
    )
    assert status == 200, body
    intent: dict[str, Any] = body
    return intent


async def status_of(server: LiveServer, intent: dict[str, Any]) -> str:
    lookup = intent["payment_intent_lookup_id"]
    status, body = await server.api(
        "GET", f"/api/v1/payments/intent?payment_intent_lookup_id={lookup}"
    )
    assert status == 200, body
    return str(body["status"])


async def fill_card(page: Page, number: str, cvc: str = "123") -> None:
    await page.get_by_label("Name on card").fill("Ada Lovelace")
    await page.get_by_label("Card number").fill(number)
    await page.get_by_label("Expiry month").fill("12")
    await page.get_by_label("Expiry year").fill("2030")
    await page.get_by_label("Security code").fill(cvc)


async def test_tokenize_and_the_token_reaches_the_callback(
    live_server: LiveServer,
    callback_receiver: CallbackReceiver,
    page: Page,
    screenshot: Screenshot,
) -> None:
    status, pmti = await live_server.api(
        "POST",
        "/api/v1/payment_method_token_intent",
        {
            "account_id": live_server.tenant.account_id,
            "payment_type": "Tokenization",
            "customer_email": "ada@example.com",
            "customer_phone_number": "+447700900123",
            "callback_url": callback_receiver.url + "/cards",
        },
        key="publishable",
    )
    assert status == 200, pmti
    await page.goto(pmti["latest_version"]["provider_tokenization_url"])
    await expect(page.get_by_role("heading")).to_have_text("Save your card")
    await fill_card(page, VISA)
    await screenshot(page, "tokenize-form")
    await page.get_by_role("button", name="Save card").click()
    await expect(page.get_by_role("status")).to_contain_text("Visa •••• 4242 is saved")
    await screenshot(page, "tokenize-result")

    delivered = await callback_receiver.wait_for(lambda r: r.path == "/cards")
    assert delivered.json["status"] == "succeeded"
    token = delivered.json["payment_method_token"]
    assert token.startswith("pmt_")
    assert delivered.json["card"]["last4"] == "4242"

    # The token pays: the saved card is charged without the customer.
    intent = await create_intent(live_server, card_token=token)
    assert intent["status"] == "PROCESSED"


@pytest.mark.parametrize(
    ("capture_method", "expected", "heading"),
    [
        ("automatic", "PROCESSED", "Payment complete"),
        ("manual", "AUTHORIZED", "Payment authorized"),
    ],
)
async def test_pay_an_intent(
    live_server: LiveServer,
    page: Page,
    screenshot: Screenshot,
    capture_method: str,
    expected: str,
    heading: str,
) -> None:
    intent = await create_intent(live_server, capture_method=capture_method)
    await page.goto(live_server.url(f"/pay/{intent['payment_intent_lookup_id']}"))
    await expect(page.locator("#amount")).to_have_text("€49.99")
    await fill_card(page, VISA)
    await screenshot(page, "pay-form")
    await page.get_by_role("button", name="Pay €49.99").click()
    await expect(page.get_by_role("heading")).to_have_text(heading)
    await screenshot(page, "pay-result")
    assert await status_of(live_server, intent) == expected
    # Reloading the result does not pay twice (post/redirect/get).
    await page.reload()
    await expect(page.get_by_role("heading")).to_have_text(heading)


async def test_a_declined_card_shows_its_error_and_the_intent_stays_payable(
    live_server: LiveServer, page: Page, screenshot: Screenshot
) -> None:
    intent = await create_intent(live_server)
    await page.goto(live_server.url(f"/pay/{intent['payment_intent_lookup_id']}"))
    await fill_card(page, "4000000000000002")
    await page.get_by_role("button", name=re.compile("^Pay")).click()
    alert = page.get_by_role("alert")
    await expect(alert).to_have_text("Your card was declined")
    await expect(page.get_by_label("Card number")).to_have_attribute("aria-invalid", "true")
    await expect(page.get_by_label("Card number")).to_have_value("")  # never echoed back
    await expect(page.get_by_label("Name on card")).to_have_value("Ada Lovelace")
    await screenshot(page, "declined")
    assert await status_of(live_server, intent) == "INITIALIZED"

    await fill_card(page, VISA)
    await page.get_by_role("button", name=re.compile("^Pay")).click()
    await expect(page.get_by_role("heading")).to_have_text("Payment complete")
    assert await status_of(live_server, intent) == "PROCESSED"


async def test_an_invalid_card_number_is_explained(
    live_server: LiveServer, page: Page, screenshot: Screenshot
) -> None:
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
    assert status == 200
    await page.goto(pmti["latest_version"]["provider_tokenization_url"])
    await fill_card(page, "4242424242424241")
    await page.get_by_role("button", name="Save card").click()
    await expect(page.get_by_role("alert")).to_have_text("The card number is incorrect")
    await screenshot(page, "invalid-number")
    # The form is still there: a mistyped number does not use up the link.
    await fill_card(page, VISA)
    await page.get_by_role("button", name="Save card").click()
    await expect(page.get_by_role("status")).to_contain_text("is saved")


async def test_three_d_secure_challenge_completes_the_payment(
    live_server: LiveServer, page: Page, screenshot: Screenshot
) -> None:
    intent = await create_intent(live_server, capture_method="manual")
    await page.goto(live_server.url(f"/pay/{intent['payment_intent_lookup_id']}"))
    await fill_card(page, "4000000000003220")
    await page.get_by_role("button", name=re.compile("^Pay")).click()
    await expect(page.get_by_role("heading")).to_have_text("Confirm your payment")
    await screenshot(page, "challenge")
    assert await status_of(live_server, intent) == "INITIALIZED"
    await page.get_by_role("button", name="Complete authentication").click()
    await expect(page.get_by_role("heading")).to_have_text("Payment authorized")
    await screenshot(page, "challenge-passed")
    assert await status_of(live_server, intent) == "AUTHORIZED"


async def test_a_failed_challenge_leaves_the_intent_payable(
    live_server: LiveServer, page: Page
) -> None:
    intent = await create_intent(live_server)
    await page.goto(live_server.url(f"/pay/{intent['payment_intent_lookup_id']}"))
    await fill_card(page, "4000000000003220")
    await page.get_by_role("button", name=re.compile("^Pay")).click()
    await page.get_by_role("button", name="Fail authentication").click()
    await expect(page.get_by_role("alert")).to_have_text("The customer did not pass 3-D Secure")
    assert await status_of(live_server, intent) == "INITIALIZED"


async def test_the_pages_fit_a_phone(
    live_server: LiveServer, mobile_page: Page, screenshot: Screenshot
) -> None:
    intent = await create_intent(live_server)
    await mobile_page.goto(live_server.url(f"/pay/{intent['payment_intent_lookup_id']}"))
    overflow = await mobile_page.evaluate(
        "document.documentElement.scrollWidth - window.innerWidth"
    )
    assert overflow <= 0
    box = await mobile_page.get_by_label("Card number").bounding_box()
    assert box is not None and box["width"] > 250  # a comfortable tap target
    await screenshot(mobile_page, "pay-phone")


@pytest.fixture
async def embedder() -> AsyncIterator[tuple[str, dict[str, str]]]:
    """A merchant's page on another origin that frames whatever URL it is given."""
    pages: dict[str, str] = {}

    async def handle(request: web.Request) -> web.Response:
        return web.Response(text=pages.get(request.path, ""), content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner, base_url = await _start(app)
    try:
        yield base_url, pages
    finally:
        await runner.cleanup()


async def test_the_tokenization_form_works_in_an_allowed_iframe(
    tmp_path: Path,
    clock: FakeClock,
    embedder: tuple[str, dict[str, str]],
    page: Page,
    screenshot: Screenshot,
) -> None:
    origin, pages = embedder
    async with serve_treasury(tmp_path, clock, frame_ancestors=(origin,)) as server:
        status, pmti = await server.api(
            "POST",
            "/api/v1/payment_method_token_intent",
            {
                "account_id": server.tenant.account_id,
                "payment_type": "Tokenization",
                "customer_email": "ada@example.com",
                "customer_phone_number": "+447700900123",
            },
        )
        assert status == 200
        url = pmti["latest_version"]["provider_tokenization_url"]
        pages["/checkout"] = (
            f'<h1>Merchant checkout</h1><iframe src="{url}" title="Card form" '
            'width="480" height="640"></iframe>'
        )
        await page.goto(origin + "/checkout")
        frame = page.frame_locator("iframe")
        await fill_card_in(frame)
        await frame.get_by_role("button", name="Save card").click()
        await expect(frame.get_by_role("status")).to_contain_text("Visa •••• 4242 is saved")
        await screenshot(page, "iframe")
        status, read = await server.api("GET", f"/api/v1/payment_method_token_intent/{pmti['id']}")
        assert read["status"] == "succeeded"


async def test_other_origins_cannot_frame_the_form(
    live_server: LiveServer, embedder: tuple[str, dict[str, str]], page: Page
) -> None:
    origin, pages = embedder
    intent = await create_intent(live_server)
    url = live_server.url(f"/pay/{intent['payment_intent_lookup_id']}")
    pages["/evil"] = f'<iframe src="{url}" title="framed"></iframe>'
    await page.goto(origin + "/evil")
    frame = page.frames[-1]
    assert frame != page.main_frame
    # The browser refused to render it (CSP frame-ancestors): no card field inside.
    assert await frame.locator("#card_number").count() == 0


async def fill_card_in(frame: Any) -> None:
    await frame.get_by_label("Card number").fill(VISA)
    await frame.get_by_label("Expiry month").fill("12")
    await frame.get_by_label("Expiry year").fill("2030")
    await frame.get_by_label("Security code").fill("123")
