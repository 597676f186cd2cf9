"""The wire's error table (:mod:`treasury_core.interface.errors`): every error of the tree has a
status and a body ``type``, and the body says what the error carries, field for field."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import treasury_core
from treasury_core.errors import (
    AuthenticationFailed,
    CardError,
    ConflictRetryExhausted,
    ErrorKind,
    FxRateUnavailable,
    IdempotencyError,
    IdempotencyInFlight,
    InsufficientFunds,
    InvalidRequestError,
    LedgerRejected,
    NotFound,
    PermissionDenied,
    ProviderDidNotAct,
    ProviderError,
    RateLimited,
    TreasuryError,
    UnknownCurrency,
    ValidationFailed,
)
from treasury_core.interface.errors import (
    HTTP_ERRORS,
    HTTP_STATUS,
    INTERNAL_ERROR,
    error_body,
    error_headers,
    error_type,
    http_error_body,
    http_status,
    internal_error_body,
)
from treasury_core.payments.states import IllegalTransition

#: The interface's answer to each error of the tree: status and body ``type`` (spec part 7,
#: docs/decisions.md "Errors and HTTP statuses").
EXPECTED: dict[type[TreasuryError], tuple[int, str]] = {
    TreasuryError: (500, "api_error"),
    InvalidRequestError: (400, "invalid_request_error"),
    ValidationFailed: (400, "invalid_request_error"),
    UnknownCurrency: (400, "invalid_request_error"),
    InsufficientFunds: (400, "invalid_request_error"),
    LedgerRejected: (400, "invalid_request_error"),
    IllegalTransition: (400, "invalid_request_error"),
    AuthenticationFailed: (401, "authentication_error"),
    CardError: (402, "card_error"),
    PermissionDenied: (403, "permission_error"),
    NotFound: (404, "not_found"),
    IdempotencyError: (400, "idempotency_error"),
    IdempotencyInFlight: (409, "idempotency_error"),
    RateLimited: (429, "rate_limit_error"),
    ConflictRetryExhausted: (503, "api_error"),
    ProviderError: (502, "api_error"),
    ProviderDidNotAct: (502, "api_error"),
    FxRateUnavailable: (503, "api_error"),
}


def _every_error_class() -> set[type[TreasuryError]]:
    # Every module of the core loaded, so that errors declared beside their feature count too.
    for module in pkgutil.walk_packages(treasury_core.__path__, "treasury_core."):
        if ".testing" not in module.name:
            importlib.import_module(module.name)
    found: set[type[TreasuryError]] = set()
    pending: list[type[TreasuryError]] = [TreasuryError]
    while pending:
        cls = pending.pop()
        found.add(cls)
        pending.extend(cls.__subclasses__())
    return found


def _instance(cls: type[TreasuryError]) -> TreasuryError:
    if cls is RateLimited:
        return RateLimited("Too many requests", retry_after=3)
    return cls.__new__(cls)


def test_every_kind_has_a_status() -> None:
    assert set(HTTP_STATUS) == set(ErrorKind)


@pytest.mark.parametrize("cls", sorted(EXPECTED, key=lambda c: c.__name__))
def test_each_error_of_the_tree_answers_its_status_and_type(cls: type[TreasuryError]) -> None:
    error = cls("Something went wrong")
    assert (http_status(error), error_type(error)) == EXPECTED[cls]


def test_the_table_is_total_over_the_error_tree() -> None:
    # Errors declared anywhere in the core (a service's, a port's) get an answer as well.
    for cls in _every_error_class():
        error = _instance(cls)
        assert http_status(error) in HTTP_STATUS.values(), cls.__name__
        assert error_type(error), cls.__name__


def test_the_body_names_each_field_the_error_carries() -> None:
    error = UnknownCurrency("Unknown currency: XXX", param="currency_id")
    assert error_body(error) == {
        "error": {
            "type": "invalid_request_error",
            "code": "unknown_currency",
            "message": "Unknown currency: XXX",
            "param": "currency_id",
        }
    }
    declined = CardError("Your card was declined", failure_reason="insufficient_funds")
    assert error_body(declined) == {
        "error": {
            "type": "card_error",
            "code": "card_declined",
            "message": "Your card was declined",
            "failure_reason": "insufficient_funds",
        }
    }
    lost = ProviderError("The card provider did not answer").leaving("refund", "re_1", "pending")
    assert error_body(lost)["error"]["resource"] == {
        "object": "refund",
        "id": "re_1",
        "status": "pending",
    }
    # Each call a new body: a caller may add to it without changing the next one.
    error_body(error)["error"]["extra"] = 1
    assert "extra" not in error_body(error)["error"]


def test_a_retry_after_is_a_header() -> None:
    assert error_headers(RateLimited("Too many requests", retry_after=7)) == {"Retry-After": "7"}
    assert error_headers(FxRateUnavailable("No fresh rate")) == {"Retry-After": "5"}
    assert error_headers(NotFound("No such wallet")) == {}


def test_the_interface_s_own_errors() -> None:
    assert http_error_body(404) == {
        "error": {
            "type": "not_found",
            "code": "route_not_found",
            "message": "Unrecognized request URL",
        }
    }
    assert set(HTTP_ERRORS) == {400, 404, 405, 408, 413, 415}
    assert internal_error_body() == {
        "error": {
            "type": "api_error",
            "code": "internal_error",
            "message": "An internal error occurred",
        }
    }
    assert internal_error_body()["error"] is not INTERNAL_ERROR
