"""A browser-like client of the dashboard over a real loopback server: it keeps the session
cookie, reads each form's CSRF token from the page it came from, and posts same-origin."""

from __future__ import annotations

import html
import re
from typing import Any

from aiohttp.test_utils import TestClient

Client = TestClient[Any, Any]

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}


def csrf_of(page: str) -> str:
    """The CSRF token of the first form on ``page``."""
    found = _CSRF.search(page)
    assert found is not None, "the page has no form with a CSRF token"
    return html.unescape(found.group(1))


async def sign_in(client: Client, secret_key: str) -> str:
    """Sign ``client`` in with ``secret_key``; the home page's CSRF token."""
    login = await client.get("/dashboard/login")
    assert login.status == 200
    response = await client.post(
        "/dashboard/login",
        data={"secret_key": secret_key, "csrf_token": csrf_of(await login.text())},
        headers=SAME_ORIGIN,
        allow_redirects=False,
    )
    assert response.status == 303, await response.text()
    assert response.headers["Location"] == "/dashboard"
    home = await client.get("/dashboard")
    assert home.status == 200
    return csrf_of(await home.text())


async def post_form(
    client: Client, path: str, token: str, fields: dict[str, str] | None = None
) -> Any:
    """Post a dashboard form (same-origin, with ``token``); the response, not followed."""
    return await client.post(
        path,
        data={"csrf_token": token, **(fields or {})},
        headers=SAME_ORIGIN,
        allow_redirects=False,
    )
