"""The real statement files of tests/data/statements imported through the service, as the
operator would: each file's accounts configured as the treasury's, every line stored once, a
second import changing nothing. The readers' own corpus tests say what each line reads as;
this says the core takes what banks send (its accounts, currencies, amounts, identities)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sepaxml", reason="the bank-files extra is not installed")

from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import ValidationFailed
from treasury_core.ports import Storage
from treasury_core.testing.fakes.clock import FakeClock

CORPUS = Path(__file__).parent.parent / "data" / "statements"
FILES = sorted(p for p in (*CORPUS.glob("camt/*.xml"), *CORPUS.glob("mt940/*.sta")))
#: Files the core refuses, and why: each is a real property of the file, not a gap.
REFUSED = {
    # The reader refuses it: one amount has no decimal comma.
    "nl-knab.sta": "is not in MT940's format",
    # Parser test data stating balances in four currencies for one EUR account.
    "genkgo-053-v08.xml": "a balance is in SEK; account",
    "genkgo-053-v03.xml": "a balance is in SEK; account",
}


def _load(path: Path) -> tuple[dict[str, Any], bytes]:
    """The file's expected reading (its JSON) and its bytes."""
    expected = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    return expected, path.read_bytes()


def _accounts(expected: dict[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for statement in expected.get("statements", []):
        # A multi-currency account (a Swiss one books an entry in EUR) holds each currency
        # its statement names or books in.
        currencies = {line.get("currency", statement["currency"]) for line in statement["lines"]}
        currencies |= {statement["currency"]} - {""}
        for currency in currencies:
            accounts = found.setdefault(currency, [])
            if statement["account"] not in accounts:
                accounts.append(statement["account"])
    return found


Opener = Callable[[dict[str, list[str]]], Treasury]


@pytest.fixture
def treasury_for(storage: Storage) -> Iterator[Opener]:
    opened: list[Treasury] = []

    def make(accounts: dict[str, list[str]]) -> Treasury:
        clock = FakeClock()
        currencies = tuple(sorted({"EUR", *accounts}))
        config = TreasuryConfig(
            database_url="memory://",
            currencies=currencies,
            # Hungarian banks book forints with two decimals, as ISO 4217 counts them; the
            # default table follows CLDR's 0 for HUF (it lacks an override), so a treasury
            # banking there sets the exponent.
            currency_exponents={"HUF": 2},
            bank_rail="files",
            bank_debtor_name="Acme Treasury BV",
            bank_debtor_iban="NL91ABNA0417164300",
            bank_accounts=accounts,
        )
        treasury = bootstrap(config, storage=storage, clock=clock, wall_clock=clock)
        opened.append(treasury)
        return treasury

    yield make
    for treasury in opened:
        treasury.close()


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
async def test_a_real_file_is_imported_once(path: Path, treasury_for: Opener) -> None:
    expected, data = _load(path)
    if path.name in REFUSED or "refused" in expected:
        accounts = {"EUR": ["NL91ABNA0417164300"]}
        if "statements" in expected:
            accounts = _accounts(expected)
        treasury = treasury_for(accounts)
        with pytest.raises(ValidationFailed) as refused:
            await treasury.bank.import_statement(data)
        assert REFUSED.get(path.name, "") in refused.value.message
        return
    treasury = treasury_for(_accounts(expected))
    lines = sum(len(s["lines"]) for s in expected["statements"])
    first = await treasury.bank.import_statement(data)
    stored = len({(line.account, line.identity) for line in first.lines})
    assert first.imported == stored == len(first.lines)
    # Several statements of one file may list one booking; each is stored once.
    assert stored <= lines
    again = await treasury.bank.import_statement(data)
    assert (again.imported, again.already_imported) == (0, first.imported)
