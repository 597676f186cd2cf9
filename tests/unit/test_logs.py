"""The server's log lines: scrubbed of secrets, as text or JSON."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from treasury_aiohttp.logs import (
    BufferedLineHandler,
    JsonFormatter,
    RedactingFilter,
    configure,
    scrub,
)


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("card 4242424242424242 declined", "4242424242424242"),
        ("card 4242 4242 4242 4242 declined", "4242 4242 4242 4242"),
        ("amex 3782-822463-10005", "3782-822463-10005"),
        ("/x?card=4242+4242+4242+4242", "4242+4242"),
        ("/x?card=4242%204242%204242%204242", "4242%204242"),
        ("key sk_USoik3vCJw3Z5j-hbPWZigcUXxu_lnIR used", "sk_USoik3vCJw3Z5j"),
        ("secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_MfKQ9r8G"),
        ("operator ok_Zx3aPq9-LmN0_rStUvWxYz12 pushed", "ok_Zx3aPq9"),
        ('"GET /pay/pil_OmMvC5-SbD1C-23waRh2NxTnyO5CJ_k3 HTTP/1.1"', "pil_OmMvC5"),
        ("POST /api/v1/payment_method_token_intent/pmti_1/confirm/abcDEF123", "abcDEF123"),
    ],
)
def test_secrets_are_scrubbed(text: str, leak: str) -> None:
    assert leak not in scrub(text)


@pytest.mark.parametrize(
    "text",
    [
        "event evt_01m813s04c7cfr14n71dmd5qet delivered in 12 ms",
        "amount 99999999999 of intent 1234567890123",  # long, but not Luhn-valid
        "2026-11-22 07:50:49,550 INFO took 0.006467s",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert scrub(text) == text


def test_records_and_exceptions_are_scrubbed_in_json_lines() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RedactingFilter())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("test.logs")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("charging %s with key %s", "4000000000000002", "sk_abcdefghijklmnop")
        try:
            raise ValueError("bad card 5555555555554444")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    assert [line["level"] for line in lines] == ["WARNING", "ERROR"]
    text = out.getvalue()
    for leak in ("4000000000000002", "sk_abcdefghijklmnop", "5555555555554444"):
        assert leak not in text
    assert "ValueError" in lines[1]["exception"]


def _wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Poll ``condition`` until it holds or ``seconds`` pass; whether it held."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        threading.Event().wait(0.01)
    return True


@pytest.fixture
def buffered() -> Iterator[tuple[logging.Logger, io.StringIO, list[BufferedLineHandler]]]:
    """A private logger, a StringIO, and a list the test puts its handlers in (closed after)."""
    logger = logging.getLogger(f"test.buffered.{uuid.uuid4().hex}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handlers: list[BufferedLineHandler] = []
    out = io.StringIO()
    yield logger, out, handlers
    for handler in handlers:
        logger.removeHandler(handler)
        handler.close()


def _attach(
    buffered: tuple[logging.Logger, io.StringIO, list[BufferedLineHandler]],
    *,
    interval: float,
    max_lines: int = 1000,
) -> BufferedLineHandler:
    logger, out, handlers = buffered
    handler = BufferedLineHandler(interval=interval, max_lines=max_lines)
    handler.setStream(out)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    handlers.append(handler)
    return handler


def test_lines_wait_for_a_flush_then_come_in_order(
    buffered: tuple[logging.Logger, io.StringIO, list[BufferedLineHandler]],
) -> None:
    logger, out, _ = buffered
    handler = _attach(buffered, interval=3600)
    for i in range(5):
        logger.info("line %d", i)
    assert out.getvalue() == ""
    handler.flush()
    assert out.getvalue() == "".join(f"line {i}\n" for i in range(5))
    handler.flush()  # nothing waiting: nothing written twice
    assert out.getvalue().count("line 0") == 1
    logger.info("line 5")
    assert out.getvalue().endswith("line 4\n")
    handler.flush()
    assert out.getvalue().endswith("line 4\nline 5\n")


def test_max_lines_waiting_are_written_at_once(
    buffered: tuple[logging.Logger, io.StringIO, list[BufferedLineHandler]],
) -> None:
    logger, out, _ = buffered
    _attach(buffered, interval=3600, max_lines=3)
    logger.info("a")
    logger.info("b")
    assert out.getvalue() == ""
    logger.info("c")
    assert out.getvalue() == "a\nb\nc\n"
    logger.info("d")
    assert out.getvalue() == "a\nb\nc\n"
    logger.info("e")
    logger.info("f")
    assert out.getvalue() == "a\nb\nc\nd\ne\nf\n"


def test_close_writes_the_rest_and_stops_the_flusher(
    buffered: tuple[logging.Logger, io.StringIO, list[BufferedLineHandler]],
) -> None:
    logger, out, _ = buffered
    handler = _attach(buffered, interval=3600)
    flusher = handler._flusher
    assert flusher.is_alive()
    logger.info("first")
    logger.info("last")
    assert out.getvalue() == ""
    handler.close()
    assert out.getvalue() == "first\nlast\n"
    assert _wait_for(lambda: not flusher.is_alive()), "the flusher thread outlived close()"


def test_the_flusher_writes_and_close_returns_while_another_holds_the_handlers_lock(
    buffered: tuple[logging.Logger, io.StringIO, list[BufferedLineHandler]],
) -> None:
    # logging.shutdown() holds each handler's lock while it closes it, and close() waits for
    # the flusher: a flusher that needed that lock would hang the process's exit.
    logger, out, _ = buffered
    handler = _attach(buffered, interval=0.01)
    handler.acquire()
    try:
        logger.info("while locked")
        assert _wait_for(lambda: out.getvalue() == "while locked\n"), "the flusher is stuck"
        logger.info("at close")
        handler.close()
        assert out.getvalue() == "while locked\nat close\n"
        assert not handler._flusher.is_alive()
    finally:
        handler.release()


def test_lines_are_written_every_interval_without_a_flush(
    buffered: tuple[logging.Logger, io.StringIO, list[BufferedLineHandler]],
) -> None:
    logger, out, _ = buffered
    _attach(buffered, interval=0.05)
    for i in range(3):
        logger.info("tick %d", i)
    assert _wait_for(lambda: out.getvalue() == "tick 0\ntick 1\ntick 2\n"), out.getvalue()
    logger.info("tock")
    assert _wait_for(lambda: out.getvalue().endswith("tick 2\ntock\n")), out.getvalue()


def test_records_that_fail_to_format_are_dropped_not_buffered(
    buffered: tuple[logging.Logger, io.StringIO, list[BufferedLineHandler]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logger, out, _ = buffered
    handler = _attach(buffered, interval=3600)
    monkeypatch.setattr(logging, "raiseExceptions", False)  # handleError stays quiet
    logger.info("%d", "not a number")
    logger.info("fine")
    handler.flush()
    assert out.getvalue() == "fine\n"


@pytest.mark.usefixtures("logging_state")
@pytest.mark.parametrize("json_lines", [True, False])
def test_configure_buffers_the_access_log_with_the_same_format(json_lines: bool) -> None:
    configure(json_lines=json_lines)
    [handler] = logging.getLogger().handlers
    access = logging.getLogger("aiohttp.access")
    [buffer] = access.handlers
    assert isinstance(buffer, BufferedLineHandler)
    assert access.propagate is False
    assert buffer.formatter is handler.formatter
    assert isinstance(buffer.formatter, JsonFormatter) is json_lines
    assert any(isinstance(f, RedactingFilter) for f in buffer.filters)
    assert any(isinstance(f, RedactingFilter) for f in handler.filters)

    out = io.StringIO()
    buffer.setStream(out)
    access.info('203.0.113.9 "GET /api/v1/wallets HTTP/1.1" 200 12 0.001000s')
    assert out.getvalue() == ""
    buffer.flush()
    [line] = out.getvalue().splitlines()
    if json_lines:
        entry = json.loads(line)
        assert entry["logger"] == "aiohttp.access"
        assert entry["level"] == "INFO"
        assert entry["message"] == '203.0.113.9 "GET /api/v1/wallets HTTP/1.1" 200 12 0.001000s'
    else:
        assert line.endswith(
            ' INFO aiohttp.access 203.0.113.9 "GET /api/v1/wallets HTTP/1.1" 200 12 0.001000s'
        )


@pytest.mark.usefixtures("logging_state")
def test_configure_again_closes_the_previous_access_handler() -> None:
    configure()
    [first] = logging.getLogger("aiohttp.access").handlers
    assert isinstance(first, BufferedLineHandler)
    out = io.StringIO()
    first.setStream(out)
    logging.getLogger("aiohttp.access").info("before")
    configure()
    [second] = logging.getLogger("aiohttp.access").handlers
    assert second is not first
    assert out.getvalue().endswith("before\n")  # written when the old handler closed
    assert _wait_for(lambda: not first._flusher.is_alive())


@pytest.mark.usefixtures("logging_state")
def test_another_access_logger_is_still_scrubbed() -> None:
    # An embedder that calls configure() but runs aiohttp's own access logger: its lines carry
    # the raw path and must be scrubbed by the handler's filter.
    configure()
    access = logging.getLogger("aiohttp.access")
    [buffer] = access.handlers
    out = io.StringIO()
    buffer.setStream(out)
    access.info('1.2.3.4 "GET /pay/pil_SECRETSECRET HTTP/1.1" 200 10 "sk_abcdefghijklmnop"')
    buffer.flush()
    assert "pil_SECRETSECRET" not in out.getvalue()
    assert "sk_abcdefghijklmnop" not in out.getvalue()
    assert "/pay/pil_…" in out.getvalue()


def test_a_record_marked_scrubbed_keeps_its_message() -> None:
    record = logging.makeLogRecord({"msg": "GET /x?card=4242424242424242", "scrubbed": True})
    RedactingFilter().filter(record)
    assert record.getMessage() == "GET /x?card=4242424242424242"
    unmarked = logging.makeLogRecord({"msg": "GET /x?card=4242424242424242"})
    RedactingFilter().filter(unmarked)
    assert "4242424242424242" not in unmarked.getMessage()


def test_a_broken_stream_does_not_stop_the_flusher() -> None:
    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("stream closed")

    handler = BufferedLineHandler(interval=0.01)
    handler.setStream(Broken())
    errors: list[str] = []
    handler.handleError = lambda record: errors.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("test.broken-stream")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("one")
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            time.sleep(0.01)
        assert errors  # the failed write was reported ...
        out = io.StringIO()
        handler.setStream(out)
        logger.warning("two")
        while "two" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "two" in out.getvalue()  # ... and the flusher kept running
    finally:
        logger.removeHandler(handler)
        handler.close()
