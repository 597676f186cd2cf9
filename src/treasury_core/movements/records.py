"""The treasury's records (parts 2.4–2.8): as the interface shows them, and as stored.

Each ``*Record`` model is exactly what the interface returns (and what the OpenAPI document
describes). The stored model extends it with what stays inside: the owning company, and the
ledger's pending movements the record reserved.

Rules:
- A movement (deposit, withdrawal, transfer) is ``pending`` until the rail confirms it, then
  ``completed`` or ``failed``; both are terminal. A failed one carries ``error``.
- Completing a movement posts its ``pending_ids``; failing it voids them. Nothing else holds money.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, ClassVar

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


class DepositRecord(_Frozen):
    """A deposit as the interface shows it (part 2.7)."""

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
    #: The virtual account the funds arrived at, for a deposit a virtual-account credit made;
    #: null for an announced deposit. Added after the interface's 2.7 fields (decisions.md).
    virtual_account_id: str | None = None
    #: Added after the interface's fields (issue 24); ``{}`` for records stored before it.
    metadata: MetadataField = {}


class WithdrawalRecord(_Frozen):
    """A withdrawal as the interface shows it (part 2.4)."""

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
    #: Added after the interface's fields (issue 24); ``{}`` for records stored before it.
    metadata: MetadataField = {}


class TransferRecord(_Frozen):
    """A transfer as the interface shows it (part 2.6)."""

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
    #: The business day of a published reference rate (the ECB's date), ``YYYY-MM-DD``; null
    #: for the same currency or an FX adapter with live rates. Added after the interface's 2.6
    #: fields, which are unchanged; records stored before it read as null.
    exchange_rate_date: date | None = None
    #: Added after the interface's fields (issue 24); ``{}`` for records stored before it.
    metadata: MetadataField = {}


class BankAccountRecord(_Frozen):
    """A registered bank account as the interface shows it: the number masked but for ``last4``."""

    id: str
    bank_name: str
    account_name: str
    account_number: str
    last4: str
    routing_number: str
    currency_id: str
    status: str
    created_at: Timestamp
    #: Added after the interface's fields (issue 24).
    metadata: MetadataField = {}


class VirtualAccountRecord(_Frozen):
    """A virtual account as the interface shows it (part 2.8)."""

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
    #: Added after the interface's fields (issue 24); ``{}`` for records stored before it.
    metadata: MetadataField = {}


class TreasuryRecord(_Frozen):
    """What every stored treasury record has beyond its interface record."""

    #: The id prefix of this kind of record (``dep``, ``wdr``, …).
    prefix: ClassVar[str]
    #: The interface's model of this record.
    record_model: ClassVar[type[BaseModel]]
    #: Whether storage refuses a second record of this kind with the same ``lookup_key``.
    unique_lookup_key: ClassVar[bool] = False

    id: str
    company_id: int
    created_at: Timestamp
    #: The merchant's key-value pairs (:mod:`treasury_core.metadata`). Shown by the kinds whose
    #: interface record has ``metadata`` (deposits, withdrawals, transfers, bank and virtual
    #: accounts, PMTIs); ``{}`` on the others.
    metadata: MetadataField = {}

    @property
    def status_value(self) -> str:
        """The status as stored in the status column."""
        status = getattr(self, "status", "active")
        return str(status.value if isinstance(status, StrEnum) else status)

    @property
    def lookup_key(self) -> str | None:
        """A second key the record can be found by (a virtual account's number), if any."""
        return None

    def record(self) -> BaseModel:
        """The interface's record."""
        return self.record_model.model_validate(
            self.model_dump(include=set(self.record_model.model_fields))
        )

    def _serialized_as_record(self) -> bool:
        # A stored record that *is* its interface model (Deposit is a DepositRecord) and keeps
        # record() as above can be written by the interface model's own serializer, which
        # writes exactly that model's fields: the same output without building the record.
        return type(self).record is TreasuryRecord.record and isinstance(self, self.record_model)

    def api(self) -> dict[str, Any]:
        """The interface's record, JSON-ready (also the ``data.object`` of events)."""
        if self._serialized_as_record():
            return self.record_model.__pydantic_serializer__.to_python(self, mode="json")  # type: ignore[no-any-return]
        return self.record().model_dump(mode="json")

    def record_json(self) -> bytes:
        """The interface's record as JSON bytes (what an API response carries)."""
        if self._serialized_as_record():
            return self.record_model.__pydantic_serializer__.to_json(self)
        record = self.record()
        return record.__pydantic_serializer__.to_json(record)


class Deposit(TreasuryRecord, DepositRecord):
    """A stored deposit; ``virtual_account_id`` when it arrived through a virtual account."""

    prefix: ClassVar[str] = "dep"
    record_model: ClassVar[type[BaseModel]] = DepositRecord

    pending_ids: tuple[str, ...] = ()


class Withdrawal(TreasuryRecord, WithdrawalRecord):
    """A stored withdrawal."""

    prefix: ClassVar[str] = "wdr"
    record_model: ClassVar[type[BaseModel]] = WithdrawalRecord

    pending_ids: tuple[str, ...] = ()
    #: The bank export (``bex_…``) whose payment file carries it; ``None`` until exported. A
    #: bank-file rail exports a withdrawal once, then waits for the bank's statement.
    bank_export_id: str | None = None
    #: The deposit (``dep_…``) that credited the wallet when the bank returned the payout after
    #: paying it; ``None`` while it has not been returned. A payout comes back once.
    returned_by: str | None = None


class Transfer(TreasuryRecord, TransferRecord):
    """A stored transfer."""

    prefix: ClassVar[str] = "trf"
    record_model: ClassVar[type[BaseModel]] = TransferRecord

    pending_ids: tuple[str, ...] = ()


class BankAccount(TreasuryRecord):
    """A stored withdrawal destination (part 2.5), full account number included."""

    prefix: ClassVar[str] = "ba"
    record_model: ClassVar[type[BaseModel]] = BankAccountRecord

    bank_name: str
    account_name: str
    account_number: str
    routing_number: str
    currency_id: str
    status: str = "active"
    metadata: MetadataField = {}

    def record(self) -> BankAccountRecord:
        """The record, with the account number masked."""
        last4 = self.account_number[-4:]
        return BankAccountRecord(
            id=self.id,
            bank_name=self.bank_name,
            account_name=self.account_name,
            account_number="•" * max(len(self.account_number) - 4, 0) + last4,
            last4=last4,
            routing_number=self.routing_number,
            currency_id=self.currency_id,
            status=self.status,
            created_at=self.created_at,
            metadata=self.metadata,
        )


class VirtualAccount(TreasuryRecord, VirtualAccountRecord):
    """A stored virtual account."""

    prefix: ClassVar[str] = "va"
    record_model: ClassVar[type[BaseModel]] = VirtualAccountRecord

    @property
    def lookup_key(self) -> str | None:
        """Incoming funds name the IBAN, or else the local account number."""
        return self.iban or self.account_number
