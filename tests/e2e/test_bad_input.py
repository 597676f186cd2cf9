"""Bad input gets the documented error body, never a 500, and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from treasury_core import Treasury
from treasury_core.errors import ValidationFailed

Client = TestClient[Any, Any]


async def wallet_count(treasury: Treasury, tenant: Tenant) -> int:
    page = await treasury.wallets.list(tenant.company_id)
    return len(page.items)


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        (b'{"name": "x", "currency_id": "USD"', None, "body_invalid"),
        (b"not json", None, "body_invalid"),
        (b"[1, 2]", None, "body_invalid"),
        (b'"a string"', None, "body_invalid"),
        (b"null", None, "body_invalid"),
        (b"{}", "name", "parameter_missing"),
        (b"", "name", "parameter_missing"),
        (b'{"name": "x"}', "currency_id", "parameter_missing"),
        (b'{"name": 5, "currency_id": "USD"}', "name", "parameter_invalid"),
        (b'{"name": "x", "currency_id": 840}', "currency_id", "parameter_invalid"),
        (b'{"name": "x", "currency_id": ["USD"]}', "currency_id", "parameter_invalid"),
        (b'{"name": "", "currency_id": "USD"}', "name", "parameter_invalid"),
        (b'{"name": "   ", "currency_id": "USD"}', "name", "parameter_invalid"),
        (
            b'{"name": "x", "currency_id": "USD", "description": 7}',
            "description",
            "parameter_invalid",
        ),
        (b'{"name": "x", "currency_id": "USD", "colour": "red"}', "colour", "parameter_unknown"),
        (rb'{"name": "a\u0000b", "currency_id": "USD"}', "name", "parameter_invalid"),
        (rb'{"name": "a\ud800b", "currency_id": "USD"}', None, "body_invalid"),
        (
            rb'{"name": "ok", "currency_id": "USD", "description": "x\u0000"}',
            "description",
            "parameter_invalid",
        ),
        (rb'{"name": "ok", "currency_id": "U\u0000D"}', "currency_id", "unknown_currency"),
        (b'{"name": "x", "currency_id": "ZZZ"}', "currency_id", "unknown_currency"),
        (b'{"name": "x", "currency_id": "US"}', "currency_id", "parameter_invalid"),
        (
            '{"name": "\udcff", "currency_id": "USD"}'.encode("utf-8", "surrogatepass"),
            None,
            "body_invalid",
        ),
    ],
)
async def test_bad_wallet_bodies(
    client: Client, tenant: Tenant, treasury: Treasury, body: bytes, param: str | None, code: str
) -> None:
    response = await client.post(
        "/api/v1/wallet", data=body, headers={**tenant.auth, "Content-Type": "application/json"}
    )
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == code
    assert error.get("param") == param
    assert error["message"]
    assert await wallet_count(treasury, tenant) == 0


async def test_oversized_bodies_are_413(client: Client, tenant: Tenant, treasury: Treasury) -> None:
    big = b'{"name": "' + b"a" * 70_000 + b'", "currency_id": "USD"}'
    response = await client.post("/api/v1/wallet", data=big, headers=tenant.auth)
    assert response.status == 413
    assert (await response.json())["error"]["code"] == "request_too_large"

    async def chunks() -> Any:  # no Content-Length: refused while reading
        for _ in range(70):
            yield b"a" * 1024

    response = await client.post("/api/v1/wallet", data=chunks(), headers=tenant.auth)
    assert response.status == 413
    assert await wallet_count(treasury, tenant) == 0


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/wallet/wal_%00x",
        "/api/v1/wallet/%ED%A0%80",
        "/api/v1/wallet/wal_%00x/balance",
        "/api/v1/wallet/" + "w" * 5000,
    ],
)
async def test_hostile_path_ids_are_not_found(client: Client, tenant: Tenant, path: str) -> None:
    response = await client.get(path, headers=tenant.auth)
    assert response.status == 404
    assert (await response.json())["error"]["type"] == "not_found"


@pytest.mark.parametrize(
    "query", ["starting_after=wal_%00", "limit=%C2%B2", "limit=%D9%A1", "starting_after=%ED%A0%80"]
)
async def test_hostile_query_parameters_are_refused(
    client: Client, tenant: Tenant, query: str
) -> None:
    response = await client.get(f"/api/v1/wallets?{query}", headers=tenant.auth)
    assert response.status == 400
    assert (await response.json())["error"]["param"] in ("limit", "starting_after")


async def test_unknown_routes_and_methods(client: Client, tenant: Tenant) -> None:
    response = await client.get("/api/v1/nothing-here", headers=tenant.auth)
    assert response.status == 404
    assert (await response.json())["error"]["type"] == "not_found"
    response = await client.delete("/api/v1/wallets", headers=tenant.auth)
    assert response.status == 405
    assert (await response.json())["error"]["code"] == "method_not_allowed"


async def test_amounts_above_the_configured_maximum_are_400(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    too_much = treasury.config.max_amount + 1
    wallet = await client.post(
        "/api/v1/wallet", json={"name": "Ops", "currency_id": "USD"}, headers=tenant.auth
    )
    wallet_id = (await wallet.json())["id"]
    for path, body, param in (
        (
            "/api/v1/deposit",
            {"wallet_id": wallet_id, "from_amount": too_much, "from_currency_id": "USD"},
            "from_amount",
        ),
        (
            "/api/v1/payments/intent",
            {
                "account_id": tenant.account_id,
                "billing_amount": too_much,
                "billing_currency": "USD",
                "payment_type": "Card Payment",
            },
            "billing_amount",
        ),
    ):
        response = await client.post(path, json=body, headers=tenant.auth)
        error = (await response.json())["error"]
        assert (response.status, error["code"], error["param"]) == (
            400,
            "amount_too_large",
            param,
        )
    events = await treasury.storage.run(lambda uow: uow.outbox.list(tenant.company_id))
    assert events == []  # nothing was created


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/api/v1/wallet", {"name": "Payroll\u202egpj.exe", "currency_id": "USD"}, "name"),
        (
            "/api/v1/wallet",
            {"name": "Payroll", "currency_id": "USD", "description": "a\u2066b"},
            "description",
        ),
        (
            "/api/v1/payments/intent",
            {
                "billing_amount": 100,
                "billing_currency": "USD",
                "payment_type": "Card Payment",
                "merchant_reference": "order\u202d42",
            },
            "merchant_reference",
        ),
        (
            "/api/v1/payments/intent",
            {
                "billing_amount": 100,
                "billing_currency": "USD",
                "payment_type": "Card Payment",
                "customer": "Jane\u202bDoe",
            },
            "customer",
        ),
    ],
)
async def test_free_text_refuses_bidirectional_controls(
    client: Client,
    tenant: Tenant,
    treasury: Treasury,
    path: str,
    body: dict[str, Any],
    param: str,
) -> None:
    if path == "/api/v1/payments/intent":
        body = {"account_id": tenant.account_id, **body}
    response = await client.post(path, json=body, headers=tenant.auth)
    assert response.status == 400
    error = (await response.json())["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "parameter_invalid",
        param,
    )
    assert "bidirectional" in error["message"]
    assert await wallet_count(treasury, tenant) == 0
    intents = await client.get("/api/v1/payments/intents/count", headers=tenant.auth)
    assert (await intents.json())["count"] == 0


async def test_company_names_refuse_bidirectional_controls(treasury: Treasury) -> None:
    with pytest.raises(ValidationFailed) as caught:
        await treasury.companies.create_company("Acme\u202e")
    assert caught.value.param == "name"


@pytest.mark.parametrize(
    ("written", "amount"),
    [(b"500", 500), (b"500.0", 500), (b"5e2", 500), (b"5.00E+2", 500), (b"500.000", 500)],
)
async def test_whole_numbers_are_integers_however_written(
    client: Client, tenant: Tenant, written: bytes, amount: int
) -> None:
    # JSON Schema's "integer" admits 500.0: the schema's promise and the server's reading agree.
    body = (
        b'{"account_id": %d, "billing_amount": %s, "billing_currency": "USD", '
        b'"payment_type": "Card Payment"}' % (tenant.account_id, written)
    )
    response = await client.post(
        "/api/v1/payments/intent",
        data=body,
        headers={**tenant.auth, "Content-Type": "application/json"},
    )
    assert response.status == 200, await response.text()
    assert (await response.json())["billing_amount"] == amount


@pytest.mark.parametrize(
    "written", [b"5.5", b"500.000000000000000001", b"1e400", b"-0.0", b"5.0e-1", b"1e999999999"]
)
async def test_numbers_with_a_fraction_are_not_amounts(
    client: Client, tenant: Tenant, written: bytes
) -> None:
    body = (
        b'{"account_id": %d, "billing_amount": %s, "billing_currency": "USD", '
        b'"payment_type": "Card Payment"}' % (tenant.account_id, written)
    )
    response = await client.post(
        "/api/v1/payments/intent",
        data=body,
        headers={**tenant.auth, "Content-Type": "application/json"},
    )
    assert response.status == 400
    error = (await response.json())["error"]
    assert (error["code"], error["param"]) == ("parameter_invalid", "billing_amount")
    intents = await client.get("/api/v1/payments/intents/count", headers=tenant.auth)
    assert (await intents.json())["count"] == 0
