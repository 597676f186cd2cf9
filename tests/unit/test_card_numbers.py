"""Card number checks: normalizing, Luhn, brands and lengths, expiry, CVC, and no leaks."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treasury_core.cards.numbers import (
    BRAND_LENGTHS,
    MSG_EXPIRED_CARD,
    MSG_INCORRECT_NUMBER,
    MSG_INVALID_CVC,
    MSG_INVALID_EXPIRY_MONTH,
    MSG_INVALID_EXPIRY_YEAR,
    MSG_INVALID_NUMBER,
    brand_of,
    check_card,
    luhn_valid,
    normalize,
)
from treasury_core.errors import ValidationFailed
from treasury_core.interface.errors import error_body

TODAY = date(2030, 6, 15)
TEST_CARDS = (
    "4242424242424242",
    "5555555555554444",
    "378282246310005",
    "4000000000000002",
    "4000000000003220",
)


def luhn_check_digit(payload: str) -> str:
    """The digit that makes ``payload + digit`` pass Luhn (an independent implementation)."""
    total = 0
    # With the check digit appended, the payload's last digit is the first to be doubled.
    for position, char in enumerate(reversed(payload)):
        digit = int(char)
        if position % 2 == 0:
            digit = sum(divmod(digit * 2, 10))
        total += digit
    return str((10 - total % 10) % 10)


def card(prefix: str, length: int) -> str:
    """A Luhn-valid number of ``length`` digits starting with ``prefix``."""
    payload = prefix + "0" * (length - len(prefix) - 1)
    return payload + luhn_check_digit(payload)


def check(
    number: str = "4242424242424242",
    month: int = 12,
    year: int = 2031,
    cvc: str | None = "123",
    today: date = TODAY,
) -> str:
    return check_card(number, month, year, cvc, today=today)


def refusal(**kwargs: object) -> ValidationFailed:
    with pytest.raises(ValidationFailed) as info:
        check(**kwargs)  # type: ignore[arg-type]
    return info.value


# --- normalize and Luhn ---------------------------------------------------------------------


def test_normalize_strips_spaces_and_dashes_only() -> None:
    assert normalize("4242 4242-4242 4242") == "4242424242424242"
    assert normalize(" 4242--4242 ") == "42424242"
    assert normalize("4242.4242\t42") == "4242.4242\t42"
    assert normalize("") == ""


@pytest.mark.parametrize("number", TEST_CARDS)
def test_test_cards_pass_luhn(number: str) -> None:
    assert luhn_valid(number)
    assert check(number, cvc=None) == number


def test_luhn_rejects_non_digits_and_empty() -> None:
    assert not luhn_valid("")
    assert not luhn_valid("4242 4242 4242 4242")
    assert not luhn_valid("42424242424242４2")  # a full-width digit
    assert not luhn_valid("4242424242424241")


@given(st.text(alphabet="0123456789", min_size=1, max_size=30), st.data())
def test_luhn_check_digit_property(payload: str, data: st.DataObject) -> None:
    number = payload + luhn_check_digit(payload)
    assert luhn_valid(number)
    # Luhn catches every single-digit error: doubling-and-folding permutes 0–9.
    position = data.draw(st.integers(min_value=0, max_value=len(number) - 1))
    replacement = data.draw(st.sampled_from([d for d in "0123456789" if d != number[position]]))
    altered = number[:position] + replacement + number[position + 1 :]
    assert not luhn_valid(altered)


# --- brands and lengths ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "brand"),
    [
        ("4", "visa"),
        ("51", "mastercard"),
        ("55", "mastercard"),
        ("2221", "mastercard"),
        ("2720", "mastercard"),
        ("34", "amex"),
        ("37", "amex"),
        ("6011", "discover"),
        ("644", "discover"),
        ("649", "discover"),
        ("65", "discover"),
        ("36", "diners"),
        ("300", "diners"),
        ("305", "diners"),
        ("38", "diners"),
        ("39", "diners"),
        ("3528", "jcb"),
        ("3589", "jcb"),
        ("62", "unionpay"),
        ("50", "unknown"),
        ("56", "unknown"),
        ("2220", "unknown"),
        ("2721", "unknown"),
        ("35", "unknown"),
        ("3527", "unknown"),
        ("3590", "unknown"),
        ("306", "unknown"),
        ("6010", "unknown"),
        ("643", "unknown"),
        ("1", "unknown"),
        ("9", "unknown"),
    ],
)
def test_brand_of(prefix: str, brand: str) -> None:
    assert brand_of(card(prefix, 16)) == brand


def test_brand_of_short_or_odd_input() -> None:
    assert brand_of("") == "unknown"
    assert brand_of("4") == "visa"
    assert brand_of("3") == "unknown"
    assert brand_of("x4242") == "unknown"


def test_test_card_brands() -> None:
    assert brand_of("4242424242424242") == "visa"
    assert brand_of("5555555555554444") == "mastercard"
    assert brand_of("378282246310005") == "amex"


def test_brand_lengths_are_the_documented_ones() -> None:
    assert dict(BRAND_LENGTHS) == {
        "visa": {13, 16, 19},
        "mastercard": {16},
        "amex": {15},
        "discover": {16, 17, 18, 19},
        "diners": {14, 15, 16, 17, 18, 19},
        "jcb": {16, 17, 18, 19},
        "unionpay": {16, 17, 18, 19},
        "unknown": {12, 13, 14, 15, 16, 17, 18, 19},
    }


BRAND_PREFIXES = {
    "visa": "4",
    "mastercard": "51",
    "amex": "37",
    "discover": "6011",
    "diners": "36",
    "jcb": "3530",
    "unionpay": "62",
    "unknown": "9",
}


@pytest.mark.parametrize(
    ("brand", "length"),
    [(brand, length) for brand in BRAND_PREFIXES for length in range(10, 22)],
)
def test_each_brand_accepts_exactly_its_lengths(brand: str, length: int) -> None:
    number = card(BRAND_PREFIXES[brand], length)
    assert brand_of(number) == brand
    cvc = "1234" if brand == "amex" else "123"
    if length in BRAND_LENGTHS[brand]:
        assert check(number, cvc=cvc) == number
    else:
        error = refusal(number=number, cvc=cvc)
        assert (error.message, error.code, error.param) == (
            MSG_INVALID_NUMBER,
            "invalid_number",
            "card_number",
        )


# --- check_card: the number -----------------------------------------------------------------


def test_grouped_input_is_normalized() -> None:
    assert check("4242 4242-4242 4242") == "4242424242424242"


@pytest.mark.parametrize(
    "number",
    ["", "  ", "4242424242424a42", "4242.4242.4242.4242", "42424242424242４2", "+4242424242424242"],
)
def test_non_digits_are_invalid_numbers(number: str) -> None:
    error = refusal(number=number)
    assert (error.message, error.code, error.param) == (
        MSG_INVALID_NUMBER,
        "invalid_number",
        "card_number",
    )


def test_luhn_failure_is_an_incorrect_number() -> None:
    error = refusal(number="4242424242424241")
    assert (error.message, error.code, error.param) == (
        MSG_INCORRECT_NUMBER,
        "incorrect_number",
        "card_number",
    )


def test_number_checks_come_before_expiry_and_cvc() -> None:
    assert refusal(number="4242424242424241", month=13, cvc="x").code == "incorrect_number"


# --- check_card: expiry ---------------------------------------------------------------------


@pytest.mark.parametrize("month", [0, 13, -1, 100])
def test_expiry_month_out_of_range(month: int) -> None:
    error = refusal(month=month)
    assert (error.message, error.code, error.param) == (
        MSG_INVALID_EXPIRY_MONTH,
        "invalid_expiry_month",
        "expiry_month",
    )


@pytest.mark.parametrize("month", [1, 12])
def test_expiry_month_bounds_are_valid(month: int) -> None:
    assert check(month=month) == "4242424242424242"


@pytest.mark.parametrize("year", [2081, 3000, 999, 100, -1, -2030])
def test_expiry_year_out_of_range(year: int) -> None:
    error = refusal(year=year)
    assert (error.message, error.code, error.param) == (
        MSG_INVALID_EXPIRY_YEAR,
        "invalid_expiry_year",
        "expiry_year",
    )


def test_expiry_year_fifty_years_ahead_is_valid() -> None:
    assert check(year=TODAY.year + 50) == "4242424242424242"


def test_this_month_is_valid_last_month_is_expired() -> None:
    assert check(month=6, year=2030) == "4242424242424242"
    # Valid through the last day of the month.
    assert check(month=6, year=2030, today=date(2030, 6, 30)) == "4242424242424242"
    error = refusal(month=5, year=2030)
    assert (error.message, error.code, error.param) == (
        MSG_EXPIRED_CARD,
        "expired_card",
        "expiry_year",
    )
    assert refusal(month=6, year=2030, today=date(2030, 7, 1)).code == "expired_card"
    assert refusal(month=12, year=2029, today=date(2030, 1, 1)).code == "expired_card"
    assert check(month=1, year=2031, today=date(2030, 12, 31)) == "4242424242424242"


def test_two_digit_years_are_this_century() -> None:
    assert check(month=6, year=30) == "4242424242424242"
    assert check(month=1, year=80) == "4242424242424242"
    assert refusal(month=5, year=30).code == "expired_card"
    assert refusal(year=0).code == "expired_card"  # 2000
    assert refusal(year=99).code == "invalid_expiry_year"  # 2099, beyond 2080


def test_year_of_a_thousand_is_a_plausible_year_that_expired() -> None:
    assert refusal(year=1000).code == "expired_card"


# --- check_card: CVC ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "cvc", "ok"),
    [
        ("4242424242424242", "123", True),
        ("4242424242424242", "1234", False),
        ("4242424242424242", "12", False),
        ("5555555555554444", "000", True),
        ("5555555555554444", "0000", False),
        ("378282246310005", "1234", True),
        ("378282246310005", "123", False),
        ("378282246310005", "12345", False),
        (card("9", 16), "123", True),
        (card("9", 16), "1234", True),
        (card("9", 16), "12", False),
        (card("9", 16), "12345", False),
        ("4242424242424242", "", False),
        ("4242424242424242", "12a", False),
        ("4242424242424242", " 123", False),
        ("4242424242424242", "１２３", False),  # full-width digits
        ("4242424242424242", None, True),
    ],
)
def test_cvc(number: str, cvc: str | None, ok: bool) -> None:
    if ok:
        assert check(number, cvc=cvc) == number
    else:
        error = refusal(number=number, cvc=cvc)
        assert (error.message, error.code, error.param) == (
            MSG_INVALID_CVC,
            "invalid_cvc",
            "cvc",
        )


# --- no leaks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"number": "4242424242424241"},
        {"number": "4242 4242 4242 424x"},
        {"number": "42424242424242"},
        {"month": 13},
        {"year": 2200},
        {"month": 1, "year": 2020},
        {"cvc": "98"},
        {"number": "378282246310005", "cvc": "987"},
    ],
)
def test_messages_never_contain_digits(kwargs: dict[str, object]) -> None:
    error = refusal(**kwargs)
    for text in (error.message, str(error), repr(error), str(error_body(error))):
        assert not any(char.isdigit() for char in text), text


def test_message_constants_contain_no_digits() -> None:
    for message in (
        MSG_INVALID_NUMBER,
        MSG_INCORRECT_NUMBER,
        MSG_INVALID_EXPIRY_MONTH,
        MSG_INVALID_EXPIRY_YEAR,
        MSG_EXPIRED_CARD,
        MSG_INVALID_CVC,
    ):
        assert not any(char.isdigit() for char in message)


def test_card_models_keep_the_number_and_cvc_out_of_repr() -> None:
    from treasury_core.payments.requests import CardSubmission

    card = CardSubmission(
        card_number="4242424242424242", expiry_month=12, expiry_year=2030, cvc="987"
    )
    assert "4242424242424242" not in repr(card)
    assert "987" not in repr(card)
    assert "4242424242424242" not in str(card)
