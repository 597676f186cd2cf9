"""The access log blanks the bearer secrets URLs carry."""

from __future__ import annotations

import logging

import pytest
from aiohttp import HttpVersion, web
from aiohttp.test_utils import make_mocked_request
from yarl import URL

from treasury_aiohttp.access_log import RedactingAccessLogger, redact


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
