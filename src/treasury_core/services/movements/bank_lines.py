"""Reading a bank file into checked statements: whose account, which lines, each line's identity.

Everything here happens before any transaction and applies nothing. A file is accepted whole or
refused whole (:class:`~treasury_core.errors.ValidationFailed`, ``statement_invalid``, naming the
place and the reason):

- every statement must be for one of the treasury's own bank accounts
  (:meth:`~treasury_core.config.TreasuryConfig.treasury_bank_accounts`), and every line and
  balance in one of that account's currencies: a statement of any other account is not the bank
  speaking about our money;
- every amount must fit the currency's decimals and the configured ``max_amount``.

A line's identity is the treasury account plus the bank's own reference of the movement,
written without white space and in upper case, so the same booking counts once whoever imports
it and however the file spells the reference; the company never takes part. A reference the
statement gives to several lines (a batch whose transactions have none of their own) is told
apart by a digest of what each line says. A line the bank gives no reference for (or
``NONREF``) gets a derived identity: a digest of the account, the booking date, the amount and
direction and every reference it quotes. Where a statement holds several lines that say the
same, the k-th of them is the k-th booking. None of it depends on where a line stands in the
file, so a statement the bank reissues with more lines, or with its lines in another order,
counts each booking once, and two identical lines of one statement are still two.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from treasury_core.config import normalized_account
from treasury_core.errors import ValidationFailed
from treasury_core.movements.bank_files import line_key
from treasury_core.ports import (
    BankFiles,
    Direction,
    Statement,
    StatementLine,
    StatementRejected,
)
from treasury_core.services.adapters import Adapters

#: References that are placeholders, not identities.
_NO_REFERENCE = frozenset({"", "NONREF", "NOTPROVIDED", "NONE"})

#: The ids this system issues that a bank line may quote back: deposits (shown in their
#: payment instructions), withdrawals (the end-to-end id of the payment file) and exports (the
#: file's message and payment-information id). Banks may change the case or run them into
#: other text, so they are found as words, case-insensitively.
_SYSTEM_ID = re.compile(r"(?<![0-9A-Za-z])(dep|wdr|bex)_([0-9A-Za-z]{20,40})(?![0-9A-Za-z])", re.I)


#: The largest balance, in minor units, a statement may state: the ledger's counters are
#: 64-bit, and a mirror must still take the lines that follow.
MAX_BALANCE = 10**18


@dataclass(frozen=True, slots=True)
class ParsedLine:
    """A statement line with its amount in minor units and its identity."""

    line: StatementLine
    account: str
    amount: int
    #: What the line is remembered by (see the module docstring).
    identity: str
    #: The records table's lookup key of the line: the account and the identity, hashed.
    key: str
    #: Whether the statement gave this line's bank reference to other lines too.
    shares_reference: bool = False

    def system_ids(self, *, remittance: bool) -> tuple[str, ...]:
        """The ids of ours the line quotes (see :func:`system_ids`)."""
        return system_ids(self.line, remittance=remittance)

    @property
    def reference(self) -> str | None:
        """The bank's reference as identities compare it (see :func:`reference_of`)."""
        return reference_of(self.line.entry_reference)


@dataclass(frozen=True, slots=True)
class ParsedStatement:
    """A statement of the file, checked, with its lines."""

    statement: Statement
    #: The statement's account, written as configuration and identities compare it.
    account: str
    #: What the statement is in (``""`` for a multi-currency statement naming none).
    currency: str
    lines: tuple[ParsedLine, ...]


def reference_of(text: str | None) -> str | None:
    """A bank reference as identities compare it: no white space, upper case; ``None`` for a
    placeholder (``NONREF``, ``NOTPROVIDED``) or nothing."""
    if text is None:
        return None
    written = "".join(text.split()).upper()
    return None if written in _NO_REFERENCE else written


def _content(account: str, line: StatementLine) -> str:
    """A digest of what the bank says of ``line``, leaving out where it stands in the file."""
    parts = (
        account,
        line.booking_date.isoformat(),
        line.direction.value,
        str(line.amount.normalize()),
        line.currency,
        line.end_to_end_id or "",
        line.remittance or "",
        line.creditor_account or "",
        line.message_id or "",
        line.payment_information_id or "",
        *line.references,
        line.return_code or "",
    )
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def line_identities(account: str, lines: Sequence[StatementLine]) -> list[str]:
    """What each of one statement's ``lines`` is remembered by (see the module docstring)."""
    references = [reference_of(line.entry_reference) for line in lines]
    given = Counter(r for r in references if r is not None)
    occurrences: Counter[str] = Counter()
    identities: list[str] = []
    for line, reference in zip(lines, references, strict=True):
        if reference is not None and given[reference] == 1:
            base = f"ref:{reference}"
        elif reference is not None:
            # The bank gave several bookings one reference (a batch whose transactions have
            # none of their own, or a bank that repeats them): each is told apart by what it
            # says, never by its place, which a reissued file may change.
            base = f"ref:{reference}#{_content(account, line)[:16]}"
        else:
            base = f"derived:{_content(account, line)}"
        occurrences[base] += 1
        # Two lines saying the same thing are two bookings; the k-th of them is the k-th again
        # when the statement comes again, however many other lines it gained.
        count = occurrences[base]
        identities.append(base if count == 1 else f"{base}~{count}")
    return identities


