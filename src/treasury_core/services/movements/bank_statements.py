"""Importing bank statements: each booked line settles what it matches, all in one transaction.

Only the bank knows that money moved, and it speaks through the operator's import of a
statement of one of the treasury's own accounts (:mod:`treasury_core.services.movements.bank_lines`
checks that). A line matches only by ids this system issued, and by exact amount and currency:

- a debit quoting an exported, pending withdrawal's id (the end-to-end id of the payment
  file), booked on the account the file pays from: the bank paid it, the withdrawal completes;
- a debit quoting an export (the file's message or payment-information id) for the whole
  file's amount: the bank booked the batch as one, every withdrawal in it completes;
- a credit returning such a withdrawal (a return reason): the withdrawal fails with the reason
  in ``error`` and its amount and fee go back to the wallet;
- a credit to one of our virtual accounts (the line's creditor account is its IBAN or number)
  in its currency: a completed deposit credits its wallet, as the sandbox control does
  (``treasury.deposit.completed``);
- a credit quoting a pending deposit's id (the reference its payment instructions show): the
  deposit completes.

Free text a merchant chose (a deposit's own ``reference``) settles nothing. Anything else is
kept as unmatched for a person (``treasury bank unmatched``). Each line is remembered by its
identity on the account, so importing a statement again, by anyone, changes nothing. The plan
is made in a read transaction; the settling is one write transaction that checks each target
again under its lock and rolls back whole if any part of it fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal, TypeVar

from treasury_core.config import normalized_account
from treasury_core.errors import ValidationFailed
from treasury_core.ledger import Journal
from treasury_core.movements.bank_files import (
    OPERATOR,
    BankExport,
    BankStatementLine,
    ImportedStatement,
    ImportResult,
    LineOutcome,
    StatementLineRecord,
    line_key,
)
from treasury_core.movements.records import (
    Deposit,
    MovementStatus,
    VirtualAccount,
    Withdrawal,
)
from treasury_core.movements.safeguarding import BankBreak
from treasury_core.ports import Direction, StatementLine, UnitOfWork
from treasury_core.services.adapters import Adapters
from treasury_core.services.movements import safeguarding
from treasury_core.services.movements.bank_accounts import (
    apply_completed_credit,
    completed_credit,
    virtual_account_credit,
)
from treasury_core.services.movements.bank_lines import ParsedLine, ParsedStatement, signed
from treasury_core.services.movements.fx_quotes import FxQuotes
from treasury_core.services.movements.settlement import complete_in, fail_in
from treasury_core.wallets import Wallet

R = TypeVar("R", Deposit, Withdrawal, BankExport)

Action = Literal[
    "complete_withdrawal",
    "credit_return",
    "complete_export",
    "return_withdrawal",
    "complete_deposit",
    "credit",
    "none",
]


@dataclass(frozen=True, slots=True)
class Plan:
    """What a new line should do, decided before the writing transaction (which checks again)."""

    line: ParsedLine
    action: Action
    target: str | None = None
    reason: str | None = None
    account: VirtualAccount | None = None
    wallet: Wallet | None = None


def _unmatched(item: ParsedLine, reason: str, target: str | None = None) -> Plan:
    return Plan(item, "none", target=target, reason=reason)


def _quoted(uow: UnitOfWork, kind: type[R], ids: Sequence[str]) -> R | None:
    """The first record of ``kind`` among the ids a line quotes."""
    for record_id in ids:
        if record_id.startswith(f"{kind.prefix}_"):
            found = uow.records.get(kind, record_id, None)
            if found is not None:
                return found
    return None


def _mismatch(expected: int, currency: str, item: ParsedLine) -> str | None:
    if currency != item.line.currency:
        return f"the currency is {item.line.currency}, {currency} was expected"
    if expected != item.amount:
        return f"the amount is {item.amount}, {expected} was expected (minor units)"
    return None


def _paying_account(ctx: Adapters, item: ParsedLine) -> str | None:
    """Why ``item`` cannot be about our payment files (booked on another account), or None."""
    debtor = ctx.config.bank_debtor_iban
    if debtor is not None and normalized_account(debtor) != item.account:
        return f"our payment files are paid from {normalized_account(debtor)}, not {item.account}"
    return None


def _withdrawal_plan(
    ctx: Adapters, item: ParsedLine, withdrawal: Withdrawal, returned: bool
) -> Plan:
    problem = _mismatch(withdrawal.to_amount, withdrawal.to_currency_id, item)
    if problem is None and withdrawal.status is not MovementStatus.PENDING:
        problem = f"withdrawal {withdrawal.id} is already {withdrawal.status.value}"
    if problem is None and withdrawal.bank_export_id is None:
        problem = f"withdrawal {withdrawal.id} was never exported"
    problem = problem or _paying_account(ctx, item)
    if problem is not None:
        return _unmatched(item, problem, withdrawal.id)
    return Plan(item, "return_withdrawal" if returned else "complete_withdrawal", withdrawal.id)


def _export_withdrawals(
    uow: UnitOfWork, export: BankExport, lock: bool
) -> tuple[list[Withdrawal], str | None]:
    """The export's withdrawals, and why they cannot all complete now (or None)."""
    found: list[Withdrawal] = []
    for withdrawal_id in export.withdrawal_ids:
        withdrawal = uow.records.get(Withdrawal, withdrawal_id, None, for_update=lock)
        if withdrawal is None or withdrawal.bank_export_id != export.id:
            return found, f"withdrawal {withdrawal_id} is not in export {export.id}"
        if withdrawal.status is not MovementStatus.PENDING:
            state = withdrawal.status.value
            return found, f"withdrawal {withdrawal_id} of export {export.id} is already {state}"
        found.append(withdrawal)
    return found, None


