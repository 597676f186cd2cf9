"""camt.053 (ISO 20022 bank-to-customer statement) read with ElementTree behind defusedxml.

No maintained camt.053 reader on PyPI was worth a dependency (docs/decisions.md); the subset a
treasury needs (the account, the period, and per entry its amount, direction, status, bank
reference, end-to-end id, remittance, creditor account and return reason) is read here.
defusedxml refuses entity expansion and external references, so a hostile statement cannot
blow up memory or reach the network. Every version of the message (camt.053.001.02 to .12) is
read alike: namespaces are dropped, the element names are the same.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from treasury_core.ports import Direction, Statement, StatementLine, StatementRejected


def looks_like_camt(data: bytes) -> bool:
    """Whether ``data`` starts like an XML document (else it is taken for MT940)."""
    return data.lstrip()[:1] == b"<"


def _strip_namespaces(root: Element) -> None:
    for element in root.iter():
        if isinstance(element.tag, str) and "}" in element.tag:
            element.tag = element.tag.split("}", 1)[1]


def _text(element: Element, path: str) -> str | None:
    found = element.find(path)
    if found is None or found.text is None:
        return None
    text = found.text.strip()
    return text or None


def _required(element: Element, path: str, where: str) -> str:
    value = _text(element, path)
    if value is None:
        raise StatementRejected(f"{path} is missing", location=where)
    return value


def _date(value: str, what: str, where: str) -> date:
    try:
        return datetime.fromisoformat(value).date() if "T" in value else date.fromisoformat(value)
    except ValueError:
        raise StatementRejected(f"{what} {value!r} is not a date", location=where) from None


def _amount(entry: Element, where: str) -> tuple[Decimal, str]:
    node = entry.find("Amt")
    if node is None or not (node.text or "").strip():
        raise StatementRejected("Amt is missing", location=where)
    currency = (node.get("Ccy") or "").strip().upper()
    if len(currency) != 3 or not currency.isalpha():
        raise StatementRejected("Amt has no valid Ccy attribute", location=where)
    try:
        amount = Decimal((node.text or "").strip())
    except InvalidOperation:
        raise StatementRejected(f"Amt {node.text!r} is not a number", location=where) from None
    if not amount.is_finite() or amount <= 0:
        raise StatementRejected(f"Amt {node.text!r} must be a positive amount", location=where)
    return amount, currency


def _status(entry: Element) -> str | None:
    # camt.053.001.02 writes <Sts>BOOK</Sts>; later versions <Sts><Cd>BOOK</Cd></Sts>.
    return _text(entry, "Sts/Cd") or _text(entry, "Sts")


def _line(entry: Element, number: int, position: int) -> StatementLine | None:
    where = f"entry {number}"
    status = _status(entry)
    if status is not None and status != "BOOK":
        return None  # pending or informational entries settle nothing
    amount, currency = _amount(entry, where)
    indicator = _required(entry, "CdtDbtInd", where)
    if indicator not in ("CRDT", "DBIT"):
        raise StatementRejected(f"CdtDbtInd {indicator!r} is not CRDT or DBIT", location=where)
    booked = _text(entry, "BookgDt/Dt") or _text(entry, "BookgDt/DtTm")
    if booked is None:
        raise StatementRejected("BookgDt is missing", location=where)
    details = entry.find("NtryDtls/TxDtls")
    tx = details if details is not None else Element("TxDtls")
    reference = _text(entry, "AcctSvcrRef") or _text(tx, "Refs/AcctSvcrRef")
    if reference is None:
        raise StatementRejected(
            "the entry has no AcctSvcrRef (the bank's reference it is remembered by)",
            location=where,
        )
    end_to_end = _text(tx, "Refs/EndToEndId")
    if end_to_end == "NOTPROVIDED":
        end_to_end = None
    remittance = " ".join(
        (node.text or "").strip() for node in tx.findall("RmtInf/Ustrd") if node.text
    ).strip()
    return_code = _text(tx, "RtrInf/Rsn/Cd") or _text(tx, "RtrInf/Rsn/Prtry")
    returned = return_code is not None or _text(entry, "RvslInd") == "true"
    return StatementLine(
        location=where,
        position=position,
        entry_reference=reference,
        direction=Direction.CREDIT if indicator == "CRDT" else Direction.DEBIT,
        amount=amount,
        currency=currency,
        booking_date=_date(booked, "BookgDt", where),
        end_to_end_id=end_to_end,
        remittance=remittance or None,
        creditor_account=_text(tx, "RltdPties/CdtrAcct/Id/IBAN")
        or _text(tx, "RltdPties/CdtrAcct/Id/Othr/Id"),
        return_code=(return_code or "RETURNED") if returned else None,
        return_reason=_text(tx, "RtrInf/AddtlInf"),
    )


def read_camt053(data: bytes) -> Statement:
    """The statement in a camt.053 document; :class:`StatementRejected` naming the place of the
    first fault (an XML line, or an entry) otherwise."""
    try:
        root = fromstring(data)
    except ParseError as exc:
        row = exc.position[0] if getattr(exc, "position", None) else 0
        raise StatementRejected(
            f"not well-formed XML ({exc})", location=f"line {row}" if row else ""
        ) from None
    except DefusedXmlException as exc:
        raise StatementRejected(f"refused XML construct: {type(exc).__name__}") from None
    _strip_namespaces(root)
    statement = root.find("BkToCstmrStmt/Stmt")
    if root.tag != "Document" or statement is None:
        raise StatementRejected("not a camt.053 document (no Document/BkToCstmrStmt/Stmt)")
    if len(root.findall("BkToCstmrStmt/Stmt")) != 1:
        raise StatementRejected("one statement (Stmt) per file is supported")
    where = "Stmt"
    account = _text(statement, "Acct/Id/IBAN") or _text(statement, "Acct/Id/Othr/Id")
    if account is None:
        raise StatementRejected("Acct/Id is missing", location=where)
    entries = statement.findall("Ntry")
    lines: list[StatementLine] = []
    for number, entry in enumerate(entries, 1):
        line = _line(entry, number, len(lines) + 1)
        if line is not None:
            lines.append(line)
    start = _text(statement, "FrToDt/FrDtTm")
    end = _text(statement, "FrToDt/ToDtTm")
    dates = [line.booking_date for line in lines]
    if (start is None or end is None) and not dates:
        raise StatementRejected("FrToDt is missing and there are no entries", location=where)
    period_start = _date(start, "FrDtTm", where) if start else min(dates)
    period_end = _date(end, "ToDtTm", where) if end else max(dates)
    currencies = {line.currency for line in lines}
    currency = _text(statement, "Acct/Ccy") or (currencies.pop() if len(currencies) == 1 else "")
    return Statement(
        statement_id=_required(statement, "Id", where),
        account=account.replace(" ", "").upper(),
        currency=currency.upper(),
        period_start=period_start,
        period_end=period_end,
        lines=tuple(lines),
        format="camt.053",
    )
