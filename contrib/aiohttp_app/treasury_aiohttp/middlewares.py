"""Middlewares, outermost first: errors → body limit → auth → idempotency."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from treasury_aiohttp.access_log import redact
from treasury_aiohttp.auth_throttle import count_failure, count_request, refuse_if_failing
from treasury_aiohttp.errors import (
    http_exception_response,
    internal_error_response,
    treasury_error_response,
)
from treasury_aiohttp.io import treasury
from treasury_aiohttp.keys import (
    APP_SETTINGS_KEY,
    CLAIM,
    IDEMPOTENCY_DONE,
    MAX_BODY_KEY,
    OPERATOR,
    PRINCIPAL,
)
from treasury_aiohttp.routing import Auth, Handler, route_of
from treasury_core.errors import (
    AuthenticationFailed,
    ErrorKind,
    PermissionDenied,
    TreasuryError,
    ValidationFailed,
)
from treasury_core.interface.idempotency import (
    REPLAYED_HEADER,
    StoredResponse,
    fingerprint,
    keeps_answer,
)
from treasury_core.operators import OperatorPrincipal, is_operator_key
from treasury_core.services.idempotency import Replay

log = logging.getLogger("treasury.http")

#: What a merchant's key is told on an operator route.
OPERATOR_ONLY = (
    "Only the operator may call this: bank statements are imported with an operator key or "
    "`treasury bank import`, never with a company's API key"
)

_NO_STORE = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure becomes the documented error body; unexpected ones are logged, not shown."""
    try:
        response = await handler(request)
    except TreasuryError as exc:
        if exc.kind is ErrorKind.INTERNAL:
            # Ours, not the caller's (a vault that cannot open a card): logged, not explained.
            log.error(
                "%s on %s %s: %s", exc.code, request.method, redact(request.path), exc.message
            )
            response = internal_error_response()
        else:
            response = treasury_error_response(exc)
    except (RequestPayloadError, HttpProcessingError):
        # The body could not be decoded (a Content-Encoding it does not have, a broken chunk).
        response = treasury_error_response(
            ValidationFailed("The request body could not be read", code="body_invalid")
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = http_exception_response(exc, request.app.get(MAX_BODY_KEY, 0))
    except Exception:
        # The path may carry a bearer secret (a lookup id, a PMTI URL's secret): blanked.
        log.exception("unhandled error on %s %s", request.method, redact(request.path))
        response = internal_error_response()
    for name, value in _NO_STORE.items():
        response.headers.setdefault(name, value)
    return response


@web.middleware
async def body_limit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse a declared oversize body unread (aiohttp refuses undeclared ones while reading),
    and a body that does not arrive in time (a slow client must not hold a handler open)."""
    limit = request.app[MAX_BODY_KEY]
    route = route_of(request)
    if route is not None and route.body_limit is not None:
        limit = route.body_limit(treasury(request).config)
    if request.content_length is not None and request.content_length > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=request.content_length)
    if request.body_exists:
        try:
            # aiohttp keeps what it read: the handler's own read returns it at once. (A timeout
            # scope, not wait_for: no extra task per request.)
            async with asyncio.timeout(request.app[APP_SETTINGS_KEY].body_timeout_seconds):
                body = await request.read()
        except TimeoutError:
            raise web.HTTPRequestTimeout() from None
        # Mounted as a sub-app, aiohttp reads with the parent app's client_max_size, not ours:
        # an undeclared (chunked) body must still meet this app's limit.
        if len(body) > limit:
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=len(body))
    return await handler(request)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """``Authorization: Bearer <key>``; the route says which kind of key it needs."""
    route = route_of(request)
    if route is None or route.auth is Auth.NONE:
        return await handler(request)
    header = request.headers.get("Authorization", "")
    scheme, _, raw_key = header.partition(" ")
    raw_key = raw_key.strip()
    if scheme.lower() != "bearer" or not raw_key:
        raise AuthenticationFailed(
            "You did not provide an API key. Provide it in the Authorization header, "
            "using Bearer auth (Authorization: Bearer YOUR_SECRET_KEY)",
            code="api_key_missing",
        )
    # A client whose keys keep failing is refused before its next one is looked up.
    refuse_if_failing(request)
    try:
        if route.auth is Auth.OPERATOR:
            operator = await _operator(request, raw_key)
        else:
            # A string that is no key of ours is refused there, before it is hashed or looked
            # up; an operator key is none of a company's, so it opens no merchant route.
            principal = await treasury(request).companies.authenticate(raw_key)
    except AuthenticationFailed:
        await count_failure(request)
        raise
    if route.auth is Auth.OPERATOR:
        request[OPERATOR] = operator
        return await handler(request)
    await count_request(request, principal.key_id)
    if route.auth is Auth.SECRET and not principal.is_secret:
        raise PermissionDenied("This API call cannot be made with a publishable API key")
    if route.authorize is not None:
        # Here, not in the handler: the idempotency middleware below may answer from a stored
        # response without calling the handler, and must only do so for an allowed request.
        await route.authorize(request, principal)
    request[PRINCIPAL] = principal
    return await handler(request)


async def _operator(request: web.Request, raw_key: str) -> OperatorPrincipal:
    """The operator behind ``raw_key``; a real merchant key is told it may not (403), and
    anything else is 401 as on every route."""
    companies = treasury(request).companies
    if not is_operator_key(raw_key):
        merchant = await companies.authenticate(raw_key)
        await count_request(request, merchant.key_id)
        raise PermissionDenied(OPERATOR_ONLY, code="operator_key_required")
    operator = await companies.authenticate_operator(raw_key)
    await count_request(request, operator.key_id)
    return operator


@web.middleware
async def idempotency_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """``Idempotency-Key`` on a POST: replay the stored response or record this one.

    Runs after the auth middleware has authorized the request (a 403 is never a replay), and
    keeps each key kind's records apart: a publishable key never gets a secret key's answer.
    Records are a company's, so an operator route (no company) takes no key: what it does is
    idempotent by itself (a statement's lines are remembered).
    """
    key = request.headers.get("Idempotency-Key")
    if key is None or request.method != "POST" or PRINCIPAL not in request:
        return await handler(request)
    service = treasury(request).idempotency
    body = await request.read()
    caller = request[PRINCIPAL]
    outcome = await service.claim(
        caller.company_id,
        key,
        fingerprint(request.method, request.path_qs, body),
        kind=caller.kind,
    )
    if isinstance(outcome, Replay):
        stored = outcome.result
        body = stored.body
        route = route_of(request)
        if route is not None and route.replay is not None and 200 <= stored.status < 300:
            # Only a stored success holds a resource to complete; a stored refusal is replayed
            # as it was.
            body = await route.replay(request, body)
        return web.Response(
            body=body,
            status=stored.status,
            content_type="application/json",
            headers=dict((REPLAYED_HEADER,)),
        )
    request[CLAIM] = outcome
    try:
        response = await handler(request)
    except TreasuryError as exc:
        if exc.kind is ErrorKind.INTERNAL:
            # Ours, not the caller's (a vault that cannot open a card): logged, not explained.
            log.error(
                "%s on %s %s: %s", exc.code, request.method, redact(request.path), exc.message
            )
            response = internal_error_response()
        else:
            response = treasury_error_response(exc)
    except BaseException:
        await service.release(outcome)
        raise
    if request.get(IDEMPOTENCY_DONE):
        return response
    # Not stored by the business transaction (a refusal, or a call that is not one transaction,
    # such as advancing the sandbox clock): store what was answered, in a transaction of its
    # own, so a retry gets the same answer. 409, 429 and 5xx give the key back instead.
    sent = response.body if isinstance(response, web.Response) else None
    if isinstance(sent, bytes) and keeps_answer(response.status):
        await service.complete(outcome, StoredResponse(response.status, sent))
    else:
        await service.release(outcome)
    return response
