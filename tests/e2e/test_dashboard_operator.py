"""The operator's dashboard page over a real loopback server, on SQLite and PostgreSQL.

The treasury is on the files rail with one bank account (the debtor IBAN). The operator signs in
on the login form with an operator key and sees, on ``/dashboard/bank``, the breaks and the
unmatched lines of camt.053 statements it imported through ``POST /api/v1/bank-statements``:
a missing February makes March's opening and closing balances disagree, and February imported
late with March again resolves both. Revoking the key ends the session; a session is only what
it was signed in as; a company session gets a 403 page and no company page shows a break; an
operator session opens no company page and changes nothing there.
"""

from __future__ import annotations

import html
import json
import re
from datetime import date
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.bankfiles import Entry
from tests.e2e.conftest import Tenant
from tests.e2e.dashboard_client import SAME_ORIGIN, csrf_of, paid_intent, post_form, sign_in
from tests.safeguarding import DEBTOR_IBAN, statement
from treasury_aiohttp.dashboard import ops as dashboard_ops
from treasury_aiohttp.dashboard.auth import SESSION_CIPHER
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.movements.safeguarding import BreakKind, BreakRecord
from treasury_core.payments import IntentStatus
from treasury_core.testing.fakes.clock import FakeClock

pytest.importorskip("sepaxml", reason="the bank-files extra is not installed")

Client = TestClient[Any, Any]
BANK = "/dashboard/bank"


@pytest.fixture
def treasury(database_url: str, clock: FakeClock) -> Treasury:
    config = TreasuryConfig(
        database_url=database_url,
        pool_size=4,
        bank_rail="files",
        bank_debtor_name="Acme Treasury BV",
        bank_debtor_iban=DEBTOR_IBAN,
    )
    return bootstrap(config, clock=clock, wall_clock=clock)


@pytest.fixture
async def operator_key(treasury: Treasury) -> str:
    _, raw = await treasury.companies.create_operator_key("ops")
    return raw


def _month(name: str, month: int, last: int, opening: str, line: str, closing: str) -> bytes:
    return statement(
        name,
        [Entry(f"{name}-1", credit=True, amount=line, booked=date(2026, month, 10))],
        start=date(2026, month, 1),
        end=date(2026, month, last),
        opening=opening,
        closing=closing,
    )


JANUARY = _month("JAN", 1, 31, "100.00", "10.00", "110.00")
FEBRUARY = _month("FEB", 2, 28, "110.00", "10.00", "120.00")
MARCH = _month("MAR", 3, 31, "120.00", "5.00", "125.00")


async def import_statement(client: Client, key: str, data: bytes) -> Any:
    response = await client.post(
        "/api/v1/bank-statements",
        data=data,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/xml"},
    )
    body = await response.json()
    assert response.status == 200, body
    return body


async def march_without_february(client: Client, treasury: Treasury, key: str) -> list[BreakRecord]:
    """January agrees; March, without February's +10.00, opens and closes 10.00 above the
    ledger: two open breaks."""
    await import_statement(client, key, JANUARY)
    await import_statement(client, key, MARCH)
    found = await treasury.safeguarding.breaks()
    assert {b.kind for b in found} == {BreakKind.OPENING, BreakKind.CLOSING}
    return found


async def page_of(client: Client, path: str, **headers: str) -> str:
    response = await client.get(path, headers=headers)
    assert response.status == 200, path
    return await response.text()


def _nav(page: str) -> str:
    found = re.search(r'<nav aria-label="Dashboard">(.*?)</nav>', page, re.S)
    assert found is not None
    return found.group(1)