def _export_plan(uow: UnitOfWork, ctx: Adapters, item: ParsedLine, export: BankExport) -> Plan:
    problem = (
        _mismatch(export.amount, export.currency, item)
        or _paying_account(ctx, item)
        or _export_withdrawals(uow, export, lock=False)[1]
    )
    if problem is not None:
        return _unmatched(item, problem, export.id)
    return Plan(item, "complete_export", export.id)


def _debit_plan(uow: UnitOfWork, ctx: Adapters, item: ParsedLine) -> Plan:
    ids = item.system_ids(remittance=False)
    withdrawal = _quoted(uow, Withdrawal, ids)
    if withdrawal is not None:
        return _withdrawal_plan(ctx, item, withdrawal, returned=False)
    export = _quoted(uow, BankExport, ids)
    if export is not None:
        return _export_plan(uow, ctx, item, export)
    return _unmatched(item, "the debit quotes no withdrawal or payment file of ours")


def _virtual_account(uow: UnitOfWork, line: StatementLine) -> VirtualAccount | None:
    if not line.creditor_account:
        return None
    return uow.records.find(VirtualAccount, normalized_account(line.creditor_account))


def _paid_return_plan(
    uow: UnitOfWork, ctx: Adapters, item: ParsedLine, withdrawal: Withdrawal
) -> Plan:
    """A return of a payout the bank paid (or pays earlier in this import): its amount goes
    back to the wallet, once."""
    problem = (
        _mismatch(withdrawal.to_amount, withdrawal.to_currency_id, item)
        or _paying_account(ctx, item)
        or (
            f"withdrawal {withdrawal.id} was returned already ({withdrawal.returned_by})"
            if withdrawal.returned_by is not None
            else None
        )
    )
    wallet = uow.wallets.get(withdrawal.company_id, withdrawal.wallet_id)
    if problem is not None or wallet is None:
        return _unmatched(item, problem or f"the wallet of {withdrawal.id} is gone", withdrawal.id)
    return Plan(item, "credit_return", withdrawal.id, wallet=wallet)


