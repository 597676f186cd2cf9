"""Quoting a conversion between two currencies from the FX adapter's rates."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

from treasury_core.currency import CurrencyRegistry
from treasury_core.errors import FxRateUnavailable, ValidationFailed
from treasury_core.money import convert
from treasury_core.ports import Clock, FxRates


class FxQuotes:
    """Fresh rates and converted amounts; refuses a rate older than the freshness limit.

    The limit is the smaller of ``max_age_seconds`` (the configured one) and the adapter's own
    ``max_age_seconds``.
    """

    def __init__(
        self, *, fx: FxRates, clock: Clock, currencies: CurrencyRegistry, max_age_seconds: float
    ) -> None:
        self.fx = fx
        self._clock = clock
        self._currencies = currencies
        self._max_age_seconds = max_age_seconds

    async def quote(self, source: str, target: str, amount: int) -> tuple[Decimal, int]:
        """The rate from ``source`` to ``target`` and ``amount`` converted with it.

        Refuses a rate older than the configured freshness limit (nothing has moved yet).
        """
        rate, converted, _ = await self.dated_quote(source, target, amount)
        return rate, converted

    async def dated_quote(
        self, source: str, target: str, amount: int
    ) -> tuple[Decimal, int, date | None]:
        """As :meth:`quote`, with the business day of the rate when the FX adapter gives one
        (``None`` for the same currency, or a live rate)."""
        if source == target:
            return Decimal(1), amount, None
        quote = await self.fx.rate(source, target)
        max_age = min(self._max_age_seconds, self.fx.max_age_seconds)
        if self._clock.now() - quote.as_of > timedelta(seconds=max_age):
            raise FxRateUnavailable(
                f"The exchange rate from {source} to {target} is stale; nothing moved, retry later"
            )
        converted = convert(
            amount, self._currencies.get(source), self._currencies.get(target), quote.rate
        )
        if converted <= 0:
            raise ValidationFailed(
                f"The amount converts to nothing in {target}",
                param="from_amount",
                code="amount_too_small",
            )
        return quote.rate, converted, quote.rate_date
