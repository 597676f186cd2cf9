import pytest

from treasury_core.currency import CurrencyRegistry, iso_currency
from treasury_core.errors import UnknownCurrency
from treasury_core.interface.records import CurrencyRecord


@pytest.mark.parametrize(
    ("code", "exponent"), [("USD", 2), ("JPY", 0), ("KWD", 3), ("BHD", 3), ("IQD", 3), ("MGA", 2)]
)
def test_exponents_follow_iso_4217(code: str, exponent: int) -> None:
    assert iso_currency(code).decimal_places == exponent


def test_names_and_symbols_come_from_cldr() -> None:
    usd = iso_currency("USD")
    assert (usd.name, usd.symbol) == ("US Dollar", "$")
    assert iso_currency("EUR").symbol == "€"


@pytest.mark.parametrize("code", ["usd", "XXXX", "ABC", "", "US"])
def test_unknown_codes_are_refused(code: str) -> None:
    with pytest.raises(UnknownCurrency):
        iso_currency(code)


def test_default_registry_matches_the_sandbox_decision() -> None:
    registry = CurrencyRegistry.default()
    assert {c.code for c in registry} == {
        "USD",
        "EUR",
        "GBP",
        "JPY",
        "CHF",
        "CAD",
        "AUD",
        "SGD",
        "KWD",
    }
    assert {c.code for c in registry if c.can_vban} == {"USD", "EUR", "GBP"}


def test_registry_refuses_disabled_currencies_naming_the_param() -> None:
    registry = CurrencyRegistry.from_codes(["USD"])
    with pytest.raises(UnknownCurrency) as caught:
        registry.get("EUR", param="currency_id")
    assert caught.value.param == "currency_id"
    with pytest.raises(UnknownCurrency):
        registry.get(5)


def test_configured_exponent_overrides() -> None:
    registry = CurrencyRegistry.from_codes(["JPY"], exponents={"JPY": 2})
    assert registry.get("JPY").decimal_places == 2


def test_currency_record_fields() -> None:
    record = CurrencyRecord.of(CurrencyRegistry.default().get("GBP"))
    assert record.model_dump() == {
        "code": "GBP",
        "name": "British Pound",
        "symbol": "£",
        "currency_type": "fiat",
        "decimal_places": 2,
        "can_vban": True,
    }
