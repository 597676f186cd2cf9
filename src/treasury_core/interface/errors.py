"""The error body and HTTP status the service interface answers each error with.

A domain error (:mod:`treasury_core.errors`) says what went wrong: its kind, code, parameter and
message, and for some the record it left or the card's refusal reason. How the interface writes
that down is here, in one place for every HTTP front end: the bundled aiohttp app and an
embedding application's own routes (Django, Flask, FastAPI, …) answer with the same bodies and
statuses.

The body is ``{"error": {"type", "code", "message", "param"?, "failure_reason"?,
"resource"?}}``; ``type`` is the interface's name of the error's family (:data:`ERROR_TYPES`),
the status its kind's (:data:`HTTP_STATUS`). The tree, with each error's status and type::

    TreasuryError                      500 api_error (a fault of the service: see INTERNAL_ERROR)
    ├── InvalidRequestError            400 invalid_request_error
    ├── AuthenticationFailed           401 authentication_error
    ├── CardError                      402 card_error
    ├── PermissionDenied               403 permission_error
    ├── NotFound                       404 not_found
    ├── IdempotencyError               400 idempotency_error
    │   └── IdempotencyInFlight        409 idempotency_error
    ├── RateLimited                    429 rate_limit_error
    ├── ConflictRetryExhausted         503 api_error
    └── ProviderError                  502 api_error
        └── FxRateUnavailable          503 api_error
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from treasury_core.errors import (
    AuthenticationFailed,
    CardError,
    ErrorKind,
    IdempotencyError,
    InvalidRequestError,
    NotFound,
    PermissionDenied,
    RateLimited,
    TreasuryError,
)

__all__ = [
    "ERROR_TYPES",
    "HTTP_ERRORS",
    "HTTP_STATUS",
    "INTERNAL_ERROR",
    "error_body",
    "error_headers",
    "error_type",
    "http_error_body",
    "http_status",
    "internal_error_body",
]

#: Each kind's status in the interface (and in docs/decisions.md for the kinds it leaves open).
HTTP_STATUS: Mapping[ErrorKind, int] = MappingProxyType(
    {
        ErrorKind.INVALID_REQUEST: 400,
        ErrorKind.AUTHENTICATION: 401,
        ErrorKind.DECLINED: 402,
        ErrorKind.FORBIDDEN: 403,
        ErrorKind.NOT_FOUND: 404,
        ErrorKind.IN_PROGRESS: 409,
        ErrorKind.RATE_LIMITED: 429,
        ErrorKind.INTERNAL: 500,
        ErrorKind.PROVIDER_FAILED: 502,
        ErrorKind.UNAVAILABLE: 503,
    }
)

#: The body's ``type`` of each family of errors; an error takes its nearest ancestor's.
ERROR_TYPES: Mapping[type[TreasuryError], str] = MappingProxyType(
    {
        TreasuryError: "api_error",
        InvalidRequestError: "invalid_request_error",
        AuthenticationFailed: "authentication_error",
        CardError: "card_error",
        PermissionDenied: "permission_error",
        NotFound: "not_found",
        IdempotencyError: "idempotency_error",
        RateLimited: "rate_limit_error",
    }
)

#: What an error of kind ``internal``, or any unexpected failure, is answered with (status 500):
#: a fault of the service, logged and not explained.
INTERNAL_ERROR: Mapping[str, Any] = MappingProxyType(
    {"type": "api_error", "code": "internal_error", "message": "An internal error occurred"}
)

#: The interface's own errors of HTTP, raised before any service is called: ``type``, ``code``
#: and message per status (a body that cannot be parsed, an unknown URL, a wrong method, a body
#: too slow, too large, or not JSON).
HTTP_ERRORS: Mapping[int, tuple[str, str, str]] = MappingProxyType(
    {
        400: ("invalid_request_error", "invalid_request", "The request could not be understood"),
        404: ("not_found", "route_not_found", "Unrecognized request URL"),
        405: (
            "invalid_request_error",
            "method_not_allowed",
            "This method is not allowed on this URL",
        ),
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
)


def http_status(error: TreasuryError) -> int:
    """The status an HTTP answer to ``error`` carries."""
    return HTTP_STATUS[error.kind]


def error_type(error: TreasuryError) -> str:
    """The body's ``type`` for ``error``: its nearest family's in :data:`ERROR_TYPES`."""
    for cls in type(error).__mro__:
        found = ERROR_TYPES.get(cls)
        if found is not None:
            return found
    return ERROR_TYPES[TreasuryError]  # pragma: no cover - every error derives from it


def error_body(error: TreasuryError) -> dict[str, Any]:
    """The interface's error body for ``error`` (a new dict each call, for the caller to keep).

    An error of kind ``internal`` is rendered as it is too; a front end answers those with
    :data:`INTERNAL_ERROR` instead, so that a fault of the service is not explained.
    """
    body: dict[str, Any] = {"type": error_type(error), "code": error.code, "message": error.message}
    if error.param is not None:
        body["param"] = error.param
    if error.failure_reason is not None:
        body["failure_reason"] = error.failure_reason
    if error.resource is not None:
        body["resource"] = error.resource
    return {"error": body}


def error_headers(error: TreasuryError) -> dict[str, str]:
    """The headers an answer to ``error`` carries: ``Retry-After`` for one that says when to
    retry (:class:`~treasury_core.errors.RateLimited`,
    :class:`~treasury_core.errors.FxRateUnavailable`)."""
    retry_after = getattr(error, "retry_after", None)
    return {} if retry_after is None else {"Retry-After": str(retry_after)}


def http_error_body(status: int) -> dict[str, Any]:
    """The documented body of an HTTP-level error (400 the request could not be parsed, 404,
    405, 408, 413, 415), as :data:`HTTP_ERRORS` words it."""
    kind, code, message = HTTP_ERRORS[status]
    return {"error": {"type": kind, "code": code, "message": message}}


def internal_error_body() -> dict[str, Any]:
    """The body of a 500: :data:`INTERNAL_ERROR`."""
    return {"error": dict(INTERNAL_ERROR)}
