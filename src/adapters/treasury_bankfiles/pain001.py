"""ISO 20022 pain.001 (SEPA credit transfer initiation) files, written with sepaxml.

sepaxml builds the document and validates it against the pain.001.001.03 schema it ships before
handing it out, so a file that would not validate is never produced (the export then fails
whole and marks nothing).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sepaxml import SepaTransfer

from treasury_core.ports import OutgoingPayment, PaymentFile

#: The version every SEPA bank accepts; sepaxml ships its schema.
SCHEMA = "pain.001.001.03"


def pain001_file(
    batch_id: str,
    payments: list[OutgoingPayment],
    created_at: datetime,
    *,
    debtor_name: str,
    debtor_iban: str,
    debtor_bic: str | None,
    batch_booking: bool = True,
) -> PaymentFile:
    """One pain.001 file of ``payments``, one transfer each: with ``batch_booking`` in one
    payment information block the bank books as one debit, else one block (and one debit)
    per transfer."""
    config: dict[str, Any] = {
        "name": debtor_name,
        "IBAN": debtor_iban,
        "batch": batch_booking,
        "currency": "EUR",
    }
    if debtor_bic:
        config["BIC"] = debtor_bic
    transfer = SepaTransfer(config, schema=SCHEMA, clean=True)
    # The message id and creation time are random and the wall clock in sepaxml; ours make the
    # file name, the group header and the export record say the same thing.
    header = transfer._xml.find("CstmrCdtTrfInitn/GrpHdr")
    header.find("MsgId").text = batch_id
    header.find("CreDtTm").text = created_at.strftime("%Y-%m-%dT%H:%M:%S")
    for payment in payments:
        entry: dict[str, Any] = {
            "name": payment.creditor_name,
            "IBAN": payment.creditor_account,
            "amount": payment.amount,
            "currency": payment.currency,
            "execution_date": created_at.date(),
            "description": payment.remittance,
            "endtoend_id": payment.end_to_end_id,
        }
        if payment.creditor_bic:
            entry["BIC"] = payment.creditor_bic
        transfer.add_payment(entry)
    content: bytes = transfer.export(validate=True)
    if batch_booking:
        # A batch booking quotes the block's id (or the message id) back on the statement:
        # the export's id, like the message id, so either finds the export. sepaxml makes a
        # random one while exporting, so it is replaced in the validated bytes (both are
        # Max35Text; the export id has 30 characters).
        (block,) = (node.text for node in transfer._xml.iter("PmtInfId"))
        old = f"<PmtInfId>{block}</PmtInfId>".encode()
        content = content.replace(old, f"<PmtInfId>{batch_id}</PmtInfId>".encode(), 1)
    return PaymentFile(file_name=f"pain001-{batch_id}.xml", content=content)
