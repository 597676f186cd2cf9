"""The sandbox bank rail: formats, checksums, deposit instructions, virtual accounts, delays."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schwifty import BIC, IBAN
from schwifty.exceptions import SchwiftyException

from tests.conftest import examples
from treasury_core.config import TreasuryConfig
from treasury_core.errors import UnknownCurrency, ValidationFailed
from treasury_core.ports import (
    BankAccountDetails,
    BankRail,
    PaymentInstruction,
    Settlement,
    VirtualAccountDetails,
)
from treasury_core.testing.fakes.clock import FakeClock
from treasury_sandbox.bank_data import (
    BANK_NAMES,
    COLLECTION_ACCOUNTS,
    FORMATS,
    VIRTUAL_ACCOUNT_PROGRAMS,
    Check,
)
from treasury_sandbox.bank_rail import SandboxBankRail, aba_checksum_ok

SANDBOX_CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "SGD", "KWD")
VBAN_CURRENCIES = ("USD", "EUR", "GBP")

rail = SandboxBankRail()


def details(
    currency: str,
    account_number: str,
    routing_number: str,
    *,
    bank_name: str = "Example Bank",
    account_name: str = "Jane Doe",
) -> BankAccountDetails:
    return BankAccountDetails(
        bank_name=bank_name,
        account_name=account_name,
        account_number=account_number,
        routing_number=routing_number,
        currency=currency,
    )


def example(currency: str, field: str) -> str:
    fmt = next(f for f in rail.account_formats() if f.currency == currency)
    return next(f.example for f in fmt.fields if f.name == field)


def valid(currency: str, **fields: str) -> BankAccountDetails:
    """The currency's example account with ``fields`` replaced."""
    values = {
        "account_number": example(currency, "account_number"),
        "routing_number": example(currency, "routing_number"),
        **fields,
    }
    return details(currency, **values)


def refused(account: BankAccountDetails, param: str) -> ValidationFailed:
    with pytest.raises(ValidationFailed) as caught:
        rail.validate_bank_account(account)
    assert caught.value.param == param, caught.value.message
    return caught.value


