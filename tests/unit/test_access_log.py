"""The access log blanks the bearer secrets URLs carry."""

from __future__ import annotations

import logging

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

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