def _credit_plan(uow: UnitOfWork, ctx: Adapters, item: ParsedLine, paying: set[str]) -> Plan:
    line = item.line
    if line.return_code is not None:
        withdrawal = _quoted(uow, Withdrawal, item.system_ids(remittance=False))
        if withdrawal is None:
            return _unmatched(item, "the return quotes no withdrawal of ours")
        if withdrawal.status is MovementStatus.COMPLETED or withdrawal.id in paying:
            return _paid_return_plan(uow, ctx, item, withdrawal)
        return _withdrawal_plan(ctx, item, withdrawal, returned=True)
    account = _virtual_account(uow, line)
    if account is not None:
        if account.source_currency != line.currency:
            return _unmatched(
                item,
                f"virtual account {account.id} receives {account.source_currency}, "
                f"not {line.currency}",
                account.id,
            )
        wallet = uow.wallets.get(account.company_id, account.wallet_id)
        if wallet is not None:
            return Plan(item, "credit", account.id, account=account, wallet=wallet)
    deposit = _quoted(uow, Deposit, item.system_ids(remittance=True))
    if deposit is None:
        return _unmatched(item, "no virtual account, deposit or withdrawal of ours matches")
    problem = _mismatch(deposit.from_amount, deposit.from_currency_id, item)
    if problem is None and deposit.status is not MovementStatus.PENDING:
        problem = f"deposit {deposit.id} is already {deposit.status.value}"
    if problem is not None:
        return _unmatched(item, problem, deposit.id)
    return Plan(item, "complete_deposit", deposit.id)


def _conflict(item: ParsedLine, stored: BankStatementLine, amount: int) -> ValidationFailed:
    return ValidationFailed(
        "The statement was refused, nothing was applied: "
        f"{item.line.location}: the bank reference {item.line.entry_reference!r} was imported "
        f"before ({stored.id}) as a {stored.direction} of {abs(amount)} {item.line.currency} "
        "(minor units); the bank cannot book it again for another amount",
        param="statement",
        code="statement_invalid",
    )


def _stored_signed(stored: BankStatementLine) -> int:
    return stored.amount if stored.direction == Direction.CREDIT.value else -stored.amount


def _known_as_a_whole(uow: UnitOfWork, parsed: ParsedStatement) -> dict[str, BankStatementLine]:
    """References this statement gives several lines that an earlier import stored as one
    line (the batch booked whole, then detailed): those lines are that booking, already
    counted. Their sum must be what was stored, or the file is refused."""
    groups: dict[str, list[ParsedLine]] = {}
    for item in parsed.lines:
        if item.shares_reference and item.reference is not None:
            groups.setdefault(item.reference, []).append(item)
    whole: dict[str, BankStatementLine] = {}
    for reference, group in groups.items():
        stored = uow.records.find(BankStatementLine, line_key(parsed.account, f"ref:{reference}"))
        if stored is None:
            continue
        total = sum(signed(item) for item in group)
        if _stored_signed(stored) != total:
            raise _conflict(group[0], stored, _stored_signed(stored))
        whole[reference] = stored
    return whole


def plan(
    uow: UnitOfWork, ctx: Adapters, statements: Sequence[ParsedStatement]
) -> tuple[list[Plan], list[BankStatementLine]]:
    """Plans for the lines not imported before, and the stored lines of those that were. A
    booking two statements of the file both list (the same identity) is planned once. A line
    the bank's reference says was imported before, for another amount or direction, refuses
    the file: the bank's word about one booking cannot change."""
    plans: list[Plan] = []
    known: list[BankStatementLine] = []
    seen: set[str] = set()
    paying: set[str] = set()
    for parsed in statements:
        whole = _known_as_a_whole(uow, parsed)
        for item in parsed.lines:
            if item.key in seen:
                continue
            seen.add(item.key)
            if item.reference in whole:
                known.append(whole[item.reference])
                continue
            stored = uow.records.find(BankStatementLine, item.key)
            if stored is not None:
                if (stored.amount, stored.direction, stored.currency) != (
                    item.amount,
                    item.line.direction.value,
                    item.line.currency,
                ):
                    raise _conflict(item, stored, _stored_signed(stored))
                known.append(stored)
            elif item.line.direction is Direction.DEBIT:
                planned = _debit_plan(uow, ctx, item)
                plans.append(planned)
                paying |= _paid_by(uow, planned)
            else:
                plans.append(_credit_plan(uow, ctx, item, paying))
    return plans, known


