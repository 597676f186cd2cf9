"""What the bank-file rail keeps: payment-file exports and imported statement lines.

Both are stored as treasury records (documents in the records table): an export holds the file
it produced, byte for byte, so a file lost to a crash is written again from it, never built
anew; a statement line is remembered by the bank's entry reference, so a statement imported
twice changes nothing the second time.
"""

from __future__ import annotations

import hashlib
from datetime import date
from enum import StrEnum
from typing import ClassVar

from pydantic import BaseModel

from treasury_core.serialization import Timestamp
from treasury_core.treasury.records import TreasuryRecord, _Frozen
from treasury_core.treasury.safeguarding import BreakRecord

#: The company id of records the operator's commands write (an export spans every company).
OPERATOR = 0


class BankExportRecord(_Frozen):
    """A payment file as ``treasury bank export`` reports it."""

    id: str
    currency: str
    file_name: str
    sha256: str
    withdrawal_ids: tuple[str, ...]
    amount: int
    status: str
    created_at: Timestamp


class BankExport(TreasuryRecord, BankExportRecord):
    """A stored export: ``recorded`` with its withdrawals marked, ``written`` once the file is
    known to be on disk."""

    prefix: ClassVar[str] = "bex"
    record_model: ClassVar[type[BaseModel]] = BankExportRecord

    #: The file, as text (pain.001 is UTF-8 XML).
    content: str


class LineOutcome(StrEnum):
    """What a statement line did."""

    DEPOSIT_COMPLETED = "deposit_completed"
    VIRTUAL_ACCOUNT_CREDITED = "virtual_account_credited"
    WITHDRAWAL_COMPLETED = "withdrawal_completed"
    WITHDRAWAL_RETURNED = "withdrawal_returned"
    UNMATCHED = "unmatched"


class StatementLineRecord(_Frozen):
    """One imported statement line and what it matched."""

    id: str
    statement_id: str
    account: str
    entry_reference: str
    direction: str
    amount: int
    currency: str
    booking_date: date
    reference: str | None
    outcome: LineOutcome
    #: The deposit or withdrawal the line settled or created; ``None`` when unmatched.
    matched_id: str | None
    #: Why the line matched nothing; ``None`` when it matched.
    reason: str | None
    created_at: Timestamp


class BankStatementLine(TreasuryRecord, StatementLineRecord):
    """A stored statement line; its lookup key makes the entry reference unique per company
    and account."""

    prefix: ClassVar[str] = "bsl"
    record_model: ClassVar[type[BaseModel]] = StatementLineRecord
    #: A unique index in SQL storage (migration 0010).
    unique_lookup_key: ClassVar[bool] = True

    @property
    def status_value(self) -> str:
        """``unmatched`` or ``matched`` (``treasury bank unmatched`` lists by it)."""
        return "unmatched" if self.outcome is LineOutcome.UNMATCHED else "matched"

    @property
    def lookup_key(self) -> str | None:
        """The line's identity: company, account and the bank's entry reference."""
        return line_key(self.company_id, self.account, self.entry_reference)


def line_key(company_id: int, account: str, entry_reference: str) -> str:
    """A fixed-length key for (company, account, entry reference): the records table's lookup
    column is 64 characters, an IBAN and an entry reference together may be longer."""
    raw = f"{company_id}\x1f{account}\x1f{entry_reference}".encode()
    return hashlib.sha256(raw).hexdigest()


class ImportResult(_Frozen):
    """What importing a statement did: every line, new or already imported."""

    statement_id: str
    account: str
    lines: list[StatementLineRecord]
    #: How many lines this import applied (0 on a repeated import).
    imported: int
    #: How many lines were already imported (by their entry reference) and were skipped.
    already_imported: int
    unmatched: int
    #: Where the statement's stated balances disagree with the ledger's mirror of the account
    #: (or with its own lines): each break the statement shows, new or already recorded.
    breaks: tuple[BreakRecord, ...] = ()
