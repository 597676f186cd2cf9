"""ISO 20022 camt.053 statements and camt.054 notifications, read with ElementTree behind
defusedxml.

No maintained camt reader on PyPI was worth a dependency (docs/decisions.md); what a treasury
needs is read here. defusedxml refuses entity expansion and external references, so a hostile
file cannot blow up memory or reach the network. Every version from .001.02 to .001.13 is read
alike: namespaces are dropped, and where versions differ (``Sts`` as a code or ``Sts/Cd``,
``TxDtls/Amt`` or ``AmtDtls/TxAmt/Amt``, a date or a date-time) both forms are read.

A file holds one or more statements (``BkToCstmrStmt/Stmt``) or booked notifications
(``BkToCstmrDbtCdtNtfctn/Ntfctn``); each becomes one :class:`~treasury_core.ports.Statement`, in
file order. The reader only reads faithfully: line identities, a currency's decimals and the
largest amount are the core's to judge.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from treasury_bankfiles.camt_entries import direction, entry_lines
from treasury_bankfiles.xml_fields import amount, calendar_date, date_at, date_time, text
from treasury_core.ports import (
    Balance,
    Direction,
    Statement,
    StatementLine,
    StatementRejected,
)

#: The message each format's root element holds, and the element of one statement in it.
_MESSAGES = {
    "BkToCstmrStmt": ("camt.053", "Stmt"),
    "BkToCstmrDbtCdtNtfctn": ("camt.054", "Ntfctn"),
}
_VERSIONS = range(2, 14)
_NAMESPACE = re.compile(r"urn:iso:std:iso:20022:tech:xsd:(camt\.05[34])\.001\.([0-9]{2})")
_OPENING = ("OPBD", "PRCD")
_CLOSING = ("CLBD",)


def looks_like_camt(data: bytes) -> bool:
    """Whether ``data`` starts like an XML document (else it is taken for MT940)."""
    return data.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"<"


def _parse(data: bytes) -> Element:
    try:
        root = fromstring(data)
    except ParseError as exc:
        row = exc.position[0] if getattr(exc, "position", None) else 0
        raise StatementRejected(
            f"not well-formed XML ({exc})", location=f"line {row}" if row else ""
        ) from None
    except DefusedXmlException as exc:
        raise StatementRejected(f"refused XML construct: {type(exc).__name__}") from None
    except (LookupError, ValueError) as exc:
        # An encoding the XML declaration names that Python does not know, or bytes that
        # are not in it.
        raise StatementRejected(f"the XML cannot be decoded ({exc})") from None
    if not isinstance(root, Element):
        raise StatementRejected("not an XML document")
    return root


def _local(tag: str) -> tuple[str, str]:
    """The namespace and local name of ``tag``."""
    if tag.startswith("{") and "}" in tag:
        namespace, name = tag[1:].split("}", 1)
        return namespace, name
    return "", tag


def _message(root: Element) -> tuple[str, Element]:
    """The format and message element of the document, refused unless it is camt.053 or .054."""
    namespace, name = _local(root.tag)
    document = root
    if name != "Document":  # an envelope (a business application header) around it
        document = next((c for c in root if _local(c.tag)[1] == "Document"), root)
        namespace, name = _local(document.tag)
    message = next(iter(document), None) if name == "Document" else None
    kind = _local(message.tag)[1] if message is not None else ""
    if message is None or kind not in _MESSAGES:
        found = f"{name}/{kind}" if kind else name
        raise StatementRejected(
            "not a camt.053 or camt.054 document (Document/BkToCstmrStmt or "
            f"Document/BkToCstmrDbtCdtNtfctn expected, {found} found)"
        )
    format_ = _MESSAGES[kind][0]
    versioned = _NAMESPACE.fullmatch(namespace)
    if versioned is not None and (versioned[1] != format_ or int(versioned[2]) not in _VERSIONS):
        raise StatementRejected(f"{namespace} is not read: {format_} versions 001.02 to 001.13 are")
    for element in message.iter():
        if isinstance(element.tag, str):
            element.tag = _local(element.tag)[1]
    return format_, message


def _balances(statement: Element, where: str) -> dict[str, Balance]:
    """The statement's balances by type code (the first of each type)."""
    found: dict[str, Balance] = {}
    for number, node in enumerate(statement.findall("Bal"), 1):
        here = f"{where}, balance {number}"
        kind = (text(node, "Tp/CdOrPrtry/Cd") or text(node, "Tp/CdOrPrtry/Prtry") or "").upper()
        amount_node = node.find("Amt")
        if amount_node is None:
            raise StatementRejected("Amt is missing", location=here)
        value, currency = amount(amount_node, "Amt", here)
        sign = direction(node, here)
        day = date_at(node, "Dt", "Dt", here)
        if day is None:
            raise StatementRejected("Dt is missing", location=here)
        signed = -value if sign is Direction.DEBIT and value else value
        found.setdefault(kind, Balance(amount=signed, currency=currency, date=day))
    return found


