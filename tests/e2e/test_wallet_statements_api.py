"""Issue 23, part 3 over HTTP: a wallet's transactions and its statement, JSON and CSV."""

from __future__ import annotations

import csv
import io
from typing import Any
from urllib.parse import parse_qs, urlsplit

from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from tests.e2e.test_treasury_api import USD_BANK, balance, funded, get, post, wallet
from treasury_core.testing.fakes.clock import FakeClock

Client = TestClient[Any, Any]
DAY = 24 * 3600
FEE = 25 + 100  # the e2e treasury's fee on 10,000: 25 + 1 %


async def _history(client: Client, tenant: Tenant, clock: FakeClock) -> tuple[str, str]:
    """A USD wallet funded on 2026-01-01, with a withdrawal paid and one failed on 2026-01-02
    and a transfer out on 2026-01-03; the wallet and the paid withdrawal's id."""
    wallet_id = await funded(client, tenant, "USD", 100_000)
    clock.advance(DAY)
    bank = await post(client, tenant, "/api/v1/bank-account", USD_BANK)
    body = {
        "wallet_id": wallet_id,
        "from_amount": 10_000,
        "from_currency_id": "USD",
        "bank_account_id": bank["id"],
    }
    paid = await post(client, tenant, "/api/v1/withdraw", body)
    await post(client, tenant, f"/api/v1/sandbox/withdrawals/{paid['id']}/complete", {})
    failed = await post(client, tenant, "/api/v1/withdraw", body)
    await post(client, tenant, f"/api/v1/sandbox/withdrawals/{failed['id']}/fail", {})
    clock.advance(DAY)
    other = await wallet(client, tenant)
    await post(
        client,
        tenant,
        "/api/v1/transfer",
        {"from_wallet_id": wallet_id, "to_wallet_id": other, "from_amount": 1_000},
    )
    return wallet_id, paid["id"]


async def _error(client: Client, tenant: Tenant, path: str, status: int) -> dict[str, Any]:
    response = await client.get(path, headers=tenant.auth)
    payload = await response.json()
    assert response.status == status, payload
    return dict(payload["error"])


