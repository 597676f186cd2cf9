"""The HTTP app mounted as a sub-application under ``/treasury`` of another aiohttp app.

Everything that names a URL must name it under the mount point: the OpenAPI document's server,
the hosted pages' form actions, stylesheet and redirects, the PMTI's two URLs, and list
``Link`` headers. Authentication and error bodies work as at the root, and the parent's own
routes and lifecycle are untouched.
"""

from __future__ import annotations

import re
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from treasury_aiohttp import create_app
from treasury_aiohttp.settings import app_settings
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.testing.fakes.clock import FakeClock

Client = TestClient[Any, Any]
PREFIX = "/treasury"
HTML = {"Accept": "text/html"}
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
CARD = {
    "cardholder_name": "Ada Lovelace",
    "card_number": "4242424242424242",
    "expiry_month": "12",
    "expiry_year": "2030",
    "cvc": "123",
}
THREE_D_SECURE = "4000000000003220"


async def parent_home(request: web.Request) -> web.Response:
    """The parent app's own route."""
    return web.Response(text="parent")


@pytest.fixture
def treasury(tmp_path: Path, clock: FakeClock) -> Treasury:
    return bootstrap(
        TreasuryConfig(database_url=f"sqlite:///{tmp_path / 'mounted.db'}", pool_size=4),
        clock=clock,
        wall_clock=clock,
    )


@pytest.fixture
async def client(treasury: Treasury) -> AsyncIterator[Client]:
    parent = web.Application()
    parent.router.add_get("/", parent_home)
    parent.add_subapp(PREFIX, create_app(treasury, close_treasury=True))
    client = TestClient(TestServer(parent))
    await client.start_server()
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def auth(treasury: Treasury) -> dict[str, str]:
    created = await treasury.companies.create_company("Acme")
    return {"Authorization": f"Bearer {created.secret_key}"}


async def account_id(auth: dict[str, str], treasury: Treasury) -> int:
    principal = await treasury.companies.authenticate(auth["Authorization"].split()[1])
    accounts = await treasury.companies.merchant_accounts(principal.company_id)
    return accounts[0].id


async def json_of(response: Any, status: int) -> Any:
    body = await response.json()
    assert response.status == status, body
    return body


async def test_the_parent_keeps_its_routes_and_the_treasury_is_only_under_the_prefix(
    client: Client, auth: dict[str, str]
) -> None:
    assert await (await client.get("/")).text() == "parent"
    at_root = await client.get("/api/v1/wallets", headers=auth)
    assert at_root.status == 404
    assert at_root.content_type != "application/json"  # the parent's 404, not the treasury's
    await json_of(await client.get(f"{PREFIX}/api/v1/wallets", headers=auth), 200)


async def test_auth_and_error_bodies_under_the_prefix(client: Client, auth: dict[str, str]) -> None:
    missing = await json_of(await client.get(f"{PREFIX}/api/v1/wallets"), 401)
    assert missing["error"]["type"] == "authentication_error"
    wrong = {"Authorization": "Bearer sk_not_a_key"}
    await json_of(await client.get(f"{PREFIX}/api/v1/wallets", headers=wrong), 401)
    not_found = await json_of(
        await client.get(f"{PREFIX}/api/v1/wallet/wal_doesnotexist", headers=auth), 404
    )
    assert not_found["error"]["type"] == "not_found"
    bad = await json_of(
        await client.post(
            f"{PREFIX}/api/v1/wallet", json={"name": "X", "currency_id": "XXX"}, headers=auth
        ),
        400,
    )
    assert bad["error"] == {
        "type": "invalid_request_error",
        "code": "unknown_currency",
        "message": "Unknown currency: XXX",
        "param": "currency_id",
    }


async def test_the_openapi_document_points_at_the_mount_point(
    client: Client, auth: dict[str, str]
) -> None:
    document = await json_of(await client.get(f"{PREFIX}/api/v1/openapi.json"), 200)
    assert document["servers"] == [{"url": PREFIX}]
    # Every parameterless GET the document lists answers at server URL + path.
    checked = 0
    for path, operations in document["paths"].items():
        if "get" in operations and "{" not in path:
            response = await client.get(document["servers"][0]["url"] + path, headers=auth)
            assert response.status not in (404, 405), path
            checked += 1
    assert checked >= 5


async def test_list_links_stay_under_the_prefix(client: Client, auth: dict[str, str]) -> None:
    for name in ("A", "B"):
        body = {"name": name, "currency_id": "USD"}
        await json_of(await client.post(f"{PREFIX}/api/v1/wallet", json=body, headers=auth), 200)
    first = await client.get(f"{PREFIX}/api/v1/wallets?limit=1", headers=auth)
    link = first.headers["Link"]
    match = re.fullmatch(r'<([^>]+)>; rel="next"', link)
    assert match is not None, link
    assert match[1].startswith(f"{PREFIX}/api/v1/wallets?")
    second = await json_of(await client.get(match[1], headers=auth), 200)
    assert len(second) == 1


