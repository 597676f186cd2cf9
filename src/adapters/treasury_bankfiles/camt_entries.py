"""The lines of one camt entry (``Ntry``): a plain entry, or a batch split by its transactions.

Rules, in the order they apply:

- Only a booked entry (``Sts`` ``BOOK``, ``Sts/Cd`` or ``Sts/Prtry``) is read; a pending or
  informational one gives no line (it has not moved money yet).
- A batch entry (several ``TxDtls``, over one or more ``NtryDtls``) is split into one line per
  transaction only when every transaction states its amount (``TxDtls/Amt``, else
  ``AmtDtls/TxAmt/Amt``) in the entry's currency and their signed sum is the entry's amount:
  then each line carries exactly what the bank booked for it. Anything less, and the entry is
  one line for its whole amount, quoting the batch (``Btch/MsgId``, ``Btch/PmtInfId``, or the
  ids every transaction quotes alike): a guess at how a booked amount divides would be ours,
  not the bank's.
- A transaction's own ``Refs/AcctSvcrRef`` is its line's bank reference, else the entry's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from xml.etree.ElementTree import Element

from treasury_bankfiles.xml_fields import NO_REFERENCE, amount, date_at, reference, text, texts
from treasury_core.ports import Direction, StatementLine, StatementRejected

_DIRECTIONS = {"CRDT": Direction.CREDIT, "DBIT": Direction.DEBIT}
#: References a line quotes besides its end-to-end id and the file's ids, in schema order
#: (which is file order in a valid document).
_OTHER_REFERENCES = (
    "Refs/InstrId",
    "Refs/TxId",
    "Refs/MndtId",
    "Refs/ChqNb",
    "Refs/ClrSysRef",
    "RmtInf/Strd/CdtrRefInf/Ref",
)


@dataclass(frozen=True, slots=True)
class _Entry:
    """What an entry states for all of its lines."""

    where: str
    amount: Decimal
    currency: str
    direction: Direction
    booking_date: date
    reference: str | None
    number: str | None
    reversal: bool


@dataclass(frozen=True, slots=True)
class _Part:
    """What one transaction of a batch states for itself."""

    amount: Decimal
    currency: str
    direction: Direction


def direction(element: Element, where: str, *, default: Direction | None = None) -> Direction:
    """The ``CdtDbtInd`` of ``element`` (``default`` when it has none, if given)."""
    indicator = text(element, "CdtDbtInd")
    if indicator is None and default is not None:
        return default
    if indicator not in _DIRECTIONS:
        raise StatementRejected(f"CdtDbtInd {indicator!r} is not CRDT or DBIT", location=where)
    return _DIRECTIONS[indicator]


def _status(entry: Element, where: str) -> str:
    # camt.053.001.02 to .08 write <Sts>BOOK</Sts>; later versions <Sts><Cd>BOOK</Cd></Sts>.
    status = text(entry, "Sts/Cd") or text(entry, "Sts/Prtry") or text(entry, "Sts")
    if status is None:
        raise StatementRejected("Sts is missing (is the entry booked?)", location=where)
    return status.upper()


def _entry(entry: Element, where: str) -> _Entry:
    node = entry.find("Amt")
    if node is None:
        raise StatementRejected("Amt is missing", location=where)
    value, currency = amount(node, "Amt", where)
    if value <= 0:
        raise StatementRejected(f"Amt {value} must be more than zero", location=where)
    booked = date_at(entry, "BookgDt", "BookgDt", where)
    if booked is None:
        raise StatementRejected("BookgDt is missing", location=where)
    return _Entry(
        where=where,
        amount=value,
        currency=currency,
        direction=direction(entry, where),
        booking_date=booked,
        reference=reference(entry, "AcctSvcrRef"),
        number=reference(entry, "NtryRef"),
        reversal=(text(entry, "RvslInd") or "").lower() in ("true", "1"),
    )


def _transactions(entry: Element) -> Iterator[tuple[Element, Element]]:
    """Each ``TxDtls`` of the entry with the ``NtryDtls`` it belongs to, in file order."""
    for details in entry.findall("NtryDtls"):
        for transaction in details.findall("TxDtls"):
            yield details, transaction


def _stated_amount(transaction: Element, where: str) -> tuple[Decimal, str] | None:
    node = transaction.find("Amt")
    if node is None:
        node = transaction.find("AmtDtls/TxAmt/Amt")
    return None if node is None else amount(node, "the transaction's Amt", where)


def _stated(head: _Entry, transactions: list[tuple[Element, Element]]) -> list[_Part | None]:
    """Each transaction's own amount and direction, when it states them (every amount checked,
    whether or not the entry is split)."""
    parts: list[_Part | None] = []
    for number, (_, transaction) in enumerate(transactions, 1):
        where = f"{head.where}, transaction {number}"
        node = transaction.find("Amt")
        if node is None:
            node = transaction.find("AmtDtls/TxAmt/Amt")
        if node is None:
            parts.append(None)
            continue
        value, currency = amount(node, "the transaction's Amt", where)
        way = direction(transaction, where, default=head.direction)
        parts.append(_Part(value, currency, way))
    return parts


def _split(head: _Entry, parts: list[_Part | None]) -> list[_Part] | None:
    """The transactions' parts when each is positive, in the entry's currency, and they add up
    to the entry's amount; else ``None``."""
    known = [part for part in parts if part is not None and part.amount > 0]
    if len(known) != len(parts) or any(part.currency != head.currency for part in known):
        return None
    signed = sum(
        part.amount if part.direction is head.direction else -part.amount for part in known
    )
    return known if signed == head.amount else None


