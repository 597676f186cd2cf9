"""Serving the app: aiohttp's runner, with the JSON error body for requests that never reach it.

aiohttp's HTTP parser refuses some requests before any application code exists for them (a
header over 8 KiB, a NUL in a header, a method that is no token): its protocol handler answers
a plain-text 400 that quotes the offending bytes back, and logs an ERROR with a traceback for
each, so that any client could fill the log. :class:`AppRunner` answers those with the
documented error body instead, echoes nothing, and logs one WARNING line without a traceback.

``treasury serve`` runs the app through :func:`serve`; code that mounts :func:`create_app
<treasury_aiohttp.app.create_app>` in its own server gets the same by using :class:`AppRunner`
in place of ``aiohttp.web.AppRunner``.
"""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Sequence
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from treasury_aiohttp.access_log import redact
from treasury_aiohttp.errors import log
from treasury_core.interface.errors import http_error_body, internal_error_body

__all__ = ["SERVER_HEADER", "AppRunner", "serve"]

#: The ``Server`` header of every answer: the product, not aiohttp's and Python's versions.
SERVER_HEADER = "treasury-core"

_BAD_REQUEST = http_error_body(400)
_INTERNAL_ERROR = internal_error_body()


class _JsonErrorRequestHandler(RequestHandler):
    """aiohttp's protocol handler, answering the requests it refuses itself with JSON."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """The documented error body for a request the parser refused (``status`` < 500, the
        offending bytes in ``message``, never sent back) or a failure outside the app's own
        error middleware (5xx, logged with its traceback: that one is a bug of ours)."""
        if status < 500:
            # One line, naming the kind of refusal only: the request's bytes are the client's,
            # and repeating them would let any client write into the log.
            log.warning(
                "refused a malformed HTTP request from %s (%s)",
                request.remote,
                type(exc).__name__ if exc is not None else status,
            )
            body = _BAD_REQUEST
        else:
            log.error("unhandled error outside the app on %s", redact(request.path), exc_info=exc)
            body = _INTERNAL_ERROR
        if request.writer.output_size > 0:
            # As aiohttp's own handler: part of an answer is out, another cannot follow.
            raise ConnectionError("Response is sent already, cannot send another response")
        response = web.json_response(
            body,
            status=status,
            headers={
                "Server": SERVER_HEADER,
                "Cache-Control": "no-store",
                "X-Content-Type-Options": "nosniff",
            },
        )
        response.force_close()  # the parser's state after a refused request is not to be trusted
        return response


class _Server(web.Server):
    """aiohttp's low-level server, handing each connection a :class:`_JsonErrorRequestHandler`."""

    def __call__(self) -> RequestHandler:
        return _JsonErrorRequestHandler(self, loop=self._loop, **self._kwargs)


class AppRunner(web.AppRunner):
    """``aiohttp.web.AppRunner`` whose connections answer malformed requests with the JSON
    error body (see the module's documentation); it takes the same arguments."""

    async def _make_server(self) -> web.Server:
        # aiohttp builds its server from the app (the app's handler, request factory and
        # handler arguments); the same server, handing out our protocol handler. aiohttp offers
        # no public way to choose the handler class.
        made = await super()._make_server()
        kwargs: dict[str, Any] = made._kwargs
        return _Server(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            **kwargs,
        )


async def serve(
    app: web.Application, sockets: Sequence[socket.socket], **runner_kwargs: Any
) -> None:
    """Serve ``app`` on ``sockets`` (bound, not yet listening: ``treasury serve`` binds before
    it opens anything) through :class:`AppRunner` until SIGINT or SIGTERM, then
    stop as ``aiohttp.web.run_app`` does: no new connections, requests in flight answered,
    the app's cleanup run. ``runner_kwargs`` go to the runner (``access_log_class``, …)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    # run_app's keep-alive timeout (aiohttp's handler would keep an idle connection an hour).
    runner = AppRunner(app, **{"keepalive_timeout": 75.0, **runner_kwargs})
    await runner.setup()
    try:
        for sock in sockets:
            await web.SockSite(runner, sock).start()
        await stop.wait()
        # Operators (and the shutdown test) see when the server stopped taking work.
        log.info("stopping: no new connections; answering the requests in flight")
    finally:
        await runner.cleanup()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