def _paid_by(uow: UnitOfWork, planned: Plan) -> set[str]:
    """The withdrawals ``planned`` completes: a return later in the same import finds them
    paid."""
    if planned.action == "complete_withdrawal" and planned.target is not None:
        return {planned.target}
    if planned.action == "complete_export" and planned.target is not None:
        export = uow.records.get(BankExport, planned.target, None)
        return set(export.withdrawal_ids) if export is not None else set()
    return set()


async def apply(
    ctx: Adapters,
    quotes: FxQuotes,
    statements: Sequence[ParsedStatement],
    plans: list[Plan],
    known: list[BankStatementLine],
) -> ImportResult:
    """Carry out ``plans`` in one transaction and remember every line."""
    # Quoted and built before the transaction (a quote is async and may call out).
    credits: dict[str, tuple[Deposit, Journal]] = {}
    for p in plans:
        if p.action == "credit" and p.account is not None and p.wallet is not None:
            rate, to_amount = await quotes.quote(
                p.account.source_currency, p.wallet.currency, p.line.amount
            )
            credits[p.line.key] = virtual_account_credit(
                ctx, p.account, p.wallet, p.line.amount, _reference(p.line.line), rate, to_amount
            )
        elif p.action == "credit_return" and p.wallet is not None:
            line = p.line.line
            quote = await quotes.quote(line.currency, p.wallet.currency, p.line.amount)
            credits[p.line.key] = completed_credit(
                ctx,
                p.wallet,
                (p.line.amount, line.currency),
                quote,
                reference=p.target,
                description=f"Returned by the bank ({line.return_code}): withdrawal {p.target}",
                operation="payout_return",
            )
    now = ctx.clock.now()
    ids = {p.line.key: ctx.ids.new_id(BankStatementLine.prefix) for p in plans}
    # Each plan belongs to the first statement of the file that lists its line.
    plans_of: dict[int, list[Plan]] = {}
    first: dict[str, int] = {}
    for number, parsed in enumerate(statements):
        for item in parsed.lines:
            first.setdefault(item.key, number)
    for p in plans:
        plans_of.setdefault(first[p.line.key], []).append(p)

    def run(uow: UnitOfWork) -> tuple[list[BankStatementLine], list[BankBreak]]:
        stored: list[BankStatementLine] = []
        breaks: list[BankBreak] = []
        for number, parsed in enumerate(statements):
            mine = _store(uow, ctx, parsed, plans_of.get(number, []), credits, ids, now)
            stored += mine
            # The bank's balances against the ledger's mirror of the account, once this
            # statement's lines are in it (a later statement of the file sees them too).
            statement = replace(parsed.statement, account=parsed.account)
            breaks += safeguarding.reconcile_statement(uow, ctx, statement, mine)
        return stored, breaks

    new, breaks = await ctx.storage.run(run)
    # In file order; then any stored line no identity of this file names (a batch detailed
    # now that was imported whole before).
    by_key = {r.lookup_key: r for r in (*known, *new)}
    ordered = [
        by_key[item.key] for parsed in statements for item in parsed.lines if item.key in by_key
    ]
    lines = [record_of(r) for r in (*ordered, *known, *new)]
    return ImportResult(
        statements=[_summary(parsed) for parsed in statements],
        lines=list({line.id: line for line in lines}.values()),
        imported=len(new),
        already_imported=len(known) + (len(plans) - len(new)),
        unmatched=sum(1 for r in new if r.outcome is LineOutcome.UNMATCHED),
        breaks=tuple(safeguarding.break_record(b) for b in breaks),
    )