def schwifty_iban_ok(value: str) -> IBAN:
    """The IBAN as schwifty sees it, national check digits included where it knows them."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NationalChecksumNotVerified must not be needed
        iban = IBAN(value)
        iban.validate(validate_bban=True)
    assert str(iban) == value
    return iban


# --- The port -----------------------------------------------------------------------------------


def test_implements_the_bank_rail_protocol() -> None:
    typed: BankRail = SandboxBankRail()
    assert isinstance(typed, BankRail)


def test_plugin_registers_the_rail_under_sandbox() -> None:
    from treasury_core.plugins import collect_factories, make_plugin_manager
    from treasury_sandbox import plugin

    factory = plugin.register_bank_rail()["sandbox"]
    built = factory(TreasuryConfig(database_url="memory://"), FakeClock())
    assert isinstance(built, SandboxBankRail)
    assert built.settlement_delay(Settlement.DEPOSIT) == timedelta(hours=24)
    assert "sandbox" in collect_factories(make_plugin_manager(), "bank_rail")


def test_package_exports_the_rail_lazily() -> None:
    import treasury_sandbox

    assert treasury_sandbox.__all__ == sorted(treasury_sandbox.__all__)
    assert treasury_sandbox.SandboxBankRail is SandboxBankRail
    with pytest.raises(AttributeError):
        _ = treasury_sandbox.NoSuchThing  # type: ignore[attr-defined]
    script = (
        "import sys, treasury_sandbox, treasury_sandbox.plugin, treasury_sandbox.bank_data;"
        "print(any(m.split('.')[0] == 'schwifty' for m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


# --- Formats ------------------------------------------------------------------------------------


def test_formats_cover_the_sandbox_currencies() -> None:
    formats = rail.account_formats()
    assert {f.currency for f in formats} >= set(SANDBOX_CURRENCIES)
    assert [f.currency for f in formats] == sorted(f.currency for f in formats)
    for fmt in formats:
        assert fmt.name
        assert [f.name for f in fmt.fields] == [
            "bank_name",
            "account_name",
            "account_number",
            "routing_number",
        ]
        for field in fmt.fields:
            assert field.description and field.example, (fmt.currency, field.name)


def test_the_tables_agree_on_their_currencies() -> None:
    assert set(BANK_NAMES) == set(FORMATS) == set(COLLECTION_ACCOUNTS)
    assert set(VIRTUAL_ACCOUNT_PROGRAMS) == set(VBAN_CURRENCIES)


@pytest.mark.parametrize("currency", SANDBOX_CURRENCIES)
def test_every_example_validates(currency: str) -> None:
    fmt = next(f for f in rail.account_formats() if f.currency == currency)
    by_name = {f.name: f for f in fmt.fields}
    for field in fmt.fields:
        assert re.fullmatch(field.pattern, field.example), (currency, field.name)
    account = BankAccountDetails(
        bank_name=by_name["bank_name"].example,
        account_name=by_name["account_name"].example,
        account_number=by_name["account_number"].example,
        routing_number=by_name["routing_number"].example,
        currency=currency,
    )
    normalized = rail.validate_bank_account(account)
    assert normalized.currency == currency
    assert rail.validate_bank_account(normalized) == normalized  # normalizing is idempotent


def test_patterns_are_portable_to_javascript() -> None:
    for fmt in rail.account_formats():
        for field in fmt.fields:
            assert field.pattern.startswith("^") and field.pattern.endswith("$")
            assert "\\d" not in field.pattern  # \d matches non-ASCII digits in Python
            assert "(?" not in field.pattern  # no inline flags or named groups
            re.compile(field.pattern)


def test_lower_case_currency_is_accepted_and_normalized() -> None:
    account = details("usd", "000123456789", "021000021")
    assert rail.validate_bank_account(account).currency == "USD"


@pytest.mark.parametrize("currency", ["SEK", "XYZ", "", "US"])
def test_currency_without_a_format_is_unknown(currency: str) -> None:
    with pytest.raises(UnknownCurrency) as caught:
        rail.validate_bank_account(details(currency, "12345678", "021000021"))
    assert caught.value.param == "currency_id"


# --- USD: ABA routing numbers -------------------------------------------------------------------

VALID_ABA = ["021000021", "011000015", "026009593", "121000248", "026073150", "111000025"]


@pytest.mark.parametrize("routing", VALID_ABA)
def test_aba_checksum_accepts_real_routing_numbers(routing: str) -> None:
    assert aba_checksum_ok(routing)
    assert rail.validate_bank_account(valid("USD", routing_number=routing)).routing_number == (
        routing
    )


@pytest.mark.parametrize(
    "routing", ["021000022", "011000016", "123456789", "026009539", "000000001"]
)
def test_aba_checksum_refuses_bad_check_digits(routing: str) -> None:
    assert not aba_checksum_ok(routing)
    error = refused(valid("USD", routing_number=routing), "routing_number")
    assert error.message == "routing_number fails the ABA checksum"


def test_aba_checksum_catches_every_single_digit_error() -> None:
    for routing in VALID_ABA:
        for position in range(9):
            for digit in "0123456789":
                if digit == routing[position]:
                    continue
                mutated = routing[:position] + digit + routing[position + 1 :]
                assert not aba_checksum_ok(mutated), mutated


@pytest.mark.parametrize(
    "value", ["", "02100002", "0210000211", "02100002a", "٠٢١٠٠٠٠٢١", "021 000 02-1"]
)
def test_aba_checksum_refuses_what_is_not_nine_ascii_digits(value: str) -> None:
    assert not aba_checksum_ok(value)


@pytest.mark.parametrize("routing", ["990000000", "02100002", "0210000210", "ABCDEFGHI"])
def test_usd_routing_number_must_look_like_one(routing: str) -> None:
    # 990000000 passes the checksum but 99 is no Federal Reserve prefix.
    error = refused(valid("USD", routing_number=routing), "routing_number")
    assert "ABA routing number" in error.message


def test_usd_routing_number_ignores_spaces() -> None:
    account = rail.validate_bank_account(valid("USD", routing_number=" 0210 0002 1 "))
    assert account.routing_number == "021000021"


@pytest.mark.parametrize("number", ["1234", "12345678901234567", " 0001 2345 6789 "])
def test_usd_account_numbers_of_4_to_17_digits(number: str) -> None:
    normalized = rail.validate_bank_account(valid("USD", account_number=number))
    assert normalized.account_number == number.replace(" ", "")


@pytest.mark.parametrize("number", ["123", "123456789012345678", "12a4", "1234-5678", "-1234"])
def test_usd_account_numbers_refused(number: str) -> None:
    refused(valid("USD", account_number=number), "account_number")


# --- GBP: sort codes ----------------------------------------------------------------------------


@pytest.mark.parametrize("sort_code", ["12-34-56", "123456", "12 34 56", " 12-34-56 "])
def test_gbp_sort_code_shapes_normalize_to_six_digits(sort_code: str) -> None:
    normalized = rail.validate_bank_account(valid("GBP", routing_number=sort_code))
    assert normalized.routing_number == "123456"


@pytest.mark.parametrize(
    "sort_code", ["12345", "1234567", "12-34-5", "ab-cd-ef", "12--34-56", "12.34.56", "-123456"]
)
def test_gbp_bad_sort_codes(sort_code: str) -> None:
    error = refused(valid("GBP", routing_number=sort_code), "routing_number")
    assert "sort code" in error.message


@pytest.mark.parametrize("number", ["1234567", "123456789", "1234567a"])
def test_gbp_account_number_is_eight_digits(number: str) -> None:
    refused(valid("GBP", account_number=number), "account_number")


# --- IBAN and BIC (EUR, CHF, KWD) ---------------------------------------------------------------


def test_iban_is_normalized_to_compact_upper_case() -> None:
    account = rail.validate_bank_account(
        valid("EUR", account_number="de89 3704 0044 0532 0130 00", routing_number="deut de ff")
    )
    assert account.account_number == "DE89370400440532013000"
    assert account.routing_number == "DEUTDEFF"


@pytest.mark.parametrize(
    ("iban", "message"),
    [
        ("DE89370400440532013001", "account_number fails the IBAN checksum"),
        ("DE00370400440532013000", "account_number fails the IBAN checksum"),
        ("GB29NWBK60161331926818", "account_number fails the IBAN checksum"),
        ("DE8937040044053201300", "account_number has the wrong length for an IBAN of its country"),
        ("XX89370400440532013000", "account_number has an unknown IBAN country code"),
        ("GB29NWBK6016133192681A", "account_number does not have the structure"),
    ],
)
def test_eur_bad_ibans(iban: str, message: str) -> None:
    error = refused(valid("EUR", account_number=iban), "account_number")
    assert error.message.startswith(message)
    assert isinstance(error.__cause__, SchwiftyException)  # chained, not leaked


@pytest.mark.parametrize("iban", ["DE8937040044", "37040044053201300089", "DE89-3704-0044"])
def test_eur_iban_must_look_like_one(iban: str) -> None:
    error = refused(valid("EUR", account_number=iban), "account_number")
    assert "IBAN" in error.message


@pytest.mark.parametrize(
    "iban", ["GB29NWBK60161331926819", "FR1420041010050500013M02606", "LI21088100002324013AA"]
)
def test_eur_accepts_any_sepa_iban(iban: str) -> None:
    assert rail.validate_bank_account(valid("EUR", account_number=iban)).account_number == iban


def test_eur_refuses_an_iban_outside_sepa() -> None:
    error = refused(valid("EUR", account_number="KW81CBKU0000000000001234560101"), "account_number")
    assert error.message == "account_number must be an IBAN from a SEPA country (got KW)"


@pytest.mark.parametrize("iban", ["CH9300762011623852957", "LI21088100002324013AA"])
def test_chf_takes_ch_and_li_ibans(iban: str) -> None:
    assert rail.validate_bank_account(valid("CHF", account_number=iban)).account_number == iban


@pytest.mark.parametrize(
    "iban", ["DE89370400440532013000", "CH9400762011623852957", "CH930076201162385295"]
)
def test_chf_refuses_other_ibans(iban: str) -> None:
    refused(valid("CHF", account_number=iban), "account_number")


def test_kwd_takes_a_kw_iban_only() -> None:
    good = "KW81CBKU0000000000001234560101"
    assert rail.validate_bank_account(valid("KWD", account_number=good)).account_number == good
    refused(valid("KWD", account_number="KW82CBKU0000000000001234560101"), "account_number")
    refused(valid("KWD", account_number="DE89370400440532013000"), "account_number")


@pytest.mark.parametrize("bic", ["DEUTDEFF", "DEUTDEFF500", "INGBNL2A", "1234DEFF"])
def test_eur_accepts_bics(bic: str) -> None:
    assert rail.validate_bank_account(valid("EUR", routing_number=bic)).routing_number == bic


@pytest.mark.parametrize(
    ("bic", "message"),
    [
        ("DEUTDEF", "BIC"),
        ("DEUTDEFF5", "BIC"),
        ("DEUT1EFF", "BIC"),
        ("DEUTXXFF", "routing_number has an unknown BIC country code"),
    ],
)
def test_eur_bad_bics(bic: str, message: str) -> None:
    error = refused(valid("EUR", routing_number=bic), "routing_number")
    assert message in error.message


@pytest.mark.parametrize(
    ("currency", "good", "bad"),
    [
        ("CHF", "ZKBKCHZZ80A", "DEUTDEFF"),
        ("CHF", "BLFLLI2X", "DEUTDEFF"),
        ("KWD", "NBOKKWKW", "DBSSSGSG"),
        ("SGD", "OCBCSGSG", "NBOKKWKW"),
    ],
)
def test_bics_must_be_of_the_currency_country(currency: str, good: str, bad: str) -> None:
    assert rail.validate_bank_account(valid(currency, routing_number=good)).routing_number == good
    refused(valid(currency, routing_number=bad), "routing_number")


# --- CAD, AUD, JPY, SGD -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("routing", "expected"),
    [("000300002", "000300002"), ("00002-003", "000300002"), ("12345-678", "067812345")],
)
def test_cad_routing_normalizes_to_the_electronic_form(routing: str, expected: str) -> None:
    assert rail.validate_bank_account(valid("CAD", routing_number=routing)).routing_number == (
        expected
    )


@pytest.mark.parametrize(
    "routing", ["100300002", "00030000", "0003-00002", "00002003", "00002-0033"]
)
def test_cad_bad_routing(routing: str) -> None:
    refused(valid("CAD", routing_number=routing), "routing_number")


@pytest.mark.parametrize(
    ("currency", "low", "high"), [("CAD", 7, 12), ("AUD", 6, 10), ("SGD", 7, 12), ("JPY", 7, 7)]
)
def test_account_number_lengths(currency: str, low: int, high: int) -> None:
    for length in (low, high):
        number = "1" * length
        assert (
            rail.validate_bank_account(valid(currency, account_number=number)).account_number
            == number
        )
    refused(valid(currency, account_number="1" * (low - 1)), "account_number")
    refused(valid(currency, account_number="1" * (high + 1)), "account_number")


@pytest.mark.parametrize(("bsb", "expected"), [("062-000", "062000"), ("062000", "062000")])
def test_aud_bsb(bsb: str, expected: str) -> None:
    assert rail.validate_bank_account(valid("AUD", routing_number=bsb)).routing_number == expected


@pytest.mark.parametrize("bsb", ["06200", "0620000", "06-2000", "AB-CDEF"])
def test_aud_bad_bsb(bsb: str) -> None:
    refused(valid("AUD", routing_number=bsb), "routing_number")


@pytest.mark.parametrize(("code", "expected"), [("0005-001", "0005001"), ("0005001", "0005001")])
def test_jpy_bank_and_branch_code(code: str, expected: str) -> None:
    assert rail.validate_bank_account(valid("JPY", routing_number=code)).routing_number == expected


@pytest.mark.parametrize("code", ["000500", "00050011", "000-5001"])
def test_jpy_bad_bank_and_branch_code(code: str) -> None:
    refused(valid("JPY", routing_number=code), "routing_number")


# --- Names --------------------------------------------------------------------------------------


@pytest.mark.parametrize("param", ["bank_name", "account_name"])
def test_names_are_trimmed_and_nfc_normalized(param: str) -> None:
    account = rail.validate_bank_account(valid("USD", **{param: "  Zu\u0308rcher Kantonalbank  "}))
    assert getattr(account, param) == "Zürcher Kantonalbank"


@pytest.mark.parametrize(
    "name",
    [
        "",
        "   ",
        "a\x00b",
        "tab\there",
        "line\nbreak",
        "\x7f",
        "a\u202eb",
        "a\u2028b",
        "a\ud800b",
        "x" * 256,
    ],
)
@pytest.mark.parametrize("param", ["bank_name", "account_name"])
def test_bad_names_name_their_field(param: str, name: str) -> None:
    refused(valid("USD", **{param: name}), param)


def test_names_of_255_characters_and_unicode_are_fine() -> None:
    account = rail.validate_bank_account(valid("EUR", account_name="é" * 255, bank_name="Bank 💶"))
    assert account.account_name == "é" * 255
    assert account.bank_name == "Bank 💶"


@pytest.mark.parametrize("param", ["bank_name", "account_name", "account_number", "routing_number"])
def test_non_strings_are_refused(param: str) -> None:
    refused(valid("USD", **{param: 12345678}), param)  # type: ignore[arg-type]


def test_fields_are_checked_in_body_order() -> None:
    refused(details("USD", "x", "y", bank_name="", account_name=""), "bank_name")
    refused(details("USD", "x", "y", account_name=""), "account_name")
    refused(details("USD", "x", "y"), "account_number")


# --- Never a schwifty exception ---------------------------------------------------------------


def _outcome(account: BankAccountDetails) -> None:
    """Validation either passes or raises ValidationFailed for a code field; nothing else."""
    failure: ValidationFailed | None = None
    try:
        rail.validate_bank_account(account)
    except ValidationFailed as error:
        failure = error
    if failure is not None:
        assert failure.param in ("account_number", "routing_number"), failure.param
        assert not isinstance(failure, ValueError)


@settings(max_examples=examples(300))
@given(currency=st.sampled_from(SANDBOX_CURRENCIES), data=st.data())
def test_pattern_shaped_input_only_ever_raises_validation_failed(
    currency: str, data: st.DataObject
) -> None:
    fmt = FORMATS[currency]
    number = data.draw(st.from_regex(fmt.account_number.pattern, fullmatch=True))
    routing = data.draw(st.from_regex(fmt.routing_number.pattern, fullmatch=True))
    _outcome(details(currency, number, routing))


@settings(max_examples=examples(300))
@given(
    currency=st.sampled_from(SANDBOX_CURRENCIES),
    number=st.text(max_size=40),
    routing=st.text(max_size=20),
)
def test_arbitrary_input_only_ever_raises_validation_failed(
    currency: str, number: str, routing: str
) -> None:
    _outcome(details(currency, number, routing))


# --- Bank names ---------------------------------------------------------------------------------


@pytest.mark.parametrize("currency", SANDBOX_CURRENCIES)
def test_bank_names_per_currency(currency: str) -> None:
    names = rail.bank_names(currency)
    assert len(names) >= 4
    assert names == sorted(set(names))
    assert rail.bank_names(currency.lower()) == names


def test_all_bank_names_are_merged_sorted_and_unique() -> None:
    everything = rail.bank_names()
    assert everything == sorted(set(everything))
    assert set(everything) == {n for c in SANDBOX_CURRENCIES for n in rail.bank_names(c)}
    assert everything.count("Citibank") == 1  # listed for USD and SGD


def test_bank_names_for_an_unknown_currency() -> None:
    with pytest.raises(UnknownCurrency):
        rail.bank_names("XYZ")


# --- Deposit instructions -----------------------------------------------------------------------


def _revalidate(currency: str, item: PaymentInstruction) -> None:
    account = details(
        currency,
        item.account_number,
        item.routing_number,
        bank_name=item.bank_name,
        account_name=item.account_name,
    )
    assert rail.validate_bank_account(account) == account  # valid and already normalized


@pytest.mark.parametrize("currency", SANDBOX_CURRENCIES)
def test_deposit_instructions_are_valid_and_deterministic(currency: str) -> None:
    items = rail.deposit_instructions(currency, "dep_01HX")
    assert items
    assert items == rail.deposit_instructions(currency, "dep_01HX")
    assert items == SandboxBankRail().deposit_instructions(currency.lower(), "dep_01HX")
    for item in items:
        _revalidate(currency, item)
        assert item.account_name == "Treasury Sandbox Ltd — ref dep_01HX"
        assert item.bank_name in rail.bank_names(currency)
        spec = FORMATS[currency]
        if spec.account_number.check is Check.IBAN:
            iban = schwifty_iban_ok(item.account_number)
            known = iban.bic
            if known is not None:  # the IBAN's bank code belongs to the BIC given
                assert str(known)[:8] == item.routing_number[:8]
        if spec.routing_number.check is Check.BIC:
            assert str(BIC(item.routing_number)) == item.routing_number
        if spec.routing_number.check is Check.ABA:
            assert aba_checksum_ok(item.routing_number)


def test_deposit_instructions_by_currency() -> None:
    (usd,) = rail.deposit_instructions("USD", "r")
    assert aba_checksum_ok(usd.routing_number) and usd.account_number.isdigit()
    (gbp,) = rail.deposit_instructions("GBP", "r")
    assert re.fullmatch("[0-9]{8}", gbp.account_number)
    assert re.fullmatch("[0-9]{6}", gbp.routing_number)
    for currency, country in (("EUR", "NL"), ("CHF", "CH"), ("KWD", "KW")):
        (item,) = rail.deposit_instructions(currency, "r")
        assert schwifty_iban_ok(item.account_number).country_code == country


@pytest.mark.parametrize(
    ("reference", "shown"),
    [
        ("", "Treasury Sandbox Ltd"),
        ("   ", "Treasury Sandbox Ltd"),
        ("INV 42", "Treasury Sandbox Ltd — ref INV 42"),
        ("a\x00b\nc\u202ed", "Treasury Sandbox Ltd — ref a b c d"),
    ],
)
def test_reference_is_cleaned_for_the_account_name(reference: str, shown: str) -> None:
    (item,) = rail.deposit_instructions("USD", reference)
    assert item.account_name == shown
    _revalidate("USD", item)


def test_a_long_reference_keeps_the_account_name_valid() -> None:
    (item,) = rail.deposit_instructions("EUR", "R" * 1000)
    assert len(item.account_name) == 255
    _revalidate("EUR", item)


def test_deposit_instructions_for_an_unknown_currency() -> None:
    with pytest.raises(UnknownCurrency) as caught:
        rail.deposit_instructions("XYZ", "r")
    assert caught.value.param == "currency_id"


# --- Virtual accounts ---------------------------------------------------------------------------


def _va_revalidate(currency: str, va: VirtualAccountDetails) -> None:
    """Every coordinate a virtual account shows passes the rail's own validator."""
    if va.routing_number is not None:
        assert va.account_number is not None
        _revalidate(
            currency,
            PaymentInstruction(va.bank_name, va.account_name, va.account_number, va.routing_number),
        )
    if va.sort_code is not None:
        assert va.account_number is not None
        _revalidate(
            "GBP",
            PaymentInstruction(va.bank_name, va.account_name, va.account_number, va.sort_code),
        )
    if va.iban is not None:
        assert va.bic is not None
        _revalidate("EUR", PaymentInstruction(va.bank_name, va.account_name, va.iban, va.bic))


