"""treasury-core: an embeddable payments and treasury library.

The public surface: :func:`bootstrap` builds a :class:`Treasury` from a :class:`TreasuryConfig`;
its services (``treasury.wallets``, ``treasury.transfers``, ``treasury.payments``, …) are async
and each call is one storage transaction. Synchronous code uses :class:`BlockingTreasury`,
which hosts the treasury on an event loop of its own. Every name a caller needs for the common
calls is importable from here: the request models the services take, the records they return,
and the errors they raise, all deriving from :class:`TreasuryError` (the hierarchy is drawn in
:mod:`treasury_core.errors`). Deeper modules are for adapters and tests.

Throughout the docstrings, "the interface" is the HTTP interface document, ``docs/interface.md``
in the repository (and the docs site), and "part 2.1" one of its numbered sections.
"""

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from treasury_core.bootstrap import AdapterNotFound, Treasury, bootstrap
from treasury_core.cards.tokens import CreateTokenIntentRequest
from treasury_core.companies import KeyKind, Principal
from treasury_core.config import TreasuryConfig
from treasury_core.currency import Currency, CurrencyRegistry
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
    LedgerInvariantViolation,
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
from treasury_core.interface.errors import error_body, http_status
from treasury_core.interface.records import WalletRecord
from treasury_core.ledger import BalanceRecord
from treasury_core.listing import RecordFilter
from treasury_core.money import convert, round_minor
from treasury_core.movements.records import (
    BankAccount,
    Deposit,
    MovementStatus,
    Transfer,
    VirtualAccount,
    Withdrawal,
)
from treasury_core.movements.requests import (
    CreateDepositRequest,
    CreateTransferRequest,
    CreateVirtualAccountRequest,
    CreateWithdrawalRequest,
    RegisterBankAccountRequest,
)
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest
from treasury_core.notifications.events import Event, EventType
from treasury_core.operators import OperatorKey, OperatorPrincipal
from treasury_core.pagination import Page, PageRequest
from treasury_core.payments.intents import (
    CaptureMethod,
    IntentFilter,
    IntentStatus,
    PaymentIntent,
    PaymentType,
)
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.payments.states import IllegalTransition
from treasury_core.services.companies import CreatedCompany
from treasury_core.sync import BlockingTreasury
from treasury_core.wallets import CreateWalletRequest, Wallet

try:
    __version__ = version("treasury-core")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AdapterNotFound",
    "AuthenticationFailed",
    "BalanceRecord",
    "BankAccount",
    "BlockingTreasury",
    "CaptureMethod",
    "CardError",
    "ConflictRetryExhausted",
    "CreateDepositRequest",
    "CreateIntentRequest",
    "CreateTokenIntentRequest",
    "CreateTransferRequest",
    "CreateVirtualAccountRequest",
    "CreateWalletRequest",
    "CreateWebhookEndpointRequest",
    "CreateWithdrawalRequest",
    "CreatedCompany",
    "Currency",
    "CurrencyRegistry",
    "Deposit",
    "ErrorKind",
    "Event",
    "EventType",
    "FxRateUnavailable",
    "IdempotencyError",
    "IdempotencyInFlight",
    "IllegalTransition",
    "InsufficientFunds",
    "IntentFilter",
    "IntentStatus",
    "InvalidRequestError",
    "KeyKind",
    "LedgerInvariantViolation",
    "LedgerRejected",
    "MovementStatus",
    "NotFound",
    "OperatorKey",
    "OperatorPrincipal",
    "Page",
    "PageRequest",
    "PaymentIntent",
    "PaymentType",
    "PermissionDenied",
    "Principal",
    "ProviderDidNotAct",
    "ProviderError",
    "RateLimited",
    "RecordFilter",
    "RegisterBankAccountRequest",
    "Transfer",
    "Treasury",
    "TreasuryConfig",
    "TreasuryError",
    "UnknownCurrency",
    "ValidationFailed",
    "VirtualAccount",
    "Wallet",
    "WalletRecord",
    "Withdrawal",
    "bootstrap",
    "config_from_env",
    "convert",
    "error_body",
    "http_status",
    "round_minor",
]

if TYPE_CHECKING:
    from treasury_core.settings import config_from_env
else:

    def __getattr__(name: str) -> object:
        # Imported on first use: pydantic-settings (and python-dotenv, which it imports) are only
        # needed by code that reads the environment, not by an application that builds its
        # TreasuryConfig in code.
        if name == "config_from_env":
            from treasury_core.settings import config_from_env

            return config_from_env
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
