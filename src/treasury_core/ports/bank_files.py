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
    """One booked movement of a bank statement, as the bank reported it.

    A plain entry is one line. A batch entry (one booked amount, several transaction details)
    is one line per transaction when the details carry amounts that add up to the entry's,
    each with ``transaction`` set; otherwise it is one line for the whole entry, which may
    quote the payment file it books (``message_id``, ``payment_information_id``).
    """

    #: Where the line is in the file ("statement 2, entry 3", "line 12"), for messages.
    location: str
    #: The line's place in its statement, from 1 in file order (a batch entry's transactions
    #: one after another): part of the identity the core derives when the bank gives none.
    position: int
    direction: Direction
    #: As the file states it, in major units (``12.50``), checked by the reader against the
    #: format's own syntax (ASCII digits, no exponent): the core turns it into minor units
    #: with the currency's exponent and refuses more decimals than the currency has.
    amount: Decimal
    currency: str
    booking_date: date
    #: The bank's own reference of the movement (camt ``AcctSvcrRef``, the transaction's own
    #: when it has one; MT940's bank reference after ``//``); ``None`` when the bank gives
    #: none or ``NONREF``. The core remembers lines by it.
    entry_reference: str | None = None
    #: camt ``NtryRef``: the entry's number within its statement (``None`` for MT940).
    entry_number: str | None = None
    #: For a line of a batch entry's transaction details: its place within the entry, from 1.
    transaction: int | None = None
    #: The end-to-end id of the transfer (our withdrawal id on debits and returns), if given.
    end_to_end_id: str | None = None
    #: Remittance information (the payer's reference on credits), if given.
    remittance: str | None = None
    #: The account the funds were sent to on a credit (a virtual account's IBAN), if given.
    creditor_account: str | None = None
    #: Set on a return of one of our transfers: the bank's return reason code.
    return_code: str | None = None
    return_reason: str | None = None
    #: The payment file's message id and payment-information id the bank quotes back (camt
    #: ``Btch/MsgId``, ``Refs/MsgId``, ``Btch/PmtInfId``, ``Refs/PmtInfId``): how a batch
    #: booking names the file it books.
    message_id: str | None = None
    payment_information_id: str | None = None
    #: Any other references the bank quotes (instruction id, mandate, customer reference,
    #: MT940 ``KREF+``), in file order.
    references: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Balance:
    """A booked balance the bank states (camt ``OPBD``/``CLBD``, MT940 ``:60F:``/``:62F:``)."""

    #: Signed, in major units as the file states it: negative for a debit balance.
    amount: Decimal
    currency: str
    date: date


#: The formats a statement may come in (:attr:`Statement.format`).
STATEMENT_FORMATS = ("camt.053", "camt.054", "mt940")


@dataclass(frozen=True, slots=True)
class Statement:
    """One account statement (or camt.054 notification) of a file."""

    statement_id: str
    #: The statement's account (IBAN or account number), without spaces, upper case.
    account: str
    currency: str
    period_start: date
    period_end: date
    lines: tuple[StatementLine, ...]
    #: One of :data:`STATEMENT_FORMATS`.
    format: str
    created_at: datetime | None = None
    #: The booked balance before the statement's lines and after them, when the file states
    #: them (a camt.054 notification states none).
    opening_balance: Balance | None = None
    closing_balance: Balance | None = None


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

    def read_statements(self, data: bytes) -> tuple[Statement, ...]:
        """Every statement in ``data`` (camt.053, camt.054 or MT940; at least one), in file
        order; :class:`StatementRejected` if the file is malformed anywhere."""
        ...
