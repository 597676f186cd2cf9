"""A browser-like client of the dashboard over a real loopback server: it keeps the session
cookie, reads each form's CSRF token from the page it came from, and posts same-origin."""

from __future__ import annotations

import html
import re
from typing import Any

from aiohttp.test_utils import TestClient

from treasury_core import Treasury
from treasury_core.payments import PaymentIntent
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports.card_provider import CardData

Client = TestClient[Any, Any]
#: An approved sandbox card.
CARD = CardData("4242424242424242", 12, 2045, "123")

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}


def csrf_of(page: str) -> str:
    """The CSRF token of the first form on ``page``."""
    found = _CSRF.search(page)
    assert found is not None, "the page has no form with a CSRF token"
    return html.unescape(found.group(1))


async def sign_in(client: Client, secret_key: str, home: str = "/dashboard") -> str:
    """Sign ``client`` in with ``secret_key`` (a company's, or an operator key whose ``home``
    is ``/dashboard/bank``); the CSRF token of the page it lands on."""
    login = await client.get("/dashboard/login")
    assert login.status == 200
    response = await client.post(
        "/dashboard/login",
        data={"secret_key": secret_key, "csrf_token": csrf_of(await login.text())},
        headers=SAME_ORIGIN,
        allow_redirects=False,
    )
    assert response.status == 303, await response.text()
    assert response.headers["Location"] == home
    landing = await client.get(home)
    assert landing.status == 200
    return csrf_of(await landing.text())


async def post_form(
    client: Client,
    path: str,
    token: str,
    fields: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Any:
    """Post a dashboard form (same-origin, with ``token``); the response, not followed."""
    return await client.post(
        path,
        data={"csrf_token": token, **(fields or {})},
        headers={**SAME_ORIGIN, **(headers or {})},
        allow_redirects=False,
    )


async def paid_intent(
    treasury: Treasury,
    company_id: int,
    account_id: int,
    *,
    reference: str,
    amount: int = 1_000,
    manual: bool = True,
    currency: str = "USD",
) -> PaymentIntent:
    """An intent of the company paid with :data:`CARD` (authorized when ``manual``)."""
    intent = await treasury.payments.create(
        company_id,
        CreateIntentRequest(
            account_id=account_id,
            billing_amount=amount,
            billing_currency=currency,
            payment_type="Card Payment",
            capture_method="manual" if manual else "automatic",
            merchant_reference=reference,
            customer_email="ada@example.com",
        ),
    )
    return (await treasury.payments.pay(intent.payment_intent_lookup_id, CARD)).intent


_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


def confirmation_fields(page: str) -> dict[str, str]:
    """The hidden fields of the confirmation page's form (the CSRF token among them)."""
    form = page[page.index('<form method="post" action="', page.index('id="confirm-what"')) :]
    return {name: html.unescape(value) for name, value in _HIDDEN.findall(form.split("</form>")[0])}


async def post_confirmed(
    client: Client,
    path: str,
    token: str,
    fields: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Any:
    """Post an action's form, check that it answers the confirmation page and did nothing yet
    (the caller checks the state), then post the confirmation; that response, not followed."""
    review = await post_form(client, path, token, fields, headers)
    page = await review.text()
    assert review.status == 200, page
    return await client.post(
        path,
        data=confirmation_fields(page),
        headers={**SAME_ORIGIN, **(headers or {})},
        allow_redirects=False,
    )
