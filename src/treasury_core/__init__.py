"""treasury-core: an embeddable payments and treasury library.

The public surface: :func:`bootstrap` builds a :class:`Treasury` from a :class:`TreasuryConfig`;
its services (``treasury.wallets``, ``treasury.companies``, …) are async and each call is one
storage transaction. Errors derive from :class:`TreasuryError`.
"""

from treasury_core.bootstrap import AdapterNotFound, Treasury, bootstrap
from treasury_core.companies import KeyKind, Principal
from treasury_core.config import TreasuryConfig, config_from_env
from treasury_core.currency import Currency, CurrencyRegistry
from treasury_core.errors import (
    AuthenticationFailed,
    CardError,
    ConflictRetryExhausted,
    IdempotencyError,
    IdempotencyInFlight,
    InsufficientFunds,
    InvalidRequestError,
    LedgerInvariantViolation,
    LedgerRejected,
    NotFound,
    PermissionDenied,
    ProviderError,
    RateLimited,
    TreasuryError,
    UnknownCurrency,
    ValidationFailed,
)
from treasury_core.events import Event, EventType
from treasury_core.ledger import BalanceRecord
from treasury_core.money import convert, round_minor
from treasury_core.pagination import Page, PageRequest
from treasury_core.wallets import CreateWalletRequest, Wallet, WalletRecord

__all__ = [
    "AdapterNotFound",
    "AuthenticationFailed",
    "BalanceRecord",
    "CardError",
    "ConflictRetryExhausted",
    "CreateWalletRequest",
    "Currency",
    "CurrencyRegistry",
    "Event",
    "EventType",
    "IdempotencyError",
    "IdempotencyInFlight",
    "InsufficientFunds",
    "InvalidRequestError",
    "KeyKind",
    "LedgerInvariantViolation",
    "LedgerRejected",
    "NotFound",
    "Page",
    "PageRequest",
    "PermissionDenied",
    "Principal",
    "ProviderError",
    "RateLimited",
    "Treasury",
    "TreasuryConfig",
    "TreasuryError",
    "UnknownCurrency",
    "ValidationFailed",
    "Wallet",
    "WalletRecord",
    "bootstrap",
    "config_from_env",
    "convert",
    "round_minor",
]
