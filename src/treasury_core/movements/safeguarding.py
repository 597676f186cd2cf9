"""What the safeguarding reconciliation keeps: each treasury bank account's mirror in the
ledger, its day-by-day movement, the balances the bank stated, and the breaks found.

All are treasury records of the operator (company :data:`~treasury_core.movements.bank_files.
OPERATOR`), never of a merchant: the bank's balance is a fact about the platform's money.

Rules:
- A treasury bank account has one mirror per currency: the ledger account
  ``bank:{ACCOUNT}:{CUR}`` (kind ``bank``, unguarded) and its :class:`BankMirror` record, both
  opened when the treasury is assembled. Money at the bank is a *debit* balance of the mirror
  (the ledger is credit-normal), so the bank's figure is ``-balance``.
- A mirror's records have ids built from its :func:`mirror_digest` and a date (``YYYYMMDD``),
  so the records of one mirror sort by date: the day's net at a date and the latest stated
  balance on or before a date are each one indexed range read, whatever the history.
- Each statement balance is compared once with the mirror as it then stood
  (:class:`BankComparison`, agreeing or not): importing the statement again compares it with
  those figures, so a later statement of the same booking date is never read as a break of
  an earlier one.
- A break is kept once per statement balance (its :attr:`BankBreak.lookup_key`): importing
  the statement again finds it (and brings it up to date) rather than adding another.
"""

from __future__ import annotations

import hashlib
from datetime import date
from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from treasury_core.ledger import Account, AccountKind
from treasury_core.metadata import MetadataField
from treasury_core.movements.records import TreasuryRecord, _Frozen
from treasury_core.serialization import Timestamp

#: The longest account number a mirror's ledger id has room for (ids are 64 characters).
MAX_ACCOUNT_LENGTH = 64 - len("bank::XXX")


def mirror_account_id(account: str, currency: str) -> str:
    """The ledger id of the mirror of ``account`` (normalized) in ``currency``."""
    return f"bank:{account}:{currency}"


def mirror_ledger_account(account: str, currency: str) -> Account:
    """The mirror's ledger account: unguarded, since a bank account may be overdrawn."""
    return Account(mirror_account_id(account, currency), currency, AccountKind.BANK)


def mirror_digest(account: str, currency: str) -> str:
    """32 hex characters naming the mirror inside its records' ids."""
    return hashlib.sha256(f"{account}\x1f{currency}".encode()).hexdigest()[:32]


def _day(on: date) -> str:
    return on.strftime("%Y%m%d")


#: Sorts after every ``YYYYMMDD``: the upper bound of a mirror's dated ids.
_AFTER_EVERY_DAY = "99999999"


class BankMirrorRecord(_Frozen):
    """A mirror as ``treasury safeguarding report`` names it."""

    id: str
    account: str
    currency: str
    #: The ledger account: ``bank:{account}:{currency}``.
    ledger_account_id: str
    #: What the bank held before :attr:`start_date` (minor units, signed as the bank states
    #: it): the first stated opening balance less the lines booked before that date, recorded
    #: once and moved by every such line imported later; ``None`` until a statement states one.
    opening: int | None = None
    #: The date the recorded opening balance was stated for.
    opening_date: date | None = None
    opening_statement_id: str | None = None
    #: The first booking date after the opening: lines booked before it were in the bank's
    #: opening balance, so each moves :attr:`opening` rather than the mirror's bank figure.
    start_date: date | None = None
    created_at: Timestamp


class BankMirror(TreasuryRecord, BankMirrorRecord):
    """A stored mirror; locked by every import that touches it, so the imports of one bank
    account apply one after another."""

    prefix: ClassVar[str] = "bkm"

    company_id: int
    metadata: MetadataField = Field(default_factory=dict)

    @staticmethod
    def id_for(account: str, currency: str) -> str:
        """The mirror record's id."""
        return f"bkm_{mirror_digest(account, currency)}"

    @property
    def opening_journal_id(self) -> str:
        """The id of the journal that recorded the opening balance."""
        return f"{self.id}_opening"

    @staticmethod
    def opening_line_journal_id(line_id: str) -> str:
        """The id of the journal that takes a line booked before the start out of the opening
        (its line's own journal put it in the mirror)."""
        return f"{line_id}{OPENING_LINE_SUFFIX}"


#: Ends the id of a journal that moves the opening by a line booked before the start.
OPENING_LINE_SUFFIX = "_opening"


class BankDayRecord(_Frozen):
    """What one mirror's booked lines of one booking date added up to."""

    id: str
    account: str
    currency: str
    booking_date: date
    #: Signed minor units: credits (money in) minus debits.
    net: int
    lines: int
    created_at: Timestamp


