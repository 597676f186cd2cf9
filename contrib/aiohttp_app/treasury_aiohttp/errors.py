"""Turning anything that goes wrong into the documented error body; never a bare 500 page."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from treasury_core.errors import TreasuryError
from treasury_core.interface.statuses import http_status

log = logging.getLogger("treasury.http")

_HTTP_ERRORS: dict[int, tuple[str, str, str]] = {
    400: ("invalid_request_error", "invalid_request", "The request could not be understood"),
    404: ("not_found", "route_not_found", "Unrecognized request URL"),
    405: ("invalid_request_error", "method_not_allowed", "This method is not allowed on this URL"),
    408: (
        "invalid_request_error",
        "request_timeout",
        "The request body did not arrive in time",
    ),
    413: (
        "invalid_request_error",
        "request_too_large",
        "The request body is larger than the limit",
    ),
    415: (
        "invalid_request_error",
        "unsupported_media_type",
        "The request body must be JSON, sent with Content-Type: application/json",
    ),
}


def error_response(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON error response."""
    return web.json_response(body, status=status, headers=headers)


def treasury_error_response(error: TreasuryError) -> web.Response:
    """The response for a domain error."""
    headers = {}
    retry_after = getattr(error, "retry_after", None)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return error_response(http_status(error), error.to_body(), headers)


def http_error_body(status: int) -> dict[str, Any]:
    """The documented body of an HTTP-level error (400 the request could not be parsed, 404,
    405, 408, 413, 415), as the table above words it."""
    error_type, code, message = _HTTP_ERRORS[status]
    return {"error": {"type": error_type, "code": code, "message": message}}


def http_exception_response(exc: web.HTTPException, max_body: int) -> web.Response:
    """The response for aiohttp's own HTTP errors (unknown route, wrong method, too large)."""
    error_type, code, message = _HTTP_ERRORS.get(
        exc.status, ("invalid_request_error", "http_error", exc.reason)
    )
    if exc.status == 413:
        message = f"The request body is larger than the limit of {max_body} bytes"
    headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
    return error_response(
        exc.status, {"error": {"type": error_type, "code": code, "message": message}}, headers
    )
