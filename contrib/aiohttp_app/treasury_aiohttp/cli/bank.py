"""``treasury bank …``, ``treasury reconcile`` and ``treasury safeguarding report``: the
bank-file rail and the safeguarding reconciliation from the command line.

The commands are built by :func:`commands` with the main command's helpers passed in, so this
module does not import :mod:`treasury_aiohttp.cli.commands` (which runs as ``__main__``).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Coroutine
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from treasury_core import Treasury
from treasury_core.movements.bank_files import BankExport, ImportResult, StatementLineRecord
from treasury_core.movements.safeguarding import BreakRecord, BreakStatus
from treasury_core.services.movements.reconciliation import BankSide, Reconciliation
from treasury_core.services.movements.safeguarding import SafeguardingReport
from treasury_core.services.movements.statements import WalletTransaction

T = TypeVar("T")
RunOn = Callable[[str | None, Callable[[Treasury], Coroutine[Any, Any, T]]], T]


def write_export(directory: Path, export: BankExport) -> Path:
    """Write ``export``'s file into ``directory``, idempotently.

    The same bytes already there are left alone; other bytes under the name are refused (never
    overwritten). The file appears whole or not at all (written aside, then renamed).
    """
    content = export.content.encode("utf-8")
    if hashlib.sha256(content).hexdigest() != export.sha256:
        raise click.ClickException(f"export {export.id}: the stored file fails its hash")
    path = directory / export.file_name
    if path.exists():
        if hashlib.sha256(path.read_bytes()).hexdigest() == export.sha256:
            return path
        raise click.ClickException(f"{path} exists with other content; not overwriting it")
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def _money(amount: int, currency: str) -> str:
    return f"{amount} {currency} (minor units)"


def _line_text(line: StatementLineRecord) -> str:
    what = line.matched_id if line.matched_id else f"unmatched: {line.reason}"
    return (
        f"{line.booking_date} {line.entry_reference or '(no bank reference)'} {line.direction} "
        f"{_money(line.amount, line.currency)} {line.outcome.value} {what}"
    )


def _import_summary(result: ImportResult) -> list[str]:
    lines = [
        f"statement {s.statement_id} ({s.account}, {s.format}): {s.lines} line(s), "
        f"{s.period_start} to {s.period_end}"
        for s in result.statements
    ]
    lines.append(
        f"{result.imported} line(s) applied, {result.already_imported} already imported, "
        f"{result.unmatched} unmatched"
    )
    lines += [f"  {_line_text(line)}" for line in result.lines]
    if result.breaks:
        lines.append(f"BREAKS: {len(result.breaks)} balance(s) disagree with the ledger")
        lines += [f"  {_break_text(found)}" for found in result.breaks]
    else:
        lines.append("balances: agree with the ledger (or none stated)")
    return lines


def _break_text(found: BreakRecord) -> str:
    return (
        f"{found.id} {found.account} {found.currency} statement {found.statement_id} "
        f"{found.date} {found.kind.description}: stated {found.stated}, "
        f"expected {found.expected}, difference {found.difference:+d} (minor units)"
        + (" [resolved]" if found.status is BreakStatus.RESOLVED else "")
    )


def _report_lines(report: SafeguardingReport) -> list[str]:
    headers = ("currency", "bank (ledger)", "bank (stated)", "wallets", "reserved",
               "pending in", "surplus", "")  # fmt: skip
    rows = [headers]
    for row in report.rows:
        stated = "-" if row.bank_stated is None else f"{row.bank_stated} ({row.stated_on})"
        rows.append(
            (
                row.currency,
                str(row.bank_ledger),
                stated,
                str(row.wallets),
                str(row.reserved),
                str(row.pending_in),
                f"{row.surplus:+d}",
                "SHORTFALL" if row.shortfall else "ok",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    lines = [f"safeguarding at the end of {report.on} (minor units)"]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]  # fmt: skip
    if not report.rows:
        lines.append("(no bank accounts and no wallets)")
    return lines


def commands(run_on: RunOn[Any], database_help: str) -> list[click.Command]:
    """The ``bank`` and ``safeguarding`` groups and the ``reconcile`` command."""

    @click.group()
    def bank() -> None:
        """Exchange files with the bank (TREASURY_BANK_RAIL=files)."""

    @bank.command("export")
    @click.option(
        "--out",
        "out",
        required=True,
        type=click.Path(file_okay=False, writable=True, path_type=Path),
        help="Directory to write the payment file into.",
    )
    @click.option("--currency", default=None, help="Only withdrawals paying this currency.")
    @click.option("--database", default=None, help=database_help)
    def export(out: Path, currency: str | None, database: str | None) -> None:
        """Write pending withdrawals to one pain.001 payment file in OUT.

        The withdrawals are marked as sent in the same transaction that records the file, so
        none is ever exported twice. A file recorded by a run that stopped before writing it
        is written first, byte for byte as recorded. Withdrawals the format cannot carry
        (not EUR, not an IBAN) stay pending and are listed with the reason.
        """
        out.mkdir(parents=True, exist_ok=True)

        async def work(treasury: Treasury) -> list[str]:
            messages: list[str] = []
            for earlier in await treasury.bank.unwritten():
                path = write_export(out, earlier)
                await treasury.bank.written(earlier.id)
                messages.append(
                    f"reproduced {path} (export {earlier.id} was recorded but not written)"
                )
            outcome = await treasury.bank.export(currency)
            if outcome.export is not None:
                new = outcome.export
                path = write_export(out, new)
                await treasury.bank.written(new.id)
                messages.append(
                    f"wrote {path}: {len(new.withdrawal_ids)} withdrawal(s), "
                    f"{_money(new.amount, new.currency)}, export {new.id}"
                )
            else:
                messages.append("no withdrawals to export")
            messages += [f"left pending {r.withdrawal_id}: {r.reason}" for r in outcome.refused]
            return messages

        for message in run_on(database, work):
            click.echo(message)

    @bank.command("import")
    @click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
    @click.option("--database", default=None, help=database_help)
    def import_(file: Path, database: str | None) -> None:
        """Import a camt.053, camt.054 or MT940 statement FILE.

        Every statement in it must be of one of the treasury's bank accounts
        (TREASURY_BANK_ACCOUNTS). Each booked line completes the deposit or withdrawal it
        matches by our ids (a batch booking: every withdrawal of the file), fails a returned
        withdrawal, or credits a virtual account; amounts and currencies must match exactly.
        Lines already imported (by the bank's reference on the account) are skipped, so
        importing a file twice, or a line the API imported, changes nothing. A malformed file
        is refused whole, naming where and why.
        """
        data = file.read_bytes()
        result: ImportResult = run_on(
            database, lambda treasury: treasury.bank.import_statement(data)
        )
        for line in _import_summary(result):
            click.echo(line)

    @bank.command("unmatched")
    @click.option("--database", default=None, help=database_help)
    def unmatched(database: str | None) -> None:
        """List statement lines that matched nothing.

        Oldest first, for a person to resolve: each with its entry reference, amount and why
        nothing matched.
        """
        lines: list[StatementLineRecord] = run_on(
            database, lambda treasury: treasury.bank.unmatched()
        )
        if not lines:
            click.echo("no unmatched lines")
        for line in lines:
            click.echo(f"{line.id} {_line_text(line)}")

    @bank.command("breaks")
    @click.option("--all", "everything", is_flag=True, help="Resolved breaks too.")
    @click.option("--database", default=None, help=database_help)
    def breaks(everything: bool, database: str | None) -> None:
        """List where the bank's stated balances disagree with the ledger.

        Oldest first: each break names the statement, the balance compared (opening, closing,
        or the statement against its own lines), what the bank stated and what the ledger
        holds. A break is resolved when the same balance is imported again and agrees (a
        missing statement imported meanwhile). Exits with status 1 while any is open.
        """
        status = None if everything else BreakStatus.OPEN
        found: list[BreakRecord] = run_on(
            database, lambda treasury: treasury.safeguarding.breaks(status)
        )
        if not found:
            click.echo("no breaks")
        for item in found:
            click.echo(_break_text(item))
        if any(item.status is BreakStatus.OPEN for item in found):
            raise SystemExit(1)

    @click.group()
    def safeguarding() -> None:
        """The bank's balances against what the wallets are owed."""

    @safeguarding.command("report")
    @click.option(
        "--date",
        "on",
        required=True,
        type=click.DateTime(formats=["%Y-%m-%d"]),
        help="The day whose end the report is for (YYYY-MM-DD).",
    )
    @click.option("--csv", "as_csv", is_flag=True, help="CSV on stdout instead of a table.")
    @click.option("--database", default=None, help=database_help)
    def report(on: datetime, as_csv: bool, database: str | None) -> None:
        """Per currency at the end of DATE: the bank against the wallets.

        The bank is what the ledger's mirrors of the treasury bank accounts hold, and the
        closing balance the bank last stated on or before DATE; the requirement is the sum of
        the wallets' positive balances (reserved amounts, on their way out, are still owed and
        still at the bank; announced deposits are neither). A currency whose bank (the lower
        of the two figures) is below its requirement is a SHORTFALL: exit status 1.
        """
        day: date = on.date()
        result: SafeguardingReport = run_on(
            database, lambda treasury: treasury.safeguarding.report(day)
        )
        if as_csv:
            click.echo(result.csv(), nl=False)
        else:
            for line in _report_lines(result):
                click.echo(line)
        if result.shortfall:
            raise SystemExit(1)

    @click.command("reconcile")
    @click.option("--wallet", "wallet_id", required=True, help="The wallet (wal_…).")
    @click.option(
        "--statement",
        "statement",
        required=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="The bank statement (camt.053 or MT940).",
    )
    @click.option("--database", default=None, help=database_help)
    def reconcile(wallet_id: str, statement: Path, database: str | None) -> None:
        """Reconcile a wallet's ledger against a bank statement.

        The wallet's deposits and withdrawals posted in the statement's period are matched one
        to one with the statement's lines (by the deposit or withdrawal a line belongs to, then
        by amount). Prints the matched pairs, the movements only the ledger has and the lines
        only the bank has; exits with status 1 when there is any difference. The statement is
        only read, never imported.
        """
        data = statement.read_bytes()
        result: Reconciliation = run_on(
            database, lambda treasury: treasury.bank.reconcile(wallet_id, data)
        )
        for line in _reconciliation_lines(result):
            click.echo(line)
        if not result.agrees:
            raise SystemExit(1)

    return [bank, reconcile, safeguarding]


def _bank_side(line: BankSide) -> str:
    return f"{line.booking_date} {line.entry_reference} {line.amount:+d} {line.currency}" + (
        f" {line.reference}" if line.reference else ""
    )


def _ours(movement: WalletTransaction) -> str:
    return (
        f"{movement.created_at.date()} {movement.id} {movement.type.value} "
        f"{movement.amount:+d} {movement.currency_code} {movement.source_id}"
    )


def _reconciliation_lines(result: Reconciliation) -> list[str]:
    lines = [
        f"wallet {result.wallet_id} against statement {result.statement_id} "
        f"({result.account}), {result.period_start} to {result.period_end}",
        f"matched: {len(result.matched)}",
    ]
    for pair in result.matched:
        ours = _ours(pair.movement) if pair.movement else "(no posting)"
        lines.append(f"  {_bank_side(pair.line)}  <->  {ours}  [{pair.how}]")
    lines.append(f"ours only: {len(result.ours_only)}")
    lines += [f"  {_ours(m)}" for m in result.ours_only]
    lines.append(f"bank only: {len(result.bank_only)}")
    lines += [f"  {_bank_side(b)}" for b in result.bank_only]
    if result.elsewhere:
        lines.append(f"({result.elsewhere} line(s) of other wallets left out)")
    lines.append("agrees" if result.agrees else "DIFFERENCES found")
    return lines
