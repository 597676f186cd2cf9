"""Logging for ``treasury serve`` and ``treasury worker``: one line per record, as text or JSON,
with secrets scrubbed from every message before it is written.

The code never logs card data or keys on purpose (tests search the logs for them); this is the
second line: whatever a library or a future change lets slip into a message, an exception or a
URL, a filter on the handler replaces before it reaches a file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from treasury_aiohttp.redaction import scrub

__all__ = [
    "BufferedLineHandler",
    "JsonFormatter",
    "RedactingFilter",
    "TextFormatter",
    "configure",
    "scrub",
]


class RedactingFilter(logging.Filter):
    """Renders each record's message (and exception) once, scrubbed."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace the record's message with its scrubbed rendering; never drops a record.

        A record marked ``scrubbed`` (an access line whose one outside field, the path, its
        logger scrubbed already) keeps its message; its exception, if any, is still scrubbed.
        """
        if not getattr(record, "scrubbed", False):
            record.msg = scrub(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        record.exc_info = None
        return True


class TextFormatter(logging.Formatter):
    """``time level logger message`` (+ the exception on the following lines)."""

    def __init__(self, datefmt: str | None = None) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s", datefmt)
        # (second, its strftime) as one attribute: threads sharing the formatter swap it whole.
        self._stamp = (-1, "")

    def line(self, name: str, levelname: str, message: str, created: float) -> str:
        """What :meth:`format` makes of a record of these fields with no exception, without
        building the record (the access log writes one line per request)."""
        second = int(created)
        cached, stamp = self._stamp
        if second != cached:  # strftime once a second, not once a line
            stamp = time.strftime(self.default_time_format, self.converter(created))
            self._stamp = (second, stamp)
        msecs = int((created - second) * 1000)
        return f"{stamp},{msecs:03d} {levelname} {name} {message}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message`` (+ ``exception``),
    then the record's ``fields`` (a mapping, when it has one: the access log's method, path,
    status, …)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        fields: Mapping[str, Any] = getattr(record, "fields", None) or {}
        if record.exc_text:
            fields = {**fields, "exception": record.exc_text}
        return self.line(record.name, record.levelname, record.getMessage(), record.created, fields)

    def line(
        self,
        name: str,
        levelname: str,
        message: str,
        created: float,
        fields: Mapping[str, Any] | None = None,
    ) -> str:
        """:meth:`format` of a record of these fields, without the record."""
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(created, UTC).isoformat(),
            "level": levelname,
            "logger": name,
            "message": message,
        }
        if fields:
            # The four above are every line's; a field may not replace one of them.
            entry.update((k, v) for k, v in fields.items() if k not in entry)
        return json.dumps(entry, ensure_ascii=False)


class BufferedLineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Collects formatted lines and writes them in one call every ``interval`` seconds (or as
    soon as ``max_lines`` are waiting), for the access log.

    One ``write`` and ``flush`` per request cost the server more than any other part of a read
    (about a quarter of a ``GET``'s CPU at load). The price is that a ``kill -9`` loses up to
    ``interval`` seconds of access lines; application records (warnings, errors) do not go
    through this handler and are still written one at a time. A normal exit flushes
    (:func:`logging.shutdown` closes every handler).

    The flusher thread never takes the handler's own lock: :func:`logging.shutdown` holds that
    lock while it calls :meth:`close`, which waits for the flusher, so a flusher waiting for
    it would hang the exit. Lines wait in a deque (appends and pops are atomic) and every
    write happens under a private lock that is only ever taken last.
    """

    def __init__(self, interval: float = 0.25, max_lines: int = 1000) -> None:
        super().__init__()
        self._lines: deque[str] = deque()
        self._max_lines = max_lines
        self._write_lock = threading.Lock()
        self._stopped = threading.Event()
        self._flusher = threading.Thread(
            target=self._flush_every, args=(interval,), name="treasury-log-flusher", daemon=True
        )
        self._flusher.start()

    def _flush_every(self, interval: float) -> None:
        while not self._stopped.wait(interval):
            try:
                self.flush()
            except Exception:  # a closed or broken stream: reported, and tried again next tick
                self.handleError(logging.makeLogRecord({"msg": "access log flush failed"}))

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the formatted line; write everything waiting once ``max_lines`` are."""
        try:
            self._lines.append(self.format(record))
        except Exception:
            self.handleError(record)
            return
        if len(self._lines) >= self._max_lines:
            try:
                self.flush()
            except Exception:
                self.handleError(record)

    def emit_line(
        self,
        name: str,
        levelname: str,
        message: str,
        fields: Mapping[str, Any] | None = None,
    ) -> None:
        """Keep a line made by this handler's formatter from these fields, with no record.

        For :class:`~treasury_aiohttp.access_log.RedactingAccessLogger`, whose message (and
        ``fields``) are scrubbed already; only a :class:`TextFormatter` or
        :class:`JsonFormatter` can do it (see :meth:`takes_lines`).
        """
        formatter = self.formatter
        assert isinstance(formatter, TextFormatter | JsonFormatter)
        now = time.time()
        try:
            # Fields are JSON's alone: a text line's message says all it shows.
            if isinstance(formatter, JsonFormatter):
                line = formatter.line(name, levelname, message, now, fields)
            else:
                line = formatter.line(name, levelname, message, now)
            self._lines.append(line)
        except Exception:
            self.handleError(logging.makeLogRecord({"msg": message}))
            return
        if len(self._lines) >= self._max_lines:
            try:
                self.flush()
            except Exception:
                self.handleError(logging.makeLogRecord({"msg": "access log write failed"}))

    @property
    def writes_json(self) -> bool:
        """Whether its lines are JSON (the access log adds its fields only then)."""
        return isinstance(self.formatter, JsonFormatter)

    def takes_lines(self, level: int) -> bool:
        """Whether :meth:`emit_line` makes the line ``handle`` would for a scrubbed record.

        True with one of our formatters and no filter but :class:`RedactingFilter` (which
        leaves a scrubbed message as it is); anything a user configured otherwise takes the
        ordinary path.
        """
        formatter = self.formatter
        return (
            level >= self.level
            # Exactly ours, unchanged: a subclass or a custom date format formats differently.
            and type(formatter) in (TextFormatter, JsonFormatter)
            and formatter is not None
            and formatter.datefmt is None
            and all(type(f) is RedactingFilter for f in self.filters)
        )

    def flush(self) -> None:
        """Write whatever is waiting, in order, then flush the stream."""
        with self._write_lock:
            lines = []
            with contextlib.suppress(IndexError):
                while True:
                    lines.append(self._lines.popleft())
            if lines:
                self.stream.write(self.terminator.join(lines) + self.terminator)
            # Not StreamHandler.flush: it takes the handler's lock (see the class docstring).
            if hasattr(self.stream, "flush"):
                self.stream.flush()

    def close(self) -> None:
        """Stop the flusher, write what is left, close."""
        self._stopped.set()
        if self._flusher is not threading.current_thread():
            self._flusher.join()
        self.flush()
        super().close()


def configure(*, json_lines: bool = False, level: int = logging.INFO) -> None:
    """Log to stderr through the redacting filter, as text or JSON lines; the access log
    (``aiohttp.access``) through a :class:`BufferedLineHandler` with the same format."""
    formatter = JsonFormatter() if json_lines else TextFormatter()
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter())
    handler.setFormatter(formatter)
    # The access log's own handler, buffered. Its filter leaves RedactingAccessLogger's lines
    # as they are (that logger scrubbed their path already) and scrubs any other access logger.
    access = BufferedLineHandler()
    access.addFilter(RedactingFilter())
    access.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    access_logger = logging.getLogger("aiohttp.access")
    for old in access_logger.handlers:
        old.close()
    access_logger.handlers[:] = [access]
    access_logger.propagate = False
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if json_lines:
        # A Python warning is written to stderr as two lines of text otherwise.
        logging.captureWarnings(True)
