"""Only the operator asserts bank facts: ``POST /api/v1/bank-statements`` takes an operator key.

A real HTTP server on loopback over SQLite and PostgreSQL, on the files rail. A company's secret
and publishable keys post a statement that would credit their own virtual account and complete
their own pending deposit: 403 ``operator_key_required``, and nothing is written (ledger,
events, statement lines, the deposit, the balance), with or without an ``Idempotency-Key``. The
operator's key imports the same statement; revoked, it is 401 at once; on a merchant route it
is no key at all (401). Each operator key has its own rate-limit bucket.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.bankfiles import Entry, camt053
from tests.e2e.conftest import Tenant
from treasury_aiohttp import create_app
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.movements.bank_files import BankStatementLine
from treasury_core.ports import UnitOfWork
from treasury_core.testing.fakes.clock import FakeClock

Client = TestClient[Any, Any]

DEBTOR_IBAN = "NL91ABNA0417164300"
STATEMENTS = "/api/v1/bank-statements"


def _config(database_url: str, **overrides: Any) -> TreasuryConfig:
    return TreasuryConfig(
        database_url=database_url,
        pool_size=4,
        bank_rail="files",
        bank_debtor_name="Acme Treasury BV",
        bank_debtor_iban=DEBTOR_IBAN,
        **overrides,
    )


@pytest.fixture
def treasury(database_url: str, clock: FakeClock) -> Treasury:
    return bootstrap(_config(database_url), clock=clock, wall_clock=clock)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def call(client: Client, key: str, method: str, path: str, body: Any = None) -> Any:
    response = await client.request(method, path, json=body, headers=bearer(key))
    payload = await response.json()
    assert response.status == 200, payload
    return payload


async def push(
    client: Client, key: str, data: bytes, extra: dict[str, str] | None = None
) -> tuple[int, Any]:
    headers = {**bearer(key), "Content-Type": "application/xml", **(extra or {})}
    response = await client.post(STATEMENTS, data=data, headers=headers)
    return response.status, await response.json()


async def written(treasury: Treasury) -> tuple[object, ...]:
    """Everything an import could write: ledger, events, statement lines of every company."""

    def read(uow: UnitOfWork) -> tuple[object, ...]:
        lines = [
            line.id
            for status in ("matched", "unmatched")
            for line in uow.records.with_status(BankStatementLine, status, 1000)
        ]
        return (
            sorted(uow.ledger.all_accounts(), key=lambda a: a.id),
            sorted(uow.ledger.postings(), key=lambda p: p.id),
            sorted(uow.ledger.pendings(), key=lambda p: p.id),
            [e.id for e in uow.outbox.list()],
            sorted(lines),
        )

    return await treasury.storage.run(read, write=False)


async def self_crediting_statement(client: Client, tenant: Tenant) -> tuple[bytes, Any, Any]:
    """A wallet with a virtual account and a pending deposit, and a statement crediting both:
    what a merchant would forge to mint itself money."""
    wallet = await call(
        client, tenant.secret_key, "POST", "/api/v1/wallet", {"name": "EUR", "currency_id": "EUR"}
    )
    va = await call(
        client,
        tenant.secret_key,
        "POST",
        "/api/v1/virtual-account",
        {"wallet_id": wallet["id"], "source_currency": "EUR"},
    )
    deposit = await call(
        client,
        tenant.secret_key,
        "POST",
        "/api/v1/deposit",
        {"wallet_id": wallet["id"], "from_amount": 50_000, "from_currency_id": "EUR"},
    )
    statement = camt053(
        [
            Entry("MINT-1", credit=True, amount="1000000.00", creditor_iban=va["iban"]),
            Entry("MINT-2", credit=True, amount="500.00", remittance=deposit["id"]),
        ],
        account=DEBTOR_IBAN,
    )
    return statement, wallet, deposit


async def test_merchant_keys_cannot_import_and_change_nothing(
    client: Client, treasury: Treasury, tenant: Tenant
) -> None:
    statement, wallet, deposit = await self_crediting_statement(client, tenant)
    before = await written(treasury)
    balance_path = f"/api/v1/wallet/{wallet['id']}/balance"
    balance = await call(client, tenant.secret_key, "GET", balance_path)
    for key in (tenant.secret_key, tenant.publishable_key):
        for extra in (None, {"Idempotency-Key": "mint-1"}):
            status, payload = await push(client, key, statement, extra)
            assert status == 403, payload
            error = payload["error"]
            assert (error["type"], error["code"]) == ("permission_error", "operator_key_required")
            assert "Only the operator" in error["message"]
            assert "operator key" in error["message"]
    assert await written(treasury) == before
    assert await call(client, tenant.secret_key, "GET", balance_path) == balance
    got = await call(client, tenant.secret_key, "GET", f"/api/v1/deposit/{deposit['id']}")
    assert got["status"] == "pending"
    # A bad or missing key is still 401, as on every route.
    for headers in ({}, bearer("sk_" + "x" * 30), bearer("ok_" + "x" * 30), bearer("nope")):
        response = await client.post(
            STATEMENTS, data=statement, headers={**headers, "Content-Type": "application/xml"}
        )
        assert response.status == 401, headers
        assert (await response.json())["error"]["type"] == "authentication_error"
    assert await written(treasury) == before


async def test_the_operator_key_imports_and_once_revoked_is_refused(
    client: Client, treasury: Treasury, tenant: Tenant
) -> None:
    statement, wallet, deposit = await self_crediting_statement(client, tenant)
    key, raw = await treasury.companies.create_operator_key("ops")
    # The merchant's refused attempt first: the operator's import is then the first one.
    assert (await push(client, tenant.secret_key, statement))[0] == 403
    status, result = await push(client, raw, statement)
    assert status == 200, result
    assert [line["outcome"] for line in result["lines"]] == [
        "virtual_account_credited",
        "deposit_completed",
    ]
    got = await call(client, tenant.secret_key, "GET", f"/api/v1/deposit/{deposit['id']}")
    assert got["status"] == "completed"
    balance = await call(client, tenant.secret_key, "GET", f"/api/v1/wallet/{wallet['id']}/balance")
    assert balance["balance"] == 100_000_000 + 50_000
    # Again: every line is known, nothing moves (the route takes no Idempotency-Key for that).
    after = await written(treasury)
    status, again = await push(client, raw, statement, {"Idempotency-Key": "ops-1"})
    assert (status, again["already_imported"], again["imported"]) == (200, 2, 0)
    assert await written(treasury) == after
    # Revoked through this process: refused at once, whatever the key cache holds.
    await treasury.companies.revoke_operator_key(key.id)
    status, payload = await push(client, raw, statement)
    assert status == 401, payload
    assert payload["error"] == {
        "type": "authentication_error",
        "code": "invalid_api_key",
        "message": "Invalid API key provided",
    }


async def test_an_operator_key_opens_no_merchant_route(
    client: Client, treasury: Treasury, tenant: Tenant
) -> None:
    _, raw = await treasury.companies.create_operator_key("ops")
    for method, path, body in (
        ("GET", "/api/v1/wallets", None),
        ("POST", "/api/v1/wallet", {"name": "Ops", "currency_id": "EUR"}),
        ("GET", "/api/v1/currencies", None),
        ("POST", "/api/v1/sandbox/clock/advance", {"seconds": 1}),
    ):
        response = await client.request(method, path, json=body, headers=bearer(raw))
        payload = await response.json()
        assert response.status == 401, (path, payload)
        assert payload["error"]["message"] == "Invalid API key provided", path
    assert await call(client, tenant.secret_key, "GET", "/api/v1/wallets") == []


async def test_each_operator_key_has_its_own_rate_limit(
    database_url: str, clock: FakeClock
) -> None:
    limited = bootstrap(
        _config(database_url, rate_limit_per_second=0.001, rate_limit_burst=2),
        clock=clock,
        wall_clock=clock,
    )
    _, first = await limited.companies.create_operator_key("ops")
    _, second = await limited.companies.create_operator_key("backup")
    company = await limited.companies.create_company("Acme")
    client: Client = TestClient(TestServer(create_app(limited, close_treasury=True)))
    await client.start_server()
    try:
        empty = camt053([], account=DEBTOR_IBAN)
        statuses = [(await push(client, first, empty))[0] for _ in range(3)]
        assert statuses == [200, 200, 429]
        # Another operator key, and a merchant's key on the same route, count on their own.
        assert (await push(client, second, empty))[0] == 200
        assert (await push(client, company.secret_key, empty))[0] == 403
        assert (await push(client, company.secret_key, empty))[0] == 403
        assert (await push(client, company.secret_key, empty))[0] == 429
    finally:
        await client.close()