@pytest.mark.parametrize("currency", VBAN_CURRENCIES)
def test_virtual_accounts_are_deterministic_and_valid(currency: str) -> None:
    va = rail.virtual_account_details(currency, "va_01HX")
    assert va == rail.virtual_account_details(currency, "va_01HX")
    assert va == SandboxBankRail().virtual_account_details(currency.lower(), "va_01HX")
    assert va.account_name == "Treasury Sandbox Ltd"
    assert va.bank_name in rail.bank_names(currency)
    _va_revalidate(currency, va)


@pytest.mark.parametrize("currency", VBAN_CURRENCIES)
def test_different_seeds_give_different_accounts(currency: str) -> None:
    seen = {
        (va.account_number, va.iban)
        for va in (rail.virtual_account_details(currency, f"va_{i}") for i in range(500))
    }
    assert len(seen) == 500


def test_usd_virtual_account() -> None:
    va = rail.virtual_account_details("USD", "seed")
    assert va.account_number is not None and re.fullmatch("[0-9]{12}", va.account_number)
    assert va.routing_number is not None and aba_checksum_ok(va.routing_number)
    assert (va.iban, va.bic, va.sort_code) == (None, None, None)


def test_gbp_virtual_account_iban_is_built_from_sort_code_and_account_number() -> None:
    va = rail.virtual_account_details("GBP", "seed")
    assert va.account_number is not None and re.fullmatch("[0-9]{8}", va.account_number)
    assert va.sort_code is not None and re.fullmatch("[0-9]{6}", va.sort_code)
    assert va.iban is not None and va.bic is not None
    iban = schwifty_iban_ok(va.iban)
    assert iban.country_code == "GB"
    assert iban.branch_code == va.sort_code
    assert iban.account_code == va.account_number
    assert iban.bic is not None and str(iban.bic)[:8] == va.bic[:8]
    assert str(BIC(va.bic)) == va.bic
    assert va.routing_number is None


