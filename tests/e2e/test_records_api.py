"""Issue 24, items 1, 3 and 9 over HTTP: every record readable, real filters, honest lists."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from treasury_core import Treasury

Client = TestClient[Any, Any]
DAY = 86_400
ADVANCE = "/api/v1/sandbox/clock/advance"
APPROVED = "4242424242424242"
CHARGEBACK_LOST = "4000000000000051"
CARD = {"cardholder_name": "Ada", "expiry_month": 12, "expiry_year": 2030, "cvc": "123"}
USD_BANK = {
    "bank_name": "JPMorgan Chase",
    "account_name": "Acme Ltd",
    "account_number": "000123456789",
    "routing_number": "021000021",
    "currency_id": "USD",
}


async def call(
    client: Client, tenant: Tenant, method: str, path: str, body: Any = None, status: int = 200
) -> Any:
    kwargs: dict[str, Any] = {"headers": tenant.auth}
    if body is not None:
        kwargs["json"] = body
    response = await client.request(method, path, **kwargs)
    payload = await response.json()
    assert response.status == status, (method, path, payload)
    return payload


def error(payload: Any) -> dict[str, Any]:
    assert set(payload) == {"error"}, payload
    return dict(payload["error"])


async def intent(client: Client, tenant: Tenant, card: str | None, **fields: Any) -> Any:
    body = {
        "account_id": tenant.account_id,
        "billing_amount": 1_000,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "merchant_reference": "order-1",
        **fields,
    }
    made = await call(client, tenant, "POST", "/api/v1/payments/intent", body)
    if card is not None:
        paid = await client.post(
            f"/pay/{made['payment_intent_lookup_id']}", json={**CARD, "card_number": card}
        )
        assert paid.status == 200, await paid.text()
    return made


async def test_refunds_chargebacks_and_payouts_are_readable_and_filtered(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    wallet = await call(
        client, tenant, "POST", "/api/v1/wallet", {"name": "W", "currency_id": "USD"}
    )
    refunded = await intent(client, tenant, APPROVED)
    disputed = await intent(client, tenant, CHARGEBACK_LOST, merchant_reference="order-2")
    refund = await call(
        client,
        tenant,
        "POST",
        "/api/v1/payments/intent/refund",
        {"payment_intent_id": refunded["id"], "amount": 300},
    )
    # Read back by id: exactly what the refund call answered.
    assert await call(client, tenant, "GET", f"/api/v1/payments/refund/{refund['id']}") == refund
    refunds = await call(client, tenant, "GET", "/api/v1/payments/refunds")
    assert refunds == [refund]
    by_intent = f"/api/v1/payments/refunds?payment_intent_id={disputed['id']}"
    assert await call(client, tenant, "GET", by_intent) == []
    by_status = f"/api/v1/payments/refunds?status={refund['status']}&currency=USD"
    assert await call(client, tenant, "GET", by_status) == [refund]

    await call(client, tenant, "POST", ADVANCE, {"seconds": 4 * DAY})
    [chargeback] = await call(client, tenant, "GET", "/api/v1/payments/chargebacks")
    assert chargeback["payment_intent_id"] == disputed["id"]
    assert chargeback["status"] == "lost"
    got = await call(client, tenant, "GET", f"/api/v1/payments/chargeback/{chargeback['id']}")
    assert got == chargeback
    assert await call(client, tenant, "GET", "/api/v1/payments/chargebacks?status=open") == []
    payouts = await call(client, tenant, "GET", "/api/v1/payments/payouts")
    assert payouts and {p["wallet_id"] for p in payouts} == {wallet["id"]}
    mine = await call(
        client, tenant, "GET", f"/api/v1/payments/payouts?payment_intent_id={refunded['id']}"
    )
    assert [p["payment_intent_id"] for p in mine] == [refunded["id"]]
    assert mine[0]["amount"] == 700  # what the refund left
    one = await call(client, tenant, "GET", f"/api/v1/payments/payout/{mine[0]['id']}")
    assert one == mine[0]

    # The intent by its integer id is the intent by lookup id.
    by_lookup = await call(
        client,
        tenant,
        "GET",
        f"/api/v1/payments/intent?payment_intent_lookup_id={refunded['payment_intent_lookup_id']}",
    )
    assert await call(client, tenant, "GET", f"/api/v1/payments/intent/{refunded['id']}") == (
        by_lookup
    )
    for bad in ("0", "abc", "1.5", str(2**63), "-1"):
        payload = await call(client, tenant, "GET", f"/api/v1/payments/intent/{bad}", status=404)
        assert error(payload)["type"] == "not_found"

    # Intent filters of item 3.
    ref = await call(client, tenant, "GET", "/api/v1/payments/intents?merchant_reference=order-2")
    assert [i["id"] for i in ref] == [disputed["id"]]
    assert await call(client, tenant, "GET", "/api/v1/payments/intents?currency=EUR") == []
    count = await call(client, tenant, "GET", "/api/v1/payments/intents/count?currency=USD")
    assert count == {"count": 2}

    # Another company sees none of it.
    for path in (
        f"/api/v1/payments/refund/{refund['id']}",
        f"/api/v1/payments/chargeback/{chargeback['id']}",
        f"/api/v1/payments/payout/{mine[0]['id']}",
        f"/api/v1/payments/intent/{refunded['id']}",
    ):
        payload = await call(client, other_tenant, "GET", path, status=404)
        assert error(payload)["type"] == "not_found"
    for path in ("refunds", "chargebacks", "payouts"):
        assert await call(client, other_tenant, "GET", f"/api/v1/payments/{path}") == []


async def test_deposits_and_bank_accounts_are_listed_filtered_and_deletable(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    usd = await call(client, tenant, "POST", "/api/v1/wallet", {"name": "U", "currency_id": "USD"})
    eur = await call(client, tenant, "POST", "/api/v1/wallet", {"name": "E", "currency_id": "EUR"})
    deposits = [
        await call(
            client,
            tenant,
            "POST",
            "/api/v1/deposit",
            {
                "wallet_id": w["id"],
                "from_amount": 50_000,
                "from_currency_id": w["currency"]["code"],
            },
        )
        for w in (usd, eur)
    ]
    await call(client, tenant, "POST", f"/api/v1/sandbox/deposits/{deposits[0]['id']}/complete", {})
    listed = await call(client, tenant, "GET", "/api/v1/deposits")
    assert [d["id"] for d in listed] == [deposits[1]["id"], deposits[0]["id"]]
    assert listed[1]["status"] == "completed"
    completed = await call(client, tenant, "GET", "/api/v1/deposits?status=completed")
    assert [d["id"] for d in completed] == [deposits[0]["id"]]
    of_wallet = await call(client, tenant, "GET", f"/api/v1/deposits?wallet_id={eur['id']}")
    assert [d["id"] for d in of_wallet] == [deposits[1]["id"]]
    in_eur = await call(client, tenant, "GET", "/api/v1/deposits?currency=EUR")
    assert [d["id"] for d in in_eur] == [deposits[1]["id"]]
    page = await client.get("/api/v1/deposits?limit=1", headers=tenant.auth)
    assert [d["id"] for d in await page.json()] == [deposits[1]["id"]]
    assert 'rel="next"' in page.headers["Link"]
    created = listed[0]["created_at"]
    window = f"/api/v1/deposits?created_gte={quote(created)}&created_lt={quote(created)}"
    assert await call(client, tenant, "GET", window) == []  # an empty window: gte == lt
    since = await call(client, tenant, "GET", f"/api/v1/deposits?created_gte={quote(created)}")
    assert len(since) == 2

    # Item 9: a virtual-account credit names its virtual account, in the API and the event.
    va = await call(
        client,
        tenant,
        "POST",
        "/api/v1/virtual-account",
        {"wallet_id": usd["id"], "source_currency": "USD"},
    )
    credit = await call(
        client,
        tenant,
        "POST",
        f"/api/v1/sandbox/virtual-accounts/{va['id']}/incoming",
        {"amount": 700},
    )
    assert credit["virtual_account_id"] == va["id"]
    assert deposits[0]["virtual_account_id"] is None
    assert (await call(client, tenant, "GET", f"/api/v1/deposit/{credit['id']}")) == credit
    await treasury.notifications.run_due()
    events = await call(client, tenant, "GET", "/api/v1/events?type=treasury.deposit.completed")
    by_id = {e["data"]["object"]["id"]: e["data"]["object"] for e in events}
    assert by_id[credit["id"]]["virtual_account_id"] == va["id"]
    assert by_id[deposits[0]["id"]]["virtual_account_id"] is None

    # Bank accounts: read, listed, deleted once no pending withdrawal pays out to them.
    bank = await call(client, tenant, "POST", "/api/v1/bank-account", USD_BANK)
    spare = await call(client, tenant, "POST", "/api/v1/bank-account", USD_BANK)
    assert await call(client, tenant, "GET", f"/api/v1/bank-account/{bank['id']}") == bank
    assert [b["id"] for b in await call(client, tenant, "GET", "/api/v1/bank-accounts")] == [
        spare["id"],
        bank["id"],
    ]
    assert await call(client, tenant, "GET", "/api/v1/bank-accounts?currency=EUR") == []
    withdrawal = await call(
        client,
        tenant,
        "POST",
        "/api/v1/withdraw",
        {
            "wallet_id": usd["id"],
            "from_amount": 1_000,
            "from_currency_id": "USD",
            "bank_account_id": bank["id"],
        },
    )
    by_bank = await call(
        client, tenant, "GET", f"/api/v1/withdrawals?bank_account_id={bank['id']}&status=pending"
    )
    assert [w["id"] for w in by_bank] == [withdrawal["id"]]
    in_use = await call(client, tenant, "DELETE", f"/api/v1/bank-account/{bank['id']}", status=400)
    assert error(in_use)["code"] == "bank_account_in_use"
    assert error(in_use)["param"] == "bank_account_id"
    await call(
        client, tenant, "POST", f"/api/v1/sandbox/withdrawals/{withdrawal['id']}/complete", {}
    )
    deleted = await call(client, tenant, "DELETE", f"/api/v1/bank-account/{bank['id']}")
    assert deleted["id"] == bank["id"] and deleted["status"] == "deleted"
    gone = await call(client, tenant, "GET", f"/api/v1/bank-account/{bank['id']}", status=404)
    assert error(gone)["type"] == "not_found"
    again = await call(client, tenant, "DELETE", f"/api/v1/bank-account/{bank['id']}", status=404)
    assert error(again)["type"] == "not_found"
    assert [b["id"] for b in await call(client, tenant, "GET", "/api/v1/bank-accounts")] == [
        spare["id"]
    ]
    refused = await call(
        client,
        tenant,
        "POST",
        "/api/v1/withdraw",
        {
            "wallet_id": usd["id"],
            "from_amount": 1_000,
            "from_currency_id": "USD",
            "bank_account_id": bank["id"],
        },
        status=404,
    )
    assert error(refused)["param"] == "bank_account_id"
    # The completed withdrawal still names it.
    kept = await call(client, tenant, "GET", f"/api/v1/withdraw/{withdrawal['id']}")
    assert kept["bank_account_id"] == bank["id"] and kept["status"] == "completed"


async def test_unknown_parameters_and_limits_are_refused(client: Client, tenant: Tenant) -> None:
    for path, name in (
        ("/api/v1/withdrawals?walet_id=wal_x", "walet_id"),
        ("/api/v1/payments/intents?state=PROCESSED", "state"),
        ("/api/v1/wallets?currency=USD", "currency"),
        ("/api/v1/wallet/wal_x?expand=1", "expand"),
        # Deposits carry metadata and take the filter; refunds carry none and refuse it.
        ("/api/v1/payments/refunds?metadata[order]=1", "metadata[order]"),
        ("/api/v1/payments/refunds?wallet_id=wal_x", "wallet_id"),
    ):
        payload = await call(client, tenant, "GET", path, status=400)
        assert error(payload)["code"] == "parameter_unknown", (path, payload)
        assert error(payload)["param"] == name
        assert name in error(payload)["message"]
    for path in ("/api/v1/withdrawals?limit=0", "/api/v1/payments/intents?limit=101"):
        payload = await call(client, tenant, "GET", path, status=400)
        assert error(payload)["param"] == "limit"
        assert "from 1 to 100" in error(payload)["message"]
    bad_status = await call(client, tenant, "GET", "/api/v1/deposits?status=done", status=400)
    assert error(bad_status)["param"] == "status"
    assert "pending, completed, failed" in error(bad_status)["message"]
    for path, name, code in (
        ("/api/v1/deposits?wallet_id=wal_x&wallet_id=wal_y", "wallet_id", "parameter_duplicated"),
        ("/api/v1/transfers?wallet_id=null", "wallet_id", "parameter_invalid"),
        ("/api/v1/payments/refunds?currency=AAA", "currency", "unknown_currency"),
        ("/api/v1/payments/intents?currency=AAA", "currency", "unknown_currency"),
        (
            "/api/v1/payment_method_tokens?customer_email=nobody",
            "customer_email",
            "parameter_invalid",
        ),
    ):
        payload = await call(client, tenant, "GET", path, status=400)
        assert (error(payload)["code"], error(payload)["param"]) == (code, name), payload
    # A path parameter that cannot be an id matches no route; the other methods stay theirs.
    not_an_id = await client.get("/api/v1/payments/intent/refund", headers=tenant.auth)
    assert not_an_id.status == 405 and not_an_id.headers["Allow"] == "POST"
    formats = await client.delete("/api/v1/bank-account/formats", headers=tenant.auth)
    assert formats.status == 405 and formats.headers["Allow"] == "GET"
    missing = await call(client, tenant, "GET", "/api/v1/payment_method_tokens", status=400)
    assert error(missing)["code"] == "parameter_missing"


async def test_wallet_lists_return_every_wallet_without_limit(
    client: Client, tenant: Tenant
) -> None:
    made = [
        (
            await call(
                client, tenant, "POST", "/api/v1/wallet", {"name": f"{n}", "currency_id": "USD"}
            )
        )["id"]
        for n in range(23)
    ]
    newest_first = made[::-1]
    response = await client.get("/api/v1/wallets", headers=tenant.auth)
    assert [w["id"] for w in await response.json()] == newest_first  # more than a page
    assert "Link" not in response.headers
    balances = await call(client, tenant, "GET", "/api/v1/wallets/balances")
    assert [b["wallet_id"] for b in balances] == newest_first
    page = await client.get("/api/v1/wallets?limit=20", headers=tenant.auth)
    assert [w["id"] for w in await page.json()] == newest_first[:20]
    next_url = page.headers["Link"].split(">")[0].lstrip("<")
    rest = await call(client, tenant, "GET", next_url)
    assert [w["id"] for w in rest] == newest_first[20:]
    paged = await call(client, tenant, "GET", "/api/v1/wallets/balances?limit=5")
    assert [b["wallet_id"] for b in paged] == newest_first[:5]


async def test_saved_cards_are_listed_and_forgotten(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    async def save(email: str) -> str:
        pmti = await call(
            client,
            tenant,
            "POST",
            "/api/v1/payment_method_token_intent",
            {
                "account_id": tenant.account_id,
                "payment_type": "Tokenization",
                "customer_email": email,
                "customer_phone_number": "+447700900123",
            },
        )
        confirm = urlsplit(pmti["latest_version"]["confirm_endpoint_url"]).path
        answer = await client.post(confirm, json={**CARD, "card_number": APPROVED})
        result = await answer.json()
        assert result["status"] == "succeeded", result
        return str(result["payment_method_token"])

    first = await save("ada@example.com")
    second = await save("ada@example.com")
    await save("bob@example.com")
    listed = await call(
        client, tenant, "GET", "/api/v1/payment_method_tokens?customer_email=ada@example.com"
    )
    assert [t["id"] for t in listed] == [second, first]
    assert all(t["card"]["last4"] == "4242" for t in listed)
    assert (
        await call(
            client,
            other_tenant,
            "GET",
            "/api/v1/payment_method_tokens?customer_email=ada@example.com",
        )
        == []
    )
    refused = await call(
        client, other_tenant, "DELETE", f"/api/v1/payment_method_tokens/{first}", status=404
    )
    assert error(refused)["type"] == "not_found"

    forgotten = await call(client, tenant, "DELETE", f"/api/v1/payment_method_tokens/{first}")
    assert forgotten["id"] == first and forgotten["customer_email"] == ""
    await call(client, tenant, "GET", f"/api/v1/payment_method_tokens/{first}", status=404)
    remaining = await call(
        client, tenant, "GET", "/api/v1/payment_method_tokens?customer_email=ada@example.com"
    )
    assert [t["id"] for t in remaining] == [second]
    charge = {
        "account_id": tenant.account_id,
        "billing_amount": 1_000,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "card_token": first,
    }
    payload = await call(client, tenant, "POST", "/api/v1/payments/intent", charge, status=400)
    assert error(payload)["code"] == "payment_method_token_deleted"
    assert error(payload)["param"] == "card_token"
    # The other card of the customer still charges.
    paid = await call(
        client, tenant, "POST", "/api/v1/payments/intent", {**charge, "card_token": second}
    )
    assert paid["status"] == "PROCESSED"
