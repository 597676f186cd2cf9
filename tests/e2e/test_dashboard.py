"""The dashboard (issue 27) over a real loopback server: sign-in and its cookie, CSRF, every
page and action scoped to the signed-in company, bad input answered with a page and nothing
changed, and ``TREASURY_DASHBOARD=0``."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import timedelta
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.conftest import sandbox_bank_account
from tests.e2e.conftest import Tenant
from tests.e2e.dashboard_client import (
    SAME_ORIGIN,
    confirmation_fields,
    csrf_of,
    post_confirmed,
    post_form,
    sign_in,
)
from tests.e2e.dashboard_client import paid_intent as client_paid_intent
from treasury_aiohttp import create_app
from treasury_aiohttp.dashboard import ops as dashboard_ops
from treasury_aiohttp.dashboard.auth import SESSION_CIPHER, SESSION_SECONDS
from treasury_core import Treasury, bootstrap, config_from_env
from treasury_core.movements.requests import (
    CreateDepositRequest,
    CreateTransferRequest,
    CreateVirtualAccountRequest,
    CreateWithdrawalRequest,
)
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest
from treasury_core.notifications.events import EventType
from treasury_core.payments import IntentStatus, PaymentIntent
from treasury_core.testing.fakes.clock import FakeClock
from treasury_core.wallets import CreateWalletRequest

Client = TestClient[Any, Any]


async def paid_intent(
    treasury: Treasury, tenant: Tenant, *, reference: str, manual: bool = True
) -> PaymentIntent:
    """An intent of ``tenant`` paid with an approved card (authorized when ``manual``)."""
    return await client_paid_intent(
        treasury, tenant.company_id, tenant.account_id, reference=reference, manual=manual
    )


def second_client(client: Client) -> Any:
    """Another browser (its own cookie jar) on the same server."""
    return aiohttp.ClientSession(
        base_url=str(client.make_url("")), cookie_jar=aiohttp.CookieJar(unsafe=True)
    )


async def test_sign_in_sets_a_strict_cookie_without_the_key(client: Client, tenant: Tenant) -> None:
    login = await client.get("/dashboard/login")
    assert login.status == 200
    assert "default-src 'none'" in login.headers["Content-Security-Policy"]
    assert "'unsafe-inline'" not in login.headers["Content-Security-Policy"]
    page = await login.text()
    assert '<label for="secret_key">' in page
    response = await client.post(
        "/dashboard/login",
        data={"secret_key": tenant.secret_key, "csrf_token": csrf_of(page)},
        headers=SAME_ORIGIN,
        allow_redirects=False,
    )
    assert response.status == 303
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith("treasury_dashboard=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Secure" not in cookie  # served on 127.0.0.1: a developer's plain HTTP
    assert tenant.secret_key not in cookie
    assert tenant.secret_key[3:12] not in cookie
    home = await client.get("/dashboard")
    assert home.status == 200
    token = csrf_of(await home.text())
    out = await post_form(client, "/dashboard/logout", token)
    assert out.status == 303 and out.headers["Location"] == "/dashboard/login"
    again = await client.get("/dashboard", allow_redirects=False)
    assert again.status == 303 and again.headers["Location"] == "/dashboard/login"


async def test_the_cookie_is_secure_outside_the_local_machine(
    client: Client, tenant: Tenant
) -> None:
    host = {"Host": "treasury.example"}
    login = await client.get("/dashboard/login", headers=host)
    response = await client.post(
        "/dashboard/login",
        data={"secret_key": tenant.secret_key, "csrf_token": csrf_of(await login.text())},
        headers={**SAME_ORIGIN, **host},
        allow_redirects=False,
    )
    assert response.status == 303
    assert "; Secure" in response.headers["Set-Cookie"]


async def test_behind_a_proxy_an_https_public_url_keeps_the_cookie_secure(
    tmp_path: Any, clock: FakeClock
) -> None:
    # A reverse proxy that forwards Host: 127.0.0.1 must not make the cookie plain-HTTP.
    config = config_from_env(
        {
            "TREASURY_DATABASE_URL": f"sqlite:///{tmp_path / 'proxied.db'}",
            "TREASURY_PUBLIC_URL": "https://pay.example",
        }
    )
    treasury = bootstrap(config, clock=clock, wall_clock=clock)
    created = await treasury.companies.create_company("Proxied")
    app = create_app(treasury, close_treasury=True)
    async with TestClient(TestServer(app, host="127.0.0.1")) as proxied:
        login = await proxied.get("/dashboard/login")
        response = await proxied.post(
            "/dashboard/login",
            data={
                "secret_key": created.secret_key,
                "csrf_token": csrf_of(await login.text()),
            },
            headers=SAME_ORIGIN,
            allow_redirects=False,
        )
        assert response.status == 303
        assert "; Secure" in response.headers["Set-Cookie"]


async def test_a_wrong_key_a_publishable_key_or_no_csrf_token_do_not_sign_in(
    client: Client, tenant: Tenant
) -> None:
    token = csrf_of(await (await client.get("/dashboard/login")).text())
    cases = [
        ({"secret_key": "sk_" + "x" * 30, "csrf_token": token}, 401),
        ({"secret_key": "", "csrf_token": token}, 401),
        ({"secret_key": tenant.publishable_key, "csrf_token": token}, 403),
        ({"secret_key": tenant.secret_key, "csrf_token": "1.forged"}, 403),
        ({"secret_key": tenant.secret_key}, 403),
    ]
    for data, status in cases:
        response = await client.post(
            "/dashboard/login", data=data, headers=SAME_ORIGIN, allow_redirects=False
        )
        assert response.status == status, data
        assert "Set-Cookie" not in response.headers
        assert 'role="alert"' in await response.text()
    cross = await client.post(
        "/dashboard/login",
        data={"secret_key": tenant.secret_key, "csrf_token": token},
        headers={"Sec-Fetch-Site": "cross-site"},
        allow_redirects=False,
    )
    assert cross.status == 403 and "Set-Cookie" not in cross.headers


async def test_a_forged_cookie_and_a_revoked_key_end_the_session(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    client.session.cookie_jar.update_cookies({"treasury_dashboard": "gAAAAAforged"})
    response = await client.get("/dashboard", allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/dashboard/login"
    await sign_in(client, tenant.secret_key)
    key_id = (await treasury.companies.authenticate(tenant.secret_key)).key_id
    await treasury.companies.revoke_api_key(key_id)
    response = await client.get("/dashboard", allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/dashboard/login"


async def test_a_session_older_than_its_lifetime_is_over(client: Client, tenant: Tenant) -> None:
    # The cookie's own lifetime: the same session token, sealed long enough ago, is refused
    # before the server looks the session up.
    await sign_in(client, tenant.secret_key)
    cipher = client.server.app[SESSION_CIPHER]
    jar = client.session.cookie_jar.filter_cookies(client.make_url("/dashboard"))
    fields = cipher.decrypt(jar["treasury_dashboard"].value.encode())
    client.session.cookie_jar.clear()  # the jar holds only the cookies set below
    fresh = cipher.encrypt_at_time(fields, int(time.time()) - 60).decode()
    stale = cipher.encrypt_at_time(fields, int(time.time()) - SESSION_SECONDS - 60).decode()
    client.session.cookie_jar.update_cookies({"treasury_dashboard": fresh})
    assert (await client.get("/dashboard", allow_redirects=False)).status == 200
    client.session.cookie_jar.update_cookies({"treasury_dashboard": stale})
    response = await client.get("/dashboard", allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/dashboard/login"


async def test_every_page_needs_a_session_and_an_action_without_one_changes_nothing(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await paid_intent(treasury, tenant, reference="no-session")
    for method, path in sorted(dashboard_ops.PAGES):
        if path.startswith(("/dashboard/login", "/dashboard/static", "/dashboard/logout")):
            continue
        url = path.replace("{action}", "complete" if "sandbox" in path else "capture")
        url = url.replace("{kind}", "deposits").replace("{intent_id}", str(intent.id))
        url = re.sub(r"\{\w+\}", "x_placeholder1", url)
        response = await client.request(
            method, url, data={"seconds": "60"}, headers=SAME_ORIGIN, allow_redirects=False
        )
        assert response.status == 303, (method, url)
        assert response.headers["Location"] == "/dashboard/login"
    unchanged = await treasury.payments.get(tenant.company_id, intent.id)
    assert unchanged.status is IntentStatus.AUTHORIZED


async def test_find_capture_and_refund_a_payment(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await paid_intent(treasury, tenant, reference="order-77")
    await paid_intent(treasury, tenant, reference="order-78")
    token = await sign_in(client, tenant.secret_key)
    found = await (await client.get("/dashboard/payments?merchant_reference=order-77")).text()
    assert f'href="/dashboard/payments/{intent.id}"' in found
    assert "order-78" not in found
    by_status = await (await client.get("/dashboard/payments?status=AUTHORIZED&limit=1")).text()
    assert "Next page" in by_status
    detail = await client.get(f"/dashboard/payments/{intent.id}")
    assert detail.status == 200
    assert "Capture" in await detail.text()
    captured = await post_confirmed(client, f"/dashboard/payments/{intent.id}/capture", token)
    assert captured.status == 303
    assert captured.headers["Location"] == f"/dashboard/payments/{intent.id}"
    assert (await treasury.payments.get(tenant.company_id, intent.id)).status.value == "PROCESSED"
    # Bad amounts: an error page, nothing refunded.
    refund = f"/dashboard/payments/{intent.id}/refund"
    for amount in (
        "abc",
        "-1",
        "0",
        "1.234",
        "NaN",
        "Infinity",
        "20.00",
        "1e999999999",
        "9" * 40,
        "1e-2",
        "\u0661",
        "\uff11",
        "1_0",
        "0x10",
    ):
        response = await post_form(client, refund, token, {"amount": amount})
        assert response.status == 400, amount
        assert 'role="alert"' in await response.text()
    twice = aiohttp.FormData([("csrf_token", token), ("amount", "1.00"), ("amount", "9.00")])
    response = await client.post(refund, data=twice, headers=SAME_ORIGIN, allow_redirects=False)
    assert response.status == 400
    for reason in ("a\x00b", "line\nbreak", "x" * 256):
        response = await post_form(client, refund, token, {"amount": "1.00", "reason": reason})
        assert response.status == 400, reason
        assert 'role="alert"' in await response.text()
    assert (await treasury.payments.get(tenant.company_id, intent.id)).amount_refunded == 0
    part = await post_confirmed(client, refund, token, {"amount": "3.00", "reason": "damaged"})
    assert part.status == 303
    after = await treasury.payments.get(tenant.company_id, intent.id)
    assert after.amount_refunded == 300
    page = await (await client.get(f"/dashboard/payments/{intent.id}")).text()
    assert "Refund re_" in page and "$3.00" in page
    assert "Latest attempt (Visa •••• 4242): completed" in page
    rest = await post_confirmed(client, refund, token, {"amount": ""})
    assert rest.status == 303
    assert (await treasury.payments.get(tenant.company_id, intent.id)).amount_refunded == 1_000


async def test_an_action_acts_only_once_confirmed_with_the_exact_amount(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await paid_intent(treasury, tenant, reference="confirm-me")
    token = await sign_in(client, tenant.secret_key)
    capture = f"/dashboard/payments/{intent.id}/capture"
    review = await post_form(client, capture, token)
    page = await review.text()
    assert review.status == 200
    assert "Capture $10.00?" in page and "10.00 USD" in page and "1000 minor units" in page
    assert (await treasury.payments.get(tenant.company_id, intent.id)).status.value == (
        "AUTHORIZED"
    )
    # The confirmation is for this payment as shown: another amount or currency is refused.
    fields = confirmation_fields(page)
    for changed in ({"confirm_amount": "999"}, {"confirm_currency": "EUR"}):
        response = await post_form(client, capture, token, {**fields, **changed})
        assert response.status == 400, changed
    assert (await treasury.payments.get(tenant.company_id, intent.id)).status.value == (
        "AUTHORIZED"
    )
    assert (await post_form(client, capture, token, fields)).status == 303
    assert (await treasury.payments.get(tenant.company_id, intent.id)).status.value == ("PROCESSED")
    # A refund confirmed once refunds once: the same confirmation posted again is refused.
    refund = f"/dashboard/payments/{intent.id}/refund"
    review = await post_form(client, refund, token, {"amount": "2.50", "reason": "late"})
    page = await review.text()
    assert "Refund $2.50?" in page and "2.50 USD" in page and "250 minor units" in page
    fields = confirmation_fields(page)
    assert (await treasury.payments.get(tenant.company_id, intent.id)).amount_refunded == 0
    assert (await post_form(client, refund, token, fields)).status == 303
    again = await post_form(client, refund, token, fields)
    assert again.status == 400 and "changed after this was shown" in await again.text()
    assert (await treasury.payments.get(tenant.company_id, intent.id)).amount_refunded == 250


async def test_one_confirmation_posted_again_at_once_refunds_once(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await paid_intent(treasury, tenant, reference="double-post", manual=False)
    token = await sign_in(client, tenant.secret_key)
    refund = f"/dashboard/payments/{intent.id}/refund"
    # Each round is a race the unguarded page loses now and then: ten make losing one certain
    # in practice, however the two requests interleave.
    for round_ in range(1, 11):
        review = await post_form(client, refund, token, {"amount": "0.20"})
        fields = confirmation_fields(await review.text())
        answers = await asyncio.gather(
            *(
                client.post(refund, data=fields, headers=SAME_ORIGIN, allow_redirects=False)
                for _ in range(3)
            )
        )
        # One acted; the other was told the payment changed, that the same confirmation is
        # under way (409), or, once it was done, sent to the payment as the first was.
        assert sorted(a.status for a in answers)[0] in (303, 400, 409), answers
        assert 303 in [a.status for a in answers]
        current = await treasury.payments.get(tenant.company_id, intent.id)
        assert current.amount_refunded == 20 * round_


async def test_refund_amounts_are_read_in_the_pages_locale(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await paid_intent(treasury, tenant, reference="locale", manual=False)
    token = await sign_in(client, tenant.secret_key)
    refund = f"/dashboard/payments/{intent.id}/refund"
    german = {"Accept-Language": "de-DE,de;q=0.9"}
    # en-US (no Accept-Language): "12,50" could be 1,250 or 12.50; "1.000" has three decimals.
    for amount, reason in (
        ("1,0,0", "Did you mean 100?"),
        (",,1", "Did you mean 1?"),
        ("1,5", "Did you mean 15 or 1.5?"),
        ("1.000", "more decimals than USD has (2)"),
        ("1.00 $", "such as 1,234.50"),
    ):
        response = await post_form(client, refund, token, {"amount": amount})
        page = await response.text()
        assert response.status == 400, amount
        assert reason in page, (amount, page)
        assert f'value="{amount}"' in page.replace("&#36;", "$")  # the form keeps what was typed
    for amount, reason in (
        ("1,0,0", "as de-DE writes it, such as 1.234,50"),
        (",,1", "as de-DE writes it"),
        ("1.5", "Did you mean 15 or 1,5?"),
        ("1,005", "more decimals than USD has (2)"),
    ):
        response = await post_form(client, refund, token, {"amount": amount}, headers=german)
        assert response.status == 400, amount
        assert reason in await response.text(), amount
    assert (await treasury.payments.get(tenant.company_id, intent.id)).amount_refunded == 0
    done = await post_confirmed(client, refund, token, {"amount": "1,25"}, headers=german)
    assert done.status == 303
    assert (await treasury.payments.get(tenant.company_id, intent.id)).amount_refunded == 125
    done = await post_confirmed(client, refund, token, {"amount": "1.25"})
    assert done.status == 303
    assert (await treasury.payments.get(tenant.company_id, intent.id)).amount_refunded == 250


async def test_an_action_needs_the_sessions_csrf_token_and_the_same_origin(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury
) -> None:
    intent = await paid_intent(treasury, tenant, reference="csrf")
    token = await sign_in(client, tenant.secret_key)
    other = second_client(client)
    try:
        other_token = await sign_in(other, tenant.secret_key)  # same company, other session
    finally:
        await other.close()
    capture = f"/dashboard/payments/{intent.id}/capture"
    for bad in ("", "1.forged", other_token):
        response = await post_form(client, capture, bad)
        assert response.status == 403, bad
    cross = await client.post(
        capture,
        data={"csrf_token": token},
        headers={"Sec-Fetch-Site": "cross-site"},
        allow_redirects=False,
    )
    assert cross.status == 403
    assert (await treasury.payments.get(tenant.company_id, intent.id)).status.value == "AUTHORIZED"


async def test_another_company_sees_and_changes_nothing_of_this_one(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury
) -> None:
    """The dashboard's rows of the isolation matrix: company B, signed in, names company A's
    records by id in every page and action: 404 or a list without them; nothing changes."""
    intent = await paid_intent(treasury, tenant, reference="tenant-a")
    wallet = await treasury.wallets.create(
        tenant.company_id, CreateWalletRequest(name="A", currency_id="USD")
    )
    deposit = await treasury.deposits.create(
        tenant.company_id,
        CreateDepositRequest(wallet_id=wallet.id, from_amount=500, from_currency_id="USD"),
    )
    await treasury.notifications.create_endpoint(
        tenant.company_id,
        CreateWebhookEndpointRequest(url="http://127.0.0.1:9/a-hook", events=None),
    )
    events = await treasury.notifications.events(tenant.company_id, limit=100)
    event_id = events.items[0].id
    own = await sign_in(client, tenant.secret_key)
    for path in (
        f"/dashboard/payments/{intent.id}",
        f"/dashboard/wallets/{wallet.id}",
        f"/dashboard/events/{event_id}",
    ):
        assert (await client.get(path)).status == 200, path  # the control
    other = second_client(client)
    try:
        token = await sign_in(other, other_tenant.secret_key)
        for path in (
            f"/dashboard/payments/{intent.id}",
            f"/dashboard/wallets/{wallet.id}",
            f"/dashboard/events/{event_id}",
        ):
            response = await other.get(path)
            assert response.status == 404, path
            assert "tenant-a" not in await response.text()
        for path in ("/dashboard", "/dashboard/payments", "/dashboard/wallets",
                     "/dashboard/events", "/dashboard/webhooks", "/dashboard/sandbox"):  # fmt: skip
            response = await other.get(path)
            assert response.status == 200, path
            text = await response.text()
            for secret in (wallet.id, deposit.id, event_id, "tenant-a", "a-hook"):
                assert secret not in text, (path, secret)
            assert f'/dashboard/payments/{intent.id}"' not in text
        for path, fields in (
            (f"/dashboard/payments/{intent.id}/capture", {}),
            (f"/dashboard/payments/{intent.id}/void", {}),
            (f"/dashboard/payments/{intent.id}/refund", {"amount": "1.00"}),
            (f"/dashboard/events/{event_id}/redeliver", {}),
            (f"/dashboard/sandbox/deposits/{deposit.id}/complete", {}),
            (f"/dashboard/sandbox/deposits/{deposit.id}/fail", {}),
        ):
            response = await post_form(other, path, token, fields)
            assert response.status == 404, path
    finally:
        await other.close()
    assert (await treasury.payments.get(tenant.company_id, intent.id)).status.value == "AUTHORIZED"
    assert (await treasury.deposits.get(tenant.company_id, deposit.id)).status.value == "pending"
    assert await treasury.notifications.deliveries_of(tenant.company_id, event_id) == []
    assert own


async def test_another_company_cannot_settle_this_ones_withdrawals_or_transfers(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury
) -> None:
    """The sandbox's complete/fail of a withdrawal and of a transfer, each named by company B:
    404, and A's movements stay pending with A's balances as they were."""
    company = tenant.company_id
    usd = await treasury.wallets.create(company, CreateWalletRequest(name="U", currency_id="USD"))
    eur = await treasury.wallets.create(company, CreateWalletRequest(name="E", currency_id="EUR"))
    funded = await treasury.deposits.create(
        company, CreateDepositRequest(wallet_id=usd.id, from_amount=5_000, from_currency_id="USD")
    )
    await treasury.deposits.complete(None, funded.id)
    bank = await treasury.bank_accounts.register(company, sandbox_bank_account("A Inc"))
    withdrawal = await treasury.withdrawals.create(
        company,
        CreateWithdrawalRequest(
            wallet_id=usd.id, from_amount=1_000, from_currency_id="USD", bank_account_id=bank.id
        ),
    )
    # Across currencies: reserved until the conversion settles, so still pending.
    transfer = await treasury.transfers.create(
        company, CreateTransferRequest(from_wallet_id=usd.id, to_wallet_id=eur.id, from_amount=500)
    )
    assert withdrawal.status.value == "pending" and transfer.status.value == "pending"
    before = [await treasury.wallets.balance(company, w.id) for w in (usd, eur)]
    other = second_client(client)
    try:
        token = await sign_in(other, other_tenant.secret_key)
        for kind, record_id in (("withdrawals", withdrawal.id), ("transfers", transfer.id)):
            for action in ("complete", "fail"):
                path = f"/dashboard/sandbox/{kind}/{record_id}/{action}"
                response = await post_form(other, path, token)
                assert response.status == 404, path
                assert 'role="alert"' in await response.text()
    finally:
        await other.close()
    assert (await treasury.withdrawals.get(company, withdrawal.id)).status.value == "pending"
    assert (await treasury.transfers.get(company, transfer.id)).status.value == "pending"
    assert [await treasury.wallets.balance(company, w.id) for w in (usd, eur)] == before


async def test_bad_queries_and_forms_get_an_error_page(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    token = await sign_in(client, tenant.secret_key)
    for path in (
        "/dashboard/payments?status=bogus",
        "/dashboard/payments?color=red",
        "/dashboard/payments?created_gte=2026-13-01",
        "/dashboard/payments?created_lt=yesterday",
        "/dashboard/payments?customer_email=x&customer_email=y",
        "/dashboard/payments?starting_after=abc",
        "/dashboard/payments?starting_after=0",
        "/dashboard/payments?starting_after=99999999999999999999",
        # NUL and control characters: PostgreSQL would refuse them with an error (a 500).
        "/dashboard/payments?merchant_reference=a%00b",
        "/dashboard/payments?customer_email=a%00b@example.com",
        "/dashboard/payments?merchant_reference=%E2%80%AEevil",
        "/dashboard/payments?limit=0",
        "/dashboard/payments?limit=101",
        "/dashboard/events?starting_after=nope",
        "/dashboard/events?type=nope",
        "/dashboard/wallets?limit=x",
        "/dashboard?x=1",
    ):
        response = await client.get(path)
        assert response.status == 400, path
        assert 'role="alert"' in await response.text()
    for path in ("/dashboard/payments/abc", "/dashboard/payments/99999999999999999999",
                 "/dashboard/wallets/wal_nope", "/dashboard/events/evt_nope"):  # fmt: skip
        assert (await client.get(path)).status == 404, path
    for seconds in ("", "abc", "0", "-5", "1.5", "99999999999"):
        advance = {"seconds": seconds}
        response = await post_form(client, "/dashboard/sandbox/advance", token, advance)
        assert response.status == 400, seconds
    before = await treasury.sandbox.now()
    twice = aiohttp.FormData([("csrf_token", token), ("seconds", "60"), ("seconds", "120")])
    response = await client.post(
        "/dashboard/sandbox/advance", data=twice, headers=SAME_ORIGIN, allow_redirects=False
    )
    assert response.status == 400
    assert "duplicate parameter: seconds" in await response.text()
    assert await treasury.sandbox.now() == before


async def test_stored_text_is_escaped_on_every_page_that_shows_it(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    """A merchant reference is the API caller's text: shown as text (Jinja's autoescape, no
    ``|safe``), in the list, the detail and the event payload alike."""
    markup = '<script>alert(1)</script><img src=x onerror="a()">'
    intent = await paid_intent(treasury, tenant, reference=markup)
    events = await treasury.notifications.events(tenant.company_id, limit=1)
    await sign_in(client, tenant.secret_key)
    for path in (
        "/dashboard/payments",
        f"/dashboard/payments/{intent.id}",
        f"/dashboard/events/{events.items[0].id}",
    ):
        page = await (await client.get(path)).text()
        assert "<script>alert" not in page and "<img src=x" not in page, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, path


async def test_home_shows_balances_and_the_day_in_a_chart(
    client: Client, tenant: Tenant, treasury: Treasury, clock: FakeClock
) -> None:
    await paid_intent(treasury, tenant, reference="home-1", manual=False)
    clock.advance(2 * 3600)
    await paid_intent(treasury, tenant, reference="home-2", manual=False)
    await sign_in(client, tenant.secret_key)
    page = await (await client.get("/dashboard")).text()
    assert '<p id="payments-24h">2 payments created.</p>' in page
    assert page.count('<rect class="bar"') == 48  # 24 per chart: payments and volume
    assert "$10.00" in page
    # The axes: the count chart's values (at most 1 an hour) and the volume chart's in dollars.
    ticks = re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', page)
    assert ticks[:3] == ["0", "1", "$0.00"] and "$0.00" in ticks and "$10.00" in ticks
    assert "<title>" in page and "UTC: 1 payment<" in page


async def test_sandbox_advance_expires_a_hold(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    intent = await paid_intent(treasury, tenant, reference="hold")
    assert intent.authorization_expires_at is not None
    token = await sign_in(client, tenant.secret_key)
    before = await treasury.sandbox.now()
    seconds = int((intent.authorization_expires_at - before).total_seconds()) + 60
    advance = {"seconds": str(seconds)}
    response = await post_form(client, "/dashboard/sandbox/advance", token, advance)
    assert response.status == 303
    assert (await treasury.sandbox.now()) - before == timedelta(seconds=seconds)
    expired = await treasury.payments.get(tenant.company_id, intent.id)
    assert expired.status is IntentStatus.CANCELLED


async def test_redeliver_makes_new_deliveries(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    await treasury.notifications.create_endpoint(
        tenant.company_id,
        CreateWebhookEndpointRequest(
            url="http://127.0.0.1:9/hook", events=[EventType.PAYMENT_INTENT_AUTHORIZED]
        ),
    )
    await paid_intent(treasury, tenant, reference="hook")
    await treasury.notifications.dispatch()
    [event] = (
        await treasury.notifications.events(
            tenant.company_id, type_=EventType.PAYMENT_INTENT_AUTHORIZED.value, limit=1
        )
    ).items
    token = await sign_in(client, tenant.secret_key)
    first = len(await treasury.notifications.deliveries_of(tenant.company_id, event.id))
    response = await post_form(client, f"/dashboard/events/{event.id}/redeliver", token)
    assert response.status == 303
    made = await treasury.notifications.deliveries_of(tenant.company_id, event.id)
    assert len(made) == first + 1
    page = await (await client.get(f"/dashboard/events/{event.id}")).text()
    assert page.count("127.0.0.1:9/hook") == len(made)


async def test_treasury_dashboard_0_turns_it_off(tmp_path: Any, clock: FakeClock) -> None:
    config = config_from_env(
        {"TREASURY_DATABASE_URL": f"sqlite:///{tmp_path / 'off.db'}", "TREASURY_DASHBOARD": "0"}
    )
    assert config.dashboard is False
    app = create_app(bootstrap(config, clock=clock, wall_clock=clock), close_treasury=True)
    async with TestClient(TestServer(app)) as off:
        for path in ("/dashboard", "/dashboard/login", "/dashboard/static/dashboard.css"):
            assert (await off.get(path, allow_redirects=False)).status == 404


async def test_static_assets_are_served_from_the_package(client: Client) -> None:
    css = await client.get("/dashboard/static/dashboard.css")
    assert css.status == 200 and css.content_type == "text/css"
    js = await client.get("/dashboard/static/dashboard.js")
    assert js.status == 200 and "addEventListener" in await js.text()


async def test_incoming_funds_to_a_virtual_account_and_settling_a_deposit(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury
) -> None:
    wallet = await treasury.wallets.create(
        tenant.company_id, CreateWalletRequest(name="A", currency_id="USD")
    )
    account = await treasury.virtual_accounts.create(
        tenant.company_id, CreateVirtualAccountRequest(wallet_id=wallet.id, source_currency="USD")
    )
    deposit = await treasury.deposits.create(
        tenant.company_id,
        CreateDepositRequest(wallet_id=wallet.id, from_amount=700, from_currency_id="USD"),
    )
    incoming = f"/dashboard/sandbox/virtual-accounts/{account.id}/incoming"
    other = second_client(client)
    try:
        other_token = await sign_in(other, other_tenant.secret_key)
        refused = await post_form(other, incoming, other_token, {"amount": "5.00"})
        assert refused.status == 404
    finally:
        await other.close()
    token = await sign_in(client, tenant.secret_key)
    sandbox = await (await client.get("/dashboard/sandbox")).text()
    assert account.id in sandbox and deposit.id in sandbox
    for amount in ("", "five", "0.001"):
        response = await post_form(client, incoming, token, {"amount": amount})
        assert response.status == 400, amount
    for reference in ("a\x00b", "\u202eevil"):
        fields = {"amount": "5.00", "reference": reference}
        response = await post_form(client, incoming, token, fields)
        assert response.status == 400, reference
    balance = await treasury.wallets.balance(tenant.company_id, wallet.id)
    assert balance.balance == 0
    received = await post_form(client, incoming, token, {"amount": "5.00", "reference": "INV-1"})
    assert received.status == 303
    done = await post_form(client, f"/dashboard/sandbox/deposits/{deposit.id}/complete", token)
    assert done.status == 303
    balance = await treasury.wallets.balance(tenant.company_id, wallet.id)
    assert balance.balance == 1_200
    wallet_page = await (await client.get(f"/dashboard/wallets/{wallet.id}")).text()
    assert '<line class="line"' in wallet_page and "$12.00" in wallet_page


#: The dashboard routes that name a record, each refused to another company above
#: (test_another_company_sees_and_changes_nothing_of_this_one, the withdrawals-and-transfers
#: test after it, and the incoming-funds test).
ISOLATION_COVERED = {
    ("GET", "/dashboard/payments/{intent_id}"),
    ("POST", "/dashboard/payments/{intent_id}/{action}"),
    ("GET", "/dashboard/wallets/{wallet_id}"),
    ("GET", "/dashboard/events/{event_id}"),
    ("POST", "/dashboard/events/{event_id}/redeliver"),
    ("POST", "/dashboard/sandbox/{kind}/{record_id}/{action}"),
    ("POST", "/dashboard/sandbox/virtual-accounts/{virtual_account_id}/incoming"),
}


def test_every_dashboard_route_naming_a_record_is_in_the_isolation_tests() -> None:
    # A page added later with an id in its path fails here until another company is shown
    # to get its 404.
    assert {route for route in dashboard_ops.PAGES if "{" in route[1]} == ISOLATION_COVERED


async def test_mounted_under_a_prefix_every_link_and_the_cookie_follow_it(
    treasury: Treasury, tenant: Tenant
) -> None:
    parent = web.Application()
    parent.add_subapp("/treasury", create_app(treasury, close_treasury=True))
    async with TestClient(TestServer(parent)) as mounted:
        first = await mounted.get("/treasury/dashboard", allow_redirects=False)
        assert first.headers["Location"] == "/treasury/dashboard/login"
        login = await (await mounted.get("/treasury/dashboard/login")).text()
        assert 'action="/treasury/dashboard/login"' in login
        assert 'href="/treasury/dashboard/static/dashboard.css"' in login
        response = await mounted.post(
            "/treasury/dashboard/login",
            data={"secret_key": tenant.secret_key, "csrf_token": csrf_of(login)},
            headers=SAME_ORIGIN,
            allow_redirects=False,
        )
        assert response.headers["Location"] == "/treasury/dashboard"
        assert "Path=/treasury/dashboard" in response.headers["Set-Cookie"]
        home = await mounted.get("/treasury/dashboard")
        assert home.status == 200
        assert 'href="/treasury/dashboard/payments"' in await home.text()
