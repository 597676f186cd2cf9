"""The access log of ``treasury serve``: one line per request, bearer secrets in URLs blanked.

Several URLs are credentials: a payment intent's lookup id (``/pay/pil_…`` and the polling
query), the hosted tokenization form (``/tokenize/{pmti_id}/{secret}``) and the confirm
endpoint (``…/confirm/{secret}``). Logs are read by more people than the API keys are, so those
parts are replaced by ``…`` before the line is written. (Card numbers never appear in a URL.)
"""

from __future__ import annotations

import re

from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

_SECRETS = (
    (re.compile(r"(/pay/)pil_[^/?#]*"), r"\1pil_…"),
    (re.compile(r"(/tokenize/[^/?#]+/)[^/?#]*"), r"\1…"),
    (re.compile(r"(/confirm/)[^/?#]*"), r"\1…"),
    (re.compile(r"(payment_intent_lookup_id=)[^&#]*"), r"\1…"),
)


def redact(path_qs: str) -> str:
    """``path_qs`` with every bearer secret replaced by ``…``."""
    for pattern, replacement in _SECRETS:
        path_qs = pattern.sub(replacement, path_qs)
    return path_qs


class RedactingAccessLogger(AbstractAccessLogger):
    """``client "METHOD path HTTP/x.y" status bytes seconds``, the path redacted."""

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        """Write one line for a finished request."""
        version = request.version
        self.logger.info(
            '%s "%s %s HTTP/%d.%d" %d %d %.6fs',
            request.remote or "-",
            request.method,
            redact(request.path_qs),
            version.major,
            version.minor,
            response.status,
            response.body_length,
            time,
        )
