"""Per-key request rate limits: a token bucket per API key.

Each key may make ``rate`` requests a second on average and ``burst`` at once. The buckets live
in the process (several server processes each allow the full rate; put a shared limiter in
front of them if that matters). Time comes from a monotonic clock passed in, so tests step it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from treasury_core.errors import RateLimited


class RateLimiter:
    """Token buckets keyed by API key id."""

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
        wait = self.take(key)
        if wait > 0:
            raise RateLimited(
                "Too many requests for this API key; retry after the time in Retry-After",
                retry_after=max(1, math.ceil(wait)),
            )
