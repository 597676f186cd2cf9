"""The exceptions treasury-core raises, and the kind of failure each one is.

Every error a caller can act on derives from :class:`TreasuryError`. Each carries a ``code``
(what exactly failed, stable for programs), a ``message`` (for people), the ``param`` it is
about if any, and an :class:`ErrorKind`: what went wrong, in terms of what the caller can do
about it, with no transport in it. How an interface reports an error (the HTTP error body, its
``type`` and status) is the wire layer's: :mod:`treasury_core.interface.errors`, which the
bundled server and an embedding application's own routes both use. The tree, with each error's
kind and default code::

    TreasuryError                      internal         api_error
    ├── InvalidRequestError            invalid_request  invalid_request
    │   ├── ValidationFailed           invalid_request  parameter_invalid (``param`` names it)
    │   ├── UnknownCurrency            invalid_request  unknown_currency
    │   ├── InsufficientFunds          invalid_request  insufficient_funds
    │   ├── LedgerRejected             invalid_request  ledger_rejected
    │   └── IllegalTransition          invalid_request  (a payment intent cannot make that move;
    │                                                    payments.states)
    ├── AuthenticationFailed           authentication   invalid_api_key
    ├── CardError                      declined         card_declined (with ``failure_reason``)
    ├── PermissionDenied               forbidden        secret_key_required
    ├── NotFound                       not_found        resource_missing
    ├── IdempotencyError               invalid_request  idempotency_key_reused (key reused with
    │   │                                               another body)
    │   └── IdempotencyInFlight        in_progress      idempotency_key_in_use (the first request
    │                                                   is still running)
    ├── RateLimited                    rate_limited     rate_limited (with ``retry_after``)
    ├── ConflictRetryExhausted         unavailable      storage_busy (storage kept reporting
    │                                                   conflicts)
    └── ProviderError                  provider_failed  provider_error (an outside provider failed)
        ├── ProviderDidNotAct          provider_failed  (it certainly did nothing: retry is safe)
        └── FxRateUnavailable          unavailable      fx_rate_unavailable (no fresh rate:
                                                        nothing moved, retry later)

:class:`LedgerInvariantViolation` is deliberately *not* a ``TreasuryError``: it means a bug in the
caller (an unbalanced journal, a currency mismatch), never a customer mistake.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Self


class ErrorKind(StrEnum):
    """What kind of failure an error is, as a caller decides what to do next."""

    #: The request cannot be carried out as sent (fix it; retrying the same changes nothing).
    INVALID_REQUEST = "invalid_request"
    #: No usable credentials.
    AUTHENTICATION = "authentication"
    #: The card was declined or its payment refused.
    DECLINED = "declined"
    #: Valid credentials that may not do this.
    FORBIDDEN = "forbidden"
    #: No such resource for this caller.
    NOT_FOUND = "not_found"
    #: The same operation is still running (an idempotency key in flight).
    IN_PROGRESS = "in_progress"
    #: Too many requests; retry after a pause.
    RATE_LIMITED = "rate_limited"
    #: An outside provider failed or answered nonsense.
    PROVIDER_FAILED = "provider_failed"
    #: Nothing was done and a later retry may succeed (busy storage, no fresh rate).
    UNAVAILABLE = "unavailable"
    #: A fault of the service itself.
    INTERNAL = "internal"


class TreasuryError(Exception):
    """Base class of every error a caller of treasury-core can handle."""

    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL
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
        #: The record the failed call left behind and where it stands (``object``, ``id``,
        #: ``status``), for an error that leaves one: a 502 after a provider call whose answer
        #: was lost names the intent or refund a retry with the same ``Idempotency-Key`` resumes.
        self.resource: dict[str, Any] | None = None

    def leaving(self, object_name: str, record_id: int | str, status: str) -> Self:
        """This error, naming the record it leaves (:attr:`resource`); for raising."""
        self.resource = {"object": object_name, "id": record_id, "status": status}
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r}, param={self.param!r})"


class InvalidRequestError(TreasuryError):
    """The request cannot be carried out as sent; nothing was changed."""

    kind = ErrorKind.INVALID_REQUEST
    default_code = "invalid_request"


class ValidationFailed(InvalidRequestError):
    """A field is missing, of the wrong type, or out of range; ``param`` names it.

    Also what building a request model from Python with a bad value raises, with the ``param``
    and message the HTTP app answers (:class:`treasury_core.validation.StrictRequest`).
    """

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

    kind = ErrorKind.AUTHENTICATION
    default_code = "invalid_api_key"


class CardError(TreasuryError):
    """The card issuer or provider refused; ``failure_reason`` says why."""

    kind = ErrorKind.DECLINED
    default_code = "card_declined"


class PermissionDenied(TreasuryError):
    """The key is valid but may not do this (a publishable key on a secret-key call)."""

    kind = ErrorKind.FORBIDDEN
    default_code = "secret_key_required"


class NotFound(TreasuryError):
    """No such resource for this company (another company's resource is reported the same way)."""

    kind = ErrorKind.NOT_FOUND
    default_code = "resource_missing"


class IdempotencyError(TreasuryError):
    """An ``Idempotency-Key`` was reused with a different request."""

    kind = ErrorKind.INVALID_REQUEST
    default_code = "idempotency_key_reused"


class IdempotencyInFlight(IdempotencyError):
    """Another request with the same ``Idempotency-Key`` is still being processed."""

    kind = ErrorKind.IN_PROGRESS
    default_code = "idempotency_key_in_use"


class RateLimited(TreasuryError):
    """Too many requests for this key; retry after ``retry_after`` seconds."""

    kind = ErrorKind.RATE_LIMITED
    default_code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int = 1) -> None:
        super().__init__(message)
        #: Whole seconds until a request will be accepted (the ``Retry-After`` header).
        self.retry_after = retry_after


class ConflictRetryExhausted(TreasuryError):
    """Storage reported a transient conflict (deadlock, serialization) on every retry."""

    kind = ErrorKind.UNAVAILABLE
    default_code = "storage_busy"


class ProviderError(TreasuryError):
    """An outside provider (card network, bank rail, FX source) failed or answered nonsense."""

    kind = ErrorKind.PROVIDER_FAILED
    default_code = "provider_error"


class ProviderDidNotAct(ProviderError):
    """The provider certainly did not act on the call: it said so (a 429, a refused key), the
    connection was refused before anything was sent, or the adapter's circuit breaker is open.

    A plain :class:`ProviderError` may hide an effect (the answer was lost after the provider
    acted), so the services keep its record in doubt and ask the provider later; after this one
    they fail or release the record at once, as nothing happened there.
    """


class FxRateUnavailable(ProviderError):
    """No rate, or only a stale one, for a currency pair; the movement was refused whole."""

    kind = ErrorKind.UNAVAILABLE
    default_code = "fx_rate_unavailable"
    retry_after = 5


class LedgerInvariantViolation(Exception):
    """A journal broke a rule only a programming error can break (unbalanced, wrong currency)."""
