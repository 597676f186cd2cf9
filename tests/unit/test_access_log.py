"""The access log blanks the bearer secrets URLs carry."""

from __future__ import annotations

import io
import json
import logging
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import HttpVersion, web
from aiohttp.test_utils import make_mocked_request
from yarl import URL

from treasury_aiohttp import access_log as access_log_module
from treasury_aiohttp.access_log import RedactingAccessLogger, redact
from treasury_aiohttp.logs import BufferedLineHandler, JsonFormatter, RedactingFilter, TextFormatter


@pytest.mark.parametrize(
    ("path", "logged"),
    [
        ("/pay/pil_SECRET", "/pay/pil_…"),
        ("/pay/pil_SECRET/challenge", "/pay/pil_…/challenge"),
        ("/tokenize/pmti_01abc/SECRET", "/tokenize/pmti_01abc/…"),
        (
            "/api/v1/payment_method_token_intent/pmti_01abc/confirm/SECRET",
            "/api/v1/payment_method_token_intent/pmti_01abc/confirm/…",
        ),
        (
            "/api/v1/payments/intent?payment_intent_lookup_id=pil_SECRET&x=1",
            "/api/v1/payments/intent?payment_intent_lookup_id=…&x=1",
        ),
        (
            "/pay/pil_SECRET/challenge/return?payment_intent=pi_1"
            "&payment_intent_client_secret=pi_1_secret_SECRET",
            "/pay/pil_…/challenge/return?payment_intent=pi_1&payment_intent_client_secret=…",
        ),
        ("/api/v1/wallets?limit=5", "/api/v1/wallets?limit=5"),
    ],
)
def test_redact(path: str, logged: str) -> None:
    assert redact(path) == logged


