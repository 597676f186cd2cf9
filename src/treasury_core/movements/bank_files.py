"""What the bank-file rail keeps: payment-file exports and imported statement lines.

Both are stored as treasury records (documents in the records table): an export holds the file
it produced, byte for byte, so a file lost to a crash is written again from it, never built
anew; a statement line is remembered by its identity on the treasury's account (the bank's
reference of the movement, or one derived from the line), so a statement imported twice, by
anyone, changes nothing the second time.
"""

from __future__ import annotations

import hashlib
from datetime import date
from enum import StrEnum
from typing import ClassVar

from pydantic import Field, model_validator

from treasury_core.metadata import MetadataField
from treasury_core.movements.records import TreasuryRecord, _Frozen
from treasury_core.movements.safeguarding import BreakRecord
from treasury_core.serialization import Timestamp

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

    company_id: int
    metadata: MetadataField = Field(default_factory=dict)

    #: The file, as text (pain.001 is UTF-8 XML).
    content: str


class LineOutcome(StrEnum):
    """What a statement line did."""

    DEPOSIT_COMPLETED = "deposit_completed"
    VIRTUAL_ACCOUNT_CREDITED = "virtual_account_credited"
    WITHDRAWAL_COMPLETED = "withdrawal_completed"
    #: A debit booking a whole payment file: every withdrawal in it completed.
    BATCH_COMPLETED = "batch_completed"
    #: A return of a payout the bank had paid: the amount credited back to its wallet as a
    #: completed deposit (the withdrawal stays completed).
    RETURN_CREDITED = "return_credited"
    WITHDRAWAL_RETURNED = "withdrawal_returned"
    UNMATCHED = "unmatched"


class StatementLineRecord(_Frozen):
    """One imported statement line and what it matched."""

    id: str
    statement_id: str
    #: The treasury's bank account the statement is of.
    account: str
    #: The bank's reference of the movement, as the file wrote it; ``None`` when it gave none.
    entry_reference: str | None
    #: What the line is remembered by on its account: ``ref:`` and the bank's reference
    #: (normalized), or ``derived:`` and a digest of the line (docs/guides/banking.md).
    identity: str
    direction: str
    amount: int
    currency: str
    booking_date: date
    reference: str | None
    outcome: LineOutcome
    #: The deposit, withdrawal or export (batch booking) the line settled or created;
    #: ``None`` when unmatched.
    matched_id: str | None
    #: Why the line matched nothing; ``None`` when it matched.
    reason: str | None
    created_at: Timestamp


class BankStatementLine(TreasuryRecord, StatementLineRecord):
    """A stored statement line (company :data:`OPERATOR`: a bank line belongs to the treasury's
    account, not to a company); its lookup key makes its identity unique per account."""

    prefix: ClassVar[str] = "bsl"
    #: A unique index in SQL storage (migration 0010).
    unique_lookup_key: ClassVar[bool] = True

    company_id: int
    metadata: MetadataField = Field(default_factory=dict)

    @property
    def status_value(self) -> str:
        """``unmatched`` or ``matched`` (``treasury bank unmatched`` lists by it)."""
        return "unmatched" if self.outcome is LineOutcome.UNMATCHED else "matched"

    @model_validator(mode="before")
    @classmethod
    def _identity_of_older_lines(cls, data: object) -> object:
        # Lines stored before identities existed all had a bank reference; migration 0018
        # re-keyed them to the identity this gives.
        if isinstance(data, dict) and "identity" not in data:
            reference = "".join(str(data.get("entry_reference") or "").split()).upper()
            data = {**data, "identity": f"ref:{reference}"}
        return data

    @property
    def lookup_key(self) -> str | None:
        """The line's key: its account and identity."""
        return line_key(self.account, self.identity)


def line_key(account: str, identity: str) -> str:
    """A fixed-length key for (account, identity): the records table's lookup column is 64
    characters, an IBAN and an identity together may be longer."""
    return hashlib.sha256(f"{account}\x1f{identity}".encode()).hexdigest()


class ImportedStatement(_Frozen):
    """One statement of an imported file."""

    statement_id: str
    account: str
    currency: str
    #: ``camt.053``, ``camt.054`` or ``mt940``.
    format: str
    period_start: date
    period_end: date
    #: How many lines the statement has (new and already imported).
    lines: int


class ImportResult(_Frozen):
    """What importing a file did: its statements and every line, new or already imported."""

    statements: list[ImportedStatement]
    lines: list[StatementLineRecord]
    #: How many lines this import applied (0 on a repeated import).
    imported: int
    #: How many lines were already imported (by their identity) and were skipped.
    already_imported: int
    unmatched: int
    #: Where the statement's stated balances disagree with the ledger's mirror of the account
    #: (or with its own lines): each break the statement shows, new or already recorded.
    breaks: tuple[BreakRecord, ...] = ()
