"""The treasury's records (parts 2.4–2.8) as stored and as the interface returns them.

Rules:
- A movement (deposit, withdrawal, transfer) is ``pending`` until the rail confirms it, then
  ``completed`` or ``failed``; both are terminal. A failed one carries ``error``.
- ``pending_ids`` are the ledger's pending movements this record reserved; completing posts
  them, failing voids them. Nothing else holds money.
- ``api()`` is the record the interface shows: internal fields (``company_id``, ``pending_ids``)
  stay out of it.
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, PlainSerializer

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


#: A rate: exact ``Decimal`` inside, a JSON number outside (rates carry at most 12 significant
#: digits, which a double represents exactly enough to print the same digits back).
Rate = Annotated[Decimal, PlainSerializer(float, return_type=float, when_used="json")]


class TreasuryRecord(BaseModel):
    """Base of every stored treasury record: id, owner, status, creation time."""

    model_config = ConfigDict(frozen=True)

    #: The id prefix of this kind of record (``dep``, ``wdr``, …).
    prefix: ClassVar[str]
    #: Fields kept out of the interface's record.
    internal: ClassVar[frozenset[str]] = frozenset({"company_id", "pending_ids"})

    id: str
    company_id: int
    created_at: Timestamp

    @property
    def status_value(self) -> str:
        """The record's status as stored in the status column."""
        status = getattr(self, "status", "active")
        return str(status.value if isinstance(status, StrEnum) else status)

    @property
    def lookup_key(self) -> str | None:
        """A second key the record can be found by (a virtual account's number), if any."""
        return None

    def api(self) -> dict[str, Any]:
        """The record as the interface returns it (JSON-ready)."""
        return self.model_dump(mode="json", exclude=set(self.internal))


class PaymentInstructionRecord(BaseModel):
    """One item of a deposit's ``payment_instructions``."""

    model_config = ConfigDict(frozen=True)

    bank_name: str
    account_name: str
    account_number: str
    routing_number: str


class Deposit(TreasuryRecord):
    """Money coming into a wallet from outside (part 2.7)."""

    prefix: ClassVar[str] = "dep"
    internal: ClassVar[frozenset[str]] = frozenset(
        {"company_id", "pending_ids", "virtual_account_id"}
    )

    wallet_id: str
    from_amount: int
    from_currency_id: str
    to_amount: int
    to_currency_id: str
    exchange_rate_from_to: Rate | None = None
    reference: str | None = None
    description: str | None = None
    status: MovementStatus
    payment_instructions: list[PaymentInstructionRecord]
    error: MovementError | None = None
    pending_ids: tuple[str, ...] = ()
    virtual_account_id: str | None = None


class Withdrawal(TreasuryRecord):
    """Money leaving a wallet for a registered bank account (part 2.4)."""

    prefix: ClassVar[str] = "wdr"

    wallet_id: str
    from_amount: int
    from_currency_id: str
    to_amount: int
    to_currency_id: str
    exchange_rate_from_to: Rate | None = None
    bank_account_id: str
    reference: str | None = None
    description: str | None = None
    withdraw_fee: int
    status: MovementStatus
    error: MovementError | None = None
    pending_ids: tuple[str, ...] = ()


class Transfer(TreasuryRecord):
    """Money moving between two wallets of one company, converted when currencies differ (2.6)."""

    prefix: ClassVar[str] = "trf"

    from_wallet_id: str
    to_wallet_id: str
    from_amount: int
    from_currency_id: str
    to_amount: int
    to_currency_id: str
    exchange_rate_from_to: Rate
    reference: str | None = None
    description: str | None = None
    status: MovementStatus
    error: MovementError | None = None
    pending_ids: tuple[str, ...] = ()


class BankAccountStatus(StrEnum):
    """A registered bank account is usable once stored."""

    ACTIVE = "active"


class BankAccount(TreasuryRecord):
    """A withdrawal destination (part 2.5); the account number shows only its last four."""

    prefix: ClassVar[str] = "ba"
    internal: ClassVar[frozenset[str]] = frozenset({"company_id", "account_number"})

    bank_name: str
    account_name: str
    account_number: str
    routing_number: str
    currency_id: str
    status: BankAccountStatus = BankAccountStatus.ACTIVE

    def api(self) -> dict[str, Any]:
        """The record, with ``account_number`` masked and ``last4`` added."""
        body = super().api()
        body["account_number"] = (
            "•" * max(len(self.account_number) - 4, 0) + self.account_number[-4:]
        )
        body["last4"] = self.account_number[-4:]
        return body


class VirtualAccountStatus(StrEnum):
    """``active`` is the only status the interface names."""

    ACTIVE = "active"


class VirtualAccount(TreasuryRecord):
    """Dedicated bank coordinates whose incoming funds credit a wallet (part 2.8)."""

    prefix: ClassVar[str] = "va"

    wallet_id: str
    source_currency: str
    status: VirtualAccountStatus = VirtualAccountStatus.ACTIVE
    account_name: str
    bank_name: str
    account_number: str | None = None
    routing_number: str | None = None
    iban: str | None = None
    bic: str | None = None
    swift_code: str | None = None
    sort_code: str | None = None
    branch_code: str | None = None

    @property
    def lookup_key(self) -> str | None:
        """Incoming funds name the IBAN, or the local account number."""
        return self.iban or self.account_number


def is_terminal(status: MovementStatus) -> bool:
    """Whether a movement can change no more."""
    return status is not MovementStatus.PENDING


__all__ = [
    "BankAccount",
    "Deposit",
    "MovementError",
    "MovementStatus",
    "PaymentInstructionRecord",
    "Rate",
    "Transfer",
    "TreasuryRecord",
    "VirtualAccount",
    "Withdrawal",
    "is_terminal",
]
