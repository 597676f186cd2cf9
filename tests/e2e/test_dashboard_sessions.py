"""Dashboard sessions kept on the server, over a real loopback server: a copy of the cookie
dies with sign-out; rotating or revoking the key ends its sessions; an idle session and one
past its lifetime are over (the wall clock is the test's ``FakeClock``)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from tests.e2e.dashboard_client import paid_intent, post_form, sign_in
from treasury_aiohttp.dashboard.auth import COOKIE, SESSION_CIPHER
from treasury_core import Treasury
from treasury_core.companies import KeyKind
from treasury_core.dashboard_sessions import DashboardSession
from treasury_core.payments import IntentStatus
from treasury_core.services.dashboard_sessions import token_digest
from treasury_core.testing.fakes.clock import FakeClock

Client = TestClient[Any, Any]
MINUTE = 60


def cookie_of(client: Client) -> str:
    """The session cookie the client holds now."""
    return client.session.cookie_jar.filter_cookies(client.make_url("/dashboard"))[COOKIE].value


async def stored_session(client: Client, treasury: Treasury, cookie: str) -> DashboardSession:
    """The server's record of the session ``cookie`` names."""
    token = json.loads(client.server.app[SESSION_CIPHER].decrypt(cookie.encode()))["t"]
    found = await treasury.storage.run(
        lambda uow: uow.dashboard_sessions.by_hash(token_digest(token)), write=False
    )
    assert found is not None
    return found


async def status_of(client: Client, path: str = "/dashboard") -> int:
    return (await client.get(path, allow_redirects=False)).status


async def test_a_copy_of_the_cookie_is_no_session_after_sign_out(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await paid_intent(
        treasury, tenant.company_id, tenant.account_id, reference="kept-cookie"
    )
    token = await sign_in(client, tenant.secret_key)
    saved = cookie_of(client)
    page = f"/dashboard/payments/{intent.id}"
    assert await status_of(client, page) == 200
    signed_out = await post_form(client, "/dashboard/logout", token)
    assert signed_out.status == 303 and signed_out.headers["Location"] == "/dashboard/login"
    assert (await stored_session(client, treasury, saved)).ended_at is not None
    # The copy, put back as someone who kept it would: no page, no action.
    client.session.cookie_jar.update_cookies({COOKIE: saved})
    for path in ("/dashboard", page, "/dashboard/payments"):
        response = await client.get(path, allow_redirects=False)
        assert response.status == 303, path
        assert response.headers["Location"] == "/dashboard/login"
    client.session.cookie_jar.update_cookies({COOKIE: saved})
    capture = await post_form(client, f"{page}/capture", token)
    assert capture.status == 303 and capture.headers["Location"] == "/dashboard/login"
    assert (await treasury.payments.get(tenant.company_id, intent.id)).status is (
        IntentStatus.AUTHORIZED
    )


async def test_rotating_or_revoking_the_key_ends_its_sessions(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    await sign_in(client, tenant.secret_key)
    # A rotation that keeps the old key live keeps its sessions.
    kept = await treasury.companies.rotate_api_key(
        tenant.company_id, KeyKind.SECRET, revoke_old=False
    )
    assert await status_of(client) == 200
    rotated = await treasury.companies.rotate_api_key(tenant.company_id, KeyKind.SECRET)
    assert set(rotated.revoked_key_ids) >= {kept.key.id}
    assert await status_of(client) == 303
    await sign_in(client, rotated.raw_key)
    cookie = cookie_of(client)
    await treasury.companies.revoke_api_key(rotated.key.id)
    assert (await stored_session(client, treasury, cookie)).ended_at is not None
    assert await status_of(client) == 303


async def test_revoking_the_operator_key_ends_the_operators_session(
    client: Client, treasury: Treasury
) -> None:
    stored, operator_key = await treasury.companies.create_operator_key("ops")
    await sign_in(client, operator_key, home="/dashboard/bank")
    await treasury.companies.revoke_operator_key(stored.id)
    assert await status_of(client, "/dashboard/bank") == 303


async def test_an_idle_session_ends_and_a_busy_one_ends_with_its_lifetime(
    client: Client, tenant: Tenant, treasury: Treasury, clock: FakeClock
) -> None:
    await sign_in(client, tenant.secret_key)
    cookie = cookie_of(client)
    # Used every 29 minutes, it lasts; the default idle timeout is 30 minutes.
    for _ in range(3):
        clock.advance(29 * MINUTE)
        assert await status_of(client) == 200
    clock.advance(30 * MINUTE)
    assert await status_of(client) == 303
    assert (await stored_session(client, treasury, cookie)).ended_at is None  # over, not ended

    await sign_in(client, tenant.secret_key)
    cookie = cookie_of(client)
    started = (await stored_session(client, treasury, cookie)).created_at
    # last_seen_at is written at most once a minute, not on every page.
    clock.advance(30)
    assert await status_of(client) == 200
    assert (await stored_session(client, treasury, cookie)).last_seen_at == started
    clock.advance(31)
    assert await status_of(client) == 200
    assert (await stored_session(client, treasury, cookie)).last_seen_at == clock.now()
    # Busy all along, it still ends 8 hours after sign-in: 23 more pages 20 minutes apart take
    # it to 7 h 41 min, the next to past 8 h.
    for _ in range(23):
        clock.advance(20 * MINUTE)
        assert await status_of(client) == 200
    clock.advance(20 * MINUTE)
    assert clock.now() - started > timedelta(hours=8)
    assert await status_of(client) == 303
