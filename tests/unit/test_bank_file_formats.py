"""The bank-file rail's formats: pain.001 out (schema-valid), camt.053 and MT940 in."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

pytest.importorskip("sepaxml", reason="the bank-files extra is not installed")

import sepaxml
import xmlschema

from tests.bankfiles import Entry, camt053, payments_of
from treasury_bankfiles.rail import Debtor, FilesBankRail
from treasury_core.ports import Direction, OutgoingPayment, Settlement, StatementRejected

RAIL = FilesBankRail(Debtor("Acme Treasury BV", "NL91 ABNA 0417 1643 00", "ABNANL2A"))
XSD = Path(sepaxml.__file__).parent / "schemas" / "pain.001.001.03.xsd"


def payment(**changes: object) -> OutgoingPayment:
    values: dict[str, object] = {
        "end_to_end_id": "wdr_01JBANKFILE0000000000000001",
        "amount": 12_345,
        "currency": "EUR",
        "creditor_name": "Jürgen Müller & Söhne",
        "creditor_account": "DE89370400440532013000",
        "creditor_bic": "COBADEFFXXX",
        "remittance": "Payout November",
    }
    return OutgoingPayment(**{**values, **changes})  # type: ignore[arg-type]


def test_the_payment_file_validates_against_the_pain001_schema() -> None:
    second = payment(end_to_end_id="wdr_01JBANKFILE0000000000000002", amount=5, creditor_bic="")
    built = RAIL.payment_file(
        "bex_01JBANKFILE00000000000000", [payment(), second], datetime(2026, 1, 5, tzinfo=UTC)
    )
    xmlschema.XMLSchema(str(XSD)).validate(built.content.decode())
    assert built.file_name == "pain001-bex_01JBANKFILE00000000000000.xml"
    text = built.content.decode()
    assert "<MsgId>bex_01JBANKFILE00000000000000</MsgId>" in text
    assert "<CtrlSum>123.50</CtrlSum>" in text
    assert "NL91ABNA0417164300" in text  # the debtor, normalized
    paid = payments_of(built.content)
    assert [(p.end_to_end, p.amount, p.currency) for p in paid] == [
        ("wdr_01JBANKFILE0000000000000001", "123.45", "EUR"),
        ("wdr_01JBANKFILE0000000000000002", "0.05", "EUR"),
    ]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"currency": "GBP"}, "SEPA credit transfers carry EUR only"),
        ({"creditor_account": "021000021"}, "not an IBAN"),
        ({"creditor_account": "BR1800360305000010009795493C1"}, "outside the SEPA zone"),
        ({"creditor_bic": "NOTABIC"}, "BIC is not valid"),
    ],
)
def test_what_sepa_cannot_carry_is_named(changes: dict[str, object], reason: str) -> None:
    assert reason in (RAIL.cannot_carry(payment(**changes)) or "")
    assert RAIL.cannot_carry(payment()) is None


def test_deposits_and_withdrawals_wait_for_the_statement() -> None:
    assert RAIL.settlement_delay(Settlement.DEPOSIT) is None
    assert RAIL.settlement_delay(Settlement.WITHDRAWAL) is None
    assert RAIL.settlement_delay(Settlement.FX_TRANSFER) == timedelta(seconds=60)
    [instruction] = RAIL.deposit_instructions("EUR", "dep_123")
    assert instruction.account_number == "NL91ABNA0417164300"


def test_a_camt053_statement_is_read() -> None:
    data = camt053(
        [
            Entry("B1", credit=False, amount="123.45", end_to_end="wdr_1", booked=date(2026, 1, 3)),
            Entry("B2", credit=True, amount="10", remittance="dep_9", creditor_iban="DE02 1203"),
            Entry(
                "B3",
                credit=True,
                amount="1.00",
                end_to_end="wdr_2",
                return_code="AC04",
                return_info="Account closed",
            ),
            Entry("B4", credit=True, amount="5.00", status="PDNG"),
        ]
    )
    (statement,) = RAIL.read_statements(data)
    assert (statement.statement_id, statement.account) == ("STMT-1", "NL91ABNA0417164300")
    assert (statement.period_start, statement.period_end) == (date(2026, 1, 1), date(2026, 1, 31))
    debit, credit, returned = statement.lines  # the pending entry settles nothing
    assert debit.direction is Direction.DEBIT and debit.amount == Decimal("123.45")
    assert debit.end_to_end_id == "wdr_1" and debit.booking_date == date(2026, 1, 3)
    assert credit.remittance == "dep_9" and credit.creditor_account == "DE02 1203"
    assert returned.return_code == "AC04" and returned.return_reason == "Account closed"


def test_a_later_camt_version_with_a_status_code_is_read() -> None:
    data = (
        camt053([Entry("B1", credit=True, amount="1.00")])
        .replace(b"camt.053.001.02", b"camt.053.001.08")
        .replace(b"<Sts>BOOK</Sts>", b"<Sts><Cd>BOOK</Cd></Sts>")
    )
    assert [line.entry_reference for line in RAIL.read_statements(data)[0].lines] == ["B1"]


@pytest.mark.parametrize(
    ("data", "where", "why"),
    [
        (camt053([Entry("B1", True, "1"), Entry("B2", True, "1,5")]), "entry 2", "not an amount"),
        (camt053([Entry("B1", True, "-3")]), "entry 1", "not an amount"),
        (camt053([Entry("B1", True, "0.00")]), "entry 1", "more than zero"),
        (camt053([Entry("B1", True, "3", currency="E")]), "entry 1", "Ccy"),
        (b"<Document><BkToCstmrStmt>\n<Stmt>\n</Document>", "line 3", "not well-formed"),
        (b"<Document/>", "", "not a camt.053 or camt.054 document"),
    ],
)
def test_a_malformed_statement_is_refused_with_where_and_why(
    data: bytes, where: str, why: str
) -> None:
    with pytest.raises(StatementRejected) as refused:
        RAIL.read_statements(data)
    assert refused.value.location == (f"statement 1, {where}" if "entry" in where else where)
    assert why in refused.value.reason


def test_an_entry_without_the_banks_reference_is_read() -> None:
    (statement,) = RAIL.read_statements(camt053([Entry("B1", True, "1"), Entry("", True, "2")]))
    assert [line.entry_reference for line in statement.lines] == ["B1", None]
    assert [line.position for line in statement.lines] == [1, 2]


@pytest.mark.parametrize(
    "hostile",
    [
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
        b"<Document>&b;</Document>",
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b"<Document>&x;</Document>",
    ],
)
def test_entities_are_refused(hostile: bytes) -> None:
    with pytest.raises(StatementRejected, match="refused XML construct"):
        RAIL.read_statements(hostile)


MT940 = """:20:STMT-MT
:25:NL91ABNA0417164300
:28C:1/1
:60F:C260101EUR1000,00
:61:2601030103D123,45NTRFNONREF//BANKREF1
:86:EREF+wdr_01JBANKFILE0000000000000001 SVWZ+payout
:61:2601040104C25,00NTRFNONREF//BANKREF2
:86:dep_abc
:61:2601050105RD1,00NTRFNONREF//BANKREF3
:86:EREF+wdr_2 RTRN+AC04 account closed
:62F:C260131EUR901,55
"""


def test_an_mt940_statement_is_read() -> None:
    (statement,) = RAIL.read_statements(MT940.encode())
    assert (statement.statement_id, statement.account) == ("STMT-MT", "NL91ABNA0417164300")
    assert (statement.period_start, statement.period_end) == (date(2026, 1, 1), date(2026, 1, 31))
    debit, credit, returned = statement.lines
    assert debit.direction is Direction.DEBIT and debit.amount == Decimal("123.45")
    assert debit.end_to_end_id == "wdr_01JBANKFILE0000000000000001"
    assert debit.entry_reference == "BANKREF1"
    assert credit.direction is Direction.CREDIT and credit.remittance == "dep_abc"
    assert returned.direction is Direction.CREDIT and returned.return_code == "AC04"


def test_a_malformed_mt940_line_is_refused_with_its_line() -> None:
    broken = MT940.replace(":61:2601040104C25,00", ":61:garbage")
    with pytest.raises(StatementRejected) as refused:
        RAIL.read_statements(broken.encode())
    assert refused.value.location == "statement 1, line 7"


def test_an_mt940_line_without_a_bank_reference_is_read_without_one() -> None:
    (statement,) = RAIL.read_statements(MT940.replace("//BANKREF2", "").encode())
    assert statement.lines[1].entry_reference is None
    assert statement.lines[1].remittance == "dep_abc"
