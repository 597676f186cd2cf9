"""SWIFT MT940 statements read with mt-940.

An MT940 line (``:61:``) carries a 16-character customer reference, too short for our ids, so
the end-to-end id is taken from the ``EREF+`` field of the ``:86:`` details when a bank writes
the structured form (German banks do), else from the customer reference. A reversal of a debit
(``RD``) is a return of one of our transfers; its reason code comes from ``RTRN+`` if given.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from typing import Any

import mt940

from treasury_core.ports import Direction, Statement, StatementLine, StatementRejected

_EREF = re.compile(r"EREF\+\s*(\S+)")
_RTRN = re.compile(r"RTRN\+\s*(\S+)")


def _location(text: str, fragment: str) -> str:
    if fragment:
        for number, line in enumerate(text.splitlines(), 1):
            if fragment.strip() and fragment.strip().splitlines()[0] in line:
                return f"line {number}"
    return ""


def _as_date(value: Any) -> date:
    return date(value.year, value.month, value.day)


def read_mt940(data: bytes) -> Statement:
    """The statement in an MT940 file (one statement); :class:`StatementRejected` otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # the SWIFT character set is ASCII; old exports use 8859-1
    transactions = mt940.models.Transactions()
    try:
        transactions.parse(text)
    except RuntimeError as exc:
        fragment = str(exc.args[2]) if len(exc.args) > 2 else ""
        raise StatementRejected(
            f"MT940 field does not parse: {fragment[:60]!r}", location=_location(text, fragment)
        ) from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StatementRejected(f"not a readable MT940 statement ({exc})") from None
    head = transactions.data
    account = head.get("account_identification")
    if not account:
        raise StatementRejected("field :25: (the account) is missing")
    if not head.get("transaction_reference"):
        raise StatementRejected("field :20: (the statement reference) is missing")
    lines: list[StatementLine] = []
    for number, tx in enumerate(transactions, 1):
        lines.append(_line(tx.data, number))
    opening = head.get("final_opening_balance")
    closing = head.get("final_closing_balance")
    dates = [line.booking_date for line in lines]
    if opening is None and closing is None and not dates:
        raise StatementRejected("no balances and no entries: the period is unknown")
    start = _as_date(opening.date) if opening is not None else min(dates)
    end = _as_date(closing.date) if closing is not None else max(dates)
    balance = closing or opening
    currency = str(balance.amount.currency) if balance is not None else lines[0].currency
    return Statement(
        statement_id=str(head["transaction_reference"]),
        account=str(account).replace(" ", "").upper(),
        currency=currency,
        period_start=start,
        period_end=end,
        lines=tuple(lines),
        format="mt940",
    )


def _line(data: dict[str, Any], number: int) -> StatementLine:
    where = f"entry {number}"
    status = str(data.get("status") or "")
    amount = data.get("amount")
    if amount is None or status not in ("C", "D", "RC", "RD"):
        raise StatementRejected("the :61: line has no amount or mark", location=where)
    reference = (data.get("bank_reference") or "").strip()
    if not reference:
        raise StatementRejected(
            "the :61: line has no bank reference (//…), which lines are remembered by",
            location=where,
        )
    details = " ".join(str(data.get("transaction_details") or "").split())
    customer = (data.get("customer_reference") or "").strip()
    eref = _EREF.search(details)
    end_to_end = eref.group(1) if eref else (customer if customer != "NONREF" else None)
    credit = status in ("C", "RD")
    returned = status == "RD"
    code = _RTRN.search(details)
    value = abs(Decimal(amount.amount))
    if value <= 0:
        raise StatementRejected("the :61: amount must be positive", location=where)
    return StatementLine(
        location=where,
        position=number,
        entry_reference=reference,
        direction=Direction.CREDIT if credit else Direction.DEBIT,
        amount=value,
        currency=str(amount.currency),
        booking_date=_as_date(data.get("entry_date") or data["date"]),
        end_to_end_id=end_to_end or None,
        remittance=details or None,
        return_code=(code.group(1) if code else "RETURNED") if returned else None,
        return_reason=details or None if returned else None,
    )