async def test_the_operator_signs_in_and_sees_breaks_and_unmatched_lines(
    client: Client, treasury: Treasury, operator_key: str
) -> None:
    await sign_in(client, operator_key, home=BANK)
    empty = await page_of(client, BANK)
    assert "<h1>Bank reconciliation</h1>" in empty
    assert "No open breaks" in empty and "No resolved breaks" in empty
    assert "No unmatched statement lines" in empty
    # The operator's navigation is its page alone.
    assert re.findall(r'href="([^"]+)"', _nav(empty)) == [BANK]
    # Signed in already: the login page sends it to its own page.
    again = await client.get("/dashboard/login", allow_redirects=False)
    assert again.status == 303 and again.headers["Location"] == BANK

    breaks = await march_without_february(client, treasury, operator_key)
    page = await page_of(client, BANK)
    assert "No open breaks" not in page
    open_table = page.split("<h2>Open breaks</h2>")[1].split("<h2>Resolved breaks</h2>")[0]
    for found in breaks:
        row = re.search(rf"<tr><td>{found.id}</td>(.*?)</tr>", open_table)
        assert row is not None, found.id
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
        assert cells == [
            DEBTOR_IBAN, "EUR", "MAR", found.kind.value,
            "2026-03-01" if found.kind is BreakKind.OPENING else "2026-03-31",
            "€120.00" if found.kind is BreakKind.OPENING else "€125.00",
            "€110.00" if found.kind is BreakKind.OPENING else "€115.00",
            "+€10.00",
        ]  # fmt: skip
    unmatched = await treasury.bank.unmatched()
    assert [line.statement_id for line in unmatched] == ["JAN", "MAR"]
    lines = page.split("<h2>Unmatched statement lines</h2>")[1]
    for line in unmatched:
        row = re.search(rf"<tr><td>{line.id}</td>(.*?)</tr>", lines)
        assert row is not None, line.id
        assert f"<td>{line.entry_reference}</td>" in row.group(1)
        assert line.reason and f"<td>{html.escape(line.reason)}</td>" in row.group(1)
    assert '<td class="num">€10.00</td>' in lines and '<td class="num">€5.00</td>' in lines
    # Amounts are written for the browser's locale, as everywhere on the dashboard.
    german = await page_of(client, BANK, **{"Accept-Language": "de-DE"})
    assert "+10,00\xa0€" in german

    # February imported late and March again: both breaks resolved, shown below.
    await import_statement(client, operator_key, FEBRUARY)
    await import_statement(client, operator_key, MARCH)
    assert await treasury.safeguarding.breaks() == []
    resolved = await page_of(client, BANK)
    assert "No open breaks" in resolved
    below = resolved.split("<h2>Resolved breaks</h2>")[1].split("<h2>Unmatched")[0]
    assert all(f"<tr><td>{b.id}</td>" in below for b in breaks)
    assert "FEB-1" in resolved.split("<h2>Unmatched statement lines</h2>")[1]

    # A query the page does not take is refused with a page, as everywhere.
    bad = await client.get(f"{BANK}?status=open")
    assert bad.status == 400 and "Received unknown parameter: status" in await bad.text()
    # Signing out takes the bank page's CSRF token.
    token = csrf_of(resolved)
    assert (await post_form(client, "/dashboard/logout", "1.forged")).status == 403
    out = await post_form(client, "/dashboard/logout", token)
    assert out.status == 303 and out.headers["Location"] == "/dashboard/login"
    gone = await client.get(BANK, allow_redirects=False)
    assert gone.status == 303 and gone.headers["Location"] == "/dashboard/login"


async def test_a_wrong_or_revoked_operator_key_does_not_sign_in_and_revoking_ends_it(
    client: Client, treasury: Treasury, operator_key: str
) -> None:
    token = csrf_of(await (await client.get("/dashboard/login")).text())
    for key in ("ok_" + "x" * 30, operator_key + "x"):
        response = await client.post(
            "/dashboard/login",
            data={"secret_key": key, "csrf_token": token},
            headers=SAME_ORIGIN,
            allow_redirects=False,
        )
        assert response.status == 401, key
        assert "Set-Cookie" not in response.headers
    await sign_in(client, operator_key, home=BANK)
    await treasury.companies.revoke_operator_key("ops")
    ended = await client.get(BANK, allow_redirects=False)
    assert ended.status == 303 and ended.headers["Location"] == "/dashboard/login"
    assert 'treasury_dashboard=""' in ended.headers["Set-Cookie"]
    response = await client.post(
        "/dashboard/login",
        data={"secret_key": operator_key, "csrf_token": token},
        headers=SAME_ORIGIN,
        allow_redirects=False,
    )
    assert response.status == 401


