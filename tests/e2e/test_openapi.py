"""The OpenAPI document covers every route and its references resolve."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from treasury_aiohttp import hosted_pages

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
    pages = set(hosted_pages.PAGES)  # HTML for browsers, not part of the JSON API
    assert served - {("GET", "/api/v1/openapi.json")} - pages == documented
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
