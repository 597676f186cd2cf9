"""A JSON body naming a parameter twice is refused: no guessing which of the values was meant."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from tests.e2e.test_payments_api import APPROVED, create, lookup, post
from treasury_core import Treasury

Client = TestClient[Any, Any]
JSON = {"Content-Type": "application/json"}


async def send(client: Client, path: str, body: bytes, headers: dict[str, str]) -> Any:
    response = await client.post(path, data=body, headers={**headers, **JSON})
    payload = await response.json()
    assert response.status == 400, payload
    return payload


def assert_duplicate(payload: Any, param: str) -> None:
    assert payload == {
        "error": {
            "type": "invalid_request_error",
            "code": "parameter_duplicated",
            "message": f"Received duplicate parameter: {param}",
            "param": param,
        }
    }


async def test_a_repeated_amount_moves_nothing(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    wallet = await post(client, tenant, "/api/v1/wallet", {"name": "Main", "currency_id": "USD"})
    body = (
        b'{"wallet_id": "' + wallet["id"].encode() + b'", "from_currency_id": "USD", '
        b'"from_amount": 1, "from_amount": 99999999}'
    )
    assert_duplicate(await send(client, "/api/v1/deposit", body, tenant.auth), "from_amount")
    balance = await treasury.wallets.balance(tenant.company_id, wallet["id"])
    assert (balance.balance, balance.pending_in) == (0, 0)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"name": "a", "currency_id": "USD", "name": "b"}', "name"),
        # The same name however it is spelt: JSON escapes are decoded before names are compared.
        (rb'{"name": "a", "n\u0061me": "b", "currency_id": "USD"}', "name"),
        (b'{"name": "a", "currency_id": "USD", "currency_id": "USD"}', "currency_id"),
        (b'{"name": "a", "currency_id": "EUR", "currency_id": "USD"}', "currency_id"),
    ],
)
async def test_a_repeated_wallet_parameter_is_400(
    client: Client, tenant: Tenant, treasury: Treasury, body: bytes, param: str
) -> None:
    assert_duplicate(await send(client, "/api/v1/wallet", body, tenant.auth), param)
    assert (await treasury.wallets.list(tenant.company_id)).items == []


async def test_a_repeated_card_number_pays_nothing(client: Client, tenant: Tenant) -> None:
    intent = await create(client, tenant)
    body = (
        b'{"cardholder_name": "Jane Doe", "card_number": "4000000000000002", '
        b'"card_number": "' + APPROVED.encode() + b'", '
        b'"expiry_month": 12, "expiry_year": 2030, "cvc": "123"}'
    )
    path = f"/pay/{intent['payment_intent_lookup_id']}"
    assert_duplicate(await send(client, path, body, {}), "card_number")
    assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"


async def test_a_repeated_form_field_pays_nothing(client: Client, tenant: Tenant) -> None:
    # A form names a field twice as easily (card_number=…&card_number=…); aiohttp keeps both
    # and a lookup would silently take the first.
    intent = await create(client, tenant)
    fields = [
        ("cardholder_name", "Jane Doe"),
        ("card_number", "4000000000000002"),
        ("card_number", APPROVED),
        ("expiry_month", "12"),
        ("expiry_year", "2030"),
        ("cvc", "123"),
    ]
    response = await client.post(f"/pay/{intent['payment_intent_lookup_id']}", data=fields)
    payload = await response.json()
    assert response.status == 400, payload
    assert_duplicate(payload, "card_number")
    assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"
