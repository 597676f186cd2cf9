"""The one shape of each kind of handler: act (a body, idempotent; creating is one such act),
get one, list a page.

A handler of the API states its route's own facts (the body model, the service call, the path
parameter, how its result renders) and leaves the steps to these: parse the body, make the
:class:`~treasury_aiohttp.io.Responder`, call the service with the company and the ticket,
answer. The OpenAPI document names each handler and describes it by its docstring, so handlers
stay named functions that call these.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel

from treasury_aiohttp.io import (
    Responder,
    json_response,
    list_response,
    page_request,
    parse_body,
    principal,
    treasury,
)
from treasury_aiohttp.query import record_filter

__all__ = ["Render", "act", "create_one", "get_one", "list_records"]

B = TypeVar("B", bound=BaseModel)
R = TypeVar("R")

#: How a result is answered: its record, or the record's JSON bytes.
Render = Callable[[R], BaseModel | bytes]


async def act(
    request: web.Request,
    body_model: type[B],
    render: Render[R],
    call: Callable[[int, B, Any], Awaitable[R]],
) -> web.StreamResponse:
    """Parse the body as ``body_model``, call ``call(company_id, body, ticket)`` (the ticket
    goes to the service's ``idempotency``) and answer its result rendered; a retried
    idempotency key answers what was stored."""
    body = await parse_body(request, body_model)
    responder: Responder[R] = Responder(request, render)
    result = await call(principal(request).company_id, body, responder.ticket())
    return responder.respond(result)


async def create_one(
    request: web.Request,
    body_model: type[B],
    create: Callable[..., Awaitable[R]],
    render: Render[R],
) -> web.StreamResponse:
    """:func:`act` with ``create(company_id, body, idempotency=…)``."""
    return await act(
        request,
        body_model,
        render,
        lambda company, body, ticket: create(company, body, idempotency=ticket),
    )


async def get_one(
    request: web.Request,
    read: Callable[[int, str], Awaitable[R]],
    param: str,
    render: Render[R],
) -> web.StreamResponse:
    """Answer ``read(company_id, <the path's param>)`` rendered."""
    found = await read(principal(request).company_id, request.match_info[param])
    return json_response(render(found))


async def list_records(
    request: web.Request, kind: type[Any], model: type[BaseModel], render: Callable[[Any], Any]
) -> web.StreamResponse:
    """A page of the company's records of ``kind`` (the route's filters, ``limit`` and
    ``starting_after``), newest first, each rendered as ``model``."""
    page = await treasury(request).records.list(
        kind, principal(request).company_id, record_filter(request), page_request(request)
    )
    return list_response(request, [render(r) for r in page.items], page, model, lambda r: r.id)
