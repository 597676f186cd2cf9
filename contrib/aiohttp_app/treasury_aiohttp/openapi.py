"""The OpenAPI 3.1 document, built from the route table and the pydantic models it names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.json_schema import JsonSchemaMode

from treasury_aiohttp.hosted.forms import CSRF_FIELD
from treasury_aiohttp.routing import Auth, Route
from treasury_core.idempotency import KEY_PATTERN, MAX_KEY_LENGTH
from treasury_core.pagination import DEFAULT_LIMIT, MAX_LIMIT, MIN_LIMIT
from treasury_core.validation import COMPONENT_KEY

_REF = "#/components/schemas/{model}"

# Every non-2xx answer of the JSON API:
# ``{"error": {type, code, message, param?, failure_reason?, resource?}}``.
_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "code", "message"],
            "additionalProperties": False,
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
                # The record a provider call whose answer was lost left behind (a 502): a
                # retry with the same Idempotency-Key resumes it.
                "resource": {
                    "type": "object",
                    "required": ["object", "id", "status"],
                    "additionalProperties": False,
                    "properties": {
                        "object": {"type": "string", "enum": ["payment_intent", "refund"]},
                        "id": {"type": ["integer", "string"]},
                        "status": {"type": "string"},
                    },
                },
            },
        }
    },
}


#: Tags whose POSTs may charge, capture or refund a card: a decline answers 402.
_CARD_TAGS = frozenset({"Payments", "Card on file"})


def _error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _REF.format(model="Error")}}},
    }
    if headers:
        response["headers"] = headers
    return response


_HTML = {"text/html": {"schema": {"type": "string"}}}


def _page(route: Route, operation: dict[str, Any]) -> dict[str, Any]:
    """The operation of a page for people: HTML answers, a form rather than JSON."""
    responses: dict[str, Any] = {}
    for status, description in sorted(route.html.items()):
        response: dict[str, Any] = {"description": description}
        if 300 <= status < 400:
            response["headers"] = {
                "Location": {"required": True, "schema": {"type": "string"}},
            }
        else:
            response["content"] = _HTML
        responses[str(status)] = response
    if route.form is not None:
        schema = route.form.model_json_schema()
        schema["properties"][CSRF_FIELD] = {
            "type": "string",
            "description": "The token of the page the form came from.",
        }
        schema["required"] = [*schema.get("required", []), CSRF_FIELD]
        operation["requestBody"] = {
            "required": True,
            "content": {"application/x-www-form-urlencoded": {"schema": schema}},
        }
        # The body limits answer before the page does, in the API's JSON.
        responses["408"] = _error("The request body did not arrive in time")
        responses["413"] = _error("Request body too large")
    operation["responses"] = responses
    return operation


def _description(route: Route) -> str | None:
    """The handler's docstring and the route's own description, as one text."""
    parts = [text.strip() for text in (route.handler.__doc__, route.description) if text]
    return "\n\n".join(part for part in parts if part) or None


def _param_schema(annotation: Any, keys: _Keys) -> dict[str, Any]:
    """The JSON Schema of a parameter's type, without pydantic's title."""
    schema = dict(keys[(annotation, "validation")])
    schema.pop("title", None)
    return schema


@dataclass(frozen=True)
class _Marks:
    """What the running configuration makes of the request models' marks
    (:class:`treasury_core.validation.SchemaMark`)."""

    currencies: tuple[str, ...]
    vban_currencies: tuple[str, ...]
    max_amount: int | None

    def apply(self, node: Any) -> Any:
        """``node`` with every mark replaced by the rule it stands for, in place."""
        if isinstance(node, dict):
            kind = node.pop("x-treasury", None)
            if kind == "currency" and self.currencies:
                node["enum"] = list(self.currencies)
            elif kind == "vban_currency" and self.vban_currencies:
                node["enum"] = list(self.vban_currencies)
            elif kind == "amount" and self.max_amount is not None:
                node["maximum"] = self.max_amount
            for value in node.values():
                self.apply(value)
        elif isinstance(node, list):
            for value in node:
                self.apply(value)
        return node


#: A schema (or a reference to one) per (model or parameter type, mode), as pydantic's
#: ``TypeAdapter.json_schemas`` returns them.
_Keys = dict[tuple[Any, JsonSchemaMode], dict[str, Any]]

#: What a field says about itself rather than about its type: it stays beside the ``$ref`` when
#: the type's schema becomes a shared component.
_FIELD_KEYWORDS = frozenset({"title", "description", "default", "examples", "deprecated"})


def build_openapi(
    routes: tuple[Route, ...],
    *,
    title: str,
    version: str,
    currencies: Sequence[str] = (),
    vban_currencies: Sequence[str] = (),
    max_amount: int | None = None,
) -> dict[str, Any]:
    """The OpenAPI document for ``routes``.

    ``currencies`` (the enabled codes), ``vban_currencies`` (those with virtual accounts) and
    ``max_amount`` turn the request models' currency and amount fields into the ``enum`` and
    ``maximum`` the services enforce; without them those fields say only what the models check.
    """
    marks = _Marks(tuple(currencies), tuple(vban_currencies), max_amount)
    keys, schemas = _schemas(routes)
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, keys)
    marks.apply(paths)
    marks.apply(schemas)
    # Components first, so that a shared type met in a component and in a parameter is one.
    _share(schemas, schemas)
    _share(paths, schemas)
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A company's secret (`sk_…`) or publishable (`pk_…`) key.",
                },
                "operatorAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The operator's key (`ok_…`, `treasury operator-keys "
                    "create`): bound to no company, accepted only where the operator acts.",
                },
            },
        },
    }


def _schemas(routes: tuple[Route, ...]) -> tuple[_Keys, dict[str, Any]]:
    """The schemas of the routes' request and response models and parameter types, and the
    components they reference.

    One generation for all of them, so that an enum is one component whether a model's field or
    a query parameter uses it (``MovementStatus``, ``IntentStatus``, ...).
    """
    inputs: dict[tuple[Any, JsonSchemaMode], TypeAdapter[Any]] = {}

    def add(annotation: Any, mode: JsonSchemaMode) -> None:
        if (annotation, mode) not in inputs:
            inputs[(annotation, mode)] = TypeAdapter(annotation)

    for route in routes:
        if route.body is not None:
            add(route.body, "validation")
        if route.response is not None:
            add(route.response, "serialization")
        for param in route.query_params.values():
            add(param.type, "validation")
        if route.is_list and route.paged:
            add(route.cursor, "validation")
    keys, definitions = TypeAdapter.json_schemas(
        [(key[0], key[1], adapter) for key, adapter in inputs.items()], ref_template=_REF
    )
    schemas: dict[str, Any] = dict(definitions.get("$defs", {}))
    schemas["Error"] = _ERROR_SCHEMA
    return dict(keys), schemas


def _share(node: Any, schemas: dict[str, Any]) -> None:
    """Every schema named by :class:`~treasury_core.validation.SchemaComponent` under ``node``,
    moved to ``schemas`` under its name and replaced by a ``$ref`` to it, in place.

    The field's own keywords (its title, description, default) stay beside the ``$ref``. Two
    types sharing a name with different schemas are a programming error.
    """
    if isinstance(node, dict):
        for key, value in list(node.items()):
            if isinstance(value, dict) and COMPONENT_KEY in value:
                node[key] = _shared(value, schemas)
            else:
                _share(value, schemas)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            if isinstance(value, dict) and COMPONENT_KEY in value:
                node[index] = _shared(value, schemas)
            else:
                _share(value, schemas)


def _shared(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    name = schema.pop(COMPONENT_KEY)
    component = {k: v for k, v in schema.items() if k not in _FIELD_KEYWORDS}
    if schemas.setdefault(name, component) != component:
        raise ValueError(f"two types name their schema {name!r}: {schemas[name]} and {component}")
    use = {k: v for k, v in schema.items() if k in _FIELD_KEYWORDS}
    return {"$ref": _REF.format(model=name), **use}


def _operation(route: Route, keys: _Keys) -> dict[str, Any]:
    """The route's operation: a page for people, or a JSON API call."""
    operation: dict[str, Any] = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "tags": list(route.tags),
        "responses": {},
    }
    description = _description(route)
    if description:
        operation["description"] = description
    parameters = _parameters(route, keys)
    if parameters:
        operation["parameters"] = parameters
    if route.html:
        return _page(route, operation)
    body = _request_body(route, keys)
    if body is not None:
        operation["requestBody"] = body
    operation["responses"] = {"200": _ok(route, keys), **_errors(route)}
    if route.auth is Auth.OPERATOR:
        operation["security"] = [{"operatorAuth": []}]
    elif route.auth is not Auth.NONE:
        operation["security"] = [{"bearerAuth": []}]
    return operation