def _dedup(values: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def _others(transaction: Element) -> list[str]:
    found: list[str] = []
    for path in _OTHER_REFERENCES:
        found.extend(texts(transaction, path))
    return [value for value in found if value.upper() not in NO_REFERENCE]


def _returned(head: _Entry, transaction: Element | None) -> tuple[str | None, str | None]:
    if transaction is None:
        return ("RETURNED" if head.reversal else None), None
    code = text(transaction, "RtrInf/Rsn/Cd") or text(transaction, "RtrInf/Rsn/Prtry")
    reason = " ".join(texts(transaction, "RtrInf/AddtlInf")) or None
    if code is None and (head.reversal or transaction.find("RtrInf") is not None):
        code = "RETURNED"
    return code, reason


def _line(
    head: _Entry,
    details: Element | None,
    transaction: Element | None,
    *,
    position: int,
    number: int | None,
    value: Decimal,
    way: Direction,
) -> StatementLine:
    tx = transaction if transaction is not None else Element("TxDtls")
    batch = details if details is not None else Element("NtryDtls")
    code, reason = _returned(head, transaction)
    remittance = " ".join(texts(tx, "RmtInf/Ustrd"))
    own_reference = reference(tx, "Refs/AcctSvcrRef")
    return StatementLine(
        location=head.where if number is None else f"{head.where}, transaction {number}",
        position=position,
        direction=way,
        amount=value,
        currency=head.currency,
        booking_date=head.booking_date,
        entry_reference=(own_reference or head.reference)
        if number is not None
        else (head.reference or own_reference),
        entry_number=head.number,
        transaction=number,
        end_to_end_id=reference(tx, "Refs/EndToEndId"),
        remittance=remittance or None,
        creditor_account=text(tx, "RltdPties/CdtrAcct/Id/IBAN")
        or text(tx, "RltdPties/CdtrAcct/Id/Othr/Id"),
        return_code=code,
        return_reason=reason,
        message_id=reference(tx, "Refs/MsgId") or reference(batch, "Btch/MsgId"),
        payment_information_id=reference(tx, "Refs/PmtInfId") or reference(batch, "Btch/PmtInfId"),
        references=_dedup(_others(tx)),
    )


def _common(values: list[str | None]) -> str | None:
    """The one value every transaction quotes alike, or ``None``."""
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _whole(
    head: _Entry, transactions: list[tuple[Element, Element]], position: int
) -> StatementLine:
    """One line for a batch entry that is not split: the batch's ids, no transaction's own."""
    batches = list(dict.fromkeys(details for details, _ in transactions))
    txs = [tx for _, tx in transactions]
    message = next(filter(None, (reference(b, "Btch/MsgId") for b in batches)), None)
    information = next(filter(None, (reference(b, "Btch/PmtInfId") for b in batches)), None)
    others: list[str] = []
    for tx in txs:
        others.extend(_others(tx))
    return StatementLine(
        location=head.where,
        position=position,
        direction=head.direction,
        amount=head.amount,
        currency=head.currency,
        booking_date=head.booking_date,
        entry_reference=head.reference,
        entry_number=head.number,
        return_code="RETURNED" if head.reversal else None,
        message_id=message or _common([reference(tx, "Refs/MsgId") for tx in txs]),
        payment_information_id=information
        or _common([reference(tx, "Refs/PmtInfId") for tx in txs]),
        references=_dedup(others),
    )


def entry_lines(entry: Element, where: str, first_position: int) -> list[StatementLine]:
    """The lines of ``entry`` (none when it is not booked), the first at ``first_position``."""
    if _status(entry, where) != "BOOK":
        return []
    head = _entry(entry, where)
    transactions = list(_transactions(entry))
    if len(transactions) == 1:
        _stated(head, transactions)  # its amount is checked, though the entry's is booked
    if len(transactions) <= 1:
        details, transaction = transactions[0] if transactions else (entry.find("NtryDtls"), None)
        return [
            _line(
                head,
                details,
                transaction,
                position=first_position,
                number=None,
                value=head.amount,
                way=head.direction,
            )
        ]
    parts = _split(head, _stated(head, transactions))
    if parts is None:
        return [_whole(head, transactions, first_position)]
    return [
        _line(
            head,
            details,
            tx,
            position=first_position + index,
            number=index + 1,
            value=part.amount,
            way=part.direction,
        )
        for index, ((details, tx), part) in enumerate(zip(transactions, parts, strict=True))
    ]
