"""Statements with stated balances, for the safeguarding tests: camt.053 files whose opening
and closing booked balances (OPBD, CLBD) the test chooses, read by the real files rail."""

from __future__ import annotations

from datetime import date

from tests.bankfiles import Entry, camt053

DEBTOR_IBAN = "NL91ABNA0417164300"


def statement(
    statement_id: str,
    entries: list[Entry],
    *,
    start: date,
    end: date,
    opening: str | None,
    closing: str | None,
) -> bytes:
    """A camt.053 of ``entries`` over ``start``–``end`` stating ``opening`` (at ``start``) and
    ``closing`` (at ``end``) in EUR major units."""
    return camt053(
        entries, statement_id=statement_id, start=start, end=end, opening=opening, closing=closing
    )
