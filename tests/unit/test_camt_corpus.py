"""Real camt.053 and camt.054 files (banks' published samples and other parsers' test data,
listed in tests/data/statements/SOURCES.md), each read line by line as its JSON beside it says.

The expected JSON was written from reading each file: per statement its id, format, account,
currency, period and booked balances; per line where it is, its amount, direction, currency,
booking date and every reference the core matches or identifies it by.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("defusedxml", reason="the bank-files extra is not installed")

from treasury_bankfiles.rail import Debtor, FilesBankRail
from treasury_core.ports import Balance, Statement

CORPUS = Path(__file__).parents[1] / "data" / "statements" / "camt"
FILES = sorted(CORPUS.glob("*.xml"))
RAIL = FilesBankRail(Debtor("Acme Treasury BV", "NL91ABNA0417164300"))


def _balance(balance: Balance | None) -> dict[str, str] | None:
    if balance is None:
        return None
    return {
        "amount": str(balance.amount),
        "currency": balance.currency,
        "date": balance.date.isoformat(),
    }


def _as_read(statement: Statement) -> dict[str, Any]:
    return {
        "statement_id": statement.statement_id,
        "format": statement.format,
        "account": statement.account,
        "currency": statement.currency,
        "period": [statement.period_start.isoformat(), statement.period_end.isoformat()],
        "opening_balance": _balance(statement.opening_balance),
        "closing_balance": _balance(statement.closing_balance),
        "lines": [
            {
                "location": line.location,
                "position": line.position,
                "direction": line.direction.value,
                "amount": str(line.amount),
                "currency": line.currency,
                "booking_date": line.booking_date.isoformat(),
                "entry_reference": line.entry_reference,
                "entry_number": line.entry_number,
                "transaction": line.transaction,
                "end_to_end_id": line.end_to_end_id,
                "message_id": line.message_id,
                "payment_information_id": line.payment_information_id,
                "return_code": line.return_code,
            }
            for line in statement.lines
        ],
    }


def test_the_corpus_holds_several_banks_versions_and_both_messages() -> None:
    assert len(FILES) >= 10
    texts = [path.read_text("utf-8") for path in FILES]
    for version in ("053.001.02", "053.001.04", "053.001.08", "054.001.02", "054.001.04"):
        assert any(f"camt.{version}" in text for text in texts), version
    assert all(path.with_suffix(".json").exists() for path in FILES)
    sources = (CORPUS.parent / "SOURCES.md").read_text("utf-8")
    assert all(path.name in sources for path in FILES)


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_a_real_file_is_read_line_by_line_as_expected(path: Path) -> None:
    expected = json.loads(path.with_suffix(".json").read_text("utf-8"))
    statements = RAIL.read_statements(path.read_bytes())
    assert [_as_read(statement) for statement in statements] == expected["statements"]
