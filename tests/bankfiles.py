"""Statements for tests: camt.053 documents built the way a bank writes them.

:func:`camt053` writes a statement of the given entries; :func:`payments_of` reads a pain.001
file back (its end-to-end ids, amounts and creditor IBANs), so a test can book or return
exactly what was exported.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import date

NS = "urn:iso:std:iso:20022:tech:xsd:camt.053.001.02"
PAIN = "{urn:iso:std:iso:20022:tech:xsd:pain.001.001.03}"


@dataclass(frozen=True)
class Entry:
    """One camt.053 entry."""

    #: The bank's reference (AcctSvcrRef); ``None`` writes none.
    ref: str | None
    credit: bool
    amount: str
    currency: str = "EUR"
    booked: date = date(2026, 1, 1)
    end_to_end: str | None = None
    remittance: str | None = None
    creditor_iban: str | None = None
    return_code: str | None = None
    return_info: str | None = None
    status: str = "BOOK"
    #: The payment file's message id a batch booking quotes (NtryDtls/Btch/MsgId).
    batch: str | None = None


@dataclass(frozen=True)
class Paid:
    """One credit transfer of a pain.001 file."""

    end_to_end: str
    amount: str
    currency: str
    iban: str


def payments_of(pain001: bytes) -> list[Paid]:
    """The transfers in a pain.001.001.03 file."""
    root = ET.fromstring(pain001)  # our own file
    return [
        Paid(
            tx.findtext(f"{PAIN}PmtId/{PAIN}EndToEndId") or "",
            tx.findtext(f"{PAIN}Amt/{PAIN}InstdAmt") or "",
            tx.find(f"{PAIN}Amt/{PAIN}InstdAmt").get("Ccy") or "",  # type: ignore[union-attr]
            tx.findtext(f"{PAIN}CdtrAcct/{PAIN}Id/{PAIN}IBAN") or "",
        )
        for tx in root.iter(f"{PAIN}CdtTrfTxInf")
    ]


def _sub(parent: ET.Element, path: str, text: str | None = None) -> ET.Element:
    node = parent
    for name in path.split("/"):
        node = ET.SubElement(node, name)
    if text is not None:
        node.text = text
    return node


def camt053(
    entries: list[Entry],
    *,
    account: str = "NL91ABNA0417164300",
    statement_id: str = "STMT-1",
    start: date = date(2026, 1, 1),
    end: date = date(2026, 1, 31),
    opening: str | None = None,
    closing: str | None = None,
    currency: str = "EUR",
) -> bytes:
    """A camt.053.001.02 statement of ``entries`` for ``account`` over ``start``–``end``, with
    the booked balances ``opening`` and ``closing`` (signed amounts) when given; ``currency``
    is the account's."""
    document = ET.Element("Document", xmlns=NS)
    statement = _sub(document, "BkToCstmrStmt/Stmt")
    _sub(statement, "Id", statement_id)
    _sub(statement, "CreDtTm", f"{end.isoformat()}T23:59:59")
    period = _sub(statement, "FrToDt")
    _sub(period, "FrDtTm", f"{start.isoformat()}T00:00:00")
    _sub(period, "ToDtTm", f"{end.isoformat()}T23:59:59")
    acct = _sub(statement, "Acct")
    _sub(acct, "Id/IBAN", account)
    _sub(acct, "Ccy", currency)
    for code, amount, day in (("OPBD", opening, start), ("CLBD", closing, end)):
        if amount is not None:
            bal = _sub(statement, "Bal")
            _sub(bal, "Tp/CdOrPrtry/Cd", code)
            _sub(bal, "Amt", amount.lstrip("-")).set("Ccy", currency)
            _sub(bal, "CdtDbtInd", "DBIT" if amount.startswith("-") else "CRDT")
            _sub(bal, "Dt/Dt", day.isoformat())
    for entry in entries:
        ntry = _sub(statement, "Ntry")
        _sub(ntry, "Amt", entry.amount).set("Ccy", entry.currency)
        _sub(ntry, "CdtDbtInd", "CRDT" if entry.credit else "DBIT")
        if entry.return_code:
            _sub(ntry, "RvslInd", "true")
        _sub(ntry, "Sts", entry.status)
        _sub(ntry, "BookgDt/Dt", entry.booked.isoformat())
        _sub(ntry, "ValDt/Dt", entry.booked.isoformat())
        if entry.ref is not None:
            _sub(ntry, "AcctSvcrRef", entry.ref)
        details = _sub(ntry, "NtryDtls")
        if entry.batch:
            _sub(details, "Btch/MsgId", entry.batch)
        tx = _sub(details, "TxDtls")
        if entry.end_to_end:
            _sub(tx, "Refs/EndToEndId", entry.end_to_end)
        if entry.creditor_iban:
            _sub(tx, "RltdPties/CdtrAcct/Id/IBAN", entry.creditor_iban)
        if entry.remittance:
            _sub(tx, "RmtInf/Ustrd", entry.remittance)
        if entry.return_code:
            ret = _sub(tx, "RtrInf")
            _sub(ret, "Rsn/Cd", entry.return_code)
            if entry.return_info:
                _sub(ret, "AddtlInf", entry.return_info)
    return b'<?xml version="1.0" encoding="UTF-8"?>' + ET.tostring(document, "utf-8")
