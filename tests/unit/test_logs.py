"""The server's log lines: scrubbed of secrets, as text or JSON."""

from __future__ import annotations

import io
import json
import logging

import pytest

from treasury_aiohttp.logs import JsonFormatter, RedactingFilter, scrub


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("card 4242424242424242 declined", "4242424242424242"),
        ("card 4242 4242 4242 4242 declined", "4242 4242 4242 4242"),
        ("amex 3782-822463-10005", "3782-822463-10005"),
        ("key sk_USoik3vCJw3Z5j-hbPWZigcUXxu_lnIR used", "sk_USoik3vCJw3Z5j"),
        ("secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_MfKQ9r8G"),
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