class BankDay(TreasuryRecord, BankDayRecord):
    """A stored day: written in the transaction that posts its lines."""

    prefix: ClassVar[str] = "bkd"

    company_id: int
    metadata: MetadataField = Field(default_factory=dict)

    @staticmethod
    def id_for(account: str, currency: str, on: date) -> str:
        """The day's record id; a mirror's days sort by date."""
        return f"bkd_{mirror_digest(account, currency)}_{_day(on)}"

    @staticmethod
    def after_last(account: str, currency: str) -> str:
        """An id above every day of the mirror (where a newest-first walk starts)."""
        return f"bkd_{mirror_digest(account, currency)}_{_AFTER_EVERY_DAY}"


class StatedBalanceRecord(_Frozen):
    """The closing booked balance a statement stated for one date."""

    id: str
    account: str
    currency: str
    balance_date: date
    #: Signed minor units, as the bank states it (negative: overdrawn).
    amount: int
    statement_id: str
    created_at: Timestamp


class StatedBalance(TreasuryRecord, StatedBalanceRecord):
    """A stored stated balance: of the statements stating one for the date, the one whose
    balance was compared last for the first time wins (one imported again does not)."""

    prefix: ClassVar[str] = "bkc"

    company_id: int
    metadata: MetadataField = Field(default_factory=dict)

    @staticmethod
    def id_for(account: str, currency: str, on: date) -> str:
        """The stated balance's record id; a mirror's stated balances sort by date."""
        return f"bkc_{mirror_digest(account, currency)}_{_day(on)}"


class BreakKind(StrEnum):
    """Which comparison a break failed."""

    #: The statement's opening balance against the mirror before the statement's lines.
    OPENING = "opening"
    #: The statement's closing balance against the mirror at the closing date.
    CLOSING = "closing"
    #: The statement's closing balance against its own opening plus its lines.
    STATEMENT = "statement"

    @property
    def description(self) -> str:
        """What was compared, in words for people (the CLI's and the dashboard's)."""
        return _BREAK_DESCRIPTIONS[self]


_BREAK_DESCRIPTIONS = {
    BreakKind.OPENING: "opening balance against the ledger before the statement's lines",
    BreakKind.CLOSING: "closing balance against the ledger at that date",
    BreakKind.STATEMENT: "closing balance against the statement's opening plus its lines",
}


class BankComparisonRecord(_Frozen):
    """One statement balance as first compared with the mirror, agreeing or not."""

    id: str
    account: str
    currency: str
    statement_id: str
    kind: BreakKind
    #: The date of the balance compared.
    balance_date: date
    #: The balance the statement states (signed minor units).
    stated: int
    #: The booking date whose lines the comparison counted only in part: the balance's own
    #: date, or for an opening the statement's last date.
    anchor_date: date
    #: The net of the lines booked on :attr:`anchor_date` that were in the mirror when the
    #: balance was compared (this statement's included); lines of that date imported later
    #: came after it at the bank.
    anchor_part: int
    created_at: Timestamp


class BankComparison(TreasuryRecord, BankComparisonRecord):
    """A stored comparison; its id is built from the balance's :func:`break_key`, so the same
    statement balance imported again finds it with one read."""

    prefix: ClassVar[str] = "bkq"

    company_id: int
    metadata: MetadataField = Field(default_factory=dict)

    @staticmethod
    def id_for(key: str) -> str:
        """The comparison's record id for the balance whose :func:`break_key` is ``key``."""
        return f"bkq_{key[:60]}"


class BreakStatus(StrEnum):
    """``open`` until a later import finds the same balance agreeing, then ``resolved``; open
    again if a later import finds it disagreeing once more."""

    OPEN = "open"
    RESOLVED = "resolved"


class BreakRecord(_Frozen):
    """A difference between what the bank states and what the ledger holds."""

    id: str
    account: str
    currency: str
    statement_id: str
    kind: BreakKind
    #: The date of the balance compared.
    date: date
    #: The balance the statement states (signed minor units).
    stated: int
    #: What the ledger (or, for ``statement``, the statement's own lines) makes it.
    expected: int
    #: ``stated - expected``.
    difference: int
    status: BreakStatus
    created_at: Timestamp
    resolved_at: Timestamp | None = None


class BankBreak(TreasuryRecord, BreakRecord):
    """A stored break, announced by ``treasury.reconciliation.break``."""

    prefix: ClassVar[str] = "bkb"

    company_id: int
    metadata: MetadataField = Field(default_factory=dict)

    @property
    def status_value(self) -> str:
        """``open`` or ``resolved`` (``treasury bank breaks`` lists the open ones)."""
        return self.status.value

    @property
    def lookup_key(self) -> str | None:
        """One break per statement balance: account, currency, statement, kind, date and the
        stated amount (a statement id alone is not unique: some banks reuse it)."""
        return break_key(
            self.account, self.currency, self.statement_id, self.kind, self.date, self.stated
        )


def break_key(
    account: str, currency: str, statement_id: str, kind: BreakKind, on: date, stated: int
) -> str:
    """The identity of a break (64 hex characters, the lookup column's width)."""
    raw = "\x1f".join((account, currency, statement_id, kind.value, on.isoformat(), str(stated)))
    return hashlib.sha256(raw.encode()).hexdigest()
