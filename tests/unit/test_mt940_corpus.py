"""Real MT940 files from several banks and countries, each read line by line as expected.

The files and their sources are listed in ``tests/data/statements/SOURCES.md``; beside each
file, a JSON document says what the reader must return for it (or how it refuses it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mt940", reason="the bank-files extra is not installed")

from treasury_bankfiles.rail import Debtor, FilesBankRail
from treasury_core.ports import Balance, Statement, StatementLine, StatementRejected

CORPUS = Path(__file__).parents[1] / "data" / "statements" / "mt940"
FILES = sorted(CORPUS.glob("*.sta"))
RAIL = FilesBankRail(Debtor("Acme Treasury BV", "NL91ABNA0417164300"))


def _balance(balance: Balance | None) -> dict[str, str] | None:
    if balance is None:
        return None
    return {"amount": str(balance.amount), "currency": balance.currency, "date": str(balance.date)}


def _line(line: StatementLine) -> dict[str, Any]:
    return {
        "location": line.location,
        "direction": line.direction.value,
        "amount": str(line.amount),
        "booking_date": str(line.booking_date),
        "entry_reference": line.entry_reference,
        "end_to_end_id": line.end_to_end_id,
        "references": list(line.references),
        "remittance": line.remittance,
        "return_code": line.return_code,
        "payment_information_id": line.payment_information_id,
    }


def _statement(statement: Statement) -> dict[str, Any]:
    return {
        "statement_id": statement.statement_id,
        "account": statement.account,
        "currency": statement.currency,
        "opening_balance": _balance(statement.opening_balance),
        "closing_balance": _balance(statement.closing_balance),
        "lines": [_line(line) for line in statement.lines],
    }


def _adds_up(statement: Statement) -> bool:
    if statement.opening_balance is None or statement.closing_balance is None:
        return True
    moved = sum(
        (line.amount if line.direction.value == "credit" else -line.amount)
        for line in statement.lines
    )
    return statement.opening_balance.amount + moved == statement.closing_balance.amount


def test_the_corpus_spans_banks_and_countries() -> None:
    assert len(FILES) >= 10
    assert {path.name[:2] for path in FILES} >= {"nl", "de", "ch", "pl", "hu"}


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_a_real_file_is_read_as_expected(path: Path) -> None:
    expected = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    if "refused" in expected:
        with pytest.raises(StatementRejected) as refused:
            RAIL.read_statements(path.read_bytes())
        assert refused.value.location == expected["refused"]["location"]
        assert refused.value.reason == expected["refused"]["reason"]
        return
    statements = RAIL.read_statements(path.read_bytes())
    assert [_statement(statement) for statement in statements] == expected["statements"]
    for statement in statements:
        assert statement.format == "mt940"
        assert [line.position for line in statement.lines] == list(
            range(1, len(statement.lines) + 1)
        )
        assert all(line.amount > 0 and line.entry_number is None for line in statement.lines)
        assert all(line.currency == statement.currency for line in statement.lines)
        assert isinstance(statement.closing_balance or statement.opening_balance, Balance)
    assert all(_adds_up(statement) for statement in statements) is expected["balances_add_up"]
