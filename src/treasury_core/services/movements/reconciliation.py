"""Reconciliation: a wallet's bank movements in the ledger against a bank statement's lines.

Ours are the wallet's transactions of the statement's period (its first day 00:00 UTC to the
day after its last) that moved money across the bank: posted deposits (virtual-account credits
included) and posted withdrawals. Withdrawal fees, transfers, payouts and reservations stay
inside the treasury and have no bank line.

Each bank line is matched to at most one of ours, and each of ours to at most one line:

1. by the object the line belongs to: the deposit or withdrawal it settled when the statement
   was imported, else the end-to-end id or a ``dep_…`` reference it quotes; a line of another
   wallet's object is left out of this wallet's reconciliation. A line of a withdrawal that was
   returned (failed) matches that withdrawal itself: its money came back, so the ledger holds
   no posting for it.
2. what is left, by the same signed amount in the wallet's currency, nearest booking date first.

Everything still unmatched is a difference: ours only (the bank has not reported it) or bank
only (the ledger lacks it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta

from treasury_core.errors import NotFound
from treasury_core.ledger import EntryCounter, EntryType
from treasury_core.movements.bank_files import BankExport, BankStatementLine, LineOutcome
from treasury_core.movements.records import Deposit, MovementStatus, Withdrawal
from treasury_core.ports import BankFiles, UnitOfWork
from treasury_core.services.adapters import Adapters
from treasury_core.services.movements import bank_lines
from treasury_core.services.movements.statements import WalletStatementService, WalletTransaction

#: The ledger movements that cross the bank.
_BANK_TYPES = frozenset({EntryType.DEPOSIT, EntryType.WITHDRAWAL})


@dataclass(frozen=True, slots=True)
class BankSide:
    """A statement line as reconciliation shows it (amount in minor units, signed: in +)."""

    entry_reference: str
    booking_date: date
    amount: int
    currency: str
    reference: str | None
    #: The deposit or withdrawal it belongs to, when known.
    object_id: str | None


@dataclass(frozen=True, slots=True)
class Pair:
    """A bank line and what it matched: one of ours, or (``movement`` None) a returned
    withdrawal; ``how`` says by what."""

    line: BankSide
    movement: WalletTransaction | None
    how: str


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """The outcome: matched pairs, ours only, bank only."""

    wallet_id: str
    statement_id: str
    account: str
    period_start: date
    period_end: date
    matched: tuple[Pair, ...]
    ours_only: tuple[WalletTransaction, ...]
    bank_only: tuple[BankSide, ...]
    #: Lines that belong to other wallets' deposits and withdrawals (left out).
    elsewhere: int

    @property
    def agrees(self) -> bool:
        """Whether there is no difference."""
        return not self.ours_only and not self.bank_only


def _object_of(line: BankSide, stored: BankStatementLine | None) -> str | None:
    if stored is not None and stored.matched_id is not None:
        return stored.matched_id
    for token in (line.reference or "").split():
        if token.startswith(("wdr_", "dep_")):
            return token
    return None


def _owner_of(uow: UnitOfWork, object_id: str) -> Deposit | Withdrawal | None:
    kind: type[Deposit] | type[Withdrawal] = Withdrawal if object_id.startswith("wdr_") else Deposit
    return uow.records.get(kind, object_id, None)


async def reconcile(
    ctx: Adapters,
    files: BankFiles,
    statements: WalletStatementService,
    wallet_id: str,
    data: bytes,
) -> Reconciliation:
    """Reconcile ``wallet_id`` against the statements in ``data`` (read, never applied)."""
    parsed = bank_lines.read(ctx, files, data)
    lines = [item for one in parsed for item in one.lines]
    first = parsed[0].statement
    period_start = min(one.statement.period_start for one in parsed)
    period_end = max(one.statement.period_end for one in parsed)

    def owner(uow: UnitOfWork) -> int:
        account = uow.ledger.get_account(wallet_id)
        if account is None or account.company_id is None:
            raise NotFound(f"No such wallet: {wallet_id}", param="wallet_id")
        return account.company_id

    company_id = await ctx.storage.run(owner, write=False)
    start = datetime.combine(period_start, time(), UTC)
    end = datetime.combine(period_end + timedelta(days=1), time(), UTC)
    ours = [
        m
        for m in await statements.movements(company_id, wallet_id, start, end)
        if m.counter is EntryCounter.BALANCE and m.type in _BANK_TYPES
    ]

    def sides(uow: UnitOfWork) -> tuple[list[BankSide], dict[str, Deposit | Withdrawal], int]:
        found: list[BankSide] = []
        records: dict[str, Deposit | Withdrawal] = {}
        elsewhere = 0
        for item in lines:
            line = item.line
            stored = uow.records.find(BankStatementLine, item.key)
            side = BankSide(
                line.entry_reference or item.identity,
                line.booking_date,
                bank_lines.signed(item),
                line.currency,
                " ".join(t for t in (line.end_to_end_id, line.remittance) if t) or None,
                None,
            )
            if stored is not None and stored.outcome is LineOutcome.BATCH_COMPLETED:
                # One debit booked a whole payment file: this wallet's part of it is its own
                # withdrawals in the file, each a side of its own.
                export = uow.records.get(BankExport, stored.matched_id or "", None)
                for withdrawal_id in export.withdrawal_ids if export else ():
                    withdrawal = uow.records.get(Withdrawal, withdrawal_id, None)
                    if withdrawal is None or withdrawal.wallet_id != wallet_id:
                        elsewhere += 1
                        continue
                    records[withdrawal.id] = withdrawal
                    found.append(
                        replace(side, amount=-withdrawal.to_amount, object_id=withdrawal.id)
                    )
                continue
            object_id = _object_of(side, stored)
            record = _owner_of(uow, object_id) if object_id else None
            if record is not None and record.wallet_id != wallet_id:
                elsewhere += 1
                continue
            if record is not None:
                records[record.id] = record
            found.append(
                BankSide(
                    side.entry_reference,
                    side.booking_date,
                    side.amount,
                    side.currency,
                    side.reference,
                    record.id if record else None,
                )
            )
        return found, records, elsewhere

    bank, records, elsewhere = await ctx.storage.run(sides, write=False)
    matched, ours_left, bank_left = _match(bank, ours, records)
    return Reconciliation(
        wallet_id=wallet_id,
        statement_id=first.statement_id,
        account=lines[0].account if lines else first.account,
        period_start=period_start,
        period_end=period_end,
        matched=tuple(matched),
        ours_only=tuple(ours_left),
        bank_only=tuple(bank_left),
        elsewhere=elsewhere,
    )


def _match(
    bank: list[BankSide],
    ours: list[WalletTransaction],
    records: dict[str, Deposit | Withdrawal],
) -> tuple[list[Pair], list[WalletTransaction], list[BankSide]]:
    matched: list[Pair] = []
    left = list(ours)
    unmatched: list[BankSide] = []
    for line in bank:  # 1: by the object the line belongs to
        record = records.get(line.object_id or "")
        if (
            isinstance(record, Withdrawal)
            and record.status is MovementStatus.FAILED
            and abs(line.amount) == record.to_amount
            and line.currency == record.to_currency_id
        ):
            matched.append(Pair(line, None, f"returned withdrawal {record.id}"))
            continue
        mine = next(
            (
                m
                for m in left
                if m.source_id == line.object_id
                and m.amount == line.amount
                and m.currency_code == line.currency
            ),
            None,
        )
        if mine is None:
            unmatched.append(line)
            continue
        left.remove(mine)
        matched.append(Pair(line, mine, f"by {line.object_id}"))
    bank_only: list[BankSide] = []
    for line in unmatched:  # 2: by signed amount, nearest date first
        candidates = [
            m for m in left if m.amount == line.amount and m.currency_code == line.currency
        ]
        if not candidates:
            bank_only.append(line)
            continue
        mine = min(candidates, key=lambda m: abs((m.created_at.date() - line.booking_date).days))
        left.remove(mine)
        matched.append(Pair(line, mine, "by amount"))
    return matched, left, bank_only
