"""A quote whose exact amount lands halfway between two minor units rounds half to even, the
one rounding rule (docs/treasury.md, "FX"), whatever the two currencies' exponents: the quote
the services move money by, from an FX adapter's rate to the converted amount."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import ValidationFailed
from treasury_core.ports import FxQuote
from treasury_core.testing.fakes.clock import FakeClock


class FixedRates:
    """An FX adapter quoting the rates it was given, always fresh."""

    max_age_seconds = 300.0

    def __init__(self, clock: FakeClock, rates: dict[tuple[str, str], str]) -> None:
        self._clock, self._rates = clock, rates

    async def rate(self, source: str, target: str) -> FxQuote:
        rate = Decimal(self._rates[source, target])
        return FxQuote(source=source, target=target, rate=rate, as_of=self._clock.now())


#: Rates that make small amounts land exactly on a half: USD and EUR have 2 decimals, JPY 0,
#: KWD 3.
RATES = {
    ("USD", "JPY"): "2.5",
    ("JPY", "USD"): "0.005",
    ("USD", "KWD"): "0.25",
    ("KWD", "JPY"): "500",
    ("EUR", "USD"): "2.5",
}


@pytest.fixture
def treasury() -> Iterator[Treasury]:
    clock = FakeClock()
    t = bootstrap(
        TreasuryConfig(database_url="memory://"),
        clock=clock,
        wall_clock=clock,
        fx=FixedRates(clock, RATES),
    )
    try:
        yield t
    finally:
        t.close()


@pytest.mark.parametrize(
    ("source", "target", "amount", "expected"),
    [
        # 1.00 USD x 2.5 = 2.5 JPY: down to the even 2; 3.00 USD = 7.5 JPY: up to the even 8.
        ("USD", "JPY", 100, 2),
        ("USD", "JPY", 300, 8),
        # 5 JPY x 0.005 = 0.025 USD = 2.5 cents -> 2; 7 JPY = 3.5 cents -> 4.
        ("JPY", "USD", 5, 2),
        ("JPY", "USD", 7, 4),
        # 0.01 USD x 0.25 = 0.0025 KWD = 2.5 fils -> 2; 0.03 USD = 7.5 fils -> 8.
        ("USD", "KWD", 1, 2),
        ("USD", "KWD", 3, 8),
        # 0.005 KWD x 500 = 2.5 JPY -> 2; 0.007 KWD = 3.5 JPY -> 4.
        ("KWD", "JPY", 5, 2),
        ("KWD", "JPY", 7, 4),
        # Same exponent: 0.01 EUR x 2.5 = 2.5 cents -> 2; 0.03 EUR = 7.5 cents -> 8.
        ("EUR", "USD", 1, 2),
        ("EUR", "USD", 3, 8),
    ],
)
async def test_a_halfway_quote_rounds_half_to_even(
    treasury: Treasury, source: str, target: str, amount: int, expected: int
) -> None:
    rate, converted = await treasury.quotes.quote(source, target, amount)
    assert rate == Decimal(RATES[source, target])
    assert converted == expected


async def test_half_a_minor_unit_rounds_to_nothing_and_is_refused(treasury: Treasury) -> None:
    # 1 JPY x 0.005 = 0.5 cents: half-even makes it 0, which moves nothing.
    with pytest.raises(ValidationFailed) as refused:
        await treasury.quotes.quote("JPY", "USD", 1)
    assert (refused.value.code, refused.value.param) == ("amount_too_small", "from_amount")
    # 3 JPY = 1.5 cents rounds up to the even 2.
    assert (await treasury.quotes.quote("JPY", "USD", 3))[1] == 2
