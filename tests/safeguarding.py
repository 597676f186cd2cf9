"""Statements with stated balances, for the safeguarding tests.

:class:`BalancedRail` is the files rail whose reader also gives each statement the opening and
closing balances the test says the bank stated (by statement id); the lines are read from the
camt.053 file as ever. :func:`statement` registers the balances and writes the file.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from decimal import Decimal

from tests.bankfiles import Entry, camt053
from treasury_bankfiles.rail import Debtor, FilesBankRail
from treasury_core.ports import Balance, Statement

DEBTOR_IBAN = "NL91ABNA0417164300"


class BalancedRail(FilesBankRail):
    """The files rail, stating the balances registered for each statement id."""

    def __init__(self) -> None:
        super().__init__(Debtor("Acme Treasury BV", DEBTOR_IBAN))
        self.balances: dict[str, tuple[Balance | None, Balance | None]] = {}

    def read_statements(self, data: bytes) -> tuple[Statement, ...]:
        read = super().read_statements(data)
        return tuple(
            replace(s, opening_balance=opening, closing_balance=closing)
            for s in read
            for opening, closing in [self.balances.get(s.statement_id, (None, None))]
        )


def statement(
    rail: BalancedRail,
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
    rail.balances[statement_id] = (
        Balance(Decimal(opening), "EUR", start) if opening is not None else None,
        Balance(Decimal(closing), "EUR", end) if closing is not None else None,
    )
    return camt053(entries, statement_id=statement_id, start=start, end=end)