def system_ids(line: StatementLine, *, remittance: bool) -> tuple[str, ...]:
    """Every id of ours ``line`` may quote (``dep_…``, ``wdr_…``, ``bex_…``): the end-to-end id
    first, then the file's ids, the other references and, with ``remittance``, the remittance
    text; each as written and in lower case (how the default id source writes them), for
    banks that change the case.

    The remittance of a debit or a return is the text our payment file sent, which is the
    merchant's own reference: an id in it is the merchant's word, not the bank's, so debits
    and returns are matched without it. A payer writes a deposit's id in the remittance of a
    credit, where it is all the payer has.
    """
    sources: Iterable[str | None] = (
        line.end_to_end_id,
        line.message_id,
        line.payment_information_id,
        *line.references,
        line.remittance if remittance else None,
    )
    found: list[str] = []
    for text in sources:
        for prefix, rest in _SYSTEM_ID.findall(text or ""):
            for token in (f"{prefix.lower()}_{rest}", f"{prefix}_{rest}".lower()):
                if token not in found:
                    found.append(token)
    return tuple(found)


def minor_units(ctx: Adapters, amount: Decimal, currency: str, where: str) -> int:
    """``amount`` (major units) in minor units of ``currency``; :class:`StatementRejected` for
    an unknown currency or more decimals than the currency has."""
    if currency not in ctx.currencies:
        raise StatementRejected(f"currency {currency} is not enabled", location=where)
    minor = ctx.currencies.get(currency).minor_units(amount)
    if minor is None:
        raise StatementRejected(
            f"amount {amount} has more decimals than {currency} allows", location=where
        )
    return minor


def _line_amount(ctx: Adapters, line: StatementLine) -> int:
    amount = minor_units(ctx, line.amount, line.currency, line.location)
    if amount <= 0:
        raise StatementRejected(f"amount {line.amount} must be positive", location=line.location)
    if amount > ctx.config.max_amount:
        raise StatementRejected(
            f"amount {line.amount} {line.currency} is above the largest amount the treasury "
            f"accepts ({ctx.config.max_amount} minor units)",
            location=line.location,
        )
    return amount


def _checked(
    ctx: Adapters,
    statement: Statement,
    accounts: dict[str, frozenset[str]],
    number: int,
) -> ParsedStatement:
    account = normalized_account(statement.account)
    where = f"statement {number}"
    held = accounts.get(account)
    if held is None:
        raise StatementRejected(
            f"account {account} is not one of the treasury's bank accounts", location=where
        )
    holds = ", ".join(sorted(held))

    def check(currency: str, what: str, location: str) -> None:
        if currency.upper() not in held:
            raise StatementRejected(
                f"{what} is in {currency}; account {account} holds {holds}", location=location
            )

    if statement.currency:
        check(statement.currency, "the statement", where)
    lines: list[ParsedLine] = []
    identities = line_identities(account, statement.lines)
    given = Counter(reference_of(line.entry_reference) for line in statement.lines)
    for line, identity in zip(statement.lines, identities, strict=True):
        check(line.currency, "the line", line.location)
        amount = _line_amount(ctx, line)
        reference = reference_of(line.entry_reference)
        shared = reference is not None and given[reference] > 1
        key = line_key(account, identity)
        lines.append(ParsedLine(line, account, amount, identity, key, shares_reference=shared))
    for balance in (statement.opening_balance, statement.closing_balance):
        if balance is not None:
            check(balance.currency, "a balance", where)
            if abs(minor_units(ctx, balance.amount, balance.currency, where)) > MAX_BALANCE:
                raise StatementRejected(
                    f"a balance of {balance.amount} {balance.currency} is beyond what the "
                    "ledger holds",
                    location=where,
                )
    # What the statement is in: its own word, else the account's one currency, else its lines'
    # one currency; a multi-currency statement names none.
    currencies = {line.currency for line in statement.lines}
    currency = statement.currency.upper() or (
        next(iter(held)) if len(held) == 1 else (currencies.pop() if len(currencies) == 1 else "")
    )
    return ParsedStatement(statement, account, currency, tuple(lines))


def read(
    ctx: Adapters,
    files: BankFiles,
    data: bytes,
    formats: Collection[str] | None = None,
) -> list[ParsedStatement]:
    """Every statement in ``data``, checked whole (see the module docstring); with ``formats``,
    a statement in any other format refuses the file. A bad file is a
    :class:`ValidationFailed` (``statement_invalid``) naming where and why."""
    try:
        statements = files.read_statements(data)
        if not statements:  # the port promises one at least; a third-party rail may not
            raise StatementRejected("the file holds no statement")
        if formats is not None:
            for statement in statements:
                if statement.format not in formats:
                    raise StatementRejected(
                        f"a {statement.format} statement is not accepted here "
                        f"(only {', '.join(sorted(formats))})"
                    )
        accounts = ctx.config.treasury_bank_accounts()
        parsed = [_checked(ctx, s, accounts, n) for n, s in enumerate(statements, 1)]
    except StatementRejected as exc:
        raise ValidationFailed(
            f"The statement was refused, nothing was applied: {exc}",
            param="statement",
            code="statement_invalid",
        ) from None
    return parsed


def signed(item: ParsedLine) -> int:
    """The line's amount with its sign: credits in, debits out."""
    return item.amount if item.line.direction is Direction.CREDIT else -item.amount
