"""Per-key request rate limits: a token bucket per API key.

Each key may make ``rate`` requests a second on average and ``burst`` at once. The buckets of
:class:`RateLimiter` live in the process: several server processes each allow the full rate.
The Redis adapter (``treasury_redis``, ``TREASURY_RATE_LIMIT_REDIS_URL``) keeps them where all
processes share them; both implement the :class:`~treasury_core.ports.RequestLimiter` port.
Time comes from a monotonic clock passed in, so tests step it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from treasury_core.errors import RateLimited


def refuse_if_over(wait: float) -> None:
    """Raise :class:`RateLimited` (429, ``Retry-After`` in whole seconds) when ``wait`` > 0.

    ``wait`` is what a :class:`~treasury_core.ports.RequestLimiter` answered; every limiter's
    refusal reads the same to the client.
    """
    if wait > 0:
        raise RateLimited(
            "Too many requests for this API key; retry after the time in Retry-After",
            retry_after=max(1, math.ceil(wait)),
        )


class RateLimiter:
    """Token buckets keyed by API key id, in this process."""

    def __init__(
        self, rate: float, burst: int, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._now = monotonic
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Spend one request of ``key``; 0.0 when allowed, else the seconds until one is."""
        with self._lock:
            now = self._now()
            tokens, at = self._buckets.get(key, (self._burst, now))
            tokens = min(self._burst, tokens + (now - at) * self._rate)
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