def test_the_logged_line(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.access")
    access = RedactingAccessLogger(logger, "")
    request = make_mocked_request("POST", "/tokenize/pmti_01abc/SECRET")
    with caplog.at_level(logging.INFO, logger="test.access"):
        access.log(request, web.Response(status=303), 0.0125)
    assert '"POST /tokenize/pmti_01abc/… HTTP/1.1" 303' in caplog.text
    assert "SECRET" not in caplog.text


def _line(
    caplog: pytest.LogCaptureFixture,
    request: web.BaseRequest,
    response: web.StreamResponse,
    time: float,
) -> str:
    logger = logging.getLogger("test.access.line")
    with caplog.at_level(logging.INFO, logger="test.access.line"):
        RedactingAccessLogger(logger, "").log(request, response, time)
    [record] = [r for r in caplog.records if r.name == "test.access.line"]
    return record.getMessage()


def test_the_line_format(caplog: pytest.LogCaptureFixture) -> None:
    request = make_mocked_request(
        "POST", "/api/v1/wallets?limit=5", version=HttpVersion(1, 0)
    ).clone(remote="203.0.113.9")
    line = _line(caplog, request, web.Response(status=201), 0.0125)
    assert line == '203.0.113.9 "POST /api/v1/wallets?limit=5 HTTP/1.0" 201 0 0.012500s'


def test_an_unknown_client_is_a_dash(caplog: pytest.LogCaptureFixture) -> None:
    request = make_mocked_request("GET", "/api/v1/wallets")
    assert request.remote is None
    line = _line(caplog, request, web.Response(status=404), 1.5)
    assert line == '- "GET /api/v1/wallets HTTP/1.1" 404 0 1.500000s'


def test_card_numbers_and_keys_in_a_query_are_blanked(caplog: pytest.LogCaptureFixture) -> None:
    card = "4242424242424242"
    key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
    request = make_mocked_request(
        "GET", f"/api/v1/wallets?card={card}&api_key={key}&limit=5"
    ).clone(remote="203.0.113.9")
    line = _line(caplog, request, web.Response(status=400), 0.001)
    assert card not in line
    assert "4eC39HqLyjWDarjtT1zdp7dc" not in line
    assert line == (
        '203.0.113.9 "GET /api/v1/wallets?card=[card number]&api_key=sk_[redacted]&limit=5'
        ' HTTP/1.1" 400 0 0.001000s'
    )


def test_a_target_logged_again_is_blanked_again(caplog: pytest.LogCaptureFixture) -> None:
    # Scrubbed targets are remembered; what is remembered must be the scrubbed form.
    secret = f"pil_{uuid.uuid4().hex}"
    path = f"/api/v1/payments/intent?payment_intent_lookup_id={secret}"
    lines = []
    for _ in range(3):
        caplog.clear()
        lines.append(_line(caplog, make_mocked_request("GET", path), web.Response(status=200), 0))
    assert len(set(lines)) == 1
    assert secret not in lines[0]
    # What is remembered holds no unscrubbed target either.
    remembered = access_log_module._SCRUBBED
    assert remembered
    assert not any(secret in scrubbed for scrubbed in remembered.values())
    assert not any(secret.encode() in key for key in remembered)
    assert '"GET /api/v1/payments/intent?payment_intent_lookup_id=… HTTP/1.1"' in lines[0]


def test_a_grouped_card_number_in_a_path_is_blanked(caplog: pytest.LogCaptureFixture) -> None:
    request = make_mocked_request("GET", "/").clone(
        rel_url=URL("/cards/4242-4242-4242-4242/x", encoded=True)
    )
    line = _line(caplog, request, web.Response(status=404), 0.0)
    assert "4242-4242" not in line
    assert '"GET /cards/[card number]/x HTTP/1.1"' in line


def test_digits_that_are_not_a_card_number_stay(caplog: pytest.LogCaptureFixture) -> None:
    # 16 digits, not Luhn-valid: an id or an amount, kept as it is.
    request = make_mocked_request("GET", "/api/v1/things/4242424242424241")
    line = _line(caplog, request, web.Response(status=404), 0.0)
    assert '"GET /api/v1/things/4242424242424241 HTTP/1.1"' in line


@pytest.mark.parametrize(
    "path_qs",
    ["/w/%s", "/w/%d?q=%(x)s", "/w/%s%d%%?n=100%", "/w/%25s"],
)
def test_percent_signs_in_the_path_are_logged_literally(
    caplog: pytest.LogCaptureFixture, path_qs: str
) -> None:
    # A real server keeps the request target as sent (an encoded URL): the same here.
    request = make_mocked_request("GET", "/").clone(rel_url=URL(path_qs, encoded=True))
    assert request.path_qs == path_qs
    line = _line(caplog, request, web.Response(status=404), 0.0)
    assert line == f'- "GET {path_qs} HTTP/1.1" 404 0 0.000000s'


def test_nothing_is_logged_below_the_loggers_level(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.access.quiet")
    access = RedactingAccessLogger(logger, "")
    with caplog.at_level(logging.WARNING, logger="test.access.quiet"):
        assert access.enabled is False
    with caplog.at_level(logging.INFO, logger="test.access.quiet"):
        assert access.enabled is True


@pytest.mark.parametrize("formatter", [TextFormatter(), JsonFormatter()], ids=["text", "json"])
@pytest.mark.parametrize("created", [1_790_000_000.0, 1_790_000_000.9996, 1_790_000_061.0421])
def test_a_line_without_a_record_is_the_line_of_the_record(
    formatter: TextFormatter | JsonFormatter, created: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real LogRecord made at `created`: its time fields are the logging module's own.
    monkeypatch.setattr(time, "time", lambda: created)
    monkeypatch.setattr(time, "time_ns", lambda: int(created * 1e9))
    record = logging.LogRecord("aiohttp.access", logging.INFO, __file__, 1, "a line", None, None)
    monkeypatch.undo()
    formatter.line("aiohttp.access", "INFO", "warm the per-second cache", created - 1)
    assert formatter.line("aiohttp.access", "INFO", "a line", created) == formatter.format(record)


def test_other_formatters_and_disabled_loggers_take_the_record_path(
    configured_access: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = configured_access
    [handler] = [h for h in logger.handlers if isinstance(h, BufferedLineHandler)]
    logger.handlers[:] = [handler]
    assert handler.takes_lines(logging.INFO)

    class ServiceJson(JsonFormatter):  # a user's own fields
        def format(self, record: logging.LogRecord) -> str:
            return super().format(record)[:-1] + ', "service": "shop"}'

    handler.setFormatter(ServiceJson())
    assert not handler.takes_lines(logging.INFO)
    handler.setFormatter(TextFormatter(datefmt="%H:%M:%S"))
    assert not handler.takes_lines(logging.INFO)
    handler.setFormatter(TextFormatter())
    assert handler.takes_lines(logging.INFO)
    handler.setLevel(logging.WARNING)
    assert not handler.takes_lines(logging.INFO)
    handler.setLevel(logging.NOTSET)

    logger.disabled = True  # e.g. dictConfig(disable_existing_loggers=True) at run time
    RedactingAccessLogger(logger, "").log(make_mocked_request("GET", "/x"), web.Response(), 0.1)
    handler.flush()
    assert out.getvalue() == ""


def test_a_json_line_keeps_its_exception() -> None:
    record = logging.makeLogRecord({"name": "treasury", "levelname": "ERROR", "msg": "failed"})
    record.exc_text = "Traceback …\nValueError: é"
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "failed"
    assert entry["exception"] == "Traceback …\nValueError: é"
    assert list(entry) == ["time", "level", "logger", "message", "exception"]


@pytest.fixture
def configured_access() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """`treasury serve`'s access log configuration, writing into a StringIO."""
    logger = logging.getLogger(f"test.access.configured.{uuid.uuid4().hex}")
    handler = BufferedLineHandler(interval=3600)
    handler.addFilter(RedactingFilter())
    handler.setFormatter(TextFormatter())
    out = io.StringIO()
    handler.setStream(out)
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    yield logger, out
    handler.close()


def test_the_direct_line_and_the_record_path_write_the_same_line(
    configured_access: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = configured_access
    # pytest's log capture adds its handlers to non-propagating loggers too: back to the one
    # handler `treasury serve` configures.
    [handler] = [h for h in logger.handlers if isinstance(h, BufferedLineHandler)]
    logger.handlers[:] = [handler]
    assert isinstance(handler, BufferedLineHandler) and handler.takes_lines(logging.INFO)
    request = make_mocked_request("GET", "/pay/pil_SECRET?card=4242424242424242")
    access = RedactingAccessLogger(logger, "")
    made: list[logging.LogRecord] = []
    factory = logging.getLogRecordFactory()

    def counting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        made.append(factory(*args, **kwargs))
        return made[-1]

    logging.setLogRecordFactory(counting_factory)
    try:
        access.log(request, web.Response(status=200, body=b"ok"), 0.5)
        assert made == []  # straight to the buffer
        # A filter of the user's own: the line then goes through a LogRecord, as others do.
        handler.addFilter(lambda record: True)
        assert not handler.takes_lines(logging.INFO)
        access.log(request, web.Response(status=200, body=b"ok"), 0.5)
        assert len(made) == 1
    finally:
        logging.setLogRecordFactory(factory)
    handler.flush()
    direct, recorded = (line.split(" ", 2)[2] for line in out.getvalue().splitlines())
    assert direct == recorded
    assert direct == (
        f'INFO {logger.name} - "GET /pay/pil_…?card=[card number] HTTP/1.1" 200 0 0.500000s'
    )
    assert "4242424242424242" not in out.getvalue() and "SECRET" not in out.getvalue()


@pytest.mark.parametrize(
    "sent",
    [
        "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
        "ok_live_0123456789abcdefghij",
        "whsec_0123456789abcdefghijklmnopqrstuv",
        "4242424242424242",
    ],
)
def test_a_request_id_shaped_as_a_secret_is_not_logged_as_sent(sent: str) -> None:
    request = make_mocked_request("GET", "/api/v1/wallets", headers={"X-Request-Id": sent})
    logged = access_log_module.request_id(request)
    assert logged != sent
    assert re.fullmatch(r"[0-9a-f]{16}", logged)


def test_a_plain_request_id_is_logged_as_sent() -> None:
    request = make_mocked_request("GET", "/", headers={"X-Request-Id": "lb-7f3a.1:2"})
    assert access_log_module.request_id(request) == "lb-7f3a.1:2"