async def test_transactions_and_statement(
    client: Client, tenant: Tenant, other_tenant: Tenant, clock: FakeClock
) -> None:
    wallet_id, paid = await _history(client, tenant, clock)
    base = f"/api/v1/wallet/{wallet_id}/transactions"
    everything = await get(client, tenant, f"{base}?limit=100")
    assert [(t["type"], t["counter"], t["amount"]) for t in everything] == [
        ("transfer_out", "balance", -1_000),
        ("release", "pending", FEE),
        ("release", "pending", 10_000),
        ("withdrawal_fee", "pending", -FEE),
        ("withdrawal", "pending", -10_000),
        ("withdrawal_fee", "balance", -FEE),
        ("withdrawal", "balance", -10_000),
        ("withdrawal_fee", "pending", -FEE),
        ("withdrawal", "pending", -10_000),
        ("deposit", "balance", 100_000),
        ("deposit", "pending", 100_000),
    ]
    newest = everything[0]
    record = await balance(client, tenant, wallet_id)
    assert newest["balance_after"] == record["balance"] == 100_000 - 10_000 - FEE - 1_000
    assert newest["available_balance_after"] == record["available_balance"]
    assert set(newest) == {
        "id",
        "wallet_id",
        "type",
        "counter",
        "amount",
        "currency_code",
        "balance_after",
        "available_balance_after",
        "pending_in_after",
        "source_id",
        "created_at",
    }
    assert everything[6]["source_id"] == paid
    assert newest["created_at"] == "2026-01-03T00:00:00+00:00"

    # Pages of 4 through the Link header give the same list.
    seen: list[Any] = []
    url: str | None = f"{base}?limit=4"
    while url is not None:
        response = await client.get(url, headers=tenant.auth)
        assert response.status == 200
        seen += await response.json()
        link = response.headers.get("Link")
        url = link[1 : link.index(">")] if link else None
    assert seen == everything
    # Filters: a type, a window (the second day), both with paging.
    fees = await get(client, tenant, f"{base}?type=withdrawal_fee")
    assert [t["amount"] for t in fees] == [-FEE, -FEE, -FEE]
    day2 = await get(
        client,
        tenant,
        f"{base}?created_gte=2026-01-02T00:00:00Z&created_lt=2026-01-03T00:00:00%2B00:00",
    )
    assert day2 == everything[1:9]
    first = await client.get(f"{base}?type=release&limit=1", headers=tenant.auth)
    query = parse_qs(urlsplit(first.headers["Link"][1:].split(">")[0]).query)
    assert query["type"] == ["release"] and query["starting_after"] == [everything[1]["id"]]

    # Bad input: clear 400s in the API's error body; other companies and unknown ids: 404.
    assert await _error(client, tenant, f"{base}?type=bonus", 400) == {
        "type": "invalid_request_error",
        "code": "parameter_invalid",
        "message": await _message(client, tenant, f"{base}?type=bonus"),
        "param": "type",
    }
    assert (await _error(client, tenant, f"{base}?created_gte=yesterday", 400))["param"] == (
        "created_gte"
    )
    assert (await _error(client, tenant, f"{base}?limit=0", 400))["param"] == "limit"
    assert (await _error(client, tenant, f"{base}?starting_after=txn_nope", 404))["param"] == (
        "starting_after"
    )
    for who, path in (
        (other_tenant, base),
        (tenant, "/api/v1/wallet/wal_unknown/transactions"),
        (tenant, "/api/v1/wallet/not-an-id/statement?from=2026-01-01&to=2026-01-01"),
    ):
        assert (await _error(client, who, path, 404))["type"] == "not_found"

    # The statement of the second and third days.
    statement_url = f"/api/v1/wallet/{wallet_id}/statement?from=2026-01-02&to=2026-01-03"
    statement = await get(client, tenant, statement_url)
    assert statement["from_date"] == "2026-01-02" and statement["to_date"] == "2026-01-03"
    assert statement["opening_balance"] == statement["opening_available_balance"] == 100_000
    assert statement["closing_balance"] == record["balance"]
    assert statement["transactions"] == list(reversed(everything[:9]))
    totals = {t["type"]: t for t in statement["totals"]}
    assert totals["withdrawal_fee"] == {
        "type": "withdrawal_fee",
        "count": 3,
        "balance_amount": -FEE,
        "pending_amount": -2 * FEE,
    }
    assert sum(t["balance_amount"] for t in statement["totals"]) == (
        statement["closing_balance"] - statement["opening_balance"]
    )

    # The same as CSV.
    response = await client.get(statement_url, headers={**tenant.auth, "Accept": "text/csv"})
    assert response.status == 200
    assert response.content_type == "text/csv" and response.charset == "utf-8"
    assert "attachment" in response.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(await response.text())))
    assert [r["record"] for r in rows] == (
        ["opening"] + ["transaction"] * 9 + ["total"] * len(totals) + ["closing"]
    )
    assert int(rows[0]["balance_after"]) == 100_000
    assert int(rows[-1]["balance_after"]) == statement["closing_balance"]
    assert [r["id"] for r in rows[1:10]] == [t["id"] for t in statement["transactions"]]
    assert [int(r["balance_after"]) for r in rows[1:10]] == [
        t["balance_after"] for t in statement["transactions"]
    ]
    fee_row = next(r for r in rows if r["record"] == "total" and r["type"] == "withdrawal_fee")
    assert (int(fee_row["amount"]), int(fee_row["pending_amount"]), fee_row["count"]) == (
        -FEE,
        -2 * FEE,
        "3",
    )
    # JSON is preferred unless CSV ranks higher; errors stay JSON when CSV is asked for.
    for accept, csv_expected in (
        ("application/json, text/csv;q=0.5", False),
        ("text/csv, application/json;q=0.9", True),
        ("*/*", False),
        ("text/*", True),
        ("application/xml", False),
    ):
        answer = await client.get(statement_url, headers={**tenant.auth, "Accept": accept})
        assert answer.status == 200
        assert (answer.content_type == "text/csv") is csv_expected, accept
    refused = await client.get(
        f"/api/v1/wallet/{wallet_id}/statement?from=2026-01-03&to=2026-01-02",
        headers={**tenant.auth, "Accept": "text/csv"},
    )
    assert refused.status == 400 and refused.content_type == "application/json"
    assert (await refused.json())["error"]["code"] == "statement_period_invalid"
    for query, param in (
        ("to=2026-01-02", "from"),
        ("from=2026-01-02", "to"),
        ("from=2026-1-2&to=2026-01-02", "from"),
        ("from=2026-02-30&to=2026-03-02", "from"),
        ("from=2025-01-01&to=2026-01-02", "to"),
    ):
        path = f"/api/v1/wallet/{wallet_id}/statement?{query}"
        assert (await _error(client, tenant, path, 400))["param"] == param, query


async def _message(client: Client, tenant: Tenant, path: str) -> str:
    response = await client.get(path, headers=tenant.auth)
    return str((await response.json())["error"]["message"])
