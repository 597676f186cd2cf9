"""JSON endpoints take JSON declared as JSON: anything else is 415 and changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from tests.e2e.test_payments_api import APPROVED, card, create, lookup
from treasury_core import Treasury

Client = TestClient[Any, Any]

WALLET = b'{"name": "Main", "currency_id": "USD"}'


async def wallet_count(treasury: Treasury, tenant: Tenant) -> int:
    return len((await treasury.wallets.list(tenant.company_id)).items)


def assert_unsupported(status: int, payload: Any) -> None:
    assert status == 415, payload
    assert payload == {
        "error": {
            "type": "invalid_request_error",
            "code": "unsupported_media_type",
            "message": "The request body must be JSON, sent with Content-Type: application/json",
        }
    }


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/octet-stream",
        "application/json; charset=latin-1",
        "application/jsonx",
        "application/merge-patch+json",
        None,
    ],
)
async def test_a_json_body_not_declared_json_is_415(
    client: Client, tenant: Tenant, treasury: Treasury, content_type: str | None
) -> None:
    headers = dict(tenant.auth)
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = await client.post(
        "/api/v1/wallet", data=WALLET, headers=headers, skip_auto_headers=["Content-Type"]
    )
    assert_unsupported(response.status, await response.json())
    assert await wallet_count(treasury, tenant) == 0


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON; charset=UTF-8"],
)
async def test_json_with_or_without_a_utf8_charset_is_taken(
    client: Client, tenant: Tenant, treasury: Treasury, content_type: str
) -> None:
    headers = {**tenant.auth, "Content-Type": content_type}
    response = await client.post("/api/v1/wallet", data=WALLET, headers=headers)
    assert response.status == 200, await response.text()
    assert await wallet_count(treasury, tenant) == 1


async def test_an_empty_body_needs_no_content_type(client: Client, tenant: Tenant) -> None:
    # curl -X POST sends neither a body nor a Content-Type: the body's fields are checked, not
    # the label of a body that is not there.
    response = await client.post(
        "/api/v1/wallet", data=b"", headers=tenant.auth, skip_auto_headers=["Content-Type"]
    )
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "parameter_missing"


async def test_a_415_gives_the_idempotency_key_back(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    # The fingerprint is the body, not its label: a stored 415 would be replayed to the
    # corrected retry forever.
    headers = {**tenant.auth, "Idempotency-Key": "k1"}
    response = await client.post(
        "/api/v1/wallet", data=WALLET, headers={**headers, "Content-Type": "text/plain"}
    )
    assert_unsupported(response.status, await response.json())
    response = await client.post(
        "/api/v1/wallet", data=WALLET, headers={**headers, "Content-Type": "application/json"}
    )
    assert response.status == 200, await response.text()
    assert "Idempotent-Replayed" not in response.headers
    assert await wallet_count(treasury, tenant) == 1


async def test_the_pay_call_takes_json_or_a_form_and_nothing_else(
    client: Client, tenant: Tenant
) -> None:
    intent = await create(client, tenant)
    lookup_id = intent["payment_intent_lookup_id"]
    body = json.dumps(card(APPROVED)).encode()
    response = await client.post(
        f"/pay/{lookup_id}", data=body, headers={"Content-Type": "text/plain"}
    )
    assert_unsupported(response.status, await response.json())
    assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"
    # JSON labelled as a form (curl -d without -H) is read as the form it says it is.
    response = await client.post(
        f"/pay/{lookup_id}",
        data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "parameter_unknown"
    assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"


async def test_the_openapi_document_says_json_and_415(client: Client) -> None:
    document = await (await client.get("/api/v1/openapi.json")).json()
    with_body = [
        operation
        for item in document["paths"].values()
        for operation in item.values()
        if "requestBody" in operation
    ]
    assert with_body
    forms = 0
    for operation in with_body:
        content = set(operation["requestBody"]["content"])
        if content == {"application/x-www-form-urlencoded"}:
            # A hosted page's form, posted by a browser: not a JSON endpoint.
            assert any(
                "text/html" in answer.get("content", {})
                for answer in operation["responses"].values()
            )
            forms += 1
            continue
        if operation["operationId"] == "import_statement":
            # A bank statement is an XML document, not JSON (docs/guides/banking.md).
            assert content == {"application/xml", "text/xml"}
            assert "415" in operation["responses"]
            continue
        assert content == {"application/json"}, operation["operationId"]
        assert "415" in operation["responses"], operation["operationId"]
    assert forms < len(with_body)
