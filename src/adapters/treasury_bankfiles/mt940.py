"""SWIFT MT940 statements read with mt-940.

The file is cut into statements and fields here (:mod:`.mt940_fields`), so that every refusal
names its statement and file line; mt-940 reads each field: its ``:61:`` pattern (dates, the
entry date's year, mark, funds code, amount, transaction type, references), its balance tags,
and its transaction-details processor for the structured ``:86:`` (:mod:`.mt940_details`).

What is read, and why:

- Every statement of the file (each ``:20:``), in file order.
- ``:25:`` is the account, white space removed, upper case (``BLZ/account`` kept as written).
- ``:60F:``/``:60M:`` is the opening balance, ``:62F:``/``:62M:`` the closing one, signed (``D``
  negative); one of them must be there, for the statement's currency. ``:64:``, ``:65:``,
  ``:28C:`` and a ``:86:`` of the statement itself (after ``:62F:``) are not needed.
- Amounts are checked on the raw text, not on mt-940's ``Decimal``, which takes whatever its
  pattern let through: ASCII digits with one decimal comma, at most 15 characters (SWIFT's
  ``15d``), followed by the transaction type; ``1E+2``, ``12.50``, other scripts' digits or a
  space before the amount refuse the file.
- Marks: ``C`` credit, ``D`` debit, ``RC`` (reversal of a credit) a debit, ``RD`` (reversal of
  a debit: our transfer came back) a credit that is a return, its reason from ``RTRN+``.
  German banks book a returned SEPA transfer as a plain credit with transaction code 159
  (``SEPA-Überweisung Retoure``); that is a return too.
- The bank reference (after ``//``) is the line's identity; absent, empty or ``NONREF`` it is
  ``None``, and the core derives one. The customer reference (``NONREF`` or a bare keyword
  such as Rabobank's ``EREF`` meaning none) is a reference, and the end-to-end id when the
  details give none: it is where a bank quotes the payer's reference back.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from functools import cache
from typing import Any

import mt940

from treasury_bankfiles.mt940_details import Details, read_details
from treasury_bankfiles.mt940_fields import Block, Field, blocks_of, fields_of
from treasury_core.ports import (
    Balance,
    Direction,
    Statement,
    StatementLine,
    StatementRejected,
)

#: SWIFT ``15d``: digits, one decimal comma (decimals optional), 15 characters at most.
_AMOUNT = re.compile(r"[0-9]{1,14},[0-9]*")
_AMOUNT_LENGTH = 15
#: A balance field (``1!a6!n3!a15d``): mark, date (YYMMDD), currency, amount.
_BALANCE = re.compile(r"[CD][0-9]{6}[A-Z]{3}(?P<amount>[0-9,]+)")
#: Which way each mark moves money, and whether it is a return of one of our transfers.
_MARKS = {
    "C": (Direction.CREDIT, False),
    "D": (Direction.DEBIT, False),
    "RC": (Direction.DEBIT, False),
    "RD": (Direction.CREDIT, True),
}
#: German transaction code of a returned SEPA credit transfer, booked as a credit.
_RETURNED_TRANSFER = "159"
#: Customer references that say there is none, or point at the ``:86:`` details.
_NO_CUSTOMER_REFERENCE = frozenset({"NONREF", "EREF", "KREF", "MREF", "PREF", "MARF"})


def _tag_types() -> dict[str, type[mt940.tags.Tag]]:
    return {
        "61": mt940.tags.Statement,
        # mt-940's variants for banks that write a customer reference longer than SWIFT's
        # 16 characters (GLS and other Atruvia banks before ``//``; ASN Bank an IBAN).
        "61-long-reference": mt940.tags.StatementGLS,
        "61-iban-reference": mt940.tags.StatementASNB,
        "60F": mt940.tags.FinalOpeningBalance,
        "60M": mt940.tags.IntermediateOpeningBalance,
        "60": mt940.tags.OpeningBalance,
        "62F": mt940.tags.FinalClosingBalance,
        "62M": mt940.tags.IntermediateClosingBalance,
        "62": mt940.tags.ClosingBalance,
    }


@cache
def _tags() -> dict[str, mt940.tags.Tag]:
    # mt-940's tag parsers compile their patterns when built: once, on first use.
    return {tag: kind() for tag, kind in _tag_types().items()}


_OPENING = ("60F", "60M", "60")
_CLOSING = ("62F", "62M", "62")


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # the SWIFT character set is ASCII; old exports use 8859-1
    return text.removeprefix("\ufeff")


def _as_date(value: Any) -> date:
    return date(value.year, value.month, value.day)


def _amount_ok(text: str) -> bool:
    return len(text) <= _AMOUNT_LENGTH and _AMOUNT.fullmatch(text) is not None


def read_mt940(data: bytes) -> tuple[Statement, ...]:
    """Every statement in an MT940 file, in file order; :class:`StatementRejected` if any
    part of it cannot be read."""
    before, blocks = blocks_of(fields_of(_decode(data)))
    if not blocks:
        raise StatementRejected("not an MT940 statement: no :20: field (the statement reference)")
    if before:
        raise StatementRejected(
            f"field :{before[0].tag}: comes before the first :20: (the statement reference)",
            location=f"line {before[0].line}",
        )
    return tuple(_statement(block) for block in blocks)


def _statement(block: Block) -> Statement:
    where = f"statement {block.number}"
    reference = block.fields[0].value.strip()
    if not reference:
        raise StatementRejected(
            "field :20: (the statement reference) is empty",
            location=f"{where}, line {block.fields[0].line}",
        )
    account: str | None = None
    opening: Balance | None = None
    closing: Balance | None = None
    entries: list[tuple[Field, list[Field]]] = []
    open_entry = False  # whether a :86: now belongs to the last :61:
    for field in block.fields[1:]:
        if field.tag == "25":
            account = "".join(field.value.split()).upper()
        elif field.tag in _OPENING or field.tag in _CLOSING:
            stated = _balance(field, where)
            if (opening if field.tag in _OPENING else closing) is not None:
                raise StatementRejected(
                    f"a second {'opening' if field.tag in _OPENING else 'closing'} balance",
                    location=f"{where}, line {field.line}",
                )
            if field.tag in _OPENING:
                opening = stated
            else:
                closing = stated
        elif field.tag == "61":
            entries.append((field, []))
        elif field.tag == "86" and open_entry:
            entries[-1][1].append(field)
        if field.tag == "61":
            open_entry = True
        elif field.tag not in ("86", "NS"):
            open_entry = False
    if not account:
        raise StatementRejected("field :25: (the account) is missing or empty", location=where)
    balance = opening or closing
    if balance is None:
        raise StatementRejected(
            "no opening or closing balance (:60F:, :62F:): the statement's currency is unknown",
            location=where,
        )
    if opening is not None and closing is not None and opening.currency != closing.currency:
        raise StatementRejected(
            f"the opening balance is in {opening.currency}, the closing one in {closing.currency}",
            location=where,
        )
    lines = tuple(
        _line(field, details, where, position, balance.currency)
        for position, (field, details) in enumerate(entries, 1)
    )
    dates = [line.booking_date for line in lines]
    return Statement(
        statement_id=reference,
        account=account,
        currency=balance.currency,
        period_start=opening.date if opening is not None else min([*dates, balance.date]),
        period_end=closing.date if closing is not None else max([*dates, balance.date]),
        lines=lines,
        format="mt940",
        opening_balance=opening,
        closing_balance=closing,
    )


def _balance(field: Field, where: str) -> Balance:
    location = f"{where}, line {field.line}"
    first = field.lines[0].strip() if field.lines else ""
    shape = _BALANCE.fullmatch(first)
    if shape is None or not _amount_ok(shape["amount"]):
        raise StatementRejected(
            f"the balance :{field.tag}: is not a mark (C or D), a date (YYMMDD), a currency and "
            f"an amount in MT940's format (digits with one decimal comma): {first[:40]!r}",
            location=location,
        )
    tag = _tags()[field.tag]
    transactions = mt940.models.Transactions()
    try:
        parsed = tag(transactions, tag.parse(transactions, first))[tag.slug]
    except (RuntimeError, ValueError, ArithmeticError):
        raise StatementRejected(
            f"the balance :{field.tag}: has no valid date: {first[:40]!r}", location=location
        ) from None
    return Balance(
        amount=Decimal(parsed.amount.amount),
        currency=str(parsed.amount.currency),
        date=_as_date(parsed.date),
    )


def _customer_reference(value: object) -> str | None:
    text = str(value or "").strip()
    return text if text and text.upper().rstrip("+") not in _NO_CUSTOMER_REFERENCE else None


def _match_line(value: str) -> tuple[mt940.tags.Tag, re.Match[str] | None]:
    tags = _tags()
    for name in ("61", "61-long-reference", "61-iban-reference"):
        match = tags[name].re.match(value)
        if match is not None:
            return tags[name], match
    return tags["61"], None


def _line(
    field: Field, notes: list[Field], where: str, position: int, currency: str
) -> StatementLine:
    location = f"{where}, line {field.line}"
    value = field.value
    # What the messages quote of the field: a blank one has no first line.
    written = field.lines[0] if field.lines else ""
    tag, match = _match_line(value)
    if match is None:
        raise StatementRejected(
            f"the :61: line does not parse: {written[:60]!r}", location=location
        )
    raw: dict[str, Any] = match.groupdict()
    mark = str(raw["status"])
    if mark not in _MARKS:
        raise StatementRejected(
            f"the :61: mark must be C, D, RC or RD, not {mark!r}", location=location
        )
    amount_text = str(raw["amount"])
    start = match.start("amount")
    if (
        not _amount_ok(amount_text)
        or raw["id"] is None  # the transaction type must follow the amount directly
        or not value[: match.end("amount")].isascii()
        or value[start - 1].isspace()
    ):
        shown = value[match.end("status") :].split("\n")[0][:30]
        raise StatementRejected(
            "the :61: amount is not in MT940's format (ASCII digits with one decimal comma, at "
            f"most 15 characters, then the transaction type such as NTRF): {shown!r}",
            location=location,
        )
    transactions = mt940.models.Transactions()
    try:
        raw = mt940.processors.date_fixup_pre_processor(transactions, tag, raw)
        data = tag(transactions, raw)
    except (ValueError, ArithmeticError):
        raise StatementRejected(
            f"the :61: line has no valid date: {written[:30]!r}", location=location
        ) from None
    amount = abs(Decimal(data["amount"].amount))
    if amount <= 0:
        raise StatementRejected("the :61: amount must be more than zero", location=location)
    details = read_details("\n".join(note.value for note in notes)) if notes else Details()
    direction, returned = _MARKS[mark]
    returned = returned or (
        direction is Direction.CREDIT and details.transaction_code == _RETURNED_TRANSFER
    )
    bank = str(data.get("bank_reference") or "").strip()
    customer = _customer_reference(data.get("customer_reference"))
    references = tuple(dict.fromkeys([*([customer] if customer else []), *details.references]))
    return StatementLine(
        location=location,
        position=position,
        direction=direction,
        amount=amount,
        currency=currency,
        booking_date=_as_date(data.get("entry_date") or data["date"]),
        entry_reference=bank if bank and bank.upper() != "NONREF" else None,
        end_to_end_id=details.end_to_end_id or customer,
        remittance=details.remittance,
        return_code=(details.return_code or "RETURNED") if returned else None,
        return_reason=details.text if returned else None,
        payment_information_id=details.payment_information_id,
        references=references,
    )
