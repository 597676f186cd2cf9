"""The app factory: a treasury's HTTP interface as an ``aiohttp.web.Application``."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable
from importlib.metadata import PackageNotFoundError, version

from aiohttp import web

from treasury_aiohttp.api import bank_statements as bank_handlers
from treasury_aiohttp.api import cards as card_handlers
from treasury_aiohttp.api import disputes as dispute_handlers
from treasury_aiohttp.api import endpoints as endpoint_handlers
from treasury_aiohttp.api import links as link_handlers
from treasury_aiohttp.api import metadata as metadata_handlers
from treasury_aiohttp.api import movements as treasury_handlers
from treasury_aiohttp.api import notifications as notification_handlers
from treasury_aiohttp.api import payments as payment_handlers
from treasury_aiohttp.api import provider_hooks
from treasury_aiohttp.api import records as record_handlers
from treasury_aiohttp.api import sandbox as sandbox_handlers
from treasury_aiohttp.api import statements as statement_handlers
from treasury_aiohttp.api import wallets as handlers
from treasury_aiohttp.dashboard import ops as dashboard_ops
from treasury_aiohttp.hosted import pages as hosted_pages
from treasury_aiohttp.hosted.security import FormKey
from treasury_aiohttp.io import mount_prefix
from treasury_aiohttp.keys import (
    APP_SETTINGS_KEY,
    AUTH_FAILURES_KEY,
    FORM_KEY,
    MAX_BODY_KEY,
    OPENAPI_KEY,
    RATE_LIMITER_KEY,
    TREASURY_KEY,
)
from treasury_aiohttp.limits import build_failure_throttle, build_rate_limiter
from treasury_aiohttp.middlewares import (
    auth_middleware,
    body_limit_middleware,
    error_middleware,
    idempotency_middleware,
)
from treasury_aiohttp.notifier import HttpSender
from treasury_aiohttp.openapi import build_openapi
from treasury_aiohttp.query import check_query
from treasury_aiohttp.routing import Auth, Handler, Route
from treasury_aiohttp.server import SERVER_HEADER
from treasury_aiohttp.settings import app_settings
from treasury_aiohttp.worker import work_loop
from treasury_core import Treasury
from treasury_core.ports import RequestLimiter
from treasury_core.ratelimit import FailureThrottle

__all__ = ["TREASURY_KEY", "create_app"]

log = logging.getLogger("treasury.jobs")


def _package_version() -> str:
    try:
        return version("treasury-core")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def _tagged(route: Route) -> Handler:
    # The auth middleware reads the route off the matched handler.
    @functools.wraps(route.handler)
    async def handler(request: web.Request) -> web.StreamResponse:
        # After the key was checked (a caller without one learns nothing about parameters).
        check_query(route, request.query)
        return await route.handler(request)

    handler.treasury_route = route  # type: ignore[attr-defined]
    return handler


def create_app(
    treasury: Treasury,
    *,
    close_treasury: bool = False,
    run_jobs: bool = False,
    after_jobs_pass: Callable[[], None] | None = None,
) -> web.Application:
    """An app serving ``treasury``; with ``close_treasury`` its storage closes with the app.

    With ``run_jobs`` the app also settles due movements in the background, looking every
    ``config.job_poll_seconds`` (``treasury serve`` does; tests drive jobs through the clock);
    ``after_jobs_pass`` is called after each of those passes (a test harness learns from it
    that the work due at start is done).

    Mount it in an existing app with ``parent.add_subapp("/treasury", create_app(t))``.
    """
    settings = app_settings(treasury.config)
    max_body = settings.max_body_bytes
    app = web.Application(
        # The largest any route takes (a bank statement); body_limit_middleware holds every
        # other route to max_body.
        client_max_size=max(max_body, settings.bank_statement_max_bytes),
        middlewares=[
            error_middleware,
            body_limit_middleware,
            auth_middleware,
            idempotency_middleware,
        ],
    )
    app[TREASURY_KEY] = treasury
    app[MAX_BODY_KEY] = max_body
    app[APP_SETTINGS_KEY] = settings
    app.on_response_prepare.append(_server_header)
    app.on_response_prepare.append(functools.partial(_wake_the_worker, treasury))
    app[FORM_KEY] = FormKey(treasury.config)
    limiter = build_rate_limiter(settings)
    if limiter is not None:
        app[RATE_LIMITER_KEY] = limiter
        app.on_cleanup.append(functools.partial(_close_limiter, limiter))
    failures = build_failure_throttle(settings)
    if failures is not None:
        app[AUTH_FAILURES_KEY] = failures
        app.on_cleanup.append(functools.partial(_close_limiter, failures))
    routes = (
        handlers.ROUTES
        + treasury_handlers.ROUTES
        + payment_handlers.ROUTES
        + link_handlers.ROUTES
        + metadata_handlers.ROUTES
        + card_handlers.ROUTES
        + notification_handlers.ROUTES
        + endpoint_handlers.ROUTES
        + dispute_handlers.ROUTES
        + record_handlers.ROUTES
        + bank_handlers.ROUTES
        + statement_handlers.ROUTES
        + provider_hooks.routes_for(treasury)
    )
    if treasury.config.sandbox:
        routes += sandbox_handlers.ROUTES
    openapi_route = Route("GET", _OPENAPI_PATH, _openapi, "The OpenAPI document", auth=Auth.NONE)
    # aiohttp tries the routes that share a static prefix in the order they were added, one
    # coroutine each: the deeper paths go first, so that a balance read (``…/{id}/balance``) is
    # not first tried as ``/api/v1/wallet`` and ``…/{id}``. Segments never match across a
    # ``/``, so the order changes only how soon the one matching route is found.
    by_depth = sorted((*routes, openapi_route), key=lambda route: -route.path.count("/"))
    for route in by_depth:
        app.router.add_route(route.method, route.router_path, _tagged(route))
    hosted_pages.add_routes(app)
    if treasury.config.dashboard:
        dashboard_ops.add_routes(app)
    app[OPENAPI_KEY] = build_openapi(
        routes + hosted_pages.ROUTES,
        title="treasury-core",
        version=_package_version(),
        currencies=[currency.code for currency in treasury.currencies],
        vban_currencies=[currency.code for currency in treasury.currencies if currency.can_vban],
        max_amount=treasury.config.max_amount,
    )
    if treasury.notifications.sender is None:
        app.cleanup_ctx.append(_http_sender)
    if run_jobs:
        app.cleanup_ctx.append(functools.partial(_job_runner, after_pass=after_jobs_pass))
    if close_treasury:

        async def _close(_app: web.Application) -> None:
            treasury.close()

        app.on_cleanup.append(_close)
    return app


_OPENAPI_PATH = "/api/v1/openapi.json"


async def _close_limiter(limiter: RequestLimiter | FailureThrottle, _app: web.Application) -> None:
    await limiter.close()


async def _server_header(_request: web.Request, response: web.StreamResponse) -> None:
    # aiohttp would send "Python/3.x aiohttp/3.y": versions tell an attacker which advisories
    # apply. (It fills the header only when the response has none.)
    response.headers["Server"] = SERVER_HEADER


async def _wake_the_worker(
    treasury: Treasury, request: web.Request, _response: web.StreamResponse
) -> None:
    # A request that may have written has committed by the time its answer is prepared: its
    # events go out now rather than at the worker's next poll (a no-op when it is awake).
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        treasury.notifications.wake()


async def _openapi(request: web.Request) -> web.StreamResponse:
    """The OpenAPI 3.1 document of this server."""
    document = request.app[OPENAPI_KEY]
    # Mounted as a sub-app (``/treasury``), the paths live under the mount point: say so in
    # ``servers``, or every client generated from the document calls the parent's routes.
    prefix = mount_prefix(request, _OPENAPI_PATH)
    if prefix:
        document = {**document, "servers": [{"url": prefix}]}
    return web.json_response(document)


async def _http_sender(app: web.Application) -> AsyncIterator[None]:
    # Webhooks and callbacks go out over HTTP unless the embedding code gave the treasury a
    # sender of its own.
    treasury = app[TREASURY_KEY]
    async with HttpSender.for_config(treasury.config) as sender:
        treasury.notifications.sender = sender
        yield
        treasury.notifications.sender = None


async def _job_runner(
    app: web.Application, *, after_pass: Callable[[], None] | None
) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(
        work_loop(app[TREASURY_KEY], stop, after_pass=after_pass), name="treasury-jobs"
    )
    yield
    stop.set()
    await task
