"""The MT940 reader's rules, one at a time, on small statements written for each."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

pytest.importorskip("mt940", reason="the bank-files extra is not installed")

from treasury_bankfiles.mt940 import read_mt940
from treasury_core.ports import Balance, Direction, StatementLine, StatementRejected


def statement(*lines: str, head: str = ":20:S1\n:25:NL91ABNA0417164300\n:28C:1/1\n") -> str:
    return head + ":60F:C260101EUR1000,00\n" + "".join(lines) + ":62F:C260131EUR1000,00\n"


def line_of(text: str) -> StatementLine:
    (read,) = read_mt940(text.encode())
    (line,) = read.lines
    return line


@pytest.mark.parametrize(
    ("row", "reference"),
    [
        (":61:2601050105C10,00NTRFNONREF//BANK-1\n", "BANK-1"),
        (":61:2601050105C10,00NTRFNONREF\n", None),
        (":61:2601050105C10,00NTRFNONREF//NONREF\n", None),
        (":61:2601050105C10,00NTRFNONREF//nonref\n", None),
        (":61:2601050105C10,00NTRFNONREF//\n", None),
    ],
)
def test_the_bank_reference_is_optional_and_nonref_is_none(row: str, reference: str) -> None:
    line = line_of(statement(row))
    assert line.entry_reference == reference
    assert (line.entry_number, line.position) == (None, 1)


def test_two_lines_without_reference_are_two_lines_in_their_places() -> None:
    row = ":61:2601050105C10,00NTRFNONREF\n:86:same\n"
    (read,) = read_mt940(statement(row, row).encode())
    first, second = read.lines
    assert (first.position, second.position) == (1, 2)
    assert (first.location, second.location) == ("statement 1, line 5", "statement 1, line 7")
    assert first.entry_reference is second.entry_reference is None


def test_the_customer_reference_is_a_reference_unless_nonref() -> None:
    quoted = line_of(statement(":61:2601050105D10,00NTRFINV-77//B1\n"))
    assert quoted.references == ("INV-77",) and quoted.end_to_end_id == "INV-77"
    none = line_of(statement(":61:2601050105D10,00NTRFnonref//B1\n:86:EREF+E2E-1\n"))
    assert none.references == () and none.end_to_end_id == "E2E-1"


GERMAN = (
    ":61:2601050105CR250,00NTRFKREF+//0724710290621954\n"
    ":86:166?00GUTSCHRIFT?100399?20EREF+wdr_01JBANKFILE00000?21000000001?22KREF+KUNDE-9?23MREF+"
    "M-2024?24SVWZ+dep_01JDEPOSIT000000?2500000000001 thanks?30COBADEFFXXX?31DE89370400440532013"
    "000?32Jane Doe\n"
)


def test_german_subfields_are_read_through_mt940s_processor() -> None:
    line = line_of(statement(GERMAN))
    # The end-to-end id runs on from ?20 into ?21, the remittance from ?24 into ?25.
    assert line.end_to_end_id == "wdr_01JBANKFILE00000000000001"
    assert line.remittance == "dep_01JDEPOSIT00000000000000001 thanks"
    assert line.references == ("KUNDE-9", "M-2024")
    assert line.direction is Direction.CREDIT and line.amount == Decimal("250.00")
    assert line.return_code is None


def test_subfields_without_keywords_are_the_remittance() -> None:
    line = line_of(statement(":61:2601050105C5,00NMSCNONREF\n:86:051?00UEBERW?20Rechnung 4?2111\n"))
    assert line.remittance == "Rechnung 411" and line.end_to_end_id is None


def test_a_returned_transfer_booked_as_gvc_159_is_a_return() -> None:
    row = (
        ":61:2601050105C12,50NTRFNONREF//R1\n"
        ":86:159?00RETOURE?20EREF+wdr_7?21SVWZ+RTRN+AC04 konto erloschen\n"
    )
    line = line_of(statement(row))
    assert (line.direction, line.return_code, line.end_to_end_id) == (
        Direction.CREDIT,
        "AC04",
        "wdr_7",
    )
    assert line.return_reason is not None and "RETOURE" in line.return_reason


def test_the_dutch_slash_style_is_read() -> None:
    row = (
        ":61:2601050105D25,00N102EREF\nNL70ABNA0987654321\n"
        ":86:/TRTP/SEPA OVERBOEKING/IBAN/NL70ABNA0987654321/BIC/ABNANL2A/NAME/ACME/REMI/USTD//I\n"
        "NVOICE 42/EREF/wdr_01JSLASH/MARF/MANDATE-1/PREF/pmt_01JBATCH/IREF/INSTR-9/\n"
    )
    line = line_of(statement(row))
    assert line.end_to_end_id == "wdr_01JSLASH"
    assert line.remittance == "INVOICE 42"  # wrapped inside a word, joined without a space
    assert line.references == ("MANDATE-1", "INSTR-9")
    assert line.payment_information_id == "pmt_01JBATCH"
    assert line.entry_reference is None


def test_a_slash_style_return_has_its_reason_code() -> None:
    row = ":61:2601050105RD25,00N101EREF\n:86:/RTRN/MS03/EREF/wdr_9/REMI/NOTPROVIDED/\n"
    line = line_of(statement(row))
    assert (line.return_code, line.end_to_end_id, line.remittance) == ("MS03", "wdr_9", None)


def test_a_statements_own_86_is_not_its_last_lines() -> None:
    text = statement(":61:2601050105C10,00NTRFNONREF\n:86:mine\n") + ":86:summary of the day\n"
    (read,) = read_mt940(text.encode())
    assert read.lines[0].remittance == "mine"


ENVELOPED = (
    "{1:F01ABNANL2AXXXX0000000000}{2:O940ABNANL2AXXXXN}{3:}{4:\r\n"
    ":20:FIRST\r\n:25: nl91 abna 0417 1643 00\r\n:28C:00001/001\r\n"
    ":60F:C260101EUR100,00\r\n:61:2601020102D25,00NTRFNONREF//B1\r\n:86:one\r\n"
    ":62F:C260102EUR75,00\r\n:64:C260102EUR75,00\r\n-}{5:}\r\n"
    "\r\n"
    "ABNANL2A\r\n940\r\nABNANL2A\r\n"
    ":20:SECOND\r\n:25:12345678/0012345678\r\n:28C:5/1\r\n"
    ":60M:C260102EUR75,00\r\n:61:2601030103C5,00NTRFNONREF\r\n:86:two\r\n"
    ":62M:D260103EUR1,00\r\n-\r\n"
    ":20:THIRD\r\n:25:DE89370400440532013000\r\n"
    ":60F:D260103EUR1,00\r\n:62F:D260103EUR1,00\r\n"
)


def test_every_statement_of_a_file_is_read_in_order() -> None:
    first, second, third = read_mt940(ENVELOPED.encode())
    assert [s.statement_id for s in (first, second, third)] == ["FIRST", "SECOND", "THIRD"]
    assert first.account == "NL91ABNA0417164300"
    assert second.account == "12345678/0012345678"
    assert first.opening_balance == Balance(Decimal("100.00"), "EUR", date(2026, 1, 1))
    assert first.closing_balance == Balance(Decimal("75.00"), "EUR", date(2026, 1, 2))
    assert second.opening_balance == Balance(Decimal("75.00"), "EUR", date(2026, 1, 2))
    assert second.closing_balance == Balance(Decimal("-1.00"), "EUR", date(2026, 1, 3))
    assert third.lines == () and (third.period_start, third.period_end) == (
        date(2026, 1, 3),
        date(2026, 1, 3),
    )
    assert second.lines[0].location == "statement 2, line 19"
    assert (first.lines[0].remittance, second.lines[0].remittance) == ("one", "two")
    assert {s.format for s in (first, second, third)} == {"mt940"}


@pytest.mark.parametrize("number", ["5/1", "00001/001", "1", "0", None])
def test_statement_number_variants_are_read(number: str | None) -> None:
    head = ":20:S1\n:25:NL91ABNA0417164300\n" + (f":28C:{number}\n" if number else "")
    (read,) = read_mt940(statement(":61:2601050105C1,00NTRFNONREF\n", head=head).encode())
    assert len(read.lines) == 1


@pytest.mark.parametrize(
    ("mark", "funds", "direction", "returned"),
    [
        ("C", "", Direction.CREDIT, False),
        ("D", "", Direction.DEBIT, False),
        ("RC", "", Direction.DEBIT, False),
        ("RD", "", Direction.CREDIT, True),
        ("C", "R", Direction.CREDIT, False),
        ("RD", "R", Direction.CREDIT, True),
    ],
)
def test_marks_and_funds_codes(mark: str, funds: str, direction: Direction, returned: bool) -> None:
    line = line_of(statement(f":61:2601050105{mark}{funds}3,10NTRFNONREF//B\n:86:x\n"))
    assert line.direction is direction and line.amount == Decimal("3.10")
    assert (line.return_code == "RETURNED") is returned


def test_a_reversal_of_a_debit_takes_its_reason_from_rtrn() -> None:
    line = line_of(statement(":61:2601050105RD1,00NTRFNONREF//B\n:86:EREF+wdr_2 RTRN+AC04\n"))
    assert (line.return_code, line.end_to_end_id) == ("AC04", "wdr_2")


def test_the_entry_date_is_the_booking_date_across_the_year() -> None:
    line = line_of(statement(":61:2512310101C1,00NTRFNONREF\n"))
    assert line.booking_date == date(2026, 1, 1)
    assert line_of(statement(":61:260105C1,00NTRFNONREF\n")).booking_date == date(2026, 1, 5)


@pytest.mark.parametrize(
    "amount",
    [
        "1E+2",
        "12.50",
        "12,5,0",
        "\u0661\u0662,\u0665\u0660",  # Arabic-Indic digits
        " 12,50",
        "1234567890123456,00",  # over SWIFT's 15 characters
        "1250",  # no decimal comma
        ",50",
    ],
)
def test_an_amount_outside_mt940s_format_is_refused(amount: str) -> None:
    text = statement(":61:2601050105C1,00NTRFNONREF\n", f":61:2601050105C{amount}NTRFNONREF\n")
    with pytest.raises(StatementRejected, match="amount is not in MT940's format") as refused:
        read_mt940(text.encode())
    assert refused.value.location == "statement 1, line 6"


def test_the_longest_amount_swift_allows_is_read() -> None:
    assert line_of(statement(":61:2601050105C12345678901234,NTRFNONREF\n")).amount == Decimal(
        "12345678901234"
    )


def test_a_zero_amount_is_refused() -> None:
    with pytest.raises(StatementRejected, match="more than zero"):
        read_mt940(statement(":61:2601050105C0,00NTRFNONREF\n").encode())


@pytest.mark.parametrize(
    "balance", [":60F:C260101EUR1E+2", ":60F:C260101EUR1.000,00", ":60F:X260101EUR1,00"]
)
def test_a_balance_outside_mt940s_format_is_refused(balance: str) -> None:
    text = ":20:S1\n:25:NL91ABNA0417164300\n" + balance + "\n"
    with pytest.raises(StatementRejected, match="the balance :60F:") as refused:
        read_mt940(text.encode())
    assert refused.value.location == "statement 1, line 3"


@pytest.mark.parametrize(
    ("text", "reason", "location"),
    [
        ("hello", "no :20: field", ""),
        (":25:NL91ABNA0417164300\n:20:S1\n", "comes before the first :20:", "line 1"),
        (":20:S1\n:60F:C260101EUR1,00\n", "field :25:", "statement 1"),
        (":20:S1\n:25:NL91ABNA0417164300\n", "no opening or closing balance", "statement 1"),
        (
            ":20:S1\n:25:X\n:60F:C260101EUR1,00\n:62F:C260101USD1,00\n",
            "the opening balance is in EUR, the closing one in USD",
            "statement 1",
        ),
        (
            ":20:S1\n:25:X\n:60F:C260101EUR1,00\n:60F:C260101EUR1,00\n",
            "a second opening",
            "statement 1, line 4",
        ),
        (
            ":20:S1\n:25:X\n:60F:C260101EUR1,00\n:61:garbage\n",
            "does not parse",
            "statement 1, line 4",
        ),
        (
            ":20:S1\n:25:X\n:60F:C260101EUR1,00\n:61:2613450105C1,00NTRFNONREF\n",
            "no valid date",
            "statement 1, line 4",
        ),
        (":20:S1\n:25:X\n:60F:C261301EUR1,00\n", "no valid date", "statement 1, line 3"),
    ],
)
def test_an_unreadable_statement_is_refused_with_its_place(
    text: str, reason: str, location: str
) -> None:
    with pytest.raises(StatementRejected, match=reason) as refused:
        read_mt940(text.encode())
    assert refused.value.location == location


def test_latin_1_is_read_when_the_file_is_not_utf_8() -> None:
    text = statement(":61:2601050105C1,00NTRFNONREF\n:86:M\xfcller \xc4pfel\n")
    assert line_of(text.replace("\n", "\r\n")).remittance == "Müller Äpfel"
    assert read_mt940(text.encode("latin-1"))[0].lines[0].remittance == "Müller Äpfel"


def test_control_and_bidi_characters_are_dropped_from_text() -> None:
    line = line_of(statement(":61:2601050105C1,00NTRFNONREF\n:86:Pay\x94roll\u202egpj.exe\n"))
    assert line.remittance == "Payrollgpj.exe"
