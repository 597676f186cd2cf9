"""Part 4.3 of the interface over HTTP: wallets, balances, lists, currencies."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from treasury_core import Treasury
from treasury_core.ledger import Account, AccountKind, Journal, Move, PendingCategory, Reserve

Client = TestClient[Any, Any]


async def create_wallet(client: Client, tenant: Tenant, **body: Any) -> dict[str, Any]:
    payload = {"name": "Main", "currency_id": "USD", **body}
    response = await client.post("/api/v1/wallet", json=payload, headers=tenant.auth)
    assert response.status == 200, await response.text()
    return dict(await response.json())


async def test_create_wallet_returns_the_wallet_record(client: Client, tenant: Tenant) -> None:
    wallet = await create_wallet(client, tenant, currency_id="EUR", description="Payroll")
    assert wallet["id"].startswith("wal_")
    assert wallet["name"] == "Main"
    assert wallet["description"] == "Payroll"
    assert wallet["company_id"] == str(tenant.company_id)
    assert wallet["currency"] == {
        "code": "EUR",
        "name": "Euro",
        "currency_type": "fiat",
        "symbol": "€",
    }
    assert wallet["status"] == "active"
    assert datetime.fromisoformat(wallet["created_at"]).utcoffset() is not None
    assert wallet["created_at"].endswith("+00:00")
    assert set(wallet) == {
        "id",
        "name",
        "description",
        "company_id",
        "currency",
        "status",
        "created_at",
        "metadata",  # issue 24, after the interface's fields
    }
    assert wallet["metadata"] == {}


async def test_get_wallet_and_its_balance(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    wallet = await create_wallet(client, tenant, currency_id="JPY")
    response = await client.get(f"/api/v1/wallet/{wallet['id']}", headers=tenant.auth)
    assert response.status == 200
    assert await response.json() == wallet

    response = await client.get(f"/api/v1/wallet/{wallet['id']}/balance", headers=tenant.auth)
    assert await response.json() == {
        "wallet_id": wallet["id"],
        "balance": 0,
        "pending_holds": 0,
        "pending_in": 0,
        "pending_out": 0,
        "available_balance": 0,
        "currency_code": "JPY",
    }

    # Money moved by the ledger shows in the balance record.
    now = treasury.clock.now()

    def fund(uow: Any) -> None:
        uow.ledger.ensure_account(Account("world:JPY", "JPY", AccountKind.WORLD))
        uow.ledger.apply(Journal("jr_1", (Move("world:JPY", wallet["id"], "JPY", 5000),)), now)
        uow.ledger.apply(
            Journal(
                "jr_2",
                (
                    Reserve(wallet["id"], "world:JPY", "JPY", 700, PendingCategory.OUT),
                    Reserve(wallet["id"], "world:JPY", "JPY", 300, PendingCategory.HOLD),
                    Reserve("world:JPY", wallet["id"], "JPY", 900, PendingCategory.OUT),
                ),
            ),
            now,
        )

    await treasury.storage.run(fund)
    response = await client.get(f"/api/v1/wallet/{wallet['id']}/balance", headers=tenant.auth)
    balance = await response.json()
    assert (balance["balance"], balance["pending_out"], balance["pending_holds"]) == (
        5000,
        700,
        300,
    )
    assert (balance["pending_in"], balance["available_balance"]) == (900, 4000)


async def test_another_companys_wallet_is_not_found(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    wallet = await create_wallet(client, tenant)
    for path in (f"/api/v1/wallet/{wallet['id']}", f"/api/v1/wallet/{wallet['id']}/balance"):
        response = await client.get(path, headers=other_tenant.auth)
        assert response.status == 404
        body = await response.json()
        assert body["error"]["type"] == "not_found"
        assert wallet["id"] in body["error"]["message"]
    response = await client.get("/api/v1/wallets", headers=other_tenant.auth)
    assert await response.json() == []


async def test_unknown_wallet_is_not_found(client: Client, tenant: Tenant) -> None:
    for path in ("/api/v1/wallet/wal_nope", "/api/v1/wallet/x" + "y" * 500 + "/balance"):
        response = await client.get(path, headers=tenant.auth)
        assert response.status == 404
        assert (await response.json())["error"]["code"] == "resource_missing"


async def test_lists_page_newest_first_with_a_link_header(client: Client, tenant: Tenant) -> None:
    made = [await create_wallet(client, tenant, name=f"W{i}") for i in range(5)]
    newest_first = [w["id"] for w in reversed(made)]
    response = await client.get("/api/v1/wallets", headers=tenant.auth)
    assert [w["id"] for w in await response.json()] == newest_first
    assert "Link" not in response.headers

    seen: list[str] = []
    path: str | None = "/api/v1/wallets?limit=2"
    while path:
        response = await client.get(path, headers=tenant.auth)
        page = await response.json()
        assert len(page) <= 2
        seen += [w["id"] for w in page]
        link = response.headers.get("Link")
        path = link[1 : link.index(">")] if link else None
        if link:
            assert link.endswith('rel="next"')
    assert seen == newest_first

    response = await client.get("/api/v1/wallets/balances?limit=3", headers=tenant.auth)
    balances = await response.json()
    assert [b["wallet_id"] for b in balances] == newest_first[:3]
    assert "starting_after=" + newest_first[2] in response.headers["Link"]
    response = await client.get(
        f"/api/v1/wallets/balances?starting_after={newest_first[2]}", headers=tenant.auth
    )
    assert [b["wallet_id"] for b in await response.json()] == newest_first[3:]


async def test_list_parameters_are_validated(client: Client, tenant: Tenant) -> None:
    for query in ("limit=0", "limit=101", "limit=abc", "limit=-1", "limit=1.5"):
        response = await client.get(f"/api/v1/wallets?{query}", headers=tenant.auth)
        assert response.status == 400, query
        assert (await response.json())["error"]["param"] == "limit"
    response = await client.get("/api/v1/wallets?starting_after=", headers=tenant.auth)
    assert response.status == 400
    assert (await response.json())["error"]["param"] == "starting_after"


async def test_currencies(client: Client, tenant: Tenant) -> None:
    response = await client.get("/api/v1/currencies", headers=tenant.auth)
    assert response.status == 200
    currencies = {c["code"]: c for c in await response.json()}
    assert set(currencies) == {"USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "SGD", "KWD"}
    assert currencies["KWD"] == {
        "code": "KWD",
        "name": "Kuwaiti Dinar",
        "symbol": "KWD",
        "currency_type": "fiat",
        "decimal_places": 3,
        "can_vban": False,
    }
    assert {c for c, v in currencies.items() if v["can_vban"]} == {"USD", "EUR", "GBP"}


async def test_wallet_currency_must_be_enabled(client: Client, tenant: Tenant) -> None:
    for code in ("XXX", "usd", "BTC", "MXN"):
        response = await client.post(
            "/api/v1/wallet", json={"name": "W", "currency_id": code}, headers=tenant.auth
        )
        assert response.status == 400
        error = (await response.json())["error"]
        assert error["type"] == "invalid_request_error"
        assert error["param"] == "currency_id"


async def test_the_link_header_is_percent_encoded(client: Client, tenant: Tenant) -> None:
    for name in ("A", "B"):
        await client.post(
            "/api/v1/wallet", json={"name": name, "currency_id": "USD"}, headers=tenant.auth
        )
    for query in ("x=%1F", "x=%0D%0AX-Injected:%201", "x=%C3%A9"):
        # A parameter the list does not take is refused (issue 24), and injects nothing.
        response = await client.get(
            f"/api/v1/wallets/balances?limit=1&{query}", headers=tenant.auth
        )
        assert response.status == 400
        assert (await response.json())["error"]["code"] == "parameter_unknown"
        assert "X-Injected" not in response.headers and "Link" not in response.headers
    # A filter value the list does take is echoed percent-encoded.
    for reference in ("é", "é"):
        body = {
            "account_id": tenant.account_id,
            "billing_amount": 1_000,
            "billing_currency": "USD",
            "payment_type": "Card Payment",
            "merchant_reference": reference,
        }
        made = await client.post("/api/v1/payments/intent", json=body, headers=tenant.auth)
        assert made.status == 200
    response = await client.get(
        "/api/v1/payments/intents?limit=1&merchant_reference=%C3%A9", headers=tenant.auth
    )
    assert response.status == 200
    link = response.headers["Link"]
    assert link.isascii() and "merchant_reference=%C3%A9" in link
