"""Per-key request rate limits: a token bucket per API key.

Each key may make ``rate`` requests a second on average and ``burst`` at once. The buckets of
:class:`RateLimiter` live in the process: several server processes each allow the full rate.
The Redis adapter (``treasury_redis``, ``TREASURY_RATE_LIMIT_REDIS_URL``) keeps them where all
processes share them; both implement the :class:`~treasury_core.ports.RequestLimiter` port.
:class:`FailureThrottle` counts failed authentications per client address in such a limiter.
Time comes from a monotonic clock passed in, so tests step it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from treasury_core.errors import RateLimited
from treasury_core.ports.rate_limiter import RequestLimiter

TOO_MANY_REQUESTS = "Too many requests for this API key; retry after the time in Retry-After"
#: A client refused for its failed authentications is told so: no key of its was counted.
TOO_MANY_FAILURES = (
    "Too many failed authentications from this address; retry after the time in Retry-After"
)


def refuse_if_over(wait: float, message: str = TOO_MANY_REQUESTS) -> None:
    """Raise :class:`RateLimited` (429, ``Retry-After`` in whole seconds) when ``wait`` > 0.

    ``wait`` is what a :class:`~treasury_core.ports.RequestLimiter` answered; every limiter of
    request counts reads the same to the client.
    """
    if wait > 0:
        raise RateLimited(message, retry_after=max(1, math.ceil(wait)))


class RateLimiter:
    """Token buckets keyed by API key id, in this process."""

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
    ) -> None:
        """``max_keys`` bounds the buckets kept: past it, full ones are forgotten (a full
        bucket is what an unknown key gets), then the least recently used."""
        self._rate = rate
        self._burst = float(burst)
        self._now = monotonic
        self._max_keys = max_keys
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._lock = threading.Lock()

    def _make_room(self, now: float) -> None:
        # Keys may be anything a client sends from (addresses): the memory stays bounded.
        full = [
            k
            for k, (tokens, at) in self._buckets.items()
            if tokens + (now - at) * self._rate >= self._burst
        ]
        for key in full:
            del self._buckets[key]
        if len(self._buckets) >= self._max_keys:
            by_use = sorted(self._buckets, key=lambda k: self._buckets[k][1])
            for key in by_use[: len(by_use) // 2 + 1]:
                del self._buckets[key]

    def _tokens(self, key: str, now: float) -> float:
        # The bucket's tokens at ``now``: what was left, refilled since, at most ``burst``.
        tokens, at = self._buckets.get(key, (self._burst, now))
        return min(self._burst, tokens + (now - at) * self._rate)

    def take(self, key: str) -> float:
        """Spend one request of ``key``; 0.0 when allowed, else the seconds until one is."""
        with self._lock:
            now = self._now()
            if key not in self._buckets and len(self._buckets) >= self._max_keys:
                self._make_room(now)
            tokens = self._tokens(key, now)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self._rate

    def check(self, key: str) -> None:
        """Raise :class:`RateLimited` (429, ``Retry-After`` in whole seconds) when over."""
        refuse_if_over(self.take(key))

    async def acquire(self, key: str) -> float:
        """:meth:`take`, as the :class:`~treasury_core.ports.RequestLimiter` port asks."""
        return self.take(key)

    async def close(self) -> None:
        """Nothing to release: the buckets are plain memory."""


class FailureThrottle:
    """Failed authentications per client, counted in a limiter, refused before the next try.

    Each failure spends one token of the client's bucket in ``limiter`` (shared by every
    process when it is the Redis one). The failure that finds the bucket empty is refused
    (:meth:`failed` answers the wait), and this process then refuses that client at once
    (:meth:`refusal`, no I/O) until the wait is over: every process looks up at most one key
    of such a client per wait, and successful authentications cost the limiter nothing.
    """

    def __init__(
        self,
        limiter: RequestLimiter,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        max_clients: int = 100_000,
    ) -> None:
        self._limiter = limiter
        self._now = monotonic
        self._max_clients = max_clients
        self._refused_until: dict[str, float] = {}

    def refusal(self, client: str) -> float:
        """Seconds until ``client`` may try again here (0.0: now)."""
        until = self._refused_until.get(client)
        if until is None:
            return 0.0
        left = until - self._now()
        if left <= 0:
            del self._refused_until[client]
            return 0.0
        return left

    async def failed(self, client: str) -> float:
        """Count one failure of ``client``; the seconds it must wait when that one was over
        the limit (0.0 when it was not)."""
        wait = await self._limiter.acquire(client)
        if wait > 0:
            now = self._now()
            if len(self._refused_until) >= self._max_clients:
                # Bounded whatever addresses clients come from: the expired go first.
                self._refused_until = {k: v for k, v in self._refused_until.items() if v > now}
                if len(self._refused_until) >= self._max_clients:
                    self._refused_until.clear()
            self._refused_until[client] = now + wait
        return wait

    async def close(self) -> None:
        """Close the limiter."""
        await self._limiter.close()
