"""The access log of ``treasury serve``: one line per request, secrets in URLs blanked.

The line is built here from fields the server controls (client address, method, status, size,
duration) and the request's path, which is scrubbed (:func:`treasury_aiohttp.redaction.scrub`):
bearer secrets in URLs become ``…``, and keys or card numbers someone put in a URL are blanked
too. Card numbers never appear in a URL the API defines.
"""

from __future__ import annotations

import hashlib
import logging

from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

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


class RedactingAccessLogger(AbstractAccessLogger):
    """``client "METHOD path HTTP/x.y" status bytes seconds``, the path scrubbed."""

    @property
    def enabled(self) -> bool:
        """Whether the logger takes INFO records (aiohttp asks before calling :meth:`log`)."""
        return self.logger.isEnabledFor(logging.INFO)

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        """Write one line for a finished request (only called when :attr:`enabled`)."""
        version = request.version
        line = (
            f'{request.remote or "-"} "{request.method} {_scrubbed_target(request.path_qs)}'
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
            handlers[0].emit_line(logger.name, "INFO", line)
            return
        # The record is made directly: Logger.info would walk the stack for a caller this line
        # does not show, on every request.
        record = logger.makeRecord(logger.name, logging.INFO, __file__, 0, line, (), None)
        record.scrubbed = True  # RedactingFilter need not scan this line a second time
        logger.handle(record)
