"""The OpenAPI document covers every route and its references resolve."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient
from openapi_spec_validator import validate

from tests.e2e.conftest import Tenant
from treasury_aiohttp.dashboard import ops as dashboard_ops
from treasury_aiohttp.hosted import pages as hosted_pages
from treasury_core import Treasury
from treasury_core.idempotency import KEY_PATTERN, MAX_KEY_LENGTH
from treasury_core.validation import (
    EMAIL_PATTERN,
    NAME_PATTERN,
    RESOURCE_ID_PATTERN,
    SINGLE_LINE_PATTERN,
    URL_PATTERN,
)

Client = TestClient[Any, Any]


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


async def test_openapi_document_covers_every_route(client: Client) -> None:
    response = await client.get("/api/v1/openapi.json")
    doc = await response.json()
    assert doc["openapi"].startswith("3.1")
    served = {
        (route.method, route.resource.canonical)
        for route in client.server.app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }
    documented = {(m.upper(), path) for path, item in doc["paths"].items() for m in item}
    # The pages for people are documented too (HTML answers); only the stylesheet is not.
    assets = {page for page in hosted_pages.PAGES if page[1].startswith("/hosted/static/")}
    # The dashboard is for people signed in with a cookie, not part of the API it documents.
    dashboard = dashboard_ops.PAGES
    assert dashboard <= served
    assert served - {("GET", "/api/v1/openapi.json")} - assets - dashboard == documented
    schemas = doc["components"]["schemas"]
    for ref in _refs(doc):
        assert ref.startswith("#/components/schemas/")
        assert ref.rsplit("/", 1)[1] in schemas
    create = doc["paths"]["/api/v1/wallet"]["post"]
    body_schema = schemas[
        create["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    ]
    assert sorted(body_schema["required"]) == ["currency_id", "name"]
    assert body_schema["additionalProperties"] is False


def _param(operation: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in operation["parameters"] if p["name"] == name)


def _resolved(schemas: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node``, or the component its ``$ref`` names."""
    if "$ref" in node:
        resolved: dict[str, Any] = schemas[node["$ref"].rsplit("/", 1)[1]]
        return resolved
    return node


def _property(schemas: dict[str, Any], model: str, name: str) -> dict[str, Any]:
    node: dict[str, Any] = schemas[model]["properties"][name]
    # An optional field is anyOf [its schema, null].
    node = next((s for s in node.get("anyOf", []) if s.get("type") != "null"), node)
    return _resolved(schemas, node)


async def test_the_document_is_valid_openapi(client: Client) -> None:
    doc = await (await client.get("/api/v1/openapi.json")).json()
    validate(doc)  # raises on the first rule of OpenAPI 3.1 (and its JSON Schema) it breaks


