"""The bank-files port: payment files out, account statements in.

A rail that exchanges files with a real bank (``TREASURY_BANK_RAIL=files``) implements this
beside :class:`~treasury_core.ports.BankRail`. The core decides what to pay and what a statement
line means for the ledger; the adapter only writes and reads the formats (ISO 20022 pain.001,
camt.053, SWIFT MT940), so the core never imports an XML or MT940 library.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class OutgoingPayment:
    """One credit transfer to put in a payment file: a withdrawal, as the bank must see it."""

    #: The withdrawal id; the file carries it as the end-to-end id, and the bank's statement
    #: quotes it back, which is how a booked or returned line finds its withdrawal.
    end_to_end_id: str
    amount: int
    currency: str
    creditor_name: str
    creditor_account: str
    creditor_bic: str
    remittance: str


@dataclass(frozen=True, slots=True)
class PaymentFile:
    """A payment file ready to hand to the bank."""

    file_name: str
    content: bytes


class Direction(StrEnum):
    """Which way a statement line moved money on the bank account."""

    CREDIT = "credit"
    DEBIT = "debit"


@dataclass(frozen=True, slots=True)
class StatementLine:
    """One booked entry of a bank statement, as the bank reported it."""

    #: Where the line is in the file ("entry 3", "line 12"), for messages.
    location: str
    #: The bank's own reference of the entry; lines are remembered by it (idempotent imports).
    entry_reference: str
    direction: Direction
    #: As the file states it, in major units (``12.50``): the core turns it into minor units
    #: with the currency's exponent, and refuses a file whose amount has more decimals.
    amount: Decimal
    currency: str
    booking_date: date
    #: The end-to-end id of the transfer (our withdrawal id on debits and returns), if given.
    end_to_end_id: str | None = None
    #: Remittance information (the payer's reference on credits), if given.
    remittance: str | None = None
    #: The account the funds were sent to on a credit (a virtual account's IBAN), if given.
    creditor_account: str | None = None
    #: Set on a return of one of our transfers: the bank's return reason code.
    return_code: str | None = None
    return_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Statement:
    """A parsed account statement."""

    statement_id: str
    #: The statement's account (IBAN or account number).
    account: str
    currency: str
    period_start: date
    period_end: date
    lines: tuple[StatementLine, ...]
    created_at: datetime | None = None


class StatementRejected(ValueError):
    """The statement cannot be read; nothing in it may be applied.

    ``location`` says where ("line 4", "entry 2"; empty for the file as a whole).
    """

    def __init__(self, message: str, *, location: str = "") -> None:
        super().__init__(message)
        self.location = location
        self.reason = message

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}" if self.location else self.reason


@runtime_checkable
class BankFiles(Protocol):
    """What a file-exchanging rail does besides :class:`~treasury_core.ports.BankRail`."""

    def cannot_carry(self, payment: OutgoingPayment) -> str | None:
        """Why ``payment`` cannot go in a payment file (a sentence), or ``None`` if it can."""
        ...

    def payment_file(
        self, batch_id: str, payments: list[OutgoingPayment], created_at: datetime
    ) -> PaymentFile:
        """The payment file of ``payments`` (every one accepted by :meth:`cannot_carry`)."""
        ...

    def read_statement(self, data: bytes) -> Statement:
        """The statement in ``data`` (camt.053 or MT940); :class:`StatementRejected` if the
        file is malformed anywhere."""
        ...