async def _intent(client: Client, auth: dict[str, str], treasury: Treasury) -> str:
    body = {
        "account_id": await account_id(auth, treasury),
        "billing_amount": 1000,
        "billing_currency": "EUR",
        "payment_type": "Card Payment",
    }
    intent = await json_of(
        await client.post(f"{PREFIX}/api/v1/payments/intent", json=body, headers=auth), 200
    )
    lookup_id: str = intent["payment_intent_lookup_id"]
    return lookup_id


async def _page(client: Client, path: str) -> str:
    response = await client.get(path, headers=HTML, allow_redirects=False)
    html: str = await response.text()
    assert response.status == 200, html
    return html


async def test_the_payment_page_links_and_redirects_under_the_prefix(
    client: Client, auth: dict[str, str], treasury: Treasury
) -> None:
    page = f"{PREFIX}/pay/{await _intent(client, auth, treasury)}"
    html = await _page(client, page)
    assert f'action="{page}"' in html
    stylesheet = re.search(r'<link rel="stylesheet" href="([^"]+)"', html)
    assert stylesheet is not None
    assert stylesheet[1].startswith(f"{PREFIX}/")
    css = await client.get(stylesheet[1])
    assert css.status == 200
    assert css.content_type == "text/css"

    token = CSRF.search(html)
    assert token is not None
    card = {**CARD, "card_number": THREE_D_SECURE, "csrf_token": token[1]}
    paid = await client.post(page, data=card, headers=HTML, allow_redirects=False)
    assert paid.status == 303
    assert paid.headers["Location"] == f"{page}/challenge"
    challenge = await _page(client, f"{page}/challenge")
    assert f'action="{page}/challenge"' in challenge
    token = CSRF.search(challenge)
    assert token is not None
    passed = await client.post(
        f"{page}/challenge",
        data={"outcome": "pass", "csrf_token": token[1]},
        headers=HTML,
        allow_redirects=False,
    )
    assert passed.status == 303
    assert passed.headers["Location"] == page
    assert "payment is complete" in await _page(client, page)


async def test_the_token_intent_urls_name_the_mount_point(
    client: Client, auth: dict[str, str], treasury: Treasury
) -> None:
    body = {
        "account_id": await account_id(auth, treasury),
        "payment_type": "Tokenization",
        "customer_email": "ada@example.com",
        "customer_phone_number": "+447700900123",
    }
    pmti = await json_of(
        await client.post(f"{PREFIX}/api/v1/payment_method_token_intent", json=body, headers=auth),
        200,
    )
    form_url = urlsplit(pmti["latest_version"]["provider_tokenization_url"])
    confirm_url = urlsplit(pmti["latest_version"]["confirm_endpoint_url"])
    assert form_url.path.startswith(f"{PREFIX}/tokenize/")
    assert confirm_url.path.startswith(f"{PREFIX}/api/v1/payment_method_token_intent/")
    assert f'action="{form_url.path}"' in await _page(client, form_url.path)
    card = {**CARD, "expiry_month": 12, "expiry_year": 2030}
    result = await json_of(await client.post(confirm_url.path, json=card), 200)
    assert result["status"] == "succeeded"


async def test_the_parent_runs_the_sub_apps_lifecycle(treasury: Treasury) -> None:
    # The sub-app supplies an HTTP webhook sender for as long as it runs, and closes the
    # treasury with the parent (close_treasury=True): both happen only if the parent drives
    # the sub-app's startup and cleanup.
    parent = web.Application()
    parent.add_subapp(PREFIX, create_app(treasury, close_treasury=True))
    client = TestClient(TestServer(parent))
    assert treasury.notifications.sender is None
    before = set(threading.enumerate())
    await client.start_server()
    try:
        assert treasury.notifications.sender is not None
        await treasury.companies.create_company("Acme")  # a write starts the storage's writer
        started = [t for t in set(threading.enumerate()) - before if t.name.startswith("treasury")]
        assert started
    finally:
        await client.close()
    assert treasury.notifications.sender is None
    assert [t.name for t in started if t.is_alive()] == []  # the storage was closed


async def test_the_body_limit_holds_for_undeclared_bodies_under_the_prefix(
    client: Client, auth: dict[str, str], treasury: Treasury
) -> None:
    # aiohttp reads a sub-app's requests with the parent's client_max_size (1 MiB by default):
    # a chunked body has no Content-Length to refuse up front, so the app checks what it read.
    limit = app_settings(treasury.config).max_body_bytes

    async def chunked() -> AsyncIterator[bytes]:
        yield b'{"name": "' + b"x" * (limit * 2) + b'", "currency_id": "USD"}'

    headers = {**auth, "Content-Type": "application/json"}
    response = await client.post(f"{PREFIX}/api/v1/wallet", data=chunked(), headers=headers)
    body = await json_of(response, 413)
    assert body["error"]["code"] == "request_too_large"