def _idempotent(route: Route) -> bool:
    # Read only once the caller is authenticated: keys are scoped to a company (the operator
    # has none).
    return route.method == "POST" and route.auth.is_merchant


def _parameters(route: Route, keys: _Keys) -> list[dict[str, Any]]:
    """The route's path, query and header parameters, in that order."""
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
            "required": param.required,
            "description": param.description,
            "schema": _param_schema(param.type, keys),
            **({"style": param.style, "explode": True} if param.style else {}),
        }
        for name, param in route.query_params.items()
    ]
    if route.is_list and route.paged:
        parameters += _paging_parameters(route, keys)
    if _idempotent(route):
        parameters.append(_IDEMPOTENCY_KEY)
    return parameters


def _paging_parameters(route: Route, keys: _Keys) -> list[dict[str, Any]]:
    """``limit`` and ``starting_after``, with the bounds :mod:`treasury_core.pagination` checks."""
    return [
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "schema": {
                "type": "integer",
                "minimum": MIN_LIMIT,
                "maximum": MAX_LIMIT,
                "default": DEFAULT_LIMIT,
            },
        },
        {
            "name": "starting_after",
            "in": "query",
            "required": False,
            "description": "The last id of the previous page.",
            "schema": _param_schema(route.cursor, keys),
        },
    ]


