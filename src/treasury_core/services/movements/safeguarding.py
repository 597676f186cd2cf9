"""The bank's balance against the ledger: mirrors, breaks and the safeguarding report.

Rules (docs/guides/banking.md, "Safeguarding reconciliation"):

- Every booked statement line of a treasury bank account moves the account's mirror
  (``bank:{ACCOUNT}:{CUR}``) against ``world:{CUR}`` in the transaction that stores the line,
  matched or not: the money is at the bank either way. A credit debits the mirror (money at
  the bank is a debit balance of the credit-normal ledger) and credits the world, which offsets
  the world's debit a deposit made; a debit line the reverse. One journal per line, whose id is
  the line's, so ``ledger verify`` can tell each posting's line.
- The first statement stating an opening balance records it, once, whatever the mirror holds
  already (a journal against the world): less the lines posted so far that were booked
  before the statement's first line (a notification that came first), which the bank's
  opening already holds. That first line's date (the day after the statement's last date
  when it has no line) is the mirror's start. A line booked before
  the start imported later (an earlier day after a later one) was in that opening too: its
  own journal moves the mirror, a second one (``{line}_opening``) takes it out of the
  opening, so the mirror at every date from the start on is unchanged and the opening is the
  bank's balance before the earliest line known.
- Then each balance the statement states is compared, in the same transaction:
  the closing balance with the mirror as of the closing date; the opening balance with that
  figure at the statement's last date less the statement's own lines (whatever the format
  dates its opening balance); the closing with the opening plus the lines. A difference is a
  :class:`BankBreak`, announced by ``treasury.reconciliation.break`` when it opens or opens
  again; it holds the latest comparison's figures.
- The first comparison of a balance records what part of its date's lines the mirror held
  (:class:`BankComparison`). Compared again, lines of that date imported since count only if
  the statement itself brought them: the others came after it at the bank (the next page of
  an MT940 statement, a later intraday camt.053). So a statement imported again is compared
  with what it was first compared with, plus lines of earlier dates that arrived since (the
  missing statement that heals a break). The order of one date's statements is the order
  they were first imported in.
- The mirror as of a date is its balance now less the nets of the days booked after that date
  (:class:`BankDay`, one record per booking date): statements arrive mostly in order, so that
  is a read of a few days, never of the lines.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from functools import partial

from treasury_core.config import TreasuryConfig
from treasury_core.currency import CurrencyRegistry
from treasury_core.ledger import Account, AccountKind, Journal, Move, Posting
from treasury_core.movements.bank_files import OPERATOR, BankStatementLine
from treasury_core.movements.ledger import world_account
from treasury_core.movements.safeguarding import (
    MAX_ACCOUNT_LENGTH,
    OPENING_LINE_SUFFIX,
    BankBreak,
    BankComparison,
    BankDay,
    BankMirror,
    BreakKind,
    BreakRecord,
    BreakStatus,
    StatedBalance,
    break_key,
    mirror_account_id,
    mirror_digest,
    mirror_ledger_account,
)
from treasury_core.notifications.events import EventType
from treasury_core.ports import Direction, Statement, Storage, UnitOfWork
from treasury_core.services.adapters import Adapters

#: Records read per query when walking a mirror's days or listing records.
_PAGE = 200


# --- opening the mirrors -------------------------------------------------------------------------


def open_mirrors(
    storage: Storage, config: TreasuryConfig, currencies: CurrencyRegistry, now: datetime
) -> None:
    """Open the mirror (ledger account and record) of every configured treasury bank account
    whose currency is enabled and that lacks one. Done when the treasury is assembled, so no
    import ever creates an account."""
    pairs = ((a, c) for a, held in config.treasury_bank_accounts().items() for c in held)
    for account, currency in sorted(pairs):
        if currency not in currencies:
            continue  # its statements are refused: nothing of that currency is imported
        if len(account) > MAX_ACCOUNT_LENGTH:
            raise ValueError(
                f"bank account {account} is longer than {MAX_ACCOUNT_LENGTH} characters"
            )
        mirror = BankMirror(
            id=BankMirror.id_for(account, currency),
            company_id=OPERATOR,
            account=account,
            currency=currency,
            ledger_account_id=mirror_account_id(account, currency),
            created_at=now,
        )

        def ensure(uow: UnitOfWork, mirror: BankMirror = mirror) -> None:
            uow.ledger.ensure_account(mirror_ledger_account(mirror.account, mirror.currency))
            if uow.records.get(BankMirror, mirror.id, OPERATOR) is None:
                uow.records.add(mirror)

        try:
            storage.run_sync(ensure)
        except Exception:
            # Another process starting at the same moment opened it first: the record's id is
            # its key. Anything else is raised.
            if not storage.run_sync(partial(_has_mirror, mirror_id=mirror.id), write=False):
                raise


def _has_mirror(uow: UnitOfWork, mirror_id: str) -> bool:
    return uow.records.get(BankMirror, mirror_id, OPERATOR) is not None


# --- the import's step -----------------------------------------------------------------------


def _minor(ctx: Adapters, amount: Decimal, currency: str) -> int:
    # The import read the statement whole first (bank_lines.read): every amount fits, so one
    # that does not is a bug in the import, not the bank's mistake.
    minor = ctx.currencies.get(currency).minor_units(amount)
    if minor is None:
        raise RuntimeError(f"{amount} {currency} reached the mirror without being checked")
    return minor


def _signed(line: BankStatementLine) -> int:
    return line.amount if line.direction == Direction.CREDIT.value else -line.amount


def reconcile_statement(
    uow: UnitOfWork,
    ctx: Adapters,
    statement: Statement,
    new_lines: Sequence[BankStatementLine],
) -> list[BankBreak]:
    """Post ``new_lines`` (the statement's lines this transaction stored) to their mirrors and
    compare the statement's balances with them; the breaks the statement shows, new or found.

    Called in the import's write transaction, after its lines are stored. A currency of the
    statement without a mirror (not a treasury account in it) is left alone.
    """
    balances = [b for b in (statement.opening_balance, statement.closing_balance) if b]
    currencies = sorted({line.currency for line in new_lines} | {b.currency for b in balances})
    breaks: list[BankBreak] = []
    for currency in currencies:
        # Locked: the imports of one bank account queue here, so the days, the opening and
        # the comparisons are read and written by one of them at a time.
        mirror = uow.records.get(
            BankMirror, BankMirror.id_for(statement.account, currency), OPERATOR, for_update=True
        )
        if mirror is None:
            continue
        lines = [line for line in new_lines if line.currency == currency]
        mirror = _post(uow, ctx, mirror, lines)
        mirror = _record_opening(uow, ctx, statement, mirror)
        if any(b.currency == currency for b in balances):
            breaks += _compare(uow, ctx, statement, mirror, lines)
    return breaks


def _post(
    uow: UnitOfWork,
    ctx: Adapters,
    mirror: BankMirror,
    lines: Sequence[BankStatementLine],
) -> BankMirror:
    """Post each line to the mirror and its day; a line booked before the mirror's start was
    in the bank's opening balance already, so it moves the opening instead. The mirror as
    now stored."""
    now = ctx.clock.now()
    start = mirror.start_date or mirror.opening_date
    early = 0
    days: dict[date, list[BankStatementLine]] = defaultdict(list)
    for line in lines:
        signed = _signed(line)
        uow.ledger.apply(_journal(mirror, line.id, signed), now)
        if mirror.opening is not None and start is not None and line.booking_date < start:
            uow.ledger.apply(
                _journal(mirror, BankMirror.opening_line_journal_id(line.id), -signed), now
            )
            early += signed
        days[line.booking_date].append(line)
    for on, booked in sorted(days.items()):
        net = sum(_signed(line) for line in booked)
        day_id = BankDay.id_for(mirror.account, mirror.currency, on)
        day = uow.records.get(BankDay, day_id, OPERATOR)
        if day is None:
            uow.records.add(
                BankDay(
                    id=day_id,
                    company_id=OPERATOR,
                    account=mirror.account,
                    currency=mirror.currency,
                    booking_date=on,
                    net=net,
                    lines=len(booked),
                    created_at=now,
                )
            )
        else:
            uow.records.update(
                day.model_copy(update={"net": day.net + net, "lines": day.lines + len(booked)})
            )
    if not early:
        return mirror
    moved = mirror.model_copy(update={"opening": (mirror.opening or 0) - early})
    uow.records.update(moved)
    return moved


def _record_opening(
    uow: UnitOfWork, ctx: Adapters, statement: Statement, mirror: BankMirror
) -> BankMirror:
    """Record the opening from the first statement that states one (once, whatever the mirror
    holds already): the stated balance less the lines posted so far that were booked before
    the statement's first line, which the bank's opening balance already holds."""
    opening = statement.opening_balance
    if mirror.opening is not None or opening is None or opening.currency != mirror.currency:
        return mirror
    ours = [line.booking_date for line in statement.lines if line.currency == mirror.currency]
    if ours:
        start = min(ours)
    else:
        # No line: the opening is the balance at the end of the statement's last date.
        last = max(b.date for b in (opening, statement.closing_balance) if b is not None)
        start = last + timedelta(days=1) if last < date.max else last
    before = _as_of_before(uow, mirror, start)
    amount = _minor(ctx, opening.amount, mirror.currency) - before
    if amount:
        uow.ledger.apply(_journal(mirror, mirror.opening_journal_id, amount), ctx.clock.now())
    recorded = mirror.model_copy(
        update={
            "opening": amount,
            "opening_date": opening.date,
            "opening_statement_id": statement.statement_id,
            "start_date": start,
        }
    )
    uow.records.update(recorded)
    return recorded


def _journal(mirror: BankMirror, journal_id: str, signed: int) -> Journal:
    """Money in (``signed`` > 0) debits the mirror; money out credits it."""
    bank, world = mirror.ledger_account_id, world_account(mirror.currency).id
    debit, credit = (bank, world) if signed > 0 else (world, bank)
    return Journal(
        journal_id,
        (Move(debit, credit, mirror.currency, abs(signed)),),
        operation="bank_line",
        source_id=journal_id,
    )


def _bank_now(uow: UnitOfWork, mirror: BankMirror) -> int:
    account = uow.ledger.get_account(mirror.ledger_account_id)
    return -account.balance if account is not None else 0


def _booked_from(uow: UnitOfWork, mirror: BankMirror, on: date) -> int:
    """The net of the mirror's lines booked on or after ``on``, read newest day first."""
    prefix = f"bkd_{mirror_digest(mirror.account, mirror.currency)}_"
    cursor: str | None = BankDay.after_last(mirror.account, mirror.currency)
    total = 0
    while cursor is not None:
        page = uow.records.list(BankDay, OPERATOR, _PAGE, cursor)
        cursor = page[-1].id if len(page) == _PAGE else None
        for day in page:
            if not day.id.startswith(prefix) or day.booking_date < on:
                return total
            total += day.net
    return total


def _as_of_before(uow: UnitOfWork, mirror: BankMirror, on: date) -> int:
    """What the mirror says was at the bank before the lines booked on ``on``."""
    return _bank_now(uow, mirror) - _booked_from(uow, mirror, on)


def _day_net(uow: UnitOfWork, mirror: BankMirror, on: date) -> int:
    day = uow.records.get(BankDay, BankDay.id_for(mirror.account, mirror.currency, on), OPERATOR)
    return day.net if day is not None else 0


def bank_balance_as_of(uow: UnitOfWork, mirror: BankMirror, on: date) -> int:
    """What the mirror says is at the bank at the end of ``on`` (signed minor units, as the bank
    states it): its balance now less what was booked after ``on``."""
    if on == date.max:
        return _bank_now(uow, mirror)
    return _as_of_before(uow, mirror, on + timedelta(days=1))


def stated_balance_as_of(uow: UnitOfWork, mirror: BankMirror, on: date) -> StatedBalance | None:
    """The latest closing balance a statement stated for a date on or before ``on``."""
    bound = StatedBalance.id_for(mirror.account, mirror.currency, on + timedelta(days=1))
    page = uow.records.list(StatedBalance, OPERATOR, 1, bound)
    prefix = f"bkc_{mirror_digest(mirror.account, mirror.currency)}_"
    return page[0] if page and page[0].id.startswith(prefix) else None


def _compare(
    uow: UnitOfWork,
    ctx: Adapters,
    statement: Statement,
    mirror: BankMirror,
    new_lines: Sequence[BankStatementLine],
) -> list[BankBreak]:
    currency = mirror.currency
    opening, closing = statement.opening_balance, statement.closing_balance
    ours = [line for line in statement.lines if line.currency == currency]
    lines = sum(
        _minor(ctx, line.amount, currency) * (1 if line.direction is Direction.CREDIT else -1)
        for line in ours
    )
    dates = [line.booking_date for line in ours]
    dates += [b.date for b in (opening, closing) if b is not None and b.currency == currency]
    # After every line of the statement: the opening is this less the statement's lines.
    last = max(dates)
    found: list[tuple[BreakKind, date, int, int]] = []
    if opening is not None and opening.currency == currency:
        stated_open = _minor(ctx, opening.amount, currency)
        after_all = _mirror_figure(
            uow,
            ctx,
            statement,
            mirror,
            BreakKind.OPENING,
            opening.date,
            stated_open,
            last,
            new_lines,
        )
        found.append((BreakKind.OPENING, opening.date, stated_open, after_all - lines))
    if closing is not None and closing.currency == currency:
        stated = _minor(ctx, closing.amount, currency)
        at_close = _mirror_figure(
            uow,
            ctx,
            statement,
            mirror,
            BreakKind.CLOSING,
            closing.date,
            stated,
            closing.date,
            new_lines,
        )
        found.append((BreakKind.CLOSING, closing.date, stated, at_close))
        if found[0][0] is BreakKind.OPENING:
            found.append((BreakKind.STATEMENT, closing.date, stated, found[0][2] + lines))
    breaks: list[BankBreak] = []
    for kind, on, stated, expected in found:
        found_break = _record(uow, ctx, statement, mirror, kind, on, stated, expected)
        if found_break is not None:
            breaks.append(found_break)
    return breaks


def _mirror_figure(
    uow: UnitOfWork,
    ctx: Adapters,
    statement: Statement,
    mirror: BankMirror,
    kind: BreakKind,
    on: date,
    stated: int,
    anchor: date,
    new_lines: Sequence[BankStatementLine],
) -> int:
    """The mirror at the end of ``anchor`` as this statement balance sees it.

    The first time the balance is compared that is the mirror now, and the part of
    ``anchor``'s lines it holds is recorded (:class:`BankComparison`). Compared again, the
    lines of ``anchor`` imported since count only if this statement brought them: the others
    came after it at the bank (a later page, a later statement of the day). Lines of earlier
    dates count whenever they came: they were before it.
    """
    key = break_key(mirror.account, mirror.currency, statement.statement_id, kind, on, stated)
    record_id = BankComparison.id_for(key)
    known = uow.records.get(BankComparison, record_id, OPERATOR)
    if known is not None:
        # The anchor first recorded: the statement may have grown a later line since.
        brought = sum(_signed(line) for line in new_lines if line.booking_date == known.anchor_date)
        if brought:
            known = known.model_copy(update={"anchor_part": known.anchor_part + brought})
            uow.records.update(known)
        return _as_of_before(uow, mirror, known.anchor_date) + known.anchor_part
    before = _as_of_before(uow, mirror, anchor)
    part = _day_net(uow, mirror, anchor)
    uow.records.add(
        BankComparison(
            id=record_id,
            company_id=OPERATOR,
            account=mirror.account,
            currency=mirror.currency,
            statement_id=statement.statement_id,
            kind=kind,
            balance_date=on,
            stated=stated,
            anchor_date=anchor,
            anchor_part=part,
            created_at=ctx.clock.now(),
        )
    )
    if kind is BreakKind.CLOSING:
        # The statement first compared for a date states its balance; one imported again
        # does not take it back from a later statement of that date.
        _remember_closing(uow, ctx, statement, mirror, on, stated)
    return before + part


def _remember_closing(
    uow: UnitOfWork,
    ctx: Adapters,
    statement: Statement,
    mirror: BankMirror,
    on: date,
    amount: int,
) -> None:
    record_id = StatedBalance.id_for(mirror.account, mirror.currency, on)
    known = uow.records.get(StatedBalance, record_id, OPERATOR)
    if known is None:
        uow.records.add(
            StatedBalance(
                id=record_id,
                company_id=OPERATOR,
                account=mirror.account,
                currency=mirror.currency,
                balance_date=on,
                amount=amount,
                statement_id=statement.statement_id,
                created_at=ctx.clock.now(),
            )
        )
    elif (known.amount, known.statement_id) != (amount, statement.statement_id):
        uow.records.update(
            known.model_copy(update={"amount": amount, "statement_id": statement.statement_id})
        )


def _record(
    uow: UnitOfWork,
    ctx: Adapters,
    statement: Statement,
    mirror: BankMirror,
    kind: BreakKind,
    on: date,
    stated: int,
    expected: int,
) -> BankBreak | None:
    """The break of this statement balance if it disagrees, holding this comparison's
    figures; announced when it opens or opens again. An open break of the same balance that
    now agrees is resolved."""
    key = break_key(mirror.account, mirror.currency, statement.statement_id, kind, on, stated)
    known = uow.records.find(BankBreak, key)
    if stated == expected:
        if known is not None and known.status is BreakStatus.OPEN:
            uow.records.update(
                known.model_copy(
                    update={"status": BreakStatus.RESOLVED, "resolved_at": ctx.clock.now()}
                )
            )
        return None
    if known is None:
        found = BankBreak(
            id=ctx.ids.new_id(BankBreak.prefix),
            company_id=OPERATOR,
            account=mirror.account,
            currency=mirror.currency,
            statement_id=statement.statement_id,
            kind=kind,
            date=on,
            stated=stated,
            expected=expected,
            difference=stated - expected,
            status=BreakStatus.OPEN,
            created_at=ctx.clock.now(),
        )
        ctx.events.add_announced(uow, found, EventType.RECONCILIATION_BREAK)
        return found
    reopened = known.status is BreakStatus.RESOLVED
    if not reopened and known.expected == expected:
        return known
    current = known.model_copy(
        update={
            "expected": expected,
            "difference": stated - expected,
            "status": BreakStatus.OPEN,
            "resolved_at": None,
        }
    )
    uow.records.update(current)
    if reopened:
        ctx.events.write(uow, EventType.RECONCILIATION_BREAK, current)
    return current


def break_record(found: BankBreak) -> BreakRecord:
    """The break as commands and the API show it."""
    return BreakRecord.model_validate(found.model_dump(include=set(BreakRecord.model_fields)))


# --- ledger verify ---------------------------------------------------------------------------


def _records(uow: UnitOfWork, kind: type[BankMirror], company_id: int) -> Iterator[BankMirror]:
    cursor: str | None = None
    while True:
        page = uow.records.list(kind, company_id, _PAGE, cursor)
        yield from page
        if len(page) < _PAGE:
            return
        cursor = page[-1].id


def _lines(uow: UnitOfWork) -> Iterator[BankStatementLine]:
    for status in ("matched", "unmatched"):
        after: str | None = None
        while True:
            page = uow.records.with_status(BankStatementLine, status, _PAGE, after)
            yield from page
            if len(page) < _PAGE:
                break
            after = page[-1].id


def _posted_amount(posting: Posting, account_id: str) -> int:
    """The posting as money at the bank: a debit of the mirror is money in."""
    return posting.amount if posting.debit_account_id == account_id else -posting.amount


def check_bank_mirrors(
    uow: UnitOfWork,
    accounts: Mapping[str, Account],
    postings: Mapping[str, Sequence[Posting]],
) -> Iterable[str]:
    """The differences between the bank mirrors and the statement lines they mirror ([8]):

    each mirror's bank figure (minus its balance) is its opening plus the signed sum of the
    lines of its account and currency stored since it was opened; each of its postings is its
    opening's, one such line's (with the line's amount), or one that takes a line booked before
    the mirror's start out of the opening (the line's amount reversed); the opening postings
    make the recorded opening; each such line has one posting of its own.
    ``accounts`` is every ledger account, ``postings`` the postings of each ``bank`` account.
    """
    mirrors = {m.ledger_account_id: m for m in _records(uow, BankMirror, OPERATOR)}
    out: list[str] = []
    for account_id in sorted(a.id for a in accounts.values() if a.kind is AccountKind.BANK):
        if account_id not in mirrors:
            out.append(f"[8] bank account {account_id} has no mirror record")
    lines: dict[str, list[BankStatementLine]] = defaultdict(list)
    for line in _lines(uow):
        target = mirrors.get(mirror_account_id(line.account, line.currency))
        if target is not None and line.created_at >= target.created_at:
            lines[target.ledger_account_id].append(line)
    for account_id, mirror in sorted(mirrors.items()):
        account = accounts.get(account_id)
        if account is None:
            out.append(f"[8] mirror {mirror.id} has no ledger account {account_id}")
            continue
        out += _mirror_differences(mirror, account, postings.get(account_id, ()), lines[account_id])
    return out


def _mirror_differences(
    mirror: BankMirror,
    account: Account,
    postings: Sequence[Posting],
    lines: Sequence[BankStatementLine],
) -> list[str]:
    out: list[str] = []
    by_id = {line.id: line for line in lines}
    start = mirror.start_date or mirror.opening_date
    posted: dict[str, int] = defaultdict(int)
    opening = 0
    for posting in postings:
        amount = _posted_amount(posting, account.id)
        if posting.journal_id == mirror.opening_journal_id:
            opening += amount
            continue
        if posting.journal_id.endswith(OPENING_LINE_SUFFIX):
            # A line booked before the start, taken out of the opening it was already in.
            early = by_id.get(posting.journal_id.removesuffix(OPENING_LINE_SUFFIX))
            if early is None or start is None or early.booking_date >= start:
                out.append(f"[8] {account.id}: posting {posting.id} moves the opening by no line")
            elif amount != -_signed(early):
                out.append(
                    f"[8] {account.id}: posting {posting.id} moves the opening by {amount}, "
                    f"its line {early.id} by {-_signed(early)}"
                )
            opening += amount
            continue
        line = by_id.get(posting.journal_id)
        if line is None:
            out.append(f"[8] {account.id}: posting {posting.id} has no statement line")
        elif amount != _signed(line):
            out.append(
                f"[8] {account.id}: posting {posting.id} is {amount}, "
                f"its line {line.id} {_signed(line)}"
            )
        posted[posting.journal_id] += 1
    if opening != (mirror.opening or 0):
        out.append(
            f"[8] {account.id}: opening postings make {opening}, "
            f"the recorded opening {mirror.opening}"
        )
    for line in lines:
        if posted[line.id] != 1:
            out.append(
                f"[8] {account.id}: statement line {line.id} has {posted[line.id]} postings, not 1"
            )
    expected = (mirror.opening or 0) + sum(_signed(line) for line in lines)
    if -account.balance != expected:
        out.append(
            f"[8] {account.id}: holds {-account.balance} at the bank, its opening and "
            f"statement lines make {expected}"
        )
    return out


# --- the service -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SafeguardingRow:
    """One currency of the safeguarding report (minor units)."""

    currency: str
    #: What the mirrors hold at the end of the date.
    bank_ledger: int
    #: The sum of each account's latest stated closing balance on or before the date;
    #: ``None`` when an account has none.
    bank_stated: int | None
    #: The oldest date among those stated balances.
    stated_on: date | None
    #: What the wallets hold at the end of the date (positive balances: what is owed).
    wallets: int
    #: Of ``wallets``, what is reserved to leave (withdrawals, holds): owed and still at the
    #: bank until the bank books it.
    reserved: int
    #: Deposits announced but not received: not money yet, counted nowhere.
    pending_in: int

    @property
    def requirement(self) -> int:
        """What must be safeguarded: every wallet's positive balance."""
        return self.wallets

    @property
    def surplus(self) -> int:
        """The bank figure (the lower of ledger and stated) less the requirement."""
        return self.bank - self.requirement

    @property
    def bank(self) -> int:
        """The lower of the mirror's and the bank's stated figure (the ledger's without one)."""
        if self.bank_stated is None:
            return self.bank_ledger
        return min(self.bank_ledger, self.bank_stated)

    @property
    def shortfall(self) -> bool:
        """Whether the bank holds less than is owed."""
        return self.surplus < 0


@dataclass(frozen=True, slots=True)
class SafeguardingReport:
    """The safeguarding report of one date."""

    on: date
    rows: tuple[SafeguardingRow, ...]

    @property
    def shortfall(self) -> bool:
        """Whether any currency is short."""
        return any(row.shortfall for row in self.rows)

    def csv(self) -> str:
        """The report as CSV, one row per currency (amounts in minor units)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(
            (
                "date",
                "currency",
                "bank_ledger",
                "bank_stated",
                "stated_on",
                "wallets",
                "reserved",
                "pending_in",
                "requirement",
                "surplus",
                "shortfall",
            )
        )
        for row in self.rows:
            writer.writerow(
                (
                    self.on.isoformat(),
                    row.currency,
                    row.bank_ledger,
                    "" if row.bank_stated is None else row.bank_stated,
                    "" if row.stated_on is None else row.stated_on.isoformat(),
                    row.wallets,
                    row.reserved,
                    row.pending_in,
                    row.requirement,
                    row.surplus,
                    "yes" if row.shortfall else "no",
                )
            )
        return out.getvalue()


def _report(uow: UnitOfWork, on: date) -> SafeguardingReport:
    end = datetime.combine(on + timedelta(days=1), time(), UTC)
    ledger: dict[str, int] = defaultdict(int)
    stated: dict[str, int | None] = {}
    stated_on: dict[str, date | None] = {}
    for mirror in _records(uow, BankMirror, OPERATOR):
        currency = mirror.currency
        ledger[currency] += bank_balance_as_of(uow, mirror, on)
        last = stated_balance_as_of(uow, mirror, on)
        previous = stated.get(currency, 0)
        if last is None or (currency in stated and previous is None):
            stated[currency] = stated_on[currency] = None
            continue
        stated[currency] = (previous or 0) + last.amount
        earlier = stated_on.get(currency)
        stated_on[currency] = (
            last.balance_date if earlier is None else min(earlier, last.balance_date)
        )
    wallets: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for account in uow.ledger.all_accounts():
        if account.kind is not AccountKind.WALLET:
            continue
        entry = uow.ledger.last_wallet_entry(account.id, end)
        if entry is None:
            continue
        figures = wallets[account.currency]
        figures[0] += max(entry.balance_after, 0)
        figures[1] += entry.balance_after - entry.available_balance_after
        figures[2] += entry.pending_in_after
    rows = tuple(
        SafeguardingRow(
            currency=currency,
            bank_ledger=ledger.get(currency, 0),
            bank_stated=stated.get(currency),
            stated_on=stated_on.get(currency),
            wallets=wallets[currency][0],
            reserved=wallets[currency][1],
            pending_in=wallets[currency][2],
        )
        for currency in sorted(ledger.keys() | wallets.keys())
    )
    return SafeguardingReport(on, rows)


class SafeguardingService:
    """Breaks between the bank and the ledger, and the safeguarding report (the operator's)."""

    def __init__(self, *, adapters: Adapters) -> None:
        self._adapters = adapters

    async def breaks(
        self, status: BreakStatus | None = BreakStatus.OPEN, limit: int = 1000
    ) -> list[BreakRecord]:
        """Breaks, oldest first: the open ones, the resolved ones, or all (``None``)."""
        statuses = list(BreakStatus) if status is None else [status]

        def read(uow: UnitOfWork) -> list[BankBreak]:
            rows: list[BankBreak] = []
            for wanted in statuses:
                rows += uow.records.with_status(BankBreak, wanted.value, limit)
            return sorted(rows, key=lambda b: b.id)[:limit]

        found = await self._adapters.storage.run(read, write=False)
        return [break_record(b) for b in found]

    async def report(self, on: date) -> SafeguardingReport:
        """Per currency at the end of ``on``: the bank (mirrors, and the bank's stated closing
        balances) against what the wallets are owed, read in one snapshot."""
        return await self._adapters.storage.run(
            lambda uow: _report(uow, on), write=False, snapshot=True
        )
