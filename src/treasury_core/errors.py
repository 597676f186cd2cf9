"""The exceptions treasury-core raises, and the HTTP error each one becomes.

Every error a caller can act on derives from :class:`TreasuryError`. Each carries the fields of the
error body the HTTP interface returns (``{"error": {"type", "code", "message", "param"?,
"failure_reason"?}}``), so an embedding application can translate it the same way the bundled
server does::

    TreasuryError
    ├── InvalidRequestError            400 invalid_request_error
    │   ├── ValidationFailed           400 (a field failed validation; ``param`` names it)
    │   ├── UnknownCurrency            400 unknown_currency
    │   ├── InsufficientFunds          400 insufficient_funds
    │   ├── LedgerRejected             400 (a ledger rule refused a movement)
    │   └── IllegalTransition          400 (a payment intent cannot make that move; payments.states)
    ├── AuthenticationFailed           401 authentication_error
    ├── CardError                      402 card_error (with ``failure_reason``)
    ├── PermissionDenied               403 permission_error
    ├── NotFound                       404 not_found
    ├── IdempotencyError               400 idempotency_error (key reused with another body)
    │   └── IdempotencyInFlight        409 idempotency_error (the first request is still running)
    ├── RateLimited                    429 rate_limit_error
    ├── ConflictRetryExhausted         503 api_error (storage kept reporting conflicts)
    ├── ProviderError                  502 api_error (an outside provider failed)
    │   └── FxRateUnavailable          503 api_error (no fresh rate: nothing moved, retry later)

:class:`LedgerInvariantViolation` is deliberately *not* a ``TreasuryError``: it means a bug in the
caller (an unbalanced journal, a currency mismatch), never a customer mistake.
"""

from __future__ import annotations

from typing import Any, ClassVar


class TreasuryError(Exception):
    """Base class of every error a caller of treasury-core can handle."""

    http_status: ClassVar[int] = 500
    error_type: ClassVar[str] = "api_error"
    default_code: ClassVar[str] = "api_error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        failure_reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.param = param
        self.failure_reason = failure_reason

    def to_body(self) -> dict[str, Any]:
        """The error body of the HTTP interface for this error."""
        error: dict[str, Any] = {
            "type": self.error_type,
            "code": self.code,
            "message": self.message,
        }
        if self.param is not None:
            error["param"] = self.param
        if self.failure_reason is not None:
            error["failure_reason"] = self.failure_reason
        return {"error": error}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r}, param={self.param!r})"


class InvalidRequestError(TreasuryError):
    """The request cannot be carried out as sent; nothing was changed."""

    http_status = 400
    error_type = "invalid_request_error"
    default_code = "invalid_request"


class ValidationFailed(InvalidRequestError):
    """A field is missing, of the wrong type, or out of range; ``param`` names it."""

    default_code = "parameter_invalid"


class UnknownCurrency(InvalidRequestError):
    """The currency code is not ISO 4217 or is not enabled in this deployment."""

    default_code = "unknown_currency"


class InsufficientFunds(InvalidRequestError):
    """The movement would take an account's available balance below its limit."""

    default_code = "insufficient_funds"


class LedgerRejected(InvalidRequestError):
    """A ledger rule refused a movement (a pending movement already resolved, expired, …)."""

    default_code = "ledger_rejected"


class AuthenticationFailed(TreasuryError):
    """The API key is missing, malformed, unknown or revoked."""

    http_status = 401
    error_type = "authentication_error"
    default_code = "invalid_api_key"


class CardError(TreasuryError):
    """The card issuer or provider refused; ``failure_reason`` says why."""

    http_status = 402
    error_type = "card_error"
    default_code = "card_declined"


class PermissionDenied(TreasuryError):
    """The key is valid but may not do this (a publishable key on a secret-key call)."""

    http_status = 403
    error_type = "permission_error"
    default_code = "secret_key_required"


class NotFound(TreasuryError):
    """No such resource for this company (another company's resource is reported the same way)."""

    http_status = 404
    error_type = "not_found"
    default_code = "resource_missing"


class IdempotencyError(TreasuryError):
    """An ``Idempotency-Key`` was reused with a different request."""

    http_status = 400
    error_type = "idempotency_error"
    default_code = "idempotency_key_reused"


class IdempotencyInFlight(IdempotencyError):
    """Another request with the same ``Idempotency-Key`` is still being processed."""

    http_status = 409
    default_code = "idempotency_key_in_use"


class RateLimited(TreasuryError):
    """Too many requests for this key; retry after ``retry_after`` seconds."""

    http_status = 429
    error_type = "rate_limit_error"
    default_code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int = 1) -> None:
        super().__init__(message)
        #: Whole seconds until a request will be accepted (the ``Retry-After`` header).
        self.retry_after = retry_after


class ConflictRetryExhausted(TreasuryError):
    """Storage reported a transient conflict (deadlock, serialization) on every retry."""

    http_status = 503
    default_code = "storage_busy"


class ProviderError(TreasuryError):
    """An outside provider (card network, bank rail, FX source) failed or answered nonsense."""

    http_status = 502
    default_code = "provider_error"


class FxRateUnavailable(ProviderError):
    """No rate, or only a stale one, for a currency pair; the movement was refused whole."""

    http_status = 503
    default_code = "fx_rate_unavailable"
    retry_after = 5


class LedgerInvariantViolation(Exception):
    """A journal broke a rule only a programming error can break (unbalanced, wrong currency)."""