def _first(balances: dict[str, Balance], kinds: tuple[str, ...]) -> Balance | None:
    return next((balances[kind] for kind in kinds if kind in balances), None)


def _created(element: Element, where: str) -> datetime | None:
    value = text(element, "CreDtTm")
    return None if value is None else date_time(value, "CreDtTm", where)


def _period(
    statement: Element,
    where: str,
    balances: dict[str, Balance],
    lines: list[StatementLine],
    created: datetime | None,
) -> tuple[date, date]:
    """From ``FrToDt``; else the days the balances and lines fall on; else the creation day."""
    start = text(statement, "FrToDt/FrDtTm")
    end = text(statement, "FrToDt/ToDtTm")
    days = [balance.date for balance in balances.values()] + [line.booking_date for line in lines]
    if created is not None:
        days = days or [created.date()]
    if not days and (start is None or end is None):
        raise StatementRejected(
            "the period is unknown (no FrToDt, balance, entry or CreDtTm)", location=where
        )
    return (
        calendar_date(start, "FrDtTm", where) if start else min(days),
        calendar_date(end, "ToDtTm", where) if end else max(days),
    )


def _statement(statement: Element, format_: str, number: int, header: datetime | None) -> Statement:
    where = f"statement {number}"
    identifier = text(statement, "Id")
    if identifier is None:
        raise StatementRejected("Id is missing", location=where)
    account = text(statement, "Acct/Id/IBAN") or text(statement, "Acct/Id/Othr/Id")
    if account is None:
        raise StatementRejected("Acct/Id is missing", location=where)
    created = _created(statement, where) or header
    balances = _balances(statement, where)
    lines: list[StatementLine] = []
    for index, entry in enumerate(statement.findall("Ntry"), 1):
        lines.extend(entry_lines(entry, f"{where}, entry {index}", len(lines) + 1))
    start, end = _period(statement, where, balances, lines, created)
    if end < start:
        raise StatementRejected(
            f"the period ends ({end}) before it starts ({start})", location=where
        )
    balance_currencies = {balance.currency for balance in balances.values()}
    line_currencies = {line.currency for line in lines}
    currency = (
        text(statement, "Acct/Ccy")
        or (next(iter(balance_currencies)) if len(balance_currencies) == 1 else None)
        or (next(iter(line_currencies)) if len(line_currencies) == 1 else "")
    )
    return Statement(
        statement_id=identifier,
        account="".join(account.split()).upper(),
        currency=currency.upper(),
        period_start=start,
        period_end=end,
        lines=tuple(lines),
        format=format_,
        created_at=created,
        opening_balance=_first(balances, _OPENING),
        closing_balance=_first(balances, _CLOSING),
    )


def read_camt(data: bytes) -> tuple[Statement, ...]:
    """Every statement of a camt.053 or camt.054 document, in file order;
    :class:`StatementRejected` naming the place of the first fault (an XML line, a statement,
    an entry or one of its transactions) otherwise."""
    format_, message = _message(_parse(data))
    group = message.find("GrpHdr")
    header = None if group is None else _created(group, "GrpHdr")
    tag = _MESSAGES[message.tag][1]
    statements = message.findall(tag)
    if not statements:
        raise StatementRejected(f"the {format_} document holds no statement ({tag})")
    return tuple(
        _statement(statement, format_, number, header)
        for number, statement in enumerate(statements, 1)
    )
