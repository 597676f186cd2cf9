"""The sandbox FX rates: a configurable table of rates against USD, quoted at the clock's now.

Cross rates are derived through USD and rounded (half-even) to ten significant digits, so every
rate prints back as the same JSON number. ``stale_as_of`` freezes the quote time, which is how
tests make a rate stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Context, Decimal

from treasury_core.errors import FxRateUnavailable
from treasury_core.ports import Clock, FxQuote

#: Units of each currency per one US dollar (sandbox figures, not market data).
DEFAULT_USD_RATES: Mapping[str, str] = {
    "USD": "1",
    "EUR": "0.92",
    "GBP": "0.79",
    "JPY": "150.25",
    "CHF": "0.88",
    "CAD": "1.36",
    "AUD": "1.52",
    "SGD": "1.34",
    "KWD": "0.3075",
}

_TEN_DIGITS = Context(prec=10, rounding=ROUND_HALF_EVEN)


class SandboxFxRates:
    """Rates from a table; always fresh unless ``stale_as_of`` pins the quote time."""

    def __init__(
        self,
        clock: Clock,
        usd_rates: Mapping[str, str | Decimal] | None = None,
        *,
        max_age_seconds: float = 300,
        stale_as_of: datetime | None = None,
    ) -> None:
        self._clock = clock
        self._usd = {c: Decimal(str(r)) for c, r in (usd_rates or DEFAULT_USD_RATES).items()}
        self.max_age_seconds = max_age_seconds
        self.stale_as_of = stale_as_of

    async def rate(self, source: str, target: str) -> FxQuote:
        """Major units of ``target`` per major unit of ``source``."""
        if source not in self._usd or target not in self._usd:
            raise FxRateUnavailable(f"No exchange rate from {source} to {target}")
        rate = (
            Decimal(1)
            if source == target
            else _TEN_DIGITS.divide(self._usd[target], self._usd[source])
        )
        as_of = self.stale_as_of or self._clock.now()
        return FxQuote(source=source, target=target, rate=rate.normalize(), as_of=as_of)
