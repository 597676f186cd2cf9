"""Turning anything that goes wrong into the documented error body; never a bare 500 page."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from treasury_core.errors import TreasuryError
from treasury_core.interface.errors import (
    HTTP_ERRORS,
    error_body,
    error_headers,
    http_status,
    internal_error_body,
)

log = logging.getLogger("treasury.http")


def error_response(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON error response."""
    return web.json_response(body, status=status, headers=headers)


def treasury_error_response(error: TreasuryError) -> web.Response:
    """The response for a domain error."""
    return error_response(http_status(error), error_body(error), error_headers(error))


def internal_error_response() -> web.Response:
    """The 500 for a fault of ours: logged, not explained."""
    return error_response(500, internal_error_body())


def http_exception_response(exc: web.HTTPException, max_body: int) -> web.Response:
    """The response for aiohttp's own HTTP errors (unknown route, wrong method, too large)."""
    error_type, code, message = HTTP_ERRORS.get(
        exc.status, ("invalid_request_error", "http_error", exc.reason)
    )
    if exc.status == 413:
        message = f"The request body is larger than the limit of {max_body} bytes"
    headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
    return error_response(
        exc.status, {"error": {"type": error_type, "code": code, "message": message}}, headers
    )
