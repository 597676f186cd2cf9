"""The browser harness itself works: Chromium reaches the live server, callbacks are recorded,
screenshots are written."""

from __future__ import annotations

import struct

import aiohttp
import pytest
from playwright.async_api import Page

from tests.browser.conftest import CallbackReceiver, LiveServer, Screenshot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


async def test_chromium_loads_the_openapi_document(page: Page, live_server: LiveServer) -> None:
    response = await page.goto(live_server.url("/api/v1/openapi.json"))
    assert response is not None
    assert response.status == 200
    assert '"openapi"' in await response.text()
    assert "openapi" in (await page.text_content("body") or "")


async def test_mobile_page_has_a_phone_viewport(mobile_page: Page) -> None:
    # With is_mobile, a page without a viewport meta tag is laid out 980 px wide, like on a
    # real phone; pages meant for phones declare width=device-width.
    await mobile_page.set_content(
        '<meta name="viewport" content="width=device-width, initial-scale=1"><p>hi</p>'
    )
    width = await mobile_page.evaluate("window.innerWidth")
    touch = await mobile_page.evaluate("navigator.maxTouchPoints > 0")
    assert (width, touch) == (390, True)


async def test_api_helper_authenticates_as_the_tenant(live_server: LiveServer) -> None:
    status, body = await live_server.api("GET", "/api/v1/openapi.json", key=None)
    assert status == 200
    assert body["openapi"].startswith("3.")
    ok_status, _ = await live_server.api("GET", "/api/v1/wallets")
    assert ok_status == 200
    bad_status, _ = await live_server.api("GET", "/api/v1/wallets", key="sk_test_nope")
    assert bad_status == 401


async def test_callback_receiver_records_a_post(callback_receiver: CallbackReceiver) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{callback_receiver.url}/hooks/payments",
            json={"type": "payment.succeeded", "id": 7},
            headers={"X-Signature": "abc"},
        ) as response,
    ):
        assert response.status == 200
    received = await callback_receiver.wait_for(lambda r: r.path == "/hooks/payments")
    assert received.method == "POST"
    assert received.json == {"type": "payment.succeeded", "id": 7}
    assert received.headers["X-Signature"] == "abc"
    assert len(callback_receiver.received) == 1


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


async def test_screenshot_writes_a_full_page_png(page: Page, screenshot: Screenshot) -> None:
    await page.set_content('<body style="margin:0"><div style="height:2000px">tall</div></body>')
    path = await screenshot(page, "tall page")
    assert path.parts[-2:] == ("test_screenshot_writes_a_full_page_png", "tall_page.png")
    assert _png_size(path.read_bytes()) == (1280, 2000)


async def test_screenshot_of_the_live_server_viewport(
    page: Page, live_server: LiveServer, screenshot: Screenshot
) -> None:
    # The OpenAPI JSON is ~8,000 px of text: a full-page shot takes seconds, the viewport not.
    await page.goto(live_server.url("/api/v1/openapi.json"))
    path = await screenshot(page, "openapi", full_page=False)
    assert _png_size(path.read_bytes()) == (1280, 900)


async def test_callback_receiver_wait_for_gives_up(callback_receiver: CallbackReceiver) -> None:
    with pytest.raises(AssertionError, match="no matching callback"):
        await callback_receiver.wait_for(lambda r: True, timeout=0.2)