#: The header :func:`treasury_core.idempotency.is_valid_key` accepts (its pattern needs at
#: least one printable character, hence the minimum length).
_IDEMPOTENCY_KEY: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Retries with the same key get the first answer again.",
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_KEY_LENGTH,
        "pattern": KEY_PATTERN,
    },
}


def _request_body(route: Route, keys: _Keys) -> dict[str, Any] | None:
    """The JSON body the route's model describes, or the raw body it takes, or none."""
    if route.body is not None:
        return {
            "required": not _empty_body_valid(route.body),
            "content": {"application/json": {"schema": keys[(route.body, "validation")]}},
        }
    if route.raw_body:
        # ``format: binary`` says the body is the file's bytes as sent, not a JSON string:
        # client generators then take a file for it instead of a ``str`` they cannot send.
        raw = {"type": "string", "format": "binary", "description": route.raw_body_description}
        return {
            "required": True,
            "content": {media: {"schema": raw} for media in route.raw_body},
        }
    return None


def _empty_body_valid(model: type[BaseModel]) -> bool:
    """Whether ``model`` takes ``{}``: then no body at all will do, as
    :func:`treasury_aiohttp.io.parse_body` reads an empty body as ``{}``."""
    try:
        model.model_validate_json(b"{}", strict=True)
    except ValidationError:
        return False
    return True


def _ok(route: Route, keys: _Keys) -> dict[str, Any]:
    """The 200 answer: the response model (a list of them for a list), and its headers."""
    ok: dict[str, Any] = {"description": "OK"}
    if route.response is not None:
        item = keys[(route.response, "serialization")]
        ok["content"] = {
            "application/json": {
                "schema": {"type": "array", "items": item} if route.is_list else item
            }
        }
        for media in route.media_types:
            ok["content"][media] = {"schema": {"type": "string"}}
        if route.is_list and route.paged:
            ok["headers"] = {
                "Link": {
                    "description": 'rel="next" when more remain',
                    "schema": {"type": "string"},
                }
            }
    if _idempotent(route):
        ok.setdefault("headers", {})["Idempotent-Replayed"] = {
            "description": "`true` when this is the stored answer to an earlier request "
            "with the same Idempotency-Key",
            "schema": {"type": "string", "enum": ["true"]},
        }
    return ok


def _errors(route: Route) -> dict[str, Any]:
    """The error answers the route can give, by status."""
    responses: dict[str, Any] = {
        "400": _error(
            "Invalid request (`invalid_request_error`), or an Idempotency-Key reused with "
            "another request (`idempotency_error`)"
        )
    }
    if route.auth is not Auth.NONE:
        responses["401"] = _error("Missing or invalid API key")
    if route.method == "POST" and _CARD_TAGS.intersection(route.tags):
        responses["402"] = _error("The card was declined (`card_error`)")
        responses["502"] = _error("The card provider failed or could not be reached")
    if route.auth is Auth.SECRET:
        responses["403"] = _error("A secret key is required")
    elif route.auth is Auth.OPERATOR:
        responses["403"] = _error(
            "A company's key (`permission_error`, `operator_key_required`): only the operator "
            "may call this"
        )
    elif route.authorize is not None:
        responses["403"] = _error(
            "This key may not ask for that (`permission_error`), such as a publishable "
            "key's manual capture or `card_token`"
        )
    # An id in the path, the query or the body that this company does not have.
    responses["404"] = _error("No such resource for this company")
    if route.method == "POST":
        responses.update(_post_errors(route))
    if route.auth is not Auth.NONE:
        responses["429"] = _error(
            "Too many requests with this API key",
            headers={
                "Retry-After": {
                    "description": "Seconds to wait before retrying",
                    "required": True,
                    "schema": {"type": "string", "pattern": "^[0-9]+$"},
                }
            },
        )
    return responses


def _post_errors(route: Route) -> dict[str, Any]:
    """What only a request with a body can be answered: a key in use, a body too slow, too
    large or of the wrong media type."""
    responses: dict[str, Any] = {}
    if _idempotent(route):
        responses["409"] = _error("A request with this Idempotency-Key is in progress")
    responses["408"] = _error("The request body did not arrive in time")
    responses["413"] = _error("Request body too large")
    if route.body is not None:
        responses["415"] = _error("A body not sent as `application/json`")
    elif route.raw_body:
        media = ", ".join(f"`{m}`" for m in route.raw_body)
        responses["415"] = _error(f"A body not sent as {media}")
    return responses