def _inline_enums(node: Any, path: str = "") -> list[tuple[str, tuple[Any, ...]]]:
    """Every ``enum`` of several values in ``node`` that is not a component of its own, with
    where it is (one value is a constant, such as ``Idempotent-Replayed: true``)."""
    found: list[tuple[str, tuple[Any, ...]]] = []
    if isinstance(node, dict):
        if len(node.get("enum", ())) > 1 and path.count("/") > 3:
            found.append((path, tuple(node["enum"])))
        for key, value in node.items():
            found += _inline_enums(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _inline_enums(value, f"{path}/{index}")
    return found


async def test_a_repeated_type_is_one_component(client: Client, treasury: Treasury) -> None:
    doc = await (await client.get("/api/v1/openapi.json")).json()
    schemas, paths = doc["components"]["schemas"], doc["paths"]
    # No set of values is spelt out twice: a client generator makes a type of each copy.
    enums = _inline_enums(doc)
    assert len(enums) >= 2  # the Error schema's own, at least
    values = [enum for _, enum in enums]
    assert [(p, e) for p, e in enums if values.count(e) > 1] == []
    # Every currency field and parameter refers to the one Currency, the enabled codes.
    currency = "#/components/schemas/Currency"
    enabled = sorted(c.code for c in treasury.currencies)
    assert sorted(schemas["Currency"]["enum"]) == enabled
    assert schemas["CreateWalletRequest"]["properties"]["currency_id"]["$ref"] == currency
    processing = schemas["CreateIntentRequest"]["properties"]["processing_currency"]
    assert {"$ref": currency} in processing["anyOf"]
    assert _param(paths["/api/v1/deposits"]["get"], "currency")["schema"] == {"$ref": currency}
    vban = "#/components/schemas/VirtualAccountCurrency"
    assert schemas["CreateVirtualAccountRequest"]["properties"]["source_currency"]["$ref"] == vban
    # A status filter is the status enum of the records it lists.
    deposits = _param(paths["/api/v1/deposits"]["get"], "status")["schema"]
    assert deposits == schemas["DepositRecord"]["properties"]["status"]
    # Metadata: one type on the records, one (with its limits) in requests and filters.
    assert schemas["WalletRecord"]["properties"]["metadata"]["$ref"].endswith("/Metadata")
    metadata_filter = _param(paths["/api/v1/wallets"]["get"], "metadata")["schema"]
    assert metadata_filter["$ref"].endswith("/MetadataInput")
    assert schemas["MetadataInput"]["maxProperties"] == 50


async def test_a_body_without_required_fields_may_be_left_out(
    client: Client, tenant: Tenant
) -> None:
    doc = await (await client.get("/api/v1/openapi.json")).json()
    complete = doc["paths"]["/api/v1/sandbox/deposits/{deposit_id}/complete"]["post"]
    assert complete["requestBody"]["required"] is False
    create = doc["paths"]["/api/v1/deposit"]["post"]
    assert create["requestBody"]["required"] is True
    # As documented: no body and no Content-Type completes the deposit.
    wallet = await client.post(
        "/api/v1/wallet", json={"name": "Ops", "currency_id": "EUR"}, headers=tenant.auth
    )
    wallet_id = (await wallet.json())["id"]
    deposit = await client.post(
        "/api/v1/deposit",
        json={"wallet_id": wallet_id, "from_amount": 1000, "from_currency_id": "EUR"},
        headers=tenant.auth,
    )
    deposit_id = (await deposit.json())["id"]
    completed = await client.post(
        f"/api/v1/sandbox/deposits/{deposit_id}/complete", headers=tenant.auth
    )
    assert completed.status == 200, await completed.text()
    assert (await completed.json())["status"] == "completed"


async def test_the_document_states_the_rules_the_server_enforces(
    client: Client, treasury: Treasury
) -> None:
    doc = await (await client.get("/api/v1/openapi.json")).json()
    schemas, paths = doc["components"]["schemas"], doc["paths"]
    enabled = sorted(currency.code for currency in treasury.currencies)
    # Currencies: the enabled codes; amounts: the configured maximum.
    assert sorted(_property(schemas, "CreateWalletRequest", "currency_id")["enum"]) == enabled
    amount = _property(schemas, "CreateIntentRequest", "billing_amount")
    assert (amount["type"], amount["maximum"]) == ("integer", treasury.config.max_amount)
    # Free text: the one list of refused characters, as a pattern.
    assert _property(schemas, "CreateWalletRequest", "name")["pattern"] == NAME_PATTERN
    assert _property(schemas, "CreateIntentRequest", "customer")["pattern"] == SINGLE_LINE_PATTERN
    assert _property(schemas, "CreateIntentRequest", "customer_email")["pattern"] == EMAIL_PATTERN
    assert _property(schemas, "CreateWebhookEndpointRequest", "url")["pattern"] == URL_PATTERN
    # Query parameters: typed as the handlers read them.
    intents = paths["/api/v1/payments/intents"]["get"]
    assert _param(intents, "created_gte")["schema"] == {"type": "string", "format": "date-time"}
    assert _param(intents, "account_id")["schema"]["type"] == "integer"
    assert _param(intents, "starting_after")["schema"]["type"] == "integer"
    wallets = paths["/api/v1/wallets"]["get"]
    assert _param(wallets, "starting_after")["schema"]["pattern"] == RESOURCE_ID_PATTERN
    lookup = _param(paths["/api/v1/payments/intent"]["get"], "payment_intent_lookup_id")
    assert lookup["required"] is True
    key = _param(paths["/api/v1/wallet"]["post"], "Idempotency-Key")
    assert (key["schema"]["pattern"], key["schema"]["maxLength"]) == (KEY_PATTERN, MAX_KEY_LENGTH)
    # The hosted pages answer HTML.
    for path in ("/pay/{payment_intent_lookup_id}", "/tokenize/{pmti_id}/{secret}"):
        assert list(paths[path]["get"]["responses"]["200"]["content"]) == ["text/html"]


async def test_a_hosted_page_answers_as_documented(client: Client) -> None:
    doc = await (await client.get("/api/v1/openapi.json")).json()
    response = await client.get("/pay/pil_0000000000000000000000")
    documented = doc["paths"]["/pay/{payment_intent_lookup_id}"]["get"]["responses"]
    assert str(response.status) in documented
    assert response.content_type in documented[str(response.status)]["content"]


async def test_the_refusals_a_route_can_give_are_documented(client: Client) -> None:
    doc = await (await client.get("/api/v1/openapi.json")).json()
    create = doc["paths"]["/api/v1/payments/intent"]["post"]["responses"]
    # A publishable key's card_token or manual capture (the route takes publishable keys).
    assert "403" in create
    assert "permission_error" in create["403"]["description"]
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method == "post" and {"Payments", "Card on file"} & set(operation["tags"]):
                assert "502" in operation["responses"], path


async def test_the_statement_route_shows_the_operators_scheme(client: Client) -> None:
    doc = await (await client.get("/api/v1/openapi.json")).json()
    schemes = doc["components"]["securitySchemes"]
    assert set(schemes) == {"bearerAuth", "operatorAuth"}
    assert "ok_" in schemes["operatorAuth"]["description"]
    statements = doc["paths"]["/api/v1/bank-statements"]["post"]
    assert statements["security"] == [{"operatorAuth": []}]
    assert "operator_key_required" in statements["responses"]["403"]["description"]
    # No company, so no idempotency records: the header is not offered, nor its 409.
    assert all(p["name"] != "Idempotency-Key" for p in statements.get("parameters", []))
    assert "409" not in statements["responses"]
    # Every other keyed route takes a company's key.
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if path != "/api/v1/bank-statements" and "security" in operation:
                assert operation["security"] == [{"bearerAuth": []}], (method, path)
