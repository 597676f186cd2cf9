"""Parts 4.4–4.7 over HTTP: deposits, bank accounts, withdrawals, transfers, virtual accounts."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from treasury_core import Treasury
from treasury_core.notifications.events import EventType

Client = TestClient[Any, Any]
USD_BANK = {
    "bank_name": "JPMorgan Chase",
    "account_name": "Acme Ltd",
    "account_number": "000123456789",
    "routing_number": "021000021",
    "currency_id": "USD",
}


async def post(client: Client, tenant: Tenant, path: str, body: Any, status: int = 200) -> Any:
    response = await client.post(path, json=body, headers=tenant.auth)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def get(client: Client, tenant: Tenant, path: str, status: int = 200) -> Any:
    response = await client.get(path, headers=tenant.auth)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def wallet(client: Client, tenant: Tenant, currency: str = "USD") -> str:
    return str(
        (await post(client, tenant, "/api/v1/wallet", {"name": "W", "currency_id": currency}))["id"]
    )


async def balance(client: Client, tenant: Tenant, wallet_id: str) -> dict[str, int]:
    return dict(await get(client, tenant, f"/api/v1/wallet/{wallet_id}/balance"))


async def funded(client: Client, tenant: Tenant, currency: str, amount: int) -> str:
    wallet_id = await wallet(client, tenant, currency)
    deposit = await post(
        client,
        tenant,
        "/api/v1/deposit",
        {"wallet_id": wallet_id, "from_amount": amount, "from_currency_id": currency},
    )
    await post(client, tenant, f"/api/v1/sandbox/deposits/{deposit['id']}/complete", {})
    return wallet_id


def events_of(treasury: Treasury, company_id: int) -> list[Any]:
    return treasury.storage.run_sync(lambda uow: uow.outbox.list(company_id), write=False)


async def test_deposit_lifecycle(client: Client, tenant: Tenant, treasury: Treasury) -> None:
    wallet_id = await wallet(client, tenant, "EUR")
    deposit = await post(
        client,
        tenant,
        "/api/v1/deposit",
        {
            "wallet_id": wallet_id,
            "from_amount": 10_000,
            "from_currency_id": "EUR",
            "reference": "INV-1",
        },
    )
    assert deposit["id"].startswith("dep_")
    assert deposit["status"] == "pending"
    assert (deposit["from_amount"], deposit["to_amount"], deposit["to_currency_id"]) == (
        10_000,
        10_000,
        "EUR",
    )
    assert deposit["error"] is None
    assert deposit["payment_instructions"]
    assert set(deposit["payment_instructions"][0]) == {
        "bank_name",
        "account_name",
        "account_number",
        "routing_number",
    }
    assert "company_id" not in deposit and "pending_ids" not in deposit
    assert (await balance(client, tenant, wallet_id))["pending_in"] == 10_000
    assert (await balance(client, tenant, wallet_id))["available_balance"] == 0

    done = await post(client, tenant, f"/api/v1/sandbox/deposits/{deposit['id']}/complete", {})
    assert done["status"] == "completed"
    after = await balance(client, tenant, wallet_id)
    assert (after["balance"], after["pending_in"], after["available_balance"]) == (
        10_000,
        0,
        10_000,
    )
    assert await get(client, tenant, f"/api/v1/deposit/{deposit['id']}") == done

    again = await post(
        client, tenant, f"/api/v1/sandbox/deposits/{deposit['id']}/complete", {}, status=400
    )
    assert again["error"]["code"] == "movement_not_pending"
    completed = [
        e for e in events_of(treasury, tenant.company_id) if e.type is EventType.DEPOSIT_COMPLETED
    ]
    assert [e.data["object"] for e in completed] == [done]


async def test_failed_and_short_deposits(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    wallet_id = await wallet(client, tenant)
    body = {"wallet_id": wallet_id, "from_amount": 500, "from_currency_id": "USD"}
    first = await post(client, tenant, "/api/v1/deposit", body)
    failed = await post(client, tenant, f"/api/v1/sandbox/deposits/{first['id']}/fail", {})
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "deposit_failed", "message": "The funds did not arrive"}
    second = await post(client, tenant, "/api/v1/deposit", body)
    short = await post(
        client, tenant, f"/api/v1/sandbox/deposits/{second['id']}/complete", {"amount": 420}
    )
    assert (short["from_amount"], short["to_amount"]) == (420, 420)
    assert await balance(client, tenant, wallet_id) == {
        "wallet_id": wallet_id,
        "balance": 420,
        "pending_holds": 0,
        "pending_in": 0,
        "pending_out": 0,
        "available_balance": 420,
        "currency_code": "USD",
    }
    types = [e.type for e in events_of(treasury, tenant.company_id)]
    assert EventType.DEPOSIT_FAILED in types


async def test_deposit_in_another_currency_is_converted(client: Client, tenant: Tenant) -> None:
    wallet_id = await wallet(client, tenant, "EUR")
    deposit = await post(
        client,
        tenant,
        "/api/v1/deposit",
        {"wallet_id": wallet_id, "from_amount": 10_000, "from_currency_id": "USD"},
    )
    assert deposit["exchange_rate_from_to"] == 0.92
    assert deposit["to_amount"] == 9_200
    await post(client, tenant, f"/api/v1/sandbox/deposits/{deposit['id']}/complete", {})
    assert (await balance(client, tenant, wallet_id))["balance"] == 9_200


async def test_clock_advance_settles_what_falls_due(client: Client, tenant: Tenant) -> None:
    wallet_id = await wallet(client, tenant)
    deposit = await post(
        client,
        tenant,
        "/api/v1/deposit",
        {"wallet_id": wallet_id, "from_amount": 700, "from_currency_id": "USD"},
    )
    early = await post(client, tenant, "/api/v1/sandbox/clock/advance", {"seconds": 23 * 3600})
    assert (await get(client, tenant, f"/api/v1/deposit/{deposit['id']}"))["status"] == "pending"
    late = await post(client, tenant, "/api/v1/sandbox/clock/advance", {"seconds": 3600})
    assert late["now"] > early["now"]
    assert (await get(client, tenant, f"/api/v1/deposit/{deposit['id']}"))["status"] == "completed"
    assert (await balance(client, tenant, wallet_id))["balance"] == 700


async def test_bank_accounts(client: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    account = await post(client, tenant, "/api/v1/bank-account", USD_BANK)
    assert account["id"].startswith("ba_")
    assert account["last4"] == "6789"
    assert account["account_number"].endswith("6789") and "0001234" not in account["account_number"]
    bad = await post(
        client,
        tenant,
        "/api/v1/bank-account",
        {**USD_BANK, "routing_number": "021000022"},
        status=400,
    )
    assert bad["error"]["param"] == "routing_number"
    bad_iban = await post(
        client,
        tenant,
        "/api/v1/bank-account",
        {
            **USD_BANK,
            "currency_id": "EUR",
            "account_number": "DE89370400440532013001",
            "routing_number": "COBADEFFXXX",
        },
        status=400,
    )
    assert bad_iban["error"]["param"] == "account_number"
    formats = await get(client, tenant, "/api/v1/bank-account/formats")
    assert {f["currency_id"] for f in formats} == {
        "USD",
        "EUR",
        "GBP",
        "JPY",
        "CHF",
        "CAD",
        "AUD",
        "SGD",
        "KWD",
    }
    usd = next(f for f in formats if f["currency_id"] == "USD")
    assert {f["name"] for f in usd["fields"]} >= {"account_number", "routing_number"}
    names = await get(client, tenant, "/api/v1/bank-account/bank-names?currency=GBP")
    assert names[0]["currency_id"] == "GBP" and names[0]["bank_names"]
    await get(client, tenant, "/api/v1/bank-account/bank-names?currency=XXX", status=400)


async def test_withdrawal_reserves_amount_and_fee(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    wallet_id = await funded(client, tenant, "USD", 100_000)
    bank = await post(client, tenant, "/api/v1/bank-account", USD_BANK)
    body = {
        "wallet_id": wallet_id,
        "from_amount": 10_000,
        "from_currency_id": "USD",
        "to_currency_id": "USD",
        "bank_account_id": bank["id"],
        "reference": "payout-1",
    }
    withdrawal = await post(client, tenant, "/api/v1/withdraw", body)
    assert withdrawal["withdraw_fee"] == 25 + 100  # fixed 25 + 1 % of 10,000
    assert withdrawal["status"] == "pending"
    held = await balance(client, tenant, wallet_id)
    assert (held["balance"], held["pending_out"], held["available_balance"]) == (
        100_000,
        10_125,
        89_875,
    )
    done = await post(
        client, tenant, f"/api/v1/sandbox/withdrawals/{withdrawal['id']}/complete", {}
    )
    assert done["status"] == "completed"
    after = await balance(client, tenant, wallet_id)
    assert (after["balance"], after["pending_out"]) == (89_875, 0)

    second = await post(client, tenant, "/api/v1/withdraw", body)
    failed = await post(
        client,
        tenant,
        f"/api/v1/sandbox/withdrawals/{second['id']}/fail",
        {"code": "account_closed", "message": "The beneficiary account is closed"},
    )
    assert failed["error"] == {
        "code": "account_closed",
        "message": "The beneficiary account is closed",
    }
    assert (await balance(client, tenant, wallet_id))["available_balance"] == 89_875
    listed = await get(client, tenant, "/api/v1/withdrawals")
    assert [w["id"] for w in listed] == [second["id"], withdrawal["id"]]
    assert await get(client, tenant, f"/api/v1/withdraw/{withdrawal['id']}") == done
    types = [e.type for e in events_of(treasury, tenant.company_id)]
    assert EventType.WITHDRAWAL_COMPLETED in types and EventType.WITHDRAWAL_FAILED in types


async def test_withdrawal_refusals_move_nothing(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    wallet_id = await funded(client, tenant, "USD", 1_000)
    bank = await post(client, tenant, "/api/v1/bank-account", USD_BANK)
    foreign_bank = await post(client, other_tenant, "/api/v1/bank-account", USD_BANK)
    base = {
        "wallet_id": wallet_id,
        "from_amount": 990,
        "from_currency_id": "USD",
        "bank_account_id": bank["id"],
    }
    before = await balance(client, tenant, wallet_id)
    short = await post(client, tenant, "/api/v1/withdraw", base, status=400)  # 990 + fee > 1,000
    assert short["error"]["code"] == "insufficient_funds"
    assert short["error"]["param"] == "from_amount"
    cases = [
        ({**base, "bank_account_id": foreign_bank["id"]}, 404, "bank_account_id"),
        ({**base, "bank_account_id": "ba_nope"}, 404, "bank_account_id"),
        ({**base, "from_currency_id": "EUR"}, 400, "from_currency_id"),
        ({**base, "to_currency_id": "GBP"}, 400, "to_currency_id"),
        ({**base, "from_amount": 0}, 400, "from_amount"),
        ({**base, "from_amount": -5}, 400, "from_amount"),
        ({**base, "from_amount": 10.5}, 400, "from_amount"),
        ({**base, "from_amount": "100"}, 400, "from_amount"),
        ({**base, "from_amount": 100_000_000_000}, 400, "from_amount"),
        ({**base, "wallet_id": "wal_nope"}, 404, "wallet_id"),
    ]
    for body, status, param in cases:
        error = await post(client, tenant, "/api/v1/withdraw", body, status=status)
        assert error["error"]["param"] == param, body
    assert await balance(client, tenant, wallet_id) == before
    assert await get(client, tenant, "/api/v1/withdrawals") == []


async def test_transfers_same_and_cross_currency(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    usd = await funded(client, tenant, "USD", 50_000)
    usd2 = await wallet(client, tenant, "USD")
    jpy = await wallet(client, tenant, "JPY")
    same = await post(
        client,
        tenant,
        "/api/v1/transfer",
        {"from_wallet_id": usd, "to_wallet_id": usd2, "from_amount": 1_000, "reference": "r1"},
    )
    assert same["status"] == "completed"
    assert same["exchange_rate_from_to"] == 1
    assert (await balance(client, tenant, usd2))["balance"] == 1_000

    cross = await post(
        client,
        tenant,
        "/api/v1/transfer",
        {"from_wallet_id": usd, "to_wallet_id": jpy, "from_amount": 10_000},
    )
    assert cross["status"] == "pending"
    assert Decimal(str(cross["exchange_rate_from_to"])) == Decimal("150.25")
    assert cross["to_amount"] == 15_025  # 100.00 USD at 150.25 = 15,025 JPY (exponent 0)
    assert (await balance(client, tenant, jpy))["pending_in"] == 15_025
    assert (await balance(client, tenant, usd))["pending_out"] == 10_000
    await post(client, tenant, "/api/v1/sandbox/clock/advance", {"seconds": 60})
    assert (await get(client, tenant, f"/api/v1/transfer/{cross['id']}"))["status"] == "completed"
    assert (await balance(client, tenant, jpy))["balance"] == 15_025
    assert (await balance(client, tenant, usd))["balance"] == 39_000
    listed = await get(client, tenant, "/api/v1/transfers")
    assert [t["id"] for t in listed] == [cross["id"], same["id"]]

    refund = await post(
        client,
        tenant,
        "/api/v1/transfer",
        {"from_wallet_id": usd, "to_wallet_id": jpy, "from_amount": 100},
    )
    failed = await post(client, tenant, f"/api/v1/sandbox/transfers/{refund['id']}/fail", {})
    assert failed["status"] == "failed" and failed["error"]["code"] == "transfer_failed"
    assert (await balance(client, tenant, usd))["available_balance"] == 39_000
    types = [e.type for e in events_of(treasury, tenant.company_id)]
    assert types.count(EventType.TRANSFER_COMPLETED) == 2 and EventType.TRANSFER_FAILED in types


async def test_transfer_refusals(client: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    usd = await funded(client, tenant, "USD", 100)
    other = await wallet(client, tenant, "USD")
    foreign = await wallet(client, other_tenant, "USD")
    short = await post(
        client,
        tenant,
        "/api/v1/transfer",
        {"from_wallet_id": usd, "to_wallet_id": other, "from_amount": 101},
        status=400,
    )
    assert short["error"]["code"] == "insufficient_funds"
    same = await post(
        client,
        tenant,
        "/api/v1/transfer",
        {"from_wallet_id": usd, "to_wallet_id": usd, "from_amount": 1},
        status=400,
    )
    assert same["error"]["param"] == "to_wallet_id"
    await post(
        client,
        tenant,
        "/api/v1/transfer",
        {"from_wallet_id": usd, "to_wallet_id": foreign, "from_amount": 1},
        status=404,
    )
    await get(client, tenant, "/api/v1/transfer/trf_nope", status=404)
    assert (await balance(client, tenant, usd))["balance"] == 100


@pytest.mark.parametrize(
    ("currency", "fields"),
    [
        ("USD", {"account_number", "routing_number"}),
        ("GBP", {"account_number", "sort_code", "iban"}),
        ("EUR", {"iban", "bic"}),
    ],
)
async def test_virtual_accounts(
    client: Client, tenant: Tenant, treasury: Treasury, currency: str, fields: set[str]
) -> None:
    wallet_id = await wallet(client, tenant, currency)
    account = await post(
        client,
        tenant,
        "/api/v1/virtual-account",
        {"wallet_id": wallet_id, "source_currency": currency},
    )
    assert account["id"].startswith("va_") and account["status"] == "active"
    assert all(account[f] for f in fields), account
    credited = await post(
        client,
        tenant,
        f"/api/v1/sandbox/virtual-accounts/{account['id']}/incoming",
        {"amount": 2_500, "reference": "rent"},
    )
    assert credited["status"] == "completed" and credited["to_amount"] == 2_500
    assert (await balance(client, tenant, wallet_id))["balance"] == 2_500
    assert [a["id"] for a in await get(client, tenant, "/api/v1/virtual-accounts")] == [
        account["id"]
    ]
    completed = [
        e for e in events_of(treasury, tenant.company_id) if e.type is EventType.DEPOSIT_COMPLETED
    ]
    assert completed[-1].data["object"]["id"] == credited["id"]


async def test_virtual_accounts_only_where_can_vban(client: Client, tenant: Tenant) -> None:
    wallet_id = await wallet(client, tenant, "JPY")
    error = await post(
        client,
        tenant,
        "/api/v1/virtual-account",
        {"wallet_id": wallet_id, "source_currency": "JPY"},
        status=400,
    )
    assert error["error"]["param"] == "source_currency"


async def test_sandbox_calls_replay_with_an_idempotency_key(client: Client, tenant: Tenant) -> None:
    wallet_id = await wallet(client, tenant, "USD")
    account = await post(
        client,
        tenant,
        "/api/v1/virtual-account",
        {"wallet_id": wallet_id, "source_currency": "USD"},
    )
    path = f"/api/v1/sandbox/virtual-accounts/{account['id']}/incoming"
    headers = {**tenant.auth, "Idempotency-Key": "incoming-1"}
    first = await client.post(path, json={"amount": 10_000}, headers=headers)
    again = await client.post(path, json={"amount": 10_000}, headers=headers)
    assert first.status == again.status == 200
    assert await first.read() == await again.read()
    assert (await balance(client, tenant, wallet_id))["balance"] == 10_000  # credited once

    bank = await post(client, tenant, "/api/v1/bank-account", USD_BANK)
    withdrawal = await post(
        client,
        tenant,
        "/api/v1/withdraw",
        {
            "wallet_id": wallet_id,
            "from_amount": 1_000,
            "from_currency_id": "USD",
            "bank_account_id": bank["id"],
        },
    )
    settle = f"/api/v1/sandbox/withdrawals/{withdrawal['id']}/complete"
    headers = {**tenant.auth, "Idempotency-Key": "settle-1"}
    done = await client.post(settle, json={}, headers=headers)
    replay = await client.post(settle, json={}, headers=headers)
    assert done.status == replay.status == 200
    assert await done.read() == await replay.read()

    headers = {**tenant.auth, "Idempotency-Key": "tick-1"}
    tick = await client.post("/api/v1/sandbox/clock/advance", json={"seconds": 10}, headers=headers)
    tock = await client.post("/api/v1/sandbox/clock/advance", json={"seconds": 10}, headers=headers)
    assert await tick.json() == await tock.json()  # advanced once


async def test_the_sandbox_clock_stays_in_range(client: Client, tenant: Tenant) -> None:
    error = await post(
        client, tenant, "/api/v1/sandbox/clock/advance", {"seconds": 315_360_000}, status=200
    )
    assert "now" in error
    for _ in range(3):
        refused = await post(
            client,
            tenant,
            "/api/v1/sandbox/clock/advance",
            {"seconds": 315_360_000 * 300},
            status=400,
        )
        assert refused["error"]["param"] == "seconds"
    await wallet(client, tenant)  # business calls still work


async def test_settling_refusals_name_the_right_field(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    wallet_id = await wallet(client, tenant, "JPY")
    deposit = await post(
        client,
        tenant,
        "/api/v1/deposit",
        {"wallet_id": wallet_id, "from_amount": 1_000, "from_currency_id": "KWD"},
    )
    zero = await post(
        client,
        tenant,
        f"/api/v1/sandbox/deposits/{deposit['id']}/complete",
        {"amount": 1},
        status=400,
    )
    assert zero["error"]["code"] == "amount_too_small"
    assert zero["error"]["param"] == "amount"
    assert (await get(client, tenant, f"/api/v1/deposit/{deposit['id']}"))["status"] == "pending"
    foreign = await post(
        client, other_tenant, f"/api/v1/sandbox/deposits/{deposit['id']}/complete", {}, status=404
    )
    assert foreign["error"]["param"] == "deposit_id"
