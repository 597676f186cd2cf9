"""The access log of ``treasury serve``: one line per request, secrets in URLs blanked.

The line is built here from fields the server controls (client address, method, status, size,
duration) and the request's path, which is scrubbed (:func:`treasury_aiohttp.redaction.scrub`):
bearer secrets in URLs become ``…``, and keys or card numbers someone put in a URL are blanked
too. Card numbers never appear in a URL the API defines.

As JSON (``--log-format json``) the entry also has each part as a field of its own:
``remote``, ``method``, ``path``, ``status``, ``bytes``, ``duration_ms``, ``key_id`` (the API
or operator key that authenticated the request, ``null`` when none did) and ``request_id``
(the request's ``X-Request-Id`` when it is a plain token of at most 128 characters, as a load
balancer sets it, else a random one), so that a log pipeline need not parse the message.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from typing import Any

from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

from treasury_aiohttp.keys import OPERATOR, PRINCIPAL
from treasury_aiohttp.logs import BufferedLineHandler
from treasury_aiohttp.redaction import redact, scrub

__all__ = ["RedactingAccessLogger", "redact"]

#: The scrubbed form of recently logged request targets, by a digest of the target. Three
#: regular-expression scans per line were a third of the line's cost, and a server sees the
#: same targets again and again (a create path, a polled intent). Keyed by digest so that no
#: unscrubbed target (a lookup id, a tokenization secret) outlives its request here.
_SCRUBBED: dict[bytes, str] = {}
_SCRUBBED_MAX = 1024


def _scrubbed_target(target: str) -> str:
    key = hashlib.blake2b(target.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    scrubbed = _SCRUBBED.get(key)
    if scrubbed is None:
        scrubbed = scrub(target)
        if len(_SCRUBBED) >= _SCRUBBED_MAX:
            _SCRUBBED.clear()  # bounded; the next lines refill it
        _SCRUBBED[key] = scrubbed
    return scrubbed


#: A request id taken as the client sent it: nothing that could carry a secret's shape or
#: break a log pipeline (spaces, quotes, control characters), and not too long.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id(request: BaseRequest) -> str:
    """The request's ``X-Request-Id`` when it is a plain token, else a new random id."""
    given = request.headers.get("X-Request-Id")
    # Shaped as a key or a card number (which the pattern admits), it is not logged as sent.
    if given is not None and _REQUEST_ID.fullmatch(given) and scrub(given) == given:
        return given
    return secrets.token_hex(8)


def _key_id(request: BaseRequest) -> str | None:
    principal = request.get(PRINCIPAL) or request.get(OPERATOR)
    return None if principal is None else principal.key_id


def access_fields(
    request: BaseRequest, response: StreamResponse, time: float, target: str
) -> dict[str, Any]:
    """The parts of an access line as JSON fields (``target``: the scrubbed path and query)."""
    return {
        "remote": request.remote,
        "method": request.method,
        "path": target,
        "status": response.status,
        "bytes": response.body_length,
        "duration_ms": round(time * 1000, 3),
        "key_id": _key_id(request),
        "request_id": request_id(request),
    }


class RedactingAccessLogger(AbstractAccessLogger):
    """``client "METHOD path HTTP/x.y" status bytes seconds``, the path scrubbed."""

    @property
    def enabled(self) -> bool:
        """Whether the logger takes INFO records (aiohttp asks before calling :meth:`log`)."""
        return self.logger.isEnabledFor(logging.INFO)

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        """Write one line for a finished request (only called when :attr:`enabled`)."""
        version = request.version
        target = _scrubbed_target(request.path_qs)
        line = (
            f'{request.remote or "-"} "{request.method} {target}'
            f' HTTP/{version.major}.{version.minor}" {response.status}'
            f" {response.body_length} {time:.6f}s"
        )
        logger = self.logger
        handlers = logger.handlers
        if (
            len(handlers) == 1
            and not logger.propagate
            and not logger.disabled  # as Logger.handle would drop the record
            and not logger.filters
            and isinstance(handlers[0], BufferedLineHandler)
            and handlers[0].takes_lines(logging.INFO)
        ):
            # `treasury serve`'s own configuration: the line goes straight to the buffer, as
            # the record would have been written. A LogRecord and its formatting cost a tenth
            # of a request's time on the event loop.
            handler = handlers[0]
            # The fields only for JSON: a text line would not show them, and a read is cheap.
            fields = access_fields(request, response, time, target) if handler.writes_json else None
            handler.emit_line(logger.name, "INFO", line, fields)
            return
        # The record is made directly: Logger.info would walk the stack for a caller this line
        # does not show, on every request.
        record = logger.makeRecord(logger.name, logging.INFO, __file__, 0, line, (), None)
        record.scrubbed = True  # RedactingFilter need not scan this line a second time
        record.fields = access_fields(request, response, time, target)
        logger.handle(record)
