"""The camt reader's rules, one at a time, on documents written the way banks write them."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

pytest.importorskip("defusedxml", reason="the bank-files extra is not installed")

from treasury_bankfiles.camt import read_camt
from treasury_bankfiles.rail import Debtor, FilesBankRail
from treasury_core.ports import Direction, StatementRejected

RAIL = FilesBankRail(Debtor("Acme Treasury BV", "NL91ABNA0417164300"))

PERIOD = "<FrToDt><FrDtTm>2026-01-01T00:00:00</FrDtTm><ToDtTm>2026-01-31T23:59:59</ToDtTm></FrToDt>"


def document(*statements: str, message: str = "053", version: str = "02") -> bytes:
    root, tag = (
        ("BkToCstmrStmt", "Stmt") if message == "053" else ("BkToCstmrDbtCdtNtfctn", "Ntfctn")
    )
    body = "".join(f"<{tag}>{statement}</{tag}>" for statement in statements)
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>'
        f'<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.{message}.001.{version}">'
        f"<{root}><GrpHdr><MsgId>M1</MsgId><CreDtTm>2026-02-01T06:00:00+01:00</CreDtTm></GrpHdr>"
        f"{body}</{root}></Document>"
    ).encode()


def statement(*entries: str, head: str = PERIOD, balances: str = "", ident: str = "S1") -> str:
    return (
        f"<Id>{ident}</Id><CreDtTm>2026-01-31T23:00:00</CreDtTm>{head}"
        "<Acct><Id><IBAN>nl91 abna 0417 1643 00</IBAN></Id></Acct>"
        f"{balances}{''.join(entries)}"
    )


def entry(
    amount: str = "10.00",
    *,
    indicator: str = "CRDT",
    status: str = "<Sts>BOOK</Sts>",
    booked: str = "<Dt>2026-01-03</Dt>",
    ref: str = "<AcctSvcrRef>BANK-1</AcctSvcrRef>",
    details: str = "",
    currency: str = "EUR",
    extra: str = "",
) -> str:
    return (
        f'<Ntry><NtryRef>7</NtryRef><Amt Ccy="{currency}">{amount}</Amt>'
        f"<CdtDbtInd>{indicator}</CdtDbtInd>{extra}{status}<BookgDt>{booked}</BookgDt>"
        f"<ValDt><Dt>2026-01-03</Dt></ValDt>{ref}{details}</Ntry>"
    )


def tx(amount: str | None = None, *, refs: str = "", rest: str = "", currency: str = "EUR") -> str:
    stated = f'<Amt Ccy="{currency}">{amount}</Amt>' if amount is not None else ""
    return f"<TxDtls><Refs>{refs}</Refs>{stated}{rest}</TxDtls>"


def balance(
    code: str, amount: str, indicator: str = "CRDT", day: str = "<Dt>2026-01-01</Dt>"
) -> str:
    return (
        f"<Bal><Tp><CdOrPrtry><Cd>{code}</Cd></CdOrPrtry></Tp>"
        f'<Amt Ccy="EUR">{amount}</Amt><CdtDbtInd>{indicator}</CdtDbtInd><Dt>{day}</Dt></Bal>'
    )


def refused(data: bytes) -> StatementRejected:
    with pytest.raises(StatementRejected) as caught:
        RAIL.read_statements(data)
    return caught.value


# --- amounts ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "written",
    [
        "1E+2",
        "1e2",
        "\u0661\u0660\u0660",  # Arabic-Indic digits
        "\u00a0100",  # a no-break space is not XML white space
        "100\u2009",
        "+5",
        "-5",
        "5.",
        ".5",
        "1,5",
        "1 000.00",
        "NaN",
        "Infinity",
        "",
        "1234567890123456789",  # 19 digits
        "1234567890123.123456",  # 6 decimals
        "1.123456",
    ],
)
def test_an_amount_outside_the_schemas_decimal_form_is_refused(written: str) -> None:
    error = refused(document(statement(entry(written))))
    assert error.location == "statement 1, entry 1"
    assert "Amt" in error.reason


@pytest.mark.parametrize(
    ("written", "read"),
    [
        (" 100\n", "100"),
        ("\t0.12345 ", "0.12345"),
        ("1234567890123.12345", "1234567890123.12345"),
    ],
)
def test_an_amount_in_the_schemas_form_is_read_as_written(written: str, read: str) -> None:
    (line,) = RAIL.read_statements(document(statement(entry(written))))[0].lines
    assert line.amount == Decimal(read) and str(line.amount) == read


@pytest.mark.parametrize("currency", ["EU", "EURO", "E1R", "\u20acUR", ""])
def test_a_currency_that_is_not_three_letters_is_refused(currency: str) -> None:
    error = refused(document(statement(entry(currency=currency))))
    assert (error.location, "Ccy" in error.reason) == ("statement 1, entry 1", True)


def test_a_zero_entry_is_refused_but_a_zero_balance_is_read() -> None:
    assert "more than zero" in refused(document(statement(entry("0.00")))).reason
    (read,) = RAIL.read_statements(document(statement(balances=balance("OPBD", "0.00"))))
    assert read.opening_balance is not None and read.opening_balance.amount == 0


def test_a_transactions_and_a_balances_amounts_are_as_strict() -> None:
    batch = entry("3", details=f"<NtryDtls>{tx('1')}{tx('2e0')}</NtryDtls>")
    error = refused(document(statement(batch)))
    assert error.location == "statement 1, entry 1, transaction 2"
    single = entry("3", details=f"<NtryDtls>{tx('٣')}</NtryDtls>")
    assert refused(document(statement(single))).location == "statement 1, entry 1, transaction 1"
    error = refused(document(statement(balances=balance("OPBD", "1E3"))))
    assert error.location == "statement 1, balance 1"


# --- batches ------------------------------------------------------------------------------------


def test_a_batch_whose_transactions_add_up_is_one_line_per_transaction() -> None:
    details = (
        "<NtryDtls><Btch><MsgId>bex_1</MsgId><PmtInfId>bex_1-1</PmtInfId></Btch>"
        + tx("60.00", refs="<AcctSvcrRef>TX-1</AcctSvcrRef><EndToEndId>wdr_1</EndToEndId>")
        + "</NtryDtls><NtryDtls>"
        + tx(
            None,
            refs="<MsgId>other</MsgId><EndToEndId>wdr_2</EndToEndId>",
            rest='<AmtDtls><TxAmt><Amt Ccy="EUR">45.00</Amt></TxAmt></AmtDtls>'
            "<RtrInf><Rsn><Cd>AC04</Cd></Rsn><AddtlInf>Account</AddtlInf>"
            "<AddtlInf>closed</AddtlInf></RtrInf>",
        )
        + tx(
            "5.00", refs="<EndToEndId>notprovided</EndToEndId>", rest="<CdtDbtInd>CRDT</CdtDbtInd>"
        )
        + "</NtryDtls>"
    )
    data = document(statement(entry(), entry("100.00", indicator="DBIT", details=details)))
    lines = RAIL.read_statements(data)[0].lines
    assert [line.position for line in lines] == [1, 2, 3, 4]
    first, second, third = lines[1:]
    assert [line.transaction for line in lines] == [None, 1, 2, 3]
    assert first.location == "statement 1, entry 2, transaction 1"
    assert [(line.amount, line.direction) for line in (first, second, third)] == [
        (Decimal("60.00"), Direction.DEBIT),
        (Decimal("45.00"), Direction.DEBIT),
        (Decimal("5.00"), Direction.CREDIT),
    ]
    assert [line.entry_reference for line in (first, second, third)] == ["TX-1", "BANK-1", "BANK-1"]
    assert [line.end_to_end_id for line in (first, second, third)] == ["wdr_1", "wdr_2", None]
    assert (first.message_id, first.payment_information_id) == ("bex_1", "bex_1-1")
    assert (second.message_id, second.payment_information_id) == ("other", None)
    assert (second.return_code, second.return_reason) == ("AC04", "Account closed")
    assert first.return_code is None and all(line.entry_number == "7" for line in lines)


@pytest.mark.parametrize(
    "transactions",
    [
        [tx("60.00"), tx("30.00")],  # adds up to 90, not 100
        [tx("60.00"), tx()],  # one amount not stated
        [tx("60.00"), tx("40.00", currency="CHF")],  # another currency
        [tx("100.00"), tx("0")],  # a zero part
    ],
)
def test_a_batch_that_does_not_add_up_is_one_line_quoting_the_batch(
    transactions: list[str],
) -> None:
    details = (
        "<NtryDtls><Btch><MsgId>bex_1</MsgId><PmtInfId>bex_1-1</PmtInfId></Btch>"
        + "".join(transactions)
        + "</NtryDtls>"
    )
    (line,) = RAIL.read_statements(document(statement(entry("100.00", details=details))))[0].lines
    assert (line.amount, line.transaction, line.end_to_end_id) == (Decimal("100.00"), None, None)
    assert (line.message_id, line.payment_information_id) == ("bex_1", "bex_1-1")
    assert (line.location, line.entry_reference) == ("statement 1, entry 1", "BANK-1")


def test_an_unsplit_batch_quotes_the_file_every_transaction_quotes() -> None:
    same = "<MsgId>bex_9</MsgId><PmtInfId>bex_9-1</PmtInfId>"
    details = f"<NtryDtls>{tx(refs=same + '<InstrId>i1</InstrId>')}{tx(refs=same)}</NtryDtls>"
    (line,) = RAIL.read_statements(document(statement(entry(details=details))))[0].lines
    assert (line.message_id, line.payment_information_id) == ("bex_9", "bex_9-1")
    assert line.references == ("i1",)
    mixed = f"<NtryDtls>{tx(refs=same)}{tx(refs='<MsgId>bex_8</MsgId>')}</NtryDtls>"
    (line,) = RAIL.read_statements(document(statement(entry(details=mixed))))[0].lines
    assert (line.message_id, line.payment_information_id) == (None, None)


def test_a_single_transaction_is_the_entrys_line_with_its_references() -> None:
    refs = (
        "<MsgId>bex_1</MsgId><AcctSvcrRef>TX-9</AcctSvcrRef><PmtInfId>p1</PmtInfId>"
        "<InstrId>i1</InstrId><EndToEndId>NOTPROVIDED</EndToEndId><TxId>t1</TxId>"
        "<MndtId>m1</MndtId><ChqNb>i1</ChqNb><ClrSysRef>NONREF</ClrSysRef>"
    )
    rest = (
        "<RltdPties><CdtrAcct><Id><IBAN>DE02120300000000202051</IBAN></Id></CdtrAcct></RltdPties>"
        "<RmtInf><Ustrd>invoice</Ustrd><Ustrd>42</Ustrd>"
        "<Strd><CdtrRefInf><Ref>RF18539007547034</Ref></CdtrRefInf></Strd></RmtInf>"
    )
    details = f"<NtryDtls>{tx('3.00', refs=refs, rest=rest)}</NtryDtls>"
    (line,) = RAIL.read_statements(document(statement(entry(details=details))))[0].lines
    assert (line.amount, line.transaction) == (Decimal("10.00"), None)  # the entry's amount
    assert line.entry_reference == "BANK-1" and line.end_to_end_id is None
    assert (line.message_id, line.payment_information_id) == ("bex_1", "p1")
    assert line.references == ("i1", "t1", "m1", "RF18539007547034")
    assert (line.remittance, line.creditor_account) == ("invoice 42", "DE02120300000000202051")
    without = entry(ref="", details=details)
    (line,) = RAIL.read_statements(document(statement(without)))[0].lines
    assert line.entry_reference == "TX-9"


def test_a_reversal_is_a_return_even_without_a_reason() -> None:
    reversed_ = entry(extra="<RvslInd>true</RvslInd>")
    (line,) = RAIL.read_statements(document(statement(reversed_)))[0].lines
    assert (line.return_code, line.return_reason) == ("RETURNED", None)
    proprietary = f"<NtryDtls>{tx(rest='<RtrInf><Rsn><Prtry>X1</Prtry></Rsn></RtrInf>')}</NtryDtls>"
    (line,) = RAIL.read_statements(document(statement(entry(details=proprietary))))[0].lines
    assert line.return_code == "X1"


# --- statements ---------------------------------------------------------------------------------


def test_several_statements_are_read_in_file_order() -> None:
    data = document(
        statement(entry(), entry("2.00", ref=""), ident="S1"),
        statement(entry("3.00", ref="<AcctSvcrRef>NONREF</AcctSvcrRef>"), ident="S2"),
    )
    first, second = RAIL.read_statements(data)
    assert (first.statement_id, second.statement_id) == ("S1", "S2")
    assert [line.entry_reference for line in first.lines] == ["BANK-1", None]
    assert [(line.location, line.position) for line in second.lines] == [
        ("statement 2, entry 1", 1)
    ]
    assert second.lines[0].entry_reference is None
    error = refused(document(statement(entry()), statement(entry("x"))))
    assert error.location == "statement 2, entry 1"


def test_a_file_without_statements_is_refused() -> None:
    assert "holds no statement (Stmt)" in refused(document()).reason
    assert "holds no statement (Ntfctn)" in refused(document(message="054")).reason


def test_balances_are_signed_and_the_booked_ones_open_and_close() -> None:
    balances = (
        balance("PRCD", "9.00", day="<Dt>2025-12-31</Dt>")
        + balance("OPBD", "10.00", "DBIT")
        + balance("CLAV", "99.00")
        + balance("CLBD", "5.50", day="<DtTm>2026-01-31T23:59:59+01:00</DtTm>")
    )
    (read,) = RAIL.read_statements(document(statement(entry(), balances=balances)))
    assert read.opening_balance is not None and read.closing_balance is not None
    assert (read.opening_balance.amount, read.opening_balance.date) == (
        Decimal("-10.00"),
        date(2026, 1, 1),
    )
    assert (read.closing_balance.amount, read.closing_balance.date) == (
        Decimal("5.50"),
        date(2026, 1, 31),
    )
    assert read.currency == "EUR"  # no Acct/Ccy: the balances'
    (previous,) = RAIL.read_statements(document(statement(balances=balance("PRCD", "1"))))
    assert previous.opening_balance is not None and previous.closing_balance is None


@pytest.mark.parametrize(
    ("head", "balances", "period"),
    [
        (PERIOD, "", (date(2026, 1, 1), date(2026, 1, 31))),
        (
            "",
            balance("OPBD", "1") + balance("CLBD", "1", day="<Dt>2026-01-02</Dt>"),
            (date(2026, 1, 1), date(2026, 1, 2)),
        ),
        ("", "", (date(2026, 1, 31), date(2026, 1, 31))),  # the statement's CreDtTm
    ],
)
def test_an_empty_statement_is_read_with_the_period_it_can_tell(
    head: str, balances: str, period: tuple[date, date]
) -> None:
    (read,) = RAIL.read_statements(document(statement(head=head, balances=balances)))
    assert (read.lines, (read.period_start, read.period_end)) == ((), period)
    assert read.account == "NL91ABNA0417164300"


def test_without_the_statements_own_creation_time_the_group_headers_is_taken() -> None:
    body = "<Id>N1</Id><Acct><Id><Othr><Id> 12 34-5 </Id></Othr></Id><Ccy>chf</Ccy></Acct>"
    (read,) = read_camt(document(body, message="054"))
    assert read.created_at == datetime(2026, 2, 1, 6, tzinfo=timezone(timedelta(hours=1)))
    assert (read.period_start, read.period_end) == (date(2026, 2, 1), date(2026, 2, 1))
    assert (read.format, read.account, read.currency) == ("camt.054", "1234-5", "CHF")
    assert read.opening_balance is None and read.closing_balance is None


def test_a_statement_without_a_period_or_anything_dated_is_refused() -> None:
    data = document("<Id>S</Id><Acct><Id><IBAN>X</IBAN></Id></Acct>").replace(
        b"<CreDtTm>2026-02-01T06:00:00+01:00</CreDtTm>", b""
    )
    assert refused(data).location == "statement 1"


def test_a_camt054_notification_is_read() -> None:
    details = f"<NtryDtls>{tx('4.00')}{tx('6.00')}</NtryDtls>"
    (read,) = RAIL.read_statements(document(statement(entry(details=details)), message="054"))
    assert read.format == "camt.054"
    assert [line.transaction for line in read.lines] == [1, 2]


# --- dates and statuses ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "booked",
    [
        "<Dt>2026-01-03</Dt>",
        "<DtTm>2026-01-03T23:30:00</DtTm>",
        "<DtTm>2026-01-03T23:30:00-05:00</DtTm>",
        "<DtTm>2026-01-03T00:15:00.123456789+02:00</DtTm>",
        "<DtTm>2026-01-03T23:59:59Z</DtTm>",
    ],
)
def test_a_booking_date_is_the_calendar_date_as_written(booked: str) -> None:
    head = (
        "<FrToDt><FrDtTm>2026-01-01T00:00:00+01:00</FrDtTm>"
        "<ToDtTm>2026-01-31T23:59:59Z</ToDtTm></FrToDt>"
    )
    (read,) = RAIL.read_statements(document(statement(entry(booked=booked), head=head)))
    assert read.lines[0].booking_date == date(2026, 1, 3)
    assert (read.period_start, read.period_end) == (date(2026, 1, 1), date(2026, 1, 31))


@pytest.mark.parametrize(
    "booked", ["<Dt>2026-02-30</Dt>", "<Dt>03.01.2026</Dt>", "<Dt>٢٠٢٦-01-03</Dt>", "<Dt/>"]
)
def test_a_booking_date_that_is_not_a_date_is_refused(booked: str) -> None:
    error = refused(document(statement(entry(booked=booked))))
    assert (error.location, "BookgDt" in error.reason) == ("statement 1, entry 1", True)


def test_a_creation_time_is_read_aware_or_naive_as_written() -> None:
    (read,) = read_camt(document(statement()))
    assert read.created_at == datetime(2026, 1, 31, 23)
    zulu = document(statement()).replace(b"2026-01-31T23:00:00", b"2026-01-31T23:00:00.5Z")
    assert read_camt(zulu)[0].created_at == datetime(2026, 1, 31, 23, 0, 0, 500000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("status", "booked"),
    [
        ("<Sts>BOOK</Sts>", True),
        ("<Sts><Cd>BOOK</Cd></Sts>", True),
        ("<Sts><Prtry>book</Prtry></Sts>", True),
        ("<Sts>PDNG</Sts>", False),
        ("<Sts><Cd>INFO</Cd></Sts>", False),
        ("<Sts><Cd>FUTR</Cd></Sts>", False),
    ],
)
def test_only_booked_entries_become_lines(status: str, booked: bool) -> None:
    data = document(statement(entry(status=status), entry("2.00")), version="08")
    lines = RAIL.read_statements(data)[0].lines
    assert [line.location for line in lines] == (
        ["statement 1, entry 1", "statement 1, entry 2"] if booked else ["statement 1, entry 2"]
    )
    assert [line.position for line in lines] == ([1, 2] if booked else [1])


def test_an_entry_without_a_status_is_refused() -> None:
    assert "Sts" in refused(document(statement(entry(status="")))).reason


# --- documents ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["02", "04", "08", "10", "13"])
def test_every_version_from_02_to_13_is_read(version: str) -> None:
    for message in ("053", "054"):
        (read,) = read_camt(document(statement(entry()), message=message, version=version))
        assert len(read.lines) == 1


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (
            b'<Document xmlns="urn:iso:std:iso:20022:tech:xsd:pain.001.001.03">'
            b"<CstmrCdtTrfInitn><GrpHdr/></CstmrCdtTrfInitn></Document>",
            "Document/CstmrCdtTrfInitn found",
        ),
        (b"<html><body>hello</body></html>", "html found"),
        (
            b'<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.052.001.08">'
            b"<BkToCstmrAcctRpt/></Document>",
            "BkToCstmrAcctRpt found",
        ),
        (document(statement(), version="14"), "camt.053.001.14 is not read"),
        (document(statement(), version="01"), "camt.053.001.01 is not read"),
        (b":20:STMT\n:25:NL91ABNA0417164300\n", "not well-formed"),
    ],
)
def test_what_is_not_a_camt_statement_is_refused_with_why(data: bytes, why: str) -> None:
    with pytest.raises(StatementRejected) as caught:
        read_camt(data)
    assert why in str(caught.value)


def test_a_namespace_mismatch_with_the_message_is_refused() -> None:
    data = document(statement()).replace(b"camt.053.001.02", b"camt.054.001.02")
    assert "camt.054.001.02 is not read" in str(refused(data))


def test_a_byte_order_mark_and_an_envelope_are_read() -> None:
    data = b"\xef\xbb\xbf" + document(statement(entry()))
    assert len(RAIL.read_statements(data)[0].lines) == 1
    inner = document(statement(entry())).split(b"?>", 1)[1]
    wrapped = b"<BizMsgEnvlp><AppHdr><MsgDefIdr>camt.053.001.02</MsgDefIdr></AppHdr>" + inner
    assert len(read_camt(wrapped + b"</BizMsgEnvlp>")[0].lines) == 1
