"""The HTTP status the service interface gives each kind of error.

The errors themselves say only what kind of failure they are (:class:`ErrorKind`); this table
is the interface's, in one place, for every HTTP front end: the bundled aiohttp app and an
embedding application's own routes (Django, Flask, FastAPI, …) answer with the same statuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from treasury_core.errors import ErrorKind, TreasuryError

__all__ = ["HTTP_STATUS", "http_status"]

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


def http_status(error: TreasuryError) -> int:
    """The status an HTTP answer to ``error`` carries."""
    return HTTP_STATUS[error.kind]
