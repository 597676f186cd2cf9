"""The hosted pages over HTTP (without a browser; tests/browser drives them in Chromium):
status codes, security headers, CSRF and same-origin checks, post/redirect/get, amounts in the
customer's locale."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from tests.e2e.test_cards_api import CARD, create_pmti
from treasury_aiohttp.hosted.pages import SANDBOX_TEST_CARDS
from treasury_core import Treasury

Client = TestClient[Any, Any]
HTML = {"Accept": "text/html,application/xhtml+xml"}
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


async def create_intent(client: Client, tenant: Tenant, **extra: Any) -> dict[str, Any]:
    body = {
        "account_id": tenant.account_id,
        "billing_amount": 123456,
        "billing_currency": "EUR",
        "payment_type": "Card Payment",
        "merchant_reference": "order-42",
        **extra,
    }
    response = await client.post("/api/v1/payments/intent", json=body, headers=tenant.auth)
    intent: dict[str, Any] = await response.json()
    assert response.status == 200, intent
    return intent


async def page(client: Client, path: str, status: int = 200, **headers: str) -> str:
    response = await client.get(path, headers={**HTML, **headers}, allow_redirects=False)
    text: str = await response.text()
    assert response.status == status, text
    return text


def token_of(html: str) -> str:
    match = CSRF.search(html)
    assert match is not None, html
    return match.group(1)


def form(card: dict[str, Any], token: str | None) -> dict[str, str]:
    fields = {k: str(v) for k, v in card.items()}
    if token is not None:
        fields["csrf_token"] = token
    return fields


async def test_the_payment_page_has_strict_headers_and_a_labelled_form(
    client: Client, tenant: Tenant
) -> None:
    intent = await create_intent(client, tenant)
    response = await client.get(f"/pay/{intent['payment_intent_lookup_id']}", headers=HTML)
    assert response.status == 200
    assert response.content_type == "text/html"
    csp = response.headers["Content-Security-Policy"]
    for directive in (
        "default-src 'none'",
        "style-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'self'",
        "base-uri 'none'",
    ):
        assert directive in csp
    assert "script-src" not in csp  # no script at all (default-src 'none')
    assert response.headers["Referrer-Policy"] == "same-origin"
    assert response.headers["Cache-Control"] == "no-store"
    html = await response.text()
    assert "<script" not in html
    for field in ("cardholder_name", "card_number", "expiry_month", "expiry_year", "cvc"):
        assert f'<label for="{field}">' in html
        assert f'id="{field}" name="{field}"' in html
    assert "€1,234.56" in html
    assert "order-42" in html


async def test_amounts_follow_the_customers_language(client: Client, tenant: Tenant) -> None:
    intent = await create_intent(client, tenant)
    path = f"/pay/{intent['payment_intent_lookup_id']}"
    assert "1.234,56\xa0€" in await page(client, path, **{"Accept-Language": "de-DE,de;q=0.9"})
    assert "1\u202f234,56\xa0€" in await page(client, path, **{"Accept-Language": "fr"})
    yen = await create_intent(client, tenant, billing_currency="JPY", billing_amount=5000)
    assert "￥5,000" in await page(
        client, f"/pay/{yen['payment_intent_lookup_id']}", **{"Accept-Language": "ja-JP"}
    )
    # Nonsense falls back to English.
    assert "€1,234.56" in await page(client, path, **{"Accept-Language": "xx-!!, *;q=abc"})


async def test_paying_through_the_form_redirects_to_the_result(
    client: Client, tenant: Tenant
) -> None:
    intent = await create_intent(client, tenant)
    path = f"/pay/{intent['payment_intent_lookup_id']}"
    token = token_of(await page(client, path))
    response = await client.post(path, data=form(CARD, token), headers=HTML, allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"] == path
    assert "payment is complete" in await page(client, path)
    polled = await client.get(
        "/api/v1/payments/intent",
        params={"payment_intent_lookup_id": intent["payment_intent_lookup_id"]},
        headers=tenant.auth,
    )
    assert (await polled.json())["status"] == "PROCESSED"


async def test_a_declined_card_shows_its_reason_and_stays_payable(
    client: Client, tenant: Tenant
) -> None:
    intent = await create_intent(client, tenant, capture_method="manual")
    path = f"/pay/{intent['payment_intent_lookup_id']}"
    token = token_of(await page(client, path))
    declined = {**CARD, "card_number": "4000000000000002"}
    response = await client.post(path, data=form(declined, token), headers=HTML)
    html = await response.text()
    assert response.status == 402
    assert 'role="alert"' in html
    assert "Your card was declined" in html
    assert "4000000000000002" not in html  # the number is never echoed back
    assert 'value="Ada Lovelace"' in html  # the rest is kept for the next try
    response = await client.post(
        path, data=form(CARD, token_of(html)), headers=HTML, allow_redirects=False
    )
    assert response.status == 303
    assert "payment is authorized" in await page(client, path)


async def test_a_malformed_card_names_the_field(client: Client, tenant: Tenant) -> None:
    intent = await create_intent(client, tenant)
    path = f"/pay/{intent['payment_intent_lookup_id']}"
    token = token_of(await page(client, path))
    response = await client.post(
        path, data=form({**CARD, "expiry_month": "13"}, token), headers=HTML
    )
    html = await response.text()
    assert response.status == 400
    assert 'id="expiry_month" name="expiry_month"' in html
    assert re.search(r'id="expiry_month"[^>]*aria-invalid="true"', html, re.S)


async def test_forms_need_their_csrf_token_and_this_origin(client: Client, tenant: Tenant) -> None:
    intent = await create_intent(client, tenant)
    lookup = intent["payment_intent_lookup_id"]
    path = f"/pay/{lookup}"
    token = token_of(await page(client, path))
    other = token_of(
        await page(
            client, f"/pay/{(await create_intent(client, tenant))['payment_intent_lookup_id']}"
        )
    )
    for fields, headers in (
        (form(CARD, None), HTML),
        (form(CARD, "1.forged"), HTML),
        (form(CARD, other), HTML),  # a token for another page
        (form(CARD, token), {**HTML, "Origin": "https://evil.example"}),
        (form(CARD, token), {**HTML, "Sec-Fetch-Site": "cross-site"}),
    ):
        response = await client.post(path, data=fields, headers=headers, allow_redirects=False)
        assert response.status == 403, await response.text()
    polled = await client.get(
        "/api/v1/payments/intent",
        params={"payment_intent_lookup_id": lookup},
        headers=tenant.auth,
    )
    assert (await polled.json())["status"] == "INITIALIZED"  # nothing was charged


async def test_three_d_secure_goes_through_the_challenge_page(
    client: Client, tenant: Tenant
) -> None:
    intent = await create_intent(client, tenant)
    path = f"/pay/{intent['payment_intent_lookup_id']}"
    card = {**CARD, "card_number": "4000000000003220"}
    response = await client.post(
        path, data=form(card, token_of(await page(client, path))), headers=HTML,
        allow_redirects=False,
    )  # fmt: skip
    assert response.status == 303
    assert response.headers["Location"] == f"{path}/challenge"
    challenge = await page(client, f"{path}/challenge")
    assert "Complete authentication" in challenge
    response = await client.post(
        f"{path}/challenge",
        data={"outcome": "pass", "csrf_token": token_of(challenge)},
        headers=HTML,
        allow_redirects=False,
    )
    assert response.status == 303
    assert "payment is complete" in await page(client, path)
    # Nothing waits any more: the challenge page sends the customer back.
    response = await client.get(f"{path}/challenge", headers=HTML, allow_redirects=False)
    assert response.status == 303


async def test_unknown_links_are_404_pages(client: Client) -> None:
    assert "not valid" in await page(client, "/pay/pil_nope", status=404)
    assert "not valid" in await page(client, "/tokenize/pmti_nope/secret", status=404)


async def test_the_tokenization_form_saves_the_card_once(client: Client, tenant: Tenant) -> None:
    pmti = await create_pmti(client, tenant)
    path = urlsplit(pmti["latest_version"]["provider_tokenization_url"]).path
    html = await page(client, path)
    assert "ada@example.com" in html
    response = await client.post(
        path, data=form(CARD, token_of(html)), headers=HTML, allow_redirects=False
    )
    assert response.status == 303
    assert response.headers["Location"] == path
    result = await page(client, path)
    assert "Visa •••• 4242 is saved" in result
    assert "csrf_token" not in result  # no form any more: one card per PMTI
    read = await (
        await client.get(f"/api/v1/payment_method_token_intent/{pmti['id']}", headers=tenant.auth)
    ).json()
    assert read["status"] == "succeeded"


async def test_the_tokenization_form_may_be_framed_by_configured_origins(
    client: Client, tenant: Tenant
) -> None:
    pmti = await create_pmti(client, tenant)
    path = urlsplit(pmti["latest_version"]["provider_tokenization_url"]).path
    response = await client.get(path, headers=HTML)
    # The default configuration lets only the server's own pages frame it.
    assert "frame-ancestors 'self'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Frame-Options"] == "SAMEORIGIN"


async def test_the_stylesheet_is_served(client: Client) -> None:
    response = await client.get("/hosted/static/hosted.css")
    assert response.status == 200
    assert response.content_type == "text/css"
    assert ".card" in await response.text()


async def test_hostile_form_values_are_400s(client: Client, tenant: Tenant) -> None:
    intent = await create_intent(client, tenant)
    path = f"/pay/{intent['payment_intent_lookup_id']}"
    token = token_of(await page(client, path))
    for change in (
        {"expiry_year": "9" * 5000},
        {"expiry_month": "²"},
        {"expiry_month": "１２"},  # full-width digits
        {"card_number": "4242" * 1000},
    ):
        response = await client.post(path, data=form({**CARD, **change}, token), headers=HTML)
        assert response.status == 400, await response.text()
        # The same fields as a plain form post (no browser) answer JSON errors.
        response = await client.post(path, data=form({**CARD, **change}, None))
        body = await response.json()
        assert response.status == 400, body
        assert body["error"]["type"] == "invalid_request_error"
    for bad_token in ("².x", "9" * 5000 + ".x"):
        response = await client.post(path, data=form(CARD, bad_token), headers=HTML)
        assert response.status == 403


async def test_the_pages_name_the_company_being_paid_escaped(
    client: Client, treasury: Treasury
) -> None:
    created = await treasury.companies.create_company("Ada & <Sons>")
    shop = Tenant(
        created.company.id, created.merchant_account.id, created.secret_key, created.publishable_key
    )
    intent = await create_intent(client, shop)
    html = await page(client, f"/pay/{intent['payment_intent_lookup_id']}")
    assert '<p class="merchant" id="merchant">Ada &amp; &lt;Sons&gt;</p>' in html
    assert "<title>Pay · Ada &amp; &lt;Sons&gt;</title>" in html
    assert "<Sons>" not in html
    pmti = await create_pmti(client, shop)
    html = await page(client, urlsplit(pmti["latest_version"]["provider_tokenization_url"]).path)
    assert 'id="merchant">Ada &amp; &lt;Sons&gt;</p>' in html
    # A page that belongs to no company names none.
    assert 'id="merchant"' not in await page(client, "/pay/pil_nope", status=404)


async def test_sandbox_pages_carry_the_badge_and_the_test_cards(
    client: Client, tenant: Tenant
) -> None:
    intent = await create_intent(client, tenant)
    html = await page(client, f"/pay/{intent['payment_intent_lookup_id']}")
    assert 'id="test-mode"' in html
    for number, outcome in SANDBOX_TEST_CARDS:
        assert f"<code>{number}</code></dt><dd>{outcome}</dd>" in html
    assert "<script" not in html  # still no script under the strict CSP


async def test_each_listed_test_card_does_what_the_page_says(
    client: Client, tenant: Tenant
) -> None:
    """The table on the page is typed out, not read from the provider: check it against the
    sandbox card provider by paying with every card as a customer would."""
    expected = {
        "Approved": (303, "payment is complete"),
        "Asks for 3-D Secure": (303, "Confirm your payment"),
        "Declined": (402, "Your card was declined"),
        "Declined: insufficient funds": (402, "Your card has insufficient funds"),
    }
    assert {outcome for _, outcome in SANDBOX_TEST_CARDS} == set(expected)
    for number, outcome in SANDBOX_TEST_CARDS:
        intent = await create_intent(client, tenant)
        path = f"/pay/{intent['payment_intent_lookup_id']}"
        card = form({**CARD, "card_number": number}, token_of(await page(client, path)))
        response = await client.post(path, data=card, headers=HTML, allow_redirects=False)
        status, shown = expected[outcome]
        assert response.status == status, (number, await response.text())
        if status == 303:
            shown_html = await page(client, response.headers["Location"])
        else:
            shown_html = await response.text()
        assert shown in shown_html, number
