from decimal import Decimal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from treasury_core.currency import Currency, iso_currency
from treasury_core.money import convert, exact_conversion, round_minor

USD, EUR, JPY, KWD = (iso_currency(c) for c in ("USD", "EUR", "JPY", "KWD"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0.5", 0), ("1.5", 2), ("2.5", 2), ("-0.5", 0), ("-1.5", -2), ("2.4999", 2), ("2.5001", 3)],
)
def test_round_minor_is_half_even(value: str, expected: int) -> None:
    assert round_minor(Decimal(value)) == expected


def test_round_minor_refuses_floats_and_non_finite() -> None:
    with pytest.raises(TypeError):
        round_minor(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-finite"):
        round_minor(Decimal("NaN"))


def test_convert_scales_by_both_exponents() -> None:
    # 10.00 USD at 150.123 JPY/USD = 1501.23 JPY -> 1501 JPY
    assert convert(1000, USD, JPY, Decimal("150.123")) == 1501
    # 1501 JPY at 0.0066 USD/JPY = 9.9066 USD -> 991 cents
    assert convert(1501, JPY, USD, Decimal("0.0066")) == 991
    # 1.000 KWD (1000 fils) at 3.25 USD/KWD = 325 cents
    assert convert(1000, KWD, USD, Decimal("3.25")) == 325


def test_convert_rounds_ties_to_even() -> None:
    assert convert(1, USD, EUR, Decimal("0.5")) == 0
    assert convert(3, USD, EUR, Decimal("0.5")) == 2


def test_convert_refuses_bad_inputs() -> None:
    with pytest.raises(TypeError):
        convert(1.0, USD, EUR, Decimal(1))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        convert(True, USD, EUR, Decimal(1))
    with pytest.raises(TypeError):
        convert(1, USD, EUR, 1.1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        convert(1, USD, EUR, Decimal(0))


@given(
    amount=st.integers(min_value=0, max_value=99_999_999_999),
    rate=st.decimals(min_value=Decimal("0.000001"), max_value=Decimal(100000), places=6),
    pair=st.sampled_from([(USD, EUR), (USD, JPY), (JPY, KWD), (KWD, JPY), (EUR, KWD)]),
)
# Exact halves, which random rates rarely hit: 1.00 USD at 2.5 is 2.5 JPY (to 2), 3 JPY at
# 0.0005 KWD/JPY is 1.5 fils (to 2), 5 fils at 500 JPY/KWD is 2.5 JPY (to 2), 0.03 USD at 2.5
# is 7.5 cents (to 8).
@example(amount=100, rate=Decimal("2.5"), pair=(USD, JPY))
@example(amount=3, rate=Decimal("0.0005"), pair=(JPY, KWD))
@example(amount=5, rate=Decimal("500"), pair=(KWD, JPY))
@example(amount=3, rate=Decimal("2.5"), pair=(USD, EUR))
def test_converted_amount_is_within_half_a_minor_unit(
    amount: int, rate: Decimal, pair: tuple[Currency, Currency]
) -> None:
    source, target = pair
    exact = exact_conversion(amount, source, target, rate)
    converted = convert(amount, source, target, rate)
    assert abs(Decimal(converted) - exact) <= Decimal("0.5")
    if abs(Decimal(converted) - exact) == Decimal("0.5"):
        assert converted % 2 == 0, f"{exact} is a half and rounds to the even neighbour"
