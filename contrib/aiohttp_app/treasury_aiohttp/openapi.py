"""The OpenAPI 3.1 document, built from the route table and the pydantic models it names."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from treasury_aiohttp.routing import Auth, Route

_REF = "#/components/schemas/{model}"

_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "code", "message"],
            "properties": {
                "type": {
                    "type": "string",
                    "enum": [
                        "invalid_request_error",
                        "authentication_error",
                        "card_error",
                        "permission_error",
                        "not_found",
                        "idempotency_error",
                        "rate_limit_error",
                        "api_error",
                    ],
                },
                "code": {"type": "string"},
                "message": {"type": "string"},
                "param": {"type": "string"},
                "failure_reason": {"type": "string"},
            },
        }
    },
}


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _REF.format(model="Error")}}},
    }


def build_openapi(routes: tuple[Route, ...], *, title: str, version: str) -> dict[str, Any]:
    """The OpenAPI document for ``routes``."""
    models: list[tuple[type[BaseModel], Any]] = []
    for route in routes:
        if route.body is not None:
            models.append((route.body, "validation"))
        if route.response is not None:
            models.append((route.response, "serialization"))
    keys, schema = models_json_schema(models, ref_template=_REF)
    schemas: dict[str, Any] = dict(schema.get("$defs", {}))
    schemas["Error"] = _ERROR_SCHEMA

    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        operation: dict[str, Any] = {
            "operationId": route.operation_id,
            "summary": route.summary,
            "tags": list(route.tags),
            "responses": {},
        }
        if route.handler.__doc__:
            operation["description"] = route.handler.__doc__.strip()
        parameters: list[dict[str, Any]] = [
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": text,
                "schema": {"type": "string"},
            }
            for name, text in route.path_params.items()
        ]
        parameters += [
            {
                "name": name,
                "in": "query",
                "required": False,
                "description": text,
                "schema": {"type": "string"},
            }
            for name, text in route.query_params.items()
        ]
        if route.is_list and route.paged:
            parameters += [
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                },
                {
                    "name": "starting_after",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "maxLength": 64},
                },
            ]
        if route.method == "POST":
            parameters.append(
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "minLength": 1, "maxLength": 255},
                }
            )
        if parameters:
            operation["parameters"] = parameters
        if route.body is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": keys[(route.body, "validation")]}},
            }
        ok: dict[str, Any] = {"description": "OK"}
        if route.response is not None:
            item = keys[(route.response, "serialization")]
            ok["content"] = {
                "application/json": {
                    "schema": {"type": "array", "items": item} if route.is_list else item
                }
            }
            if route.is_list and route.paged:
                ok["headers"] = {
                    "Link": {
                        "description": 'rel="next" when more remain',
                        "schema": {"type": "string"},
                    }
                }
        responses = operation["responses"]
        responses["200"] = ok
        responses["400"] = _error("Invalid request")
        if route.auth is not Auth.NONE:
            responses["401"] = _error("Missing or invalid API key")
            responses["403"] = _error("A secret key is required")
            operation["security"] = [{"bearerAuth": []}]
        if route.path_params:
            responses["404"] = _error("No such resource for this company")
        if route.method == "POST":
            responses["409"] = _error("A request with this Idempotency-Key is in progress")
            responses["413"] = _error("Request body too large")
        paths.setdefault(route.path, {})[route.method.lower()] = operation

    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }
