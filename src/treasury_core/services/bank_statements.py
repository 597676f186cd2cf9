"""Importing a bank statement: each booked line settles what it matches, in one transaction.

A line matches, by exact amount and currency only:

- a debit quoting an exported, pending withdrawal's id (the end-to-end id of the payment file):
  the bank paid it, the withdrawal completes;
- a credit returning such a withdrawal (a return reason): the withdrawal fails with the reason
  in ``error`` and its amount and fee go back to the wallet;
- a credit to one of our virtual accounts (the line's creditor account, else the statement's
  account, is its IBAN or number) in its currency: a completed deposit credits its wallet, as
  the sandbox control does (``treasury.deposit.completed``);
- a credit quoting a pending deposit (its id, or its reference, which must be unambiguous):
  the deposit completes.

Anything else is kept as unmatched for a person (``treasury bank unmatched``). Lines are
remembered by the bank's entry reference (per company and account), so importing a statement
again changes nothing. The file is read and checked whole before anything is applied; the
settling itself is one transaction, which rolls back whole if any part of it fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from treasury_core.errors import ValidationFailed
from treasury_core.ledger import Journal
from treasury_core.ports import (
    BankFiles,
    Direction,
    Statement,
    StatementLine,
    StatementRejected,
    UnitOfWork,
)
from treasury_core.services import safeguarding
from treasury_core.services.accounts import apply_virtual_account_credit, virtual_account_credit
from treasury_core.services.settlement import complete_in, fail_in
from treasury_core.services.support import TreasuryContext
from treasury_core.treasury.bank_files import (
    OPERATOR,
    BankStatementLine,
    ImportResult,
    LineOutcome,
    StatementLineRecord,
    line_key,
)
from treasury_core.treasury.records import (
    Deposit,
    MovementStatus,
    VirtualAccount,
    Withdrawal,
)
from treasury_core.treasury.safeguarding import BankBreak
from treasury_core.wallets import Wallet

#: Pending deposits read per page when a line's reference is looked up.
_PAGE = 500


@dataclass(frozen=True, slots=True)
class ParsedLine:
    """A statement line with its amount in minor units."""

    line: StatementLine
    amount: int
    key: str


@dataclass(frozen=True, slots=True)
class Plan:
    """What a new line should do, decided before the writing transaction (which checks again)."""

    line: ParsedLine
    action: Literal[
        "complete_withdrawal", "return_withdrawal", "complete_deposit", "credit", "none"
    ]
    target: str | None = None
    reason: str | None = None
    account: VirtualAccount | None = None
    wallet: Wallet | None = None


def minor_units(ctx: TreasuryContext, line: StatementLine) -> int:
    """The line's amount in minor units; :class:`StatementRejected` for an unknown currency or
    more decimals than the currency has."""
    if line.currency not in ctx.currencies:
        raise StatementRejected(f"currency {line.currency} is not enabled", location=line.location)
    currency = ctx.currencies.get(line.currency)
    minor = line.amount * currency.minor_per_major
    if minor != minor.to_integral_value():
        raise StatementRejected(
            f"amount {line.amount} has more decimals than {line.currency} allows",
            location=line.location,
        )
    return int(minor)


def read(
    ctx: TreasuryContext, files: BankFiles, data: bytes, company_id: int | None
) -> tuple[Statement, list[ParsedLine]]:
    """The statement and its lines, checked whole; a bad file is a :class:`ValidationFailed`
    (``statement_invalid``) naming where and why."""
    try:
        statements = files.read_statements(data)
        if len(statements) != 1:
            raise StatementRejected("one statement per file is supported")
        (statement,) = statements
        lines: list[ParsedLine] = []
        seen: set[str] = set()
        for line in statement.lines:
            if line.entry_reference is None:
                raise StatementRejected("the line has no bank reference", location=line.location)
            if line.entry_reference in seen:
                raise StatementRejected(
                    f"entry reference {line.entry_reference!r} appears twice",
                    location=line.location,
                )
            seen.add(line.entry_reference)
            key = line_key(_owner(company_id), statement.account, line.entry_reference)
            lines.append(ParsedLine(line, minor_units(ctx, line), key))
    except StatementRejected as exc:
        raise ValidationFailed(
            f"The statement was refused, nothing was applied: {exc}",
            param="statement",
            code="statement_invalid",
        ) from None
    return statement, lines


def _owner(company_id: int | None) -> int:
    return OPERATOR if company_id is None else company_id


def _withdrawal_plan(
    uow: UnitOfWork, item: ParsedLine, company_id: int | None, returned: bool
) -> Plan:
    line = item.line
    ref = line.end_to_end_id
    withdrawal = (
        uow.records.get(Withdrawal, ref, company_id) if ref and ref.startswith("wdr_") else None
    )
    if withdrawal is None:
        what = "return" if returned else "debit"
        return Plan(item, "none", reason=f"the {what} quotes no withdrawal of ours")
    problem = _mismatch(withdrawal.to_amount, withdrawal.to_currency_id, item, line.currency)
    if problem is None and withdrawal.status is not MovementStatus.PENDING:
        problem = f"withdrawal {withdrawal.id} is already {withdrawal.status.value}"
    if problem is None and withdrawal.bank_export_id is None:
        problem = f"withdrawal {withdrawal.id} was never exported"
    if problem is not None:
        return Plan(item, "none", target=withdrawal.id, reason=problem)
    action: Literal["return_withdrawal", "complete_withdrawal"] = (
        "return_withdrawal" if returned else "complete_withdrawal"
    )
    return Plan(item, action, target=withdrawal.id)


def _mismatch(expected: int, currency: str, item: ParsedLine, got_currency: str) -> str | None:
    if currency != got_currency:
        return f"the currency is {got_currency}, {currency} was expected"
    if expected != item.amount:
        return f"the amount is {item.amount}, {expected} was expected (minor units)"
    return None


def _virtual_account(
    uow: UnitOfWork, statement: Statement, item: ParsedLine, company_id: int | None
) -> VirtualAccount | None:
    for key in (item.line.creditor_account, statement.account):
        if not key:
            continue
        account = uow.records.find(VirtualAccount, key.replace(" ", "").upper())
        if account is not None and company_id in (None, account.company_id):
            return account
    return None


def _deposit_by_reference(
    uow: UnitOfWork, item: ParsedLine, company_id: int | None
) -> tuple[Deposit | None, str]:
    line = item.line
    tokens = {t for t in (line.end_to_end_id, line.remittance) if t}
    tokens |= {word for t in list(tokens) for word in t.split() if word.startswith("dep_")}
    for token in sorted(tokens):
        if token.startswith("dep_"):
            found = uow.records.get(Deposit, token, company_id)
            if found is not None:
                return found, ""
    matches: list[Deposit] = []
    after: str | None = None
    while True:
        page = uow.records.with_status(Deposit, MovementStatus.PENDING.value, _PAGE, after)
        matches += [d for d in page if d.reference in tokens and company_id in (None, d.company_id)]
        if len(page) < _PAGE:
            break
        after = page[-1].id
    if len(matches) > 1:
        ids = ", ".join(d.id for d in matches)
        return None, f"the reference matches several pending deposits ({ids})"
    return (matches[0], "") if matches else (None, "")


def _credit_plan(
    uow: UnitOfWork, statement: Statement, item: ParsedLine, company_id: int | None
) -> Plan:
    line = item.line
    if line.return_code is not None:
        return _withdrawal_plan(uow, item, company_id, returned=True)
    account = _virtual_account(uow, statement, item, company_id)
    if account is not None:
        if account.source_currency != line.currency:
            return Plan(
                item,
                "none",
                target=account.id,
                reason=f"virtual account {account.id} receives {account.source_currency}, "
                f"not {line.currency}",
            )
        wallet = uow.wallets.get(account.company_id, account.wallet_id)
        if wallet is not None:
            return Plan(item, "credit", target=account.id, account=account, wallet=wallet)
    deposit, ambiguity = _deposit_by_reference(uow, item, company_id)
    if deposit is None:
        return Plan(
            item, "none", reason=ambiguity or "no deposit, virtual account or withdrawal matches"
        )
    problem = _mismatch(deposit.from_amount, deposit.from_currency_id, item, line.currency)
    if problem is None and deposit.status is not MovementStatus.PENDING:
        problem = f"deposit {deposit.id} is already {deposit.status.value}"
    if problem is not None:
        return Plan(item, "none", target=deposit.id, reason=problem)
    return Plan(item, "complete_deposit", target=deposit.id)


def plan(
    uow: UnitOfWork, statement: Statement, lines: list[ParsedLine], company_id: int | None
) -> tuple[list[Plan], list[BankStatementLine]]:
    """Plans for the lines not imported before, and the stored lines of those that were."""
    plans: list[Plan] = []
    known: list[BankStatementLine] = []
    for item in lines:
        stored = uow.records.find(BankStatementLine, item.key)
        if stored is not None:
            known.append(stored)
        elif item.line.direction is Direction.DEBIT:
            plans.append(_withdrawal_plan(uow, item, company_id, returned=False))
        else:
            plans.append(_credit_plan(uow, statement, item, company_id))
    return plans, known


async def apply(
    ctx: TreasuryContext,
    statement: Statement,
    plans: list[Plan],
    known: list[BankStatementLine],
    company_id: int | None,
) -> ImportResult:
    """Carry out ``plans`` in one transaction and remember every line."""
    # Quoted and built before the transaction (a quote is async and may call out).
    credits: dict[str, tuple[Deposit, Journal]] = {}
    for p in plans:
        if p.action == "credit" and p.account is not None and p.wallet is not None:
            rate, to_amount = await ctx.quote(
                p.account.source_currency, p.wallet.currency, p.line.amount
            )
            credits[p.line.key] = virtual_account_credit(
                ctx, p.account, p.wallet, p.line.amount, _reference(p.line.line), rate, to_amount
            )
    now = ctx.clock.now()
    ids = {p.line.key: ctx.ids.new_id(BankStatementLine.prefix) for p in plans}

    def run(uow: UnitOfWork) -> tuple[list[BankStatementLine], list[BankBreak]]:
        stored: list[BankStatementLine] = []
        for p in plans:
            if uow.records.find(BankStatementLine, p.line.key) is not None:
                continue  # another import of the same statement got here first
            outcome, matched, reason = _carry_out(uow, ctx, p, credits, company_id)
            line = p.line.line
            record = BankStatementLine(
                id=ids[p.line.key],
                company_id=_owner(company_id),
                statement_id=statement.statement_id,
                account=statement.account,
                entry_reference=line.entry_reference or "",
                direction=line.direction.value,
                amount=p.line.amount,
                currency=line.currency,
                booking_date=line.booking_date,
                reference=_reference(line),
                outcome=outcome,
                matched_id=matched,
                reason=reason,
                created_at=now,
            )
            uow.records.add(record)
            stored.append(record)
        return stored, safeguarding.reconcile_statement(uow, ctx, statement, stored)

    new, breaks = await ctx.storage.run(run)
    lines = [record_of(r) for r in (*known, *new)]
    return ImportResult(
        statement_id=statement.statement_id,
        account=statement.account,
        lines=sorted(lines, key=lambda r: (r.booking_date, r.entry_reference)),
        imported=len(new),
        already_imported=len(known) + (len(plans) - len(new)),
        unmatched=sum(1 for r in new if r.outcome is LineOutcome.UNMATCHED),
        breaks=tuple(safeguarding.break_record(b) for b in breaks),
    )


def record_of(line: BankStatementLine) -> StatementLineRecord:
    """The line as commands and the API show it."""
    return StatementLineRecord.model_validate(
        line.model_dump(include=set(StatementLineRecord.model_fields))
    )


def _reference(line: StatementLine) -> str | None:
    return line.end_to_end_id or line.remittance


def _carry_out(
    uow: UnitOfWork,
    ctx: TreasuryContext,
    p: Plan,
    credits: dict[str, tuple[Deposit, Journal]],
    company_id: int | None,
) -> tuple[LineOutcome, str | None, str | None]:
    """Do what the plan says if it still holds (checked again under the record's lock)."""
    if p.action == "none":
        return LineOutcome.UNMATCHED, None, p.reason
    if p.action == "credit":
        deposit, journal = credits[p.line.key]
        apply_virtual_account_credit(uow, ctx, deposit, journal)
        return LineOutcome.VIRTUAL_ACCOUNT_CREDITED, deposit.id, None
    assert p.target is not None
    kind: type[Withdrawal] | type[Deposit] = (
        Deposit if p.action == "complete_deposit" else Withdrawal
    )
    record = uow.records.get(kind, p.target, company_id, for_update=True)
    if record is None or record.status is not MovementStatus.PENDING:
        state = "gone" if record is None else record.status.value
        return LineOutcome.UNMATCHED, None, f"{p.target} is {state}"
    if p.action == "return_withdrawal":
        line = p.line.line
        message = f"Returned by the bank ({line.return_code})"
        if line.return_reason:
            message += f": {line.return_reason}"
        fail_in(uow, ctx, record, code="withdrawal_returned", message=message)
        return LineOutcome.WITHDRAWAL_RETURNED, record.id, None
    complete_in(uow, ctx, record)
    outcome = (
        LineOutcome.DEPOSIT_COMPLETED
        if p.action == "complete_deposit"
        else LineOutcome.WITHDRAWAL_COMPLETED
    )
    return outcome, record.id, None
