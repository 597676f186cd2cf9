"""Ports: what the core needs from the world, as typed protocols. Adapters implement them."""

from treasury_core.ports.bank_files import (
    BankFiles,
    Direction,
    OutgoingPayment,
    PaymentFile,
    Statement,
    StatementLine,
    StatementRejected,
)
from treasury_core.ports.bank_rail import (
    AccountFormat,
    BankAccountDetails,
    BankRail,
    FormatField,
    PaymentInstruction,
    Settlement,
    VirtualAccountDetails,
)
from treasury_core.ports.card_provider import (
    HOLD_GONE_FAILURE_REASON,
    CardData,
    CardProvider,
    CardProviderBase,
    CardProviderResult,
    CardProviderStatus,
    ChargebackOutcome,
    HoldGone,
)
from treasury_core.ports.clock import Clock
from treasury_core.ports.fx import FxQuote, FxRates
from treasury_core.ports.ids import IdSource
from treasury_core.ports.notifier import DeliveryFailed, WebhookSender
from treasury_core.ports.rate_limiter import RequestLimiter
from treasury_core.ports.storage import (
    ClockOffsetRepository,
    CompanyRepository,
    DeliveryRepository,
    IdempotencyRepository,
    JobRepository,
    LedgerRepository,
    OutboxRepository,
    RecordRepository,
    Storage,
    UnitOfWork,
    WalletRepository,
    background_writes,
    in_background,
)
from treasury_core.ports.vault import SealedCard, Vault, VaultError

__all__ = [  # noqa: RUF022 - plain sorted() order, which tests/unit/test_public_api.py checks
    "AccountFormat",
    "BankAccountDetails",
    "BankFiles",
    "BankRail",
    "CardData",
    "CardProvider",
    "CardProviderBase",
    "CardProviderResult",
    "CardProviderStatus",
    "ChargebackOutcome",
    "Clock",
    "ClockOffsetRepository",
    "CompanyRepository",
    "DeliveryFailed",
    "DeliveryRepository",
    "Direction",
    "FormatField",
    "FxQuote",
    "FxRates",
    "HOLD_GONE_FAILURE_REASON",
    "HoldGone",
    "IdSource",
    "IdempotencyRepository",
    "JobRepository",
    "LedgerRepository",
    "OutboxRepository",
    "OutgoingPayment",
    "PaymentFile",
    "PaymentInstruction",
    "RecordRepository",
    "RequestLimiter",
    "SealedCard",
    "Settlement",
    "Statement",
    "StatementLine",
    "StatementRejected",
    "Storage",
    "UnitOfWork",
    "Vault",
    "VaultError",
    "VirtualAccountDetails",
    "WalletRepository",
    "WebhookSender",
    "background_writes",
    "in_background",
]
