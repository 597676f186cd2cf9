"""The bank-file rail's operations: export payment files, import statements, list what the
bank reported that matched nothing.

Every operation needs a rail that exchanges files (:class:`~treasury_core.ports.BankFiles`,
``TREASURY_BANK_RAIL=files``); with another rail it is refused with ``bank_files_unavailable``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from treasury_core.errors import ConflictRetryExhausted, InvalidRequestError
from treasury_core.movements.bank_files import (
    BankExport,
    BankStatementLine,
    ImportResult,
    StatementLineRecord,
)
from treasury_core.ports import BankFiles, Statement
from treasury_core.services.adapters import Adapters
from treasury_core.services.movements import bank_export, bank_lines, bank_statements
from treasury_core.services.movements.bank_export import ExportOutcome
from treasury_core.services.movements.fx_quotes import FxQuotes
from treasury_core.services.movements.reconciliation import Reconciliation, reconcile
from treasury_core.services.movements.statements import WalletStatementService


class BankFilesService:
    """Payment files out, statements in (docs/guides/banking.md)."""

    def __init__(
        self, *, adapters: Adapters, quotes: FxQuotes, statements: WalletStatementService
    ) -> None:
        self._adapters = adapters
        self._quotes = quotes
        self._statements = statements

    def files(self) -> BankFiles:
        """The rail, as a file-exchanging one; refused when it is not."""
        rail = self._adapters.rail
        if not isinstance(rail, BankFiles):
            raise InvalidRequestError(
                f"The bank rail {self._adapters.config.bank_rail!r} exchanges no files; "
                "set TREASURY_BANK_RAIL=files (extra bank-files)",
                code="bank_files_unavailable",
            )
        return rail

    async def export(self, currency: str | None = None) -> ExportOutcome:
        """Record one payment file of the pending, unexported withdrawals (in ``currency``, or
        all): the file's bytes and the withdrawals' marks commit together. Withdrawals the
        format cannot carry stay pending, each with its reason."""
        code = None if currency is None else self._adapters.currencies.get(currency).code
        return await bank_export.export_withdrawals(self._adapters, self.files(), code)

    async def unwritten(self) -> list[BankExport]:
        """Exports whose file was not confirmed written (a crash between recording and
        writing); write their ``content`` under their ``file_name``, then :meth:`written`."""
        return await bank_export.unwritten_exports(self._adapters)

    async def written(self, export_id: str) -> BankExport:
        """Confirm an export's file is on disk."""
        return await bank_export.mark_written(self._adapters, export_id)

    def read(self, data: bytes) -> list[Statement]:
        """The statements in ``data``, checked whole (``ValidationFailed`` naming where and
        why); applies nothing."""
        return [parsed.statement for parsed in bank_lines.read(self._adapters, self.files(), data)]

    async def import_statement(
        self, data: bytes, *, formats: Collection[str] | None = None
    ) -> ImportResult:
        """Apply a file of bank statements (camt.053, camt.054 or MT940; with ``formats``, only
        those): each new line settles what it matches, all in one transaction; lines imported
        before, by anyone, are skipped. Only the operator imports: the bank's word about the
        treasury's own accounts, never a company's."""
        ctx = self._adapters
        # Reading a large file takes a while: not on the event loop, which serves every other
        # request meanwhile.
        statements = await asyncio.to_thread(bank_lines.read, ctx, self.files(), data, formats)
        count = sum(len(parsed.lines) for parsed in statements)
        # Each retry follows a line another import committed meanwhile, so the lines left to
        # apply shrink every time: one attempt per line (and the first) always suffices.
        for _ in range(count + 1):
            plans, known = await ctx.storage.run(
                lambda uow: bank_statements.plan(uow, ctx, statements), write=False
            )
            try:
                return await bank_statements.apply(ctx, self._quotes, statements, plans, known)
            except Exception:
                # Another import of the same statement committed a line first: the storage
                # refused the duplicate key and this transaction rolled back whole. Planned
                # again, those lines are known and skipped. Anything else is raised.
                if not await self._imported_meanwhile(plans):
                    raise
        raise ConflictRetryExhausted(
            "The statement's lines kept being imported by another request; try again"
        )

    async def _imported_meanwhile(self, plans: list[bank_statements.Plan]) -> bool:
        keys = [p.line.key for p in plans]
        return await self._adapters.storage.run(
            lambda uow: any(uow.records.find(BankStatementLine, k) for k in keys), write=False
        )

    async def reconcile(self, wallet_id: str, data: bytes) -> Reconciliation:
        """The wallet's bank movements over the statement's period against its lines, matched
        one to one (:mod:`treasury_core.services.movements.reconciliation`); the statement is read,
        never
        applied."""
        return await reconcile(self._adapters, self.files(), self._statements, wallet_id, data)

    async def unmatched(self, limit: int = 1000) -> list[StatementLineRecord]:
        """Statement lines that matched nothing, oldest first, for a person to resolve."""
        rows = await self._adapters.storage.run(
            lambda uow: uow.records.with_status(BankStatementLine, "unmatched", limit),
            write=False,
        )
        return [bank_statements.record_of(r) for r in rows]
