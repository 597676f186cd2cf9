"""Currencies: ISO 4217 codes and exponents, display data from Babel, enablement from configuration.

Rules:
- An amount is always an ``int`` in the currency's minor unit; the exponent says how many minor
  units make a major one (JPY 0, USD 2, KWD 3).
- Names and symbols come from CLDR via Babel. CLDR's "digits" is a display convention and differs
  from ISO 4217's minor unit for a few currencies, so ISO's value wins where they disagree.
- Which currencies exist for a deployment, and which can have virtual accounts (``can_vban``), is
  configuration: a :class:`CurrencyRegistry` holds that choice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Literal

from treasury_core.errors import UnknownCurrency

# ISO 4217 minor units where CLDR's `digits` (what Babel reports) differs. CLDR rounds these for
# display; ISO 4217 (and every bank rail) still counts the minor unit shown here.
_ISO_EXPONENT_OVERRIDES: Mapping[str, int] = {
    "ALL": 2,
    "IQD": 3,
    "IRR": 2,
    "LAK": 2,
    "LBP": 2,
    "MGA": 2,
    "MMK": 2,
    "RSD": 2,
    "SOS": 2,
    "SYP": 2,
    "YER": 2,
}

CurrencyType = Literal["fiat"]


@dataclass(frozen=True, slots=True)
class Currency:
    """One enabled currency: ISO code, exponent, display name and symbol, and ``can_vban``."""

    code: str
    decimal_places: int
    name: str
    symbol: str
    can_vban: bool = False
    currency_type: CurrencyType = "fiat"

    @property
    def minor_per_major(self) -> int:
        """How many minor units make one major unit (100 for USD, 1 for JPY)."""
        return int(10**self.decimal_places)

    def minor_units(self, amount: Decimal) -> int | None:
        """``amount`` (major units, as a bank file states it) in minor units; ``None`` when it
        is not a finite number or has more decimals than the currency has. Trailing zeros are
        no decimals (``5442.09000`` RON is 544209 bani): they say nothing the currency cannot
        hold."""
        if not amount.is_finite():
            return None
        minor = amount * self.minor_per_major
        return int(minor) if minor == minor.to_integral_value() else None


@cache
def _known_codes() -> frozenset[str]:
    from babel.core import get_global

    return frozenset(get_global("all_currencies"))


def iso_currency(
    code: str, *, can_vban: bool = False, decimal_places: int | None = None
) -> Currency:
    """Build a :class:`Currency` from its ISO 4217 code, with Babel's CLDR data for display.

    Raises :class:`UnknownCurrency` when the code is not an ISO 4217 currency.
    """
    from babel.numbers import get_currency_name, get_currency_precision, get_currency_symbol

    upper = code.upper() if isinstance(code, str) else ""
    if len(upper) != 3 or upper != code or upper not in _known_codes():
        raise UnknownCurrency(f"Unknown currency: {code!s}", param="currency")
    exponent = decimal_places
    if exponent is None:
        exponent = _ISO_EXPONENT_OVERRIDES.get(upper, int(get_currency_precision(upper)))
    return Currency(
        code=upper,
        decimal_places=exponent,
        name=get_currency_name(upper, locale="en"),
        symbol=get_currency_symbol(upper, locale="en"),
        can_vban=can_vban,
    )


DEFAULT_CURRENCIES: tuple[str, ...] = (
    "USD",
    "EUR",
    "GBP",
    "JPY",
    "CHF",
    "CAD",
    "AUD",
    "SGD",
    "KWD",
)
DEFAULT_VBAN_CURRENCIES: tuple[str, ...] = ("USD", "EUR", "GBP")


class CurrencyRegistry:
    """The currencies enabled in one deployment, looked up by code."""

    def __init__(self, currencies: Iterable[Currency]) -> None:
        self._by_code: dict[str, Currency] = {c.code: c for c in currencies}

    @classmethod
    def from_codes(
        cls,
        codes: Iterable[str],
        vban_codes: Iterable[str] = (),
        *,
        exponents: Mapping[str, int] | None = None,
    ) -> CurrencyRegistry:
        """Enable ``codes``; those also in ``vban_codes`` get ``can_vban``."""
        vban = set(vban_codes)
        exps = exponents or {}
        return cls(iso_currency(c, can_vban=c in vban, decimal_places=exps.get(c)) for c in codes)

    @classmethod
    def default(cls) -> CurrencyRegistry:
        """The sandbox default: nine currencies, virtual accounts for USD, EUR and GBP."""
        return cls.from_codes(DEFAULT_CURRENCIES, DEFAULT_VBAN_CURRENCIES)

    def get(self, code: object, *, param: str = "currency") -> Currency:
        """The enabled currency ``code``; :class:`UnknownCurrency` naming ``param`` otherwise."""
        currency = self._by_code.get(code) if isinstance(code, str) else None
        if currency is None:
            raise UnknownCurrency(f"Unknown currency: {code!s}", param=param)
        return currency

    def describe(self, code: str) -> Currency:
        """The currency of a stored record: the enabled one, or ISO data if since disabled.

        Disabling a currency stops new wallets and movements in it; it must not make existing
        records unreadable.
        """
        return self._by_code.get(code) or iso_currency(code)

    def __contains__(self, code: object) -> bool:
        return code in self._by_code

    def __iter__(self) -> Iterator[Currency]:
        return iter(sorted(self._by_code.values(), key=lambda c: c.code))

    def __len__(self) -> int:
        return len(self._by_code)
