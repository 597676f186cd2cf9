"""Exporting pending withdrawals as a payment file, exactly once.

The file is built first, outside any transaction (the rail checks it against its schema, which
takes a while); then one transaction locks every withdrawal it carries, checks each is still
pending and unexported, stores the export record with the file's bytes and hash, and marks the
withdrawals with the export's id. Either all of that commits or none of it.

Writing the file to disk comes after, from the stored record, and is confirmed by
:func:`mark_written`. A crash in between leaves an export ``recorded`` but not ``written``: the
next run finds it and writes the same bytes again under the same name (the same message id
inside, which banks use to refuse a duplicate), never a second file for the same withdrawals.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from treasury_core.errors import NotFound
from treasury_core.movements.bank_files import OPERATOR, BankExport
from treasury_core.movements.records import BankAccount, MovementStatus, Withdrawal
from treasury_core.ports import BankFiles, OutgoingPayment, UnitOfWork
from treasury_core.services.adapters import Adapters

#: How many pending withdrawals one export reads per page.
_PAGE = 500
#: How often the export is rebuilt when a withdrawal changed between building and recording.
_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Refused:
    """A pending withdrawal the payment file cannot carry, and why; it stays pending."""

    withdrawal_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class ExportOutcome:
    """What an export run recorded: the new export (``None`` when nothing was exportable) and
    the withdrawals left pending with their reasons."""

    export: BankExport | None
    refused: tuple[Refused, ...]


def _pending_unexported(uow: UnitOfWork) -> list[Withdrawal]:
    found: list[Withdrawal] = []
    after: str | None = None
    while True:
        page = uow.records.with_status(Withdrawal, MovementStatus.PENDING.value, _PAGE, after)
        found.extend(w for w in page if w.bank_export_id is None)
        if len(page) < _PAGE:
            return found
        after = page[-1].id


def _payment(withdrawal: Withdrawal, bank: BankAccount) -> OutgoingPayment:
    return OutgoingPayment(
        end_to_end_id=withdrawal.id,
        amount=withdrawal.to_amount,
        currency=withdrawal.to_currency_id,
        creditor_name=bank.account_name,
        creditor_account=bank.account_number,
        creditor_bic=bank.routing_number,
        remittance=withdrawal.reference or withdrawal.description or withdrawal.id,
    )


def _candidates(
    uow: UnitOfWork, files: BankFiles, currency: str | None
) -> tuple[list[OutgoingPayment], list[Refused]]:
    payments: list[OutgoingPayment] = []
    refused: list[Refused] = []
    for withdrawal in _pending_unexported(uow):
        if currency is not None and withdrawal.to_currency_id != currency:
            continue
        bank = uow.records.get(BankAccount, withdrawal.bank_account_id, withdrawal.company_id)
        if bank is None:  # registered accounts are never deleted; defensive
            refused.append(Refused(withdrawal.id, "its bank account no longer exists"))
            continue
        payment = _payment(withdrawal, bank)
        reason = files.cannot_carry(payment)
        if reason is None:
            payments.append(payment)
        else:
            refused.append(Refused(withdrawal.id, reason))
    return payments, refused


async def export_withdrawals(
    ctx: Adapters, files: BankFiles, currency: str | None
) -> ExportOutcome:
    """Record one payment file of every exportable pending withdrawal (in ``currency``, or
    all); the withdrawals it carries are marked as sent in the same transaction."""
    for _ in range(_ATTEMPTS):
        payments, refused = await ctx.storage.run(
            lambda uow: _candidates(uow, files, currency), write=False
        )
        if not payments:
            return ExportOutcome(None, tuple(refused))
        now = ctx.clock.now()
        export_id = ctx.ids.new_id(BankExport.prefix)
        built = files.payment_file(export_id, payments, now)
        content = built.content.decode("utf-8")
        export = BankExport(
            id=export_id,
            company_id=OPERATOR,
            currency=payments[0].currency,
            file_name=built.file_name,
            sha256=hashlib.sha256(built.content).hexdigest(),
            withdrawal_ids=tuple(p.end_to_end_id for p in payments),
            amount=sum(p.amount for p in payments),
            status="recorded",
            created_at=now,
            content=content,
        )

        def record(uow: UnitOfWork, export: BankExport = export) -> bool:
            marked: list[Withdrawal] = []
            for withdrawal_id in export.withdrawal_ids:
                current = uow.records.get(Withdrawal, withdrawal_id, None, for_update=True)
                if (
                    current is None
                    or current.status is not MovementStatus.PENDING
                    or current.bank_export_id is not None
                ):
                    return False  # changed since the file was built: build it again
                marked.append(current.model_copy(update={"bank_export_id": export.id}))
            for withdrawal in marked:
                uow.records.update(withdrawal)
            uow.records.add(export)
            return True

        if await ctx.storage.run(record):
            return ExportOutcome(export, tuple(refused))
    raise RuntimeError("the pending withdrawals kept changing; run the export again")


async def unwritten_exports(ctx: Adapters) -> list[BankExport]:
    """Exports recorded but not confirmed written (a run crashed in between), oldest first."""
    return await ctx.storage.run(
        lambda uow: uow.records.with_status(BankExport, "recorded", 1000), write=False
    )


async def mark_written(ctx: Adapters, export_id: str) -> BankExport:
    """Confirm the export's file is on disk."""

    def mark(uow: UnitOfWork) -> BankExport:
        export = uow.records.get(BankExport, export_id, None, for_update=True)
        if export is None:
            raise NotFound(f"No such bank export: {export_id}", param="export_id")
        written = export.model_copy(update={"status": "written"})
        uow.records.update(written)
        return written

    return await ctx.storage.run(mark)
