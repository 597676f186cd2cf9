"""The FX rates port (filled by the treasury issue; shaped here)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class FxQuote:
    """A rate: major units of ``target`` per major unit of ``source``, and when it was observed.

    ``rate_date`` is the business day a published reference rate belongs to (the ECB's date),
    for adapters whose rates have one; live rates leave it ``None``.
    """

    source: str
    target: str
    rate: Decimal
    as_of: datetime
    rate_date: date | None = None


@runtime_checkable
class FxRates(Protocol):
    """Answers exchange rates; a quote older than ``max_age_seconds`` must not be used."""

    max_age_seconds: float

    async def rate(self, source: str, target: str) -> FxQuote:
        """The current quote from ``source`` to ``target``; raises ``ProviderError`` if none."""
        ...
