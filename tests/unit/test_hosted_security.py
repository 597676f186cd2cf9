"""CSRF tokens, the same-origin rule and the hosted pages' headers."""

from __future__ import annotations

import logging

import pytest
from aiohttp.test_utils import make_mocked_request
from pydantic import SecretStr

from treasury_aiohttp.hosted.security import (
    CSRF_TOKEN_SECONDS,
    MSG_FORM_KEY_RANDOM,
    FormKey,
    FormKeyMissing,
    check_same_origin,
    page_headers,
)
from treasury_aiohttp.settings import app_settings
from treasury_core import TreasuryConfig
from treasury_core.errors import PermissionDenied

NOW = 1_800_000_000.0


def key(secret: str | None = "form-key") -> FormKey:
    return FormKey(TreasuryConfig(form_key=SecretStr(secret) if secret else None))


def test_a_token_is_good_for_its_page_for_an_hour() -> None:
    token = key().token("pay:pil_a", now=NOW)
    key().check("pay:pil_a", token, now=NOW)  # another process with the same key agrees
    key().check("pay:pil_a", token, now=NOW + CSRF_TOKEN_SECONDS)
    with pytest.raises(PermissionDenied):
        key().check("pay:pil_a", token, now=NOW + CSRF_TOKEN_SECONDS + 1)
    with pytest.raises(PermissionDenied):
        key().check("pay:pil_b", token, now=NOW)  # another page
    with pytest.raises(PermissionDenied):
        key("other-key").check("pay:pil_a", token, now=NOW)


@pytest.mark.parametrize(
    "bad", [None, "", ".", "abc.def", "1800000000.", "-5.x", "².x", "9" * 5000 + ".x"]
)
def test_malformed_tokens_are_refused(bad: str | None) -> None:
    with pytest.raises(PermissionDenied, match="reload the page"):
        key().check("pay:pil_a", bad, now=NOW)


def test_a_tampered_time_is_refused() -> None:
    issued, mac = key().token("pay:pil_a", now=NOW).split(".")
    with pytest.raises(PermissionDenied):
        key().check("pay:pil_a", f"{int(issued) + 600}.{mac}", now=NOW + 600)


def test_without_a_configured_key_each_process_has_its_own() -> None:
    token = key(None).token("pay:pil_a", now=NOW)
    with pytest.raises(PermissionDenied):
        key(None).check("pay:pil_a", token, now=NOW)


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({}, True),  # a server, not a browser
        ({"Sec-Fetch-Site": "same-origin"}, True),
        ({"Sec-Fetch-Site": "same-origin", "Origin": "null"}, True),
        ({"Sec-Fetch-Site": "none"}, True),
        ({"Sec-Fetch-Site": "same-site"}, False),
        ({"Sec-Fetch-Site": "cross-site"}, False),
        ({"Origin": "http://pay.example:8080"}, True),
        ({"Origin": "https://evil.example"}, False),
        ({"Origin": "http://pay.example:8081"}, False),
        ({"Origin": "null"}, False),
    ],
)
def test_same_origin_rule(headers: dict[str, str], allowed: bool) -> None:
    request = make_mocked_request(
        "POST", "/pay/pil_a", headers={"Host": "pay.example:8080", **headers}
    )
    if allowed:
        check_same_origin(request)
    else:
        with pytest.raises(PermissionDenied, match="Cross-site"):
            check_same_origin(request)


def test_page_headers_allow_only_configured_framing() -> None:
    default = page_headers(TreasuryConfig())
    assert "frame-ancestors 'self'" in default["Content-Security-Policy"]
    assert default["X-Frame-Options"] == "SAMEORIGIN"
    embedded = page_headers(TreasuryConfig(frame_ancestors=("https://shop.example",)))
    assert "frame-ancestors 'self' https://shop.example" in embedded["Content-Security-Policy"]
    assert "X-Frame-Options" not in embedded


@pytest.mark.parametrize(
    "bad", ["https://shop.example; script-src *", "shop.example", "'unsafe-inline'", "*"]
)
def test_frame_ancestors_cannot_smuggle_directives(bad: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        # Checked by the app's settings when the app reads them.
        app_settings(TreasuryConfig(frame_ancestors=(bad,)))


@pytest.mark.parametrize("secret", [None, "", "   ", "short"])
def test_outside_sandbox_a_form_key_is_required(secret: str | None) -> None:
    # Several processes, each with a random key, refuse each other's forms.
    config = TreasuryConfig(
        sandbox=False, form_key=SecretStr(secret) if secret is not None else None
    )
    with pytest.raises(FormKeyMissing, match="TREASURY_FORM_KEY"):
        FormKey(config)
    FormKey(TreasuryConfig(sandbox=False, form_key=SecretStr("k" * 16)))


def test_in_sandbox_mode_a_missing_form_key_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="treasury.hosted"):
        key(None)
    assert [r.getMessage() for r in caplog.records] == [MSG_FORM_KEY_RANDOM]
    caplog.clear()
    key("form-key")
    assert caplog.records == []