def test_eur_virtual_account_is_an_iban_and_bic() -> None:
    va = rail.virtual_account_details("EUR", "seed")
    assert va.iban is not None and va.bic is not None
    iban = schwifty_iban_ok(va.iban)
    assert iban.in_sepa_zone
    assert iban.bic is not None and str(iban.bic)[:8] == va.bic[:8]
    assert va.account_number is None and va.routing_number is None


@pytest.mark.parametrize("currency", ["JPY", "CHF", "KWD", "XYZ", ""])
def test_virtual_accounts_only_for_usd_eur_gbp(currency: str) -> None:
    with pytest.raises(UnknownCurrency) as caught:
        rail.virtual_account_details(currency, "seed")
    assert caught.value.param == "source_currency"


# --- Settlement delays --------------------------------------------------------------------------


def test_default_settlement_delays_follow_the_decisions() -> None:
    assert rail.settlement_delay(Settlement.DEPOSIT) == timedelta(hours=24)
    assert rail.settlement_delay(Settlement.WITHDRAWAL) == timedelta(hours=24)
    assert rail.settlement_delay(Settlement.FX_TRANSFER) == timedelta(seconds=60)


def test_settlement_delays_can_be_overridden() -> None:
    quick = SandboxBankRail(
        deposit_delay=timedelta(seconds=5),
        withdrawal_delay=timedelta(0),
        fx_transfer_delay=timedelta(minutes=2),
    )
    assert quick.settlement_delay(Settlement.DEPOSIT) == timedelta(seconds=5)
    assert quick.settlement_delay(Settlement.WITHDRAWAL) == timedelta(0)
    assert quick.settlement_delay(Settlement.FX_TRANSFER) == timedelta(minutes=2)
    assert quick.settlement_delay("deposit") == timedelta(seconds=5)  # type: ignore[arg-type]


def test_negative_settlement_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="deposit"):
        SandboxBankRail(deposit_delay=timedelta(seconds=-1))


@pytest.mark.parametrize(
    ("currency", "field", "value"),
    [
        ("USD", "routing_number", "٠٢١٠٠٠٠٢١"),  # Arabic-Indic digits are not ASCII digits
        ("USD", "account_number", "１２３４５６７８"),  # nor are full-width ones
        ("EUR", "routing_number", "ıngbnl2a"),  # dotless i upper-cases to I: refused first
        ("EUR", "account_number", "DE89370400440532013000\u200b"),
    ],
)
def test_codes_must_be_ascii(currency: str, field: str, value: str) -> None:
    refused(valid(currency, **{field: value}), field)