async def test_a_session_is_only_what_it_was_signed_in_as(
    client: Client, tenant: Tenant, operator_key: str
) -> None:
    # Cookies the server encrypted itself but that name no session it opened: a key and a
    # role (what a cookie once held) or a token it never issued are no session.
    cipher = client.server.app[SESSION_CIPHER]
    for fields in (
        {"k": operator_key, "n": "n", "r": "operator"},
        {"k": tenant.secret_key, "n": "n", "r": "company"},
        {"t": operator_key},
        {"t": tenant.secret_key},
        {"t": 5},
        ["t"],
    ):
        cookie = cipher.encrypt(json.dumps(fields).encode()).decode()
        client.session.cookie_jar.update_cookies({"treasury_dashboard": cookie})
        for path in (BANK, "/dashboard"):
            response = await client.get(path, allow_redirects=False)
            assert response.status == 303, (fields, path)
            assert response.headers["Location"] == "/dashboard/login"


async def test_a_company_session_sees_no_operator_page_and_no_break(
    client: Client, treasury: Treasury, tenant: Tenant, operator_key: str
) -> None:
    breaks = await march_without_february(client, treasury, operator_key)
    unmatched = await treasury.bank.unmatched()
    await sign_in(client, tenant.secret_key)
    refused = await client.get(BANK, allow_redirects=False)
    assert refused.status == 403
    body = await refused.text()
    assert "This page is the operator&#39;s" in body
    secrets = [DEBTOR_IBAN, "MAR", *(b.id for b in breaks), *(line.id for line in unmatched)]
    company_pages = ["/dashboard", "/dashboard/wallets", "/dashboard/payments", "/dashboard/events",
                     "/dashboard/webhooks", "/dashboard/sandbox"]  # fmt: skip
    for path in [BANK, *company_pages]:
        response = await client.get(path, allow_redirects=False)
        text = await response.text()
        assert not [s for s in secrets if s in text], path
        assert "reconciliation" not in text.lower(), path
        assert f'href="{BANK}"' not in text, path
    home = await page_of(client, "/dashboard")
    assert re.findall(r'href="([^"]+)"', _nav(home))[:2] == ["/dashboard", "/dashboard/payments"]


async def test_an_operator_session_opens_no_company_page_and_changes_nothing(
    client: Client, treasury: Treasury, tenant: Tenant, operator_key: str
) -> None:
    intent = await paid_intent(
        treasury, tenant.company_id, tenant.account_id, reference="operator-cannot"
    )
    before = await treasury.sandbox.now()
    token = await sign_in(client, operator_key, home=BANK)
    company_routes = [
        (method, path)
        for method, path in sorted(dashboard_ops.PAGES)
        if path != BANK
        and not path.startswith(("/dashboard/login", "/dashboard/static", "/dashboard/logout"))
    ]
    assert ("GET", "/dashboard") in company_routes and len(company_routes) > 10
    for method, path in company_routes:
        url = path.replace("{action}", "complete" if "sandbox" in path else "capture")
        url = url.replace("{kind}", "deposits").replace("{intent_id}", str(intent.id))
        url = re.sub(r"\{\w+\}", "x_placeholder1", url)
        fields = {"csrf_token": token, "seconds": "60", "amount": "1.00"}
        response = await client.request(
            method, url, data=fields, headers=SAME_ORIGIN, allow_redirects=False
        )
        assert response.status == 303, (method, url)
        assert response.headers["Location"] == BANK, (method, url)
    assert (await treasury.payments.get(tenant.company_id, intent.id)).status is (
        IntentStatus.AUTHORIZED
    )
    assert await treasury.sandbox.now() == before