def _store(
    uow: UnitOfWork,
    ctx: Adapters,
    parsed: ParsedStatement,
    plans: list[Plan],
    credits: dict[str, tuple[Deposit, Journal]],
    ids: dict[str, str],
    now: datetime,
) -> list[BankStatementLine]:
    """Carry out one statement's plans and remember its lines."""
    stored: list[BankStatementLine] = []
    for p in plans:
        if uow.records.find(BankStatementLine, p.line.key) is not None:
            continue  # another import of the same statement got here first
        outcome, matched, reason = _carry_out(uow, ctx, p, credits)
        line = p.line.line
        record = BankStatementLine(
            id=ids[p.line.key],
            company_id=OPERATOR,
            statement_id=parsed.statement.statement_id,
            account=p.line.account,
            entry_reference=line.entry_reference,
            identity=p.line.identity,
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
    return stored


def _summary(parsed: ParsedStatement) -> ImportedStatement:
    statement = parsed.statement
    return ImportedStatement(
        statement_id=statement.statement_id,
        account=parsed.account,
        currency=parsed.currency,
        format=statement.format,
        period_start=statement.period_start,
        period_end=statement.period_end,
        lines=len(parsed.lines),
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
    ctx: Adapters,
    p: Plan,
    credits: dict[str, tuple[Deposit, Journal]],
) -> tuple[LineOutcome, str | None, str | None]:
    """Do what the plan says if it still holds (checked again under the record's lock)."""
    if p.action == "none":
        return LineOutcome.UNMATCHED, None, p.reason
    if p.action == "credit":
        deposit, journal = credits[p.line.key]
        apply_completed_credit(uow, ctx, deposit, journal)
        return LineOutcome.VIRTUAL_ACCOUNT_CREDITED, deposit.id, None
    if p.target is None:
        raise RuntimeError(f"plan {p.action} has no target")  # every other plan names one
    if p.action == "credit_return":
        return _credit_return(uow, ctx, p.target, credits[p.line.key])
    if p.action == "complete_export":
        return _complete_export(uow, ctx, p.target)
    kind: type[Withdrawal] | type[Deposit] = (
        Deposit if p.action == "complete_deposit" else Withdrawal
    )
    record = uow.records.get(kind, p.target, None, for_update=True)
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


def _credit_return(
    uow: UnitOfWork, ctx: Adapters, withdrawal_id: str, credit: tuple[Deposit, Journal]
) -> tuple[LineOutcome, str | None, str | None]:
    """Credit back a paid payout the bank returned, unless it was returned already (checked
    under the withdrawal's lock, so two imports cannot both credit it)."""
    withdrawal = uow.records.get(Withdrawal, withdrawal_id, None, for_update=True)
    if withdrawal is None or withdrawal.status is not MovementStatus.COMPLETED:
        state = "gone" if withdrawal is None else withdrawal.status.value
        return LineOutcome.UNMATCHED, None, f"{withdrawal_id} is {state}, not paid"
    if withdrawal.returned_by is not None:
        reason = f"withdrawal {withdrawal_id} was returned already ({withdrawal.returned_by})"
        return LineOutcome.UNMATCHED, None, reason
    deposit, journal = credit
    apply_completed_credit(uow, ctx, deposit, journal)
    uow.records.update(withdrawal.model_copy(update={"returned_by": deposit.id}))
    return LineOutcome.RETURN_CREDITED, deposit.id, None


def _complete_export(
    uow: UnitOfWork, ctx: Adapters, export_id: str
) -> tuple[LineOutcome, str | None, str | None]:
    """Complete every withdrawal of a batch-booked export, or none of them."""
    export = uow.records.get(BankExport, export_id, None)
    if export is None:
        raise RuntimeError(f"export {export_id} is gone")  # exports are never deleted
    withdrawals, problem = _export_withdrawals(uow, export, lock=True)
    if problem is not None:
        return LineOutcome.UNMATCHED, None, problem
    for withdrawal in withdrawals:
        complete_in(uow, ctx, withdrawal)
    return LineOutcome.BATCH_COMPLETED, export.id, None
