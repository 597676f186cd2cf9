"""What an MT940 ``:86:`` (information to the account owner) says about its line.

Banks write the field in one of three ways:

- German structured (DFÜ-Abkommen, also used in Austria, Poland and elsewhere): a three-digit
  transaction code, then ``?00`` to ``?63`` subfields (``166?00GUTSCHRIFT?20EREF+…?21…``).
  mt-940's transaction-details processor reads it, including the SEPA keywords (``EREF+``,
  ``KREF+``, ``MREF+``, ``SVWZ+``) that run on over several ``?2x`` subfields.
- The Dutch slash style (ING, ABN AMRO, Rabobank): ``/EREF/…/REMI/…/``, wrapped at 65
  characters anywhere, even inside a word.
- Free text, which may still carry SEPA keywords (``EREF+wdr_… SVWZ+…``).

Only what identifies the movement is taken: the end-to-end id, the remittance, the other
references, a return's reason code, and the German transaction code.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from typing import Any

import mt940

#: A SEPA return reason (ISO 20022 ``ExternalReturnReason1Code``: four characters) after
#: ``RTRN+``, which mt-940 does not split out of the subfield it stands in.
_RTRN = re.compile(r"RTRN\+\s*([A-Z0-9]{4})")
#: Value markers meaning "no reference" (SEPA's ``NOTPROVIDED``, SWIFT's ``NONREF``).
_NO_REFERENCE = frozenset({"NOTPROVIDED", "NONREF"})

#: The codes of the slash style (ING's and Rabobank's MT940 specifications).
_SLASH_CODES = (
    "ACCW|ADDR|BENM|BIC|CDTRREFTP|CDTRREF|CHGS|CNTP|CSID|EREF|EXCH|IBAN|ID|IREF|ISDT|MARF|"
    "NAME|OCMT|ORDP|PREF|PURP|REMI|RTRN|SVCL|TRTP|ULTB|ULTC|ULTD"
)
_SLASH = re.compile(rf"/({_SLASH_CODES})/")
#: A slash-style field starts with one of the codes that name the movement.
_SLASH_START = re.compile(r"/(EREF|REMI|TRTP|PREF|MARF|RTRN|BENM|ORDP|CNTP|IREF)/")


@dataclass(frozen=True, slots=True)
class Details:
    """The parts of a ``:86:`` that matter for matching, each ``None`` or empty when absent."""

    #: The whole field on one line, for a return's reason text.
    text: str | None = None
    end_to_end_id: str | None = None
    remittance: str | None = None
    #: The customer reference (``KREF+``), mandate (``MREF+``, ``/MARF/``), instruction id
    #: (``/IREF/``), in file order.
    references: tuple[str, ...] = ()
    #: A batch booking's payment-information id (``/PREF/``).
    payment_information_id: str | None = None
    #: A SEPA return reason (``RTRN+``, ``/RTRN/``) or the German return key (``?34``).
    return_code: str | None = None
    #: The German structured form's transaction code (GVC, ``166``, ``159``), if it has one.
    transaction_code: str | None = None


def _clean(value: object) -> str | None:
    # Control and format characters (a latin-1 reading of a DOS code page, a bidi override)
    # carry nothing a person or a match needs, and would garble the text wherever it is shown.
    kept = "".join(
        char
        for char in str(value or "")
        if unicodedata.category(char) not in ("Cc", "Cf") or char.isspace()
    )
    text = " ".join(kept.split())
    return text if text and text.upper() not in _NO_REFERENCE else None


def _references(*values: object) -> tuple[str, ...]:
    found: list[str] = []
    for value in values:
        text = _clean(value)
        if text is not None and text not in found:
            found.append(text)
    return tuple(found)


@cache
def _sepa_keywords() -> re.Pattern[str]:
    # mt-940's own list of the SEPA keywords (four characters, ``BIC `` with its space).
    keys = sorted((key.strip() for key in mt940.processors.GVC_KEYS if key.strip()), key=len)
    alternatives = "|".join(re.escape(key) for key in [*reversed(keys), "RTRN"])
    return re.compile(rf"(?<![A-Za-z0-9])({alternatives}) ?\+")


def read_details(value: str) -> Details:
    """The details of a ``:86:`` value (its lines joined by ``\\n``)."""
    value = value.strip()
    structured = _structured(value)
    if structured is not None:
        return structured
    joined = "".join(value.splitlines())
    if _SLASH_START.match(joined.lstrip()):
        return _slash(joined.strip())
    return _free(_clean(value) or "")


def _structured(value: str) -> Details | None:
    transactions = mt940.models.Transactions(
        options=mt940.Options(applicant_iban=True, gvc_leading_text=True)
    )
    tag = mt940.tags.TransactionDetails()
    raw: dict[str, Any] = {"transaction_details": value}
    result = mt940.processors.transaction_details_post_processor(transactions, tag, raw, dict(raw))
    if "transaction_details" in result:
        return None  # not the structured form: the processor leaves such details alone
    text = _clean(value)
    code = _RTRN.search("".join(value.splitlines()))
    purpose = "".join(
        part for part in (result.get("purpose"), result.get("additional_purpose")) if part
    )
    return Details(
        text=text,
        end_to_end_id=_clean(result.get("end_to_end_reference")),
        remittance=_clean(purpose),
        references=_references(
            result.get("customer_reference"), result.get("additional_position_reference")
        ),
        return_code=code.group(1) if code else _clean(result.get("return_debit_notes")),
        transaction_code=_clean(result.get("transaction_code")),
    )


def _slash(joined: str) -> Details:
    values: dict[str, str] = {}
    marks = list(_SLASH.finditer(joined))
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        end = following.start() if following is not None else len(joined)
        values.setdefault(mark.group(1), joined[mark.end() : end].strip("/ "))
    remittance = values.get("REMI", "")
    # Unstructured (USTD) or a structured creditor reference (STRD/CUR/…): the text after it.
    for prefix in ("USTD", "STRD/CUR", "STRD"):
        if remittance.startswith(prefix + "/"):
            remittance = remittance[len(prefix) :].lstrip("/")
            break
    code = values.get("RTRN", "")
    return Details(
        text=_clean(joined),
        end_to_end_id=_clean(values.get("EREF")),
        remittance=_clean(remittance),
        references=_references(values.get("MARF"), values.get("IREF")),
        payment_information_id=_clean(values.get("PREF")),
        return_code=_clean(code.split("/")[0]) if code else None,
    )


def _free(text: str) -> Details:
    if not text:
        return Details()
    keywords = _sepa_keywords()
    marks = list(keywords.finditer(text))
    if not marks:
        return Details(text=text, remittance=text)
    values: dict[str, str] = {}
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        end = following.start() if following is not None else len(text)
        values.setdefault(mark.group(1), text[mark.end() : end].strip())
    leading = text[: marks[0].start()].strip()
    code = _RTRN.search(text)
    return Details(
        text=text,
        end_to_end_id=_clean(values.get("EREF")),
        remittance=_clean(values.get("SVWZ") or leading),
        references=_references(values.get("KREF"), values.get("MREF")),
        return_code=code.group(1) if code else None,
    )
