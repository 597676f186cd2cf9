"""The app factory: a treasury's HTTP interface as an ``aiohttp.web.Application``."""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version

from aiohttp import web

from treasury_aiohttp.handlers import ROUTES
from treasury_aiohttp.keys import MAX_BODY_KEY, OPENAPI_KEY, TREASURY_KEY
from treasury_aiohttp.middlewares import (
    auth_middleware,
    body_limit_middleware,
    error_middleware,
    idempotency_middleware,
)
from treasury_aiohttp.openapi import build_openapi
from treasury_aiohttp.routing import Auth, Handler, Route
from treasury_core import Treasury

__all__ = ["TREASURY_KEY", "create_app"]


def _package_version() -> str:
    try:
        return version("treasury-core")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def _tagged(route: Route) -> Handler:
    # The auth middleware reads the route off the matched handler.
    @functools.wraps(route.handler)
    async def handler(request: web.Request) -> web.StreamResponse:
        return await route.handler(request)

    handler.treasury_route = route  # type: ignore[attr-defined]
    return handler


def create_app(treasury: Treasury, *, close_treasury: bool = False) -> web.Application:
    """An app serving ``treasury``; with ``close_treasury`` its storage closes with the app.

    Mount it in an existing app with ``parent.add_subapp("/treasury", create_app(t))``.
    """
    max_body = treasury.config.max_body_bytes
    app = web.Application(
        client_max_size=max_body,
        middlewares=[
            error_middleware,
            body_limit_middleware,
            auth_middleware,
            idempotency_middleware,
        ],
    )
    app[TREASURY_KEY] = treasury
    app[MAX_BODY_KEY] = max_body
    openapi_route = Route(
        "GET", "/api/v1/openapi.json", _openapi, "The OpenAPI document", auth=Auth.NONE
    )
    for route in (*ROUTES, openapi_route):
        app.router.add_route(route.method, route.path, _tagged(route))
    app[OPENAPI_KEY] = build_openapi(ROUTES, title="treasury-core", version=_package_version())
    if close_treasury:

        async def _close(_app: web.Application) -> None:
            treasury.close()

        app.on_cleanup.append(_close)
    return app


async def _openapi(request: web.Request) -> web.StreamResponse:
    """The OpenAPI 3.1 document of this server."""
    return web.json_response(request.app[OPENAPI_KEY])
