"""The values of an ISO 20022 document, read strictly: texts, references, amounts and dates.

A statement is untrusted input that moves money, so a value is checked against the schema's
own lexical form before anything is made of it: an amount is ``xs:decimal`` in ASCII digits as
``ActiveOrHistoricCurrencyAndAmount`` allows it (at most 18 digits, 5 of them decimals, no sign,
no exponent), a currency three ASCII letters, a date ``YYYY-MM-DD`` optionally followed by a time
and an offset. ``Decimal()`` and ``fromisoformat`` accept much more (exponents, other scripts'
digits, signs, spaces), which is why they only ever see text that passed a pattern here.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal
from xml.etree.ElementTree import Element

from treasury_core.ports import StatementRejected

#: XML's own white space: what a schema's whitespace="collapse" removes. Unicode spaces
#: (U+00A0 and the like) are not in it and make a value invalid.
XML_SPACE = " \t\r\n"

_AMOUNT = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_MAX_DIGITS = 18
_MAX_DECIMALS = 5
_CURRENCY = re.compile(r"[A-Za-z]{3}")
_DATE_TIME = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})"
    r"(?:T(?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.(?P<fraction>[0-9]+))?)?"
    r"(?P<zone>Z|[+-][0-9]{2}:[0-9]{2})?"
)
#: Words banks write where a reference is required but they have none.
NO_REFERENCE = frozenset({"NONREF", "NOTPROVIDED"})


def text(element: Element, path: str) -> str | None:
    """The text at ``path`` below ``element`` without XML white space around it, or ``None``."""
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip(XML_SPACE)
    return value or None


def texts(element: Element, path: str) -> list[str]:
    """Every non-empty text at ``path`` below ``element``, in file order."""
    found = (node.text.strip(XML_SPACE) for node in element.findall(path) if node.text)
    return [value for value in found if value]


def reference(element: Element, path: str) -> str | None:
    """The reference at ``path``, or ``None`` when absent, empty, ``NONREF`` or ``NOTPROVIDED``
    (the words a bank fills a mandatory reference field with when it has none)."""
    value = text(element, path)
    if value is None or value.upper() in NO_REFERENCE:
        return None
    return value


def amount(node: Element, what: str, where: str) -> tuple[Decimal, str]:
    """The amount and currency of ``node`` (an element of type
    ``ActiveOrHistoricCurrencyAndAmount``), refused unless both are in their schema form."""
    if len(node):
        raise StatementRejected(f"{what} holds elements, not an amount", location=where)
    written = (node.text or "").strip(XML_SPACE)
    if not _AMOUNT.fullmatch(written):
        raise StatementRejected(
            f"{what} {written!r} is not an amount (ASCII digits with an optional '.' and "
            "decimals: no sign, exponent, grouping or other spaces)",
            location=where,
        )
    whole, _, decimals = written.partition(".")
    if len(whole) + len(decimals) > _MAX_DIGITS or len(decimals) > _MAX_DECIMALS:
        raise StatementRejected(
            f"{what} {written!r} has more than {_MAX_DIGITS} digits or {_MAX_DECIMALS} decimals",
            location=where,
        )
    currency = (node.get("Ccy") or "").strip(XML_SPACE)
    if not _CURRENCY.fullmatch(currency):
        raise StatementRejected(
            f"{what} has no valid Ccy attribute (three letters): {currency!r}", location=where
        )
    return Decimal(written), currency.upper()


def calendar_date(value: str, what: str, where: str) -> date:
    """The calendar date of an ISO date or date-time as written (its offset, if any, is not
    applied: a booking on the 3rd in the bank's zone is booked on the 3rd)."""
    matched = _DATE_TIME.fullmatch(value)
    try:
        if matched is None:
            raise ValueError(value)
        return date.fromisoformat(matched["date"])
    except ValueError:
        raise StatementRejected(f"{what} {value!r} is not a date", location=where) from None


def date_at(element: Element, path: str, what: str, where: str) -> date | None:
    """The calendar date of ``path/Dt`` or ``path/DtTm`` below ``element``, or ``None``."""
    value = text(element, f"{path}/Dt") or text(element, f"{path}/DtTm")
    return None if value is None else calendar_date(value, what, where)


def date_time(value: str, what: str, where: str) -> datetime:
    """An ISO date-time as written (aware when it has an offset or ``Z``, naive otherwise)."""
    matched = _DATE_TIME.fullmatch(value)
    try:
        if matched is None or matched["time"] is None:
            raise ValueError(value)
        # fromisoformat takes at most six fraction digits; banks write up to nine.
        fraction = (matched["fraction"] or "")[:6].ljust(6, "0")
        zone = matched["zone"] or ""
        return datetime.fromisoformat(
            f"{matched['date']}T{matched['time']}.{fraction}{'+00:00' if zone == 'Z' else zone}"
        )
    except ValueError:
        raise StatementRejected(f"{what} {value!r} is not a date-time", location=where) from None
