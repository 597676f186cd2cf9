"""The treasury's stored records (parts 2.4–2.8): deposits, withdrawals, transfers, bank and
virtual accounts, as the domain keeps them.

Each holds what the interface shows of it (:mod:`treasury_core.interface.records` projects it)
and what stays inside: the owning company, and the ledger's pending movements it reserved.

Rules:
- A movement (deposit, withdrawal, transfer) is ``pending`` until the rail confirms it, then
  ``completed`` or ``failed``; both are terminal. A failed one carries ``error``.
- Completing a movement posts its ``pending_ids``; failing it voids them. Nothing else holds money.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, PlainSerializer

from treasury_core.metadata import MetadataField
from treasury_core.serialization import Timestamp


class MovementStatus(StrEnum):
    """States of deposits, withdrawals and transfers (parts 3.2–3.4)."""

    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class MovementError(BaseModel):
    """Why a movement failed: ``{"code", "message"}``."""

    model_config = ConfigDict(frozen=True)

    code: str
    message: str


#: A rate: exact ``Decimal`` inside, a JSON number outside. Rates carry at most 15 significant
#: digits, which a double prints back unchanged.
Rate = Annotated[Decimal, PlainSerializer(float, return_type=float, when_used="json")]


class PaymentInstructionRecord(BaseModel):
    """One item of a deposit's ``payment_instructions``."""

    model_config = ConfigDict(frozen=True)

    bank_name: str
    account_name: str
    account_number: str
    routing_number: str


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class TreasuryRecord(_Frozen):
    """What every stored treasury record has: an id of its kind's prefix, its company, its
    creation time and the merchant's metadata (each kind declares them among its own fields,
    in the order its stored documents keep)."""

    #: The id prefix of this kind of record (``dep``, ``wdr``, …).
    prefix: ClassVar[str]
    #: Whether storage refuses a second record of this kind with the same ``lookup_key``.
    unique_lookup_key: ClassVar[bool] = False

    if TYPE_CHECKING:
        id: str
        company_id: int
        created_at: datetime
        #: The merchant's key-value pairs (:mod:`treasury_core.metadata`); ``{}`` on the kinds
        #: whose interface record has no ``metadata``.
        metadata: dict[str, str]

    @property
    def status_value(self) -> str:
        """The status as stored in the status column."""
        status = getattr(self, "status", "active")
        return str(status.value if isinstance(status, StrEnum) else status)

    @property
    def lookup_key(self) -> str | None:
        """A second key the record can be found by (a virtual account's number), if any."""
        return None


class Deposit(TreasuryRecord):
    """A stored deposit; ``virtual_account_id`` when it arrived through a virtual account."""

    prefix: ClassVar[str] = "dep"

    id: str
    wallet_id: str
    from_amount: int
    from_currency_id: str
    to_amount: int
    to_currency_id: str
    exchange_rate_from_to: Rate
    reference: str | None
    description: str | None
    status: MovementStatus
    payment_instructions: list[PaymentInstructionRecord]
    error: MovementError | None
    created_at: Timestamp
    #: The virtual account the funds arrived at; ``None`` for an announced deposit.
    virtual_account_id: str | None = None
    metadata: MetadataField = {}
    company_id: int
    pending_ids: tuple[str, ...] = ()


class Withdrawal(TreasuryRecord):
    """A stored withdrawal."""

    prefix: ClassVar[str] = "wdr"

    id: str
    wallet_id: str
    from_amount: int
    from_currency_id: str
    to_amount: int
    to_currency_id: str
    exchange_rate_from_to: Rate
    bank_account_id: str
    reference: str | None
    description: str | None
    withdraw_fee: int
    status: MovementStatus
    error: MovementError | None
    created_at: Timestamp
    metadata: MetadataField = {}
    company_id: int
    pending_ids: tuple[str, ...] = ()
    #: The bank export (``bex_…``) whose payment file carries it; ``None`` until exported. A
    #: bank-file rail exports a withdrawal once, then waits for the bank's statement.
    bank_export_id: str | None = None
    #: The deposit (``dep_…``) that credited the wallet when the bank returned the payout after
    #: paying it; ``None`` while it has not been returned. A payout comes back once.
    returned_by: str | None = None


class Transfer(TreasuryRecord):
    """A stored transfer."""

    prefix: ClassVar[str] = "trf"

    id: str
    from_wallet_id: str
    to_wallet_id: str
    from_amount: int
    from_currency_id: str
    to_amount: int
    to_currency_id: str
    exchange_rate_from_to: Rate
    reference: str | None
    description: str | None
    status: MovementStatus
    error: MovementError | None
    created_at: Timestamp
    #: The business day of a published reference rate (the ECB's date); ``None`` for the same
    #: currency or an FX adapter with live rates.
    exchange_rate_date: date | None = None
    metadata: MetadataField = {}
    company_id: int
    pending_ids: tuple[str, ...] = ()


class BankAccount(TreasuryRecord):
    """A stored withdrawal destination (part 2.5), full account number included."""

    prefix: ClassVar[str] = "ba"

    id: str
    company_id: int
    created_at: Timestamp
    metadata: MetadataField = {}
    bank_name: str
    account_name: str
    account_number: str
    routing_number: str
    currency_id: str
    status: str = "active"


class VirtualAccount(TreasuryRecord):
    """A stored virtual account."""

    prefix: ClassVar[str] = "va"

    id: str
    wallet_id: str
    source_currency: str
    status: str
    account_name: str
    bank_name: str
    account_number: str | None
    routing_number: str | None
    iban: str | None
    bic: str | None
    swift_code: str | None
    sort_code: str | None
    branch_code: str | None
    created_at: Timestamp
    metadata: MetadataField = {}
    company_id: int

    @property
    def lookup_key(self) -> str | None:
        """Incoming funds name the IBAN, or else the local account number."""
        return self.iban or self.account_number
